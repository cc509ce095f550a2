"""The registry's state as a fold over ``_schemas`` records: what is written, what a restart rebuilds,
records from another writer (Confluent's registry) and a failing log."""

import json

import pytest

from minikafka.broker.schema_registry import errors, records
from minikafka.broker.schema_registry.store import MemorySchemasLog, Registry, replay_entries

S1 = json.dumps({"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]})
S2 = json.dumps({"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"},
                                                          {"name": "b", "type": "int", "default": 0}]})


def test_keys_are_confluents_compact_json():
    assert records.schema_key("s", 3) == b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}'
    assert records.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert records.mode_key("s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert records.delete_subject_key("s") == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    assert records.clear_subject_key("s") == b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}'
    value = json.loads(records.schema_value("s", 1, 7, "PROTOBUF", "x", [], None, None, False))
    assert value == {"subject": "s", "version": 1, "id": 7, "schemaType": "PROTOBUF", "schema": "x",
                     "deleted": False}
    assert "schemaType" not in json.loads(records.schema_value("s", 1, 7, "AVRO", "x", [], None, None, False))
    assert records.decode(b"not json", b"{}") is None
    assert records.decode(b'{"keytype":"WHAT"}', b"{}") is None
    assert records.decode(b'{"keytype":"NOOP","magic":0}', None) == ({"keytype": "NOOP", "magic": 0}, None)


def test_every_change_is_a_record_and_a_restart_rebuilds_the_same_state():
    log_ = MemorySchemasLog()
    reg = Registry(log_)
    first = reg.register("s", {"schema": S1})
    reg.set_config("s", {"compatibility": "FULL"})
    reg.set_mode("t", {"mode": "READONLY"})
    second = reg.register("s", {"schema": S2})
    reg.delete_version("s", "1")
    assert [json.loads(k)["keytype"] for _, k, _ in log_.entries] == ["SCHEMA", "CONFIG", "MODE", "SCHEMA",
                                                                     "SCHEMA"]
    again = Registry(log_)
    assert again.versions("s") == [2] and again.versions("s", deleted=True) == [1, 2]
    assert again.get_config("s")["compatibilityLevel"] == "FULL"
    assert again.get_mode("t") == {"mode": "READONLY"}
    assert again.schema_by_id(first["id"])["schema"] == json.dumps(json.loads(S1), separators=(",", ":"))
    third = again.register("u", {"schema": json.dumps("string")})
    assert third["id"] == second["id"] + 1


def test_ids_are_not_reused_while_the_tombstones_are_in_the_log():
    log_ = MemorySchemasLog()
    reg = Registry(log_)
    reg.register("s", {"schema": S1})
    reg.delete_subject("s")
    reg.delete_subject("s", permanent=True)
    restarted = Registry(log_)
    assert restarted.subjects(deleted=True) == []
    assert restarted.register("s", {"schema": S2})["id"] == 2


def test_records_of_another_writer_are_read_before_each_request():
    log_ = MemorySchemasLog()
    reg = Registry(log_)
    reg.register("s", {"schema": S1})
    # Confluent's registry (or a tool) appends to the same topic: a new version, then a soft delete
    # of the whole subject, then global config.
    log_.append([(records.schema_key("s", 2), records.schema_value("s", 2, 10, "AVRO", S2, [], None, None, False)),
                 (records.config_key(None), b'{"compatibilityLevel":"NONE"}')])
    assert reg.versions("s") == [1, 2]
    assert reg.schema_by_id(10)["schema"] == S2
    assert reg.get_config(None)["compatibilityLevel"] == "NONE"
    log_.append([(records.delete_subject_key("s"), records.delete_subject_value("s", 2))])
    assert reg.subjects() == [] and reg.subjects(deleted=True) == ["s"]
    log_.append([(records.clear_subject_key("s"), records.clear_subject_value("s"))])
    assert reg.subjects(deleted=True) == []
    # The next id continues after the other writer's.
    assert reg.register("t", {"schema": json.dumps("int")})["id"] == 11


def test_a_topic_deleted_under_the_registry_is_replayed_from_scratch():
    log_ = MemorySchemasLog()
    reg = Registry(log_)
    reg.register("s", {"schema": S1})
    reg.register("t", {"schema": S2})
    log_.entries.clear()  # an admin deleted _schemas; it is created again by the next write
    assert reg.subjects() == []
    again = reg.register("u", {"schema": S1})
    assert again["version"] == 1 and reg.subjects() == ["u"]


def test_undecodable_records_are_skipped():
    log_ = MemorySchemasLog()
    log_.append([(b"garbage", b"{}"), (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"[1]"),
                 (records.schema_key("s", 1), records.schema_value("s", 1, 1, "AVRO", S1, [], None, None, False))])
    reg = Registry(log_)
    assert reg.versions("s") == [1]


def test_a_failed_append_changes_nothing_and_answers_50001():
    log_ = MemorySchemasLog()
    reg = Registry(log_)
    log_.fail_with = OSError("disk full")
    with pytest.raises(errors.RegistryError) as e:
        reg.register("s", {"schema": S1})
    assert e.value.error_code == 50001 and e.value.http_status == 500
    assert reg.subjects(deleted=True) == []
    log_.fail_with = None
    assert reg.register("s", {"schema": S1})["id"] == 1


def test_replay_entries_folds_raw_records():
    state = replay_entries([
        (records.schema_key("s", 1), records.schema_value("s", 1, 5, "AVRO", S1, [], None, None, False)),
        (records.schema_key("s", 1), None),
    ])
    assert state.subjects == {} and state.max_id == 5 and state.ids == {}


# == property: whatever the operations, a restart rebuilds exactly the state that was served =======

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SUBJECTS = ["a", "b", "c"]
_SCHEMAS = [json.dumps({"type": "record", "name": "R", "fields": [
    {"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]}) for n in range(4)]
_ops = st.lists(st.one_of(
    st.tuples(st.just("register"), st.sampled_from(_SUBJECTS), st.integers(0, len(_SCHEMAS) - 1)),
    st.tuples(st.just("delete_version"), st.sampled_from(_SUBJECTS), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("delete_subject"), st.sampled_from(_SUBJECTS), st.booleans()),
    st.tuples(st.just("config"), st.sampled_from(_SUBJECTS + [None]), st.sampled_from(["NONE", "BACKWARD", "FULL"])),
), max_size=25)


def _snapshot(reg: Registry) -> dict:
    state = reg.state
    return {
        "subjects": {s: [(v.version, v.schema_id, v.schema, v.deleted) for v in state.all_versions(s)]
                     for s in state.subjects},
        "ids": sorted(state.ids), "configs": dict(state.configs), "modes": dict(state.modes),
    }


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_a_restart_rebuilds_the_served_state_and_ids_are_never_reused(ops):
    log_ = MemorySchemasLog()
    reg = Registry(log_)
    seen_ids: dict[int, str] = {}
    for op in ops:
        try:
            if op[0] == "register":
                answer = reg.register(op[1], {"schema": _SCHEMAS[op[2]]})
                # An id, once given to a schema, never names another schema.
                assert seen_ids.setdefault(answer["id"], answer["schema"]) == answer["schema"]
            elif op[0] == "delete_version":
                reg.delete_version(op[1], str(op[2]), permanent=op[3])
            elif op[0] == "delete_subject":
                reg.delete_subject(op[1], permanent=op[2])
            else:
                reg.set_config(op[1], {"compatibility": op[2]})
        except errors.RegistryError as exc:
            assert exc.error_code in (409, 40401, 40402, 40404, 40405, 40406, 40407)
    assert _snapshot(Registry(log_)) == _snapshot(reg)
