"""The asyncio handlers: every served version decodes, answers, and encodes; version-specific fitting."""

from __future__ import annotations

import asyncio
import types

import pytest

from minikafka.broker.context import RequestContext
from minikafka.broker.group import apis
from minikafka.broker.group.coordinator import GroupCoordinator
from minikafka.broker.group.shard import GroupConfig, MemoryOffsetsLog
from minikafka.broker.clock import MockTimer
from minikafka.protocol.codec import decode_request, decode_response, encode_request, encode_response
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.errors import KafkaError

from group_harness import subscription


class FakeBroker:
    def __init__(self, loop):
        self.loop = loop
        self.timer = MockTimer()
        self.config = types.SimpleNamespace(node_id=7, advertised=("127.0.0.1", 9999))
        topics = {"t": types.SimpleNamespace(num_partitions=4)}
        self.controller = types.SimpleNamespace(topic=topics.get)
        self.txn_coordinator = None
        self.group_coordinator = GroupCoordinator(
            5, lambda p: MemoryOffsetsLog(), self.timer, self.timer.clock,
            GroupConfig(min_session_timeout_ms=1000))
        self.group_coordinator.load()
        self.correlation = 0

    async def call(self, api_key, version, body, client_id="cid"):
        """Encode the request, decode it as the server would, run the handler, encode the response."""
        self.correlation += 1
        frame = encode_request(api_key, version, self.correlation, client_id, body)[4:]
        request = decode_request(frame)
        ctx = RequestContext(api_key, version, self.correlation, client_id, "127.0.0.1", self)
        task = asyncio.ensure_future(getattr(apis, HANDLERS[api_key])(ctx, request.body))
        for _ in range(5):
            await asyncio.sleep(0)
            self.timer.advance(0)  # fire the initial-rebalance timer of a first join
        response = await asyncio.wait_for(task, 1)
        wire = b"".join(bytes(c) for c in encode_response(api_key, version, self.correlation, response))
        _, decoded = decode_response(api_key, version, wire[4:])
        return decoded


HANDLERS = {10: "find_coordinator", 11: "join_group", 12: "heartbeat", 13: "leave_group", 14: "sync_group",
            8: "offset_commit", 9: "offset_fetch", 15: "describe_groups", 16: "list_groups",
            42: "delete_groups", 47: "offset_delete", 28: "txn_offset_commit"}


@pytest.fixture
async def broker():
    return FakeBroker(asyncio.get_running_loop())


def join_body(group, member_id=""):
    return {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 10000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription("t")}]}


@pytest.mark.parametrize("version", range(0, 10))
async def test_join_sync_heartbeat_commit_fetch_leave_every_version(broker, version):
    group = f"g{version}"
    r = await broker.call(11, version, join_body(group))
    if version >= 4:
        assert r["error_code"] == E.MEMBER_ID_REQUIRED
        r = await broker.call(11, version, join_body(group, r["member_id"]))
    assert r["error_code"] == 0 and r["generation_id"] == 1 and r["protocol_name"] == "range"
    member = r["member_id"]
    sync_version = min(version, 5)
    s = await broker.call(14, sync_version, {"group_id": group, "generation_id": 1, "member_id": member,
                                            "group_instance_id": None, "protocol_type": "consumer",
                                            "protocol_name": "range",
                                            "assignments": [{"member_id": member, "assignment": b"A"}]})
    assert s["error_code"] == 0 and bytes(s["assignment"]) == b"A"
    h = await broker.call(12, min(version, 4), {"group_id": group, "generation_id": 1, "member_id": member,
                                                "group_instance_id": None})
    assert h["error_code"] == 0
    commit_version = min(max(version, 2), 9)
    c = await broker.call(8, commit_version, {
        "group_id": group, "generation_id_or_member_epoch": 1, "member_id": member, "group_instance_id": None,
        "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 1, "committed_offset": 33, "committed_leader_epoch": 2, "committed_metadata": "md"},
            {"partition_index": 9, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]},
            {"name": "ghost", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                              "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    assert [[p["error_code"] for p in t["partitions"]] for t in c["topics"]] == [
        [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION], [E.UNKNOWN_TOPIC_OR_PARTITION]]
    fetch_version = min(max(version, 1), 9)
    if fetch_version >= 8:
        f = await broker.call(9, fetch_version, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                             "topics": [{"name": "t", "partition_indexes": [1, 2]}]}],
                                                 "require_stable": True})
        topics = f["groups"][0]["topics"]
    else:
        f = await broker.call(9, fetch_version, {"group_id": group, "require_stable": True,
                                                 "topics": [{"name": "t", "partition_indexes": [1, 2]}]})
        topics = f["topics"]
    parts = topics[0]["partitions"]
    assert [(p["committed_offset"], p["metadata"]) for p in parts] == [(33, "md"), (-1, "")]
    if fetch_version >= 5:  # the epoch exists in OffsetCommit from v6
        assert parts[0]["committed_leader_epoch"] == (2 if commit_version >= 6 else -1)
    leave_version = min(version, 5)
    if leave_version >= 3:
        lv = await broker.call(13, leave_version, {"group_id": group, "members": [
            {"member_id": member, "group_instance_id": None}, {"member_id": "ghost", "group_instance_id": None}]})
        assert lv["error_code"] == 0 and [m["error_code"] for m in lv["members"]] == [0, E.UNKNOWN_MEMBER_ID]
    else:
        lv = await broker.call(13, leave_version, {"group_id": group, "member_id": "ghost"})
        assert lv["error_code"] == E.UNKNOWN_MEMBER_ID  # the member's error at the top before v3
        lv = await broker.call(13, leave_version, {"group_id": group, "member_id": member})
        assert lv["error_code"] == 0


async def test_join_error_before_v7_has_empty_protocol_name(broker):
    r = await broker.call(11, 6, {**join_body("g"), "session_timeout_ms": 10})
    assert r["error_code"] == E.INVALID_SESSION_TIMEOUT and r["protocol_name"] == ""
    r = await broker.call(11, 7, {**join_body("g"), "session_timeout_ms": 10})
    assert r["protocol_name"] is None and r["generation_id"] == -1
    r = await broker.call(11, 7, {**join_body(""), "session_timeout_ms": 6000})
    assert r["error_code"] == E.INVALID_GROUP_ID


@pytest.mark.parametrize("version", range(0, 5))
async def test_find_coordinator(broker, version):
    if version >= 4:
        r = await broker.call(10, version, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(c["key"], c["node_id"], c["host"], c["port"], c["error_code"]) for c in r["coordinators"]] == [
            ("a", 7, "127.0.0.1", 9999, 0), ("b", 7, "127.0.0.1", 9999, 0)]
        r = await broker.call(10, version, {"key_type": 1, "coordinator_keys": ["txn"]})
        assert r["coordinators"][0]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    else:
        r = await broker.call(10, version, {"key": "a", "key_type": 0})
        assert (r["error_code"], r["node_id"], r["host"], r["port"]) == (0, 7, "127.0.0.1", 9999)
        if version >= 1:
            r = await broker.call(10, version, {"key": "a", "key_type": 1})
            assert r["error_code"] == E.COORDINATOR_NOT_AVAILABLE and r["node_id"] == -1
            broker.txn_coordinator = _TxnService(fail=True)
            r = await broker.call(10, version, {"key": "a", "key_type": 1})
            assert r["error_code"] == E.COORDINATOR_NOT_AVAILABLE and r["node_id"] == -1
            broker.txn_coordinator = service = _TxnService()
            r = await broker.call(10, version, {"key": "a", "key_type": 1})
            assert r["error_code"] == 0 and r["node_id"] == 7
            assert service.ensured == 1  # the state topic is created (or found) on first use


class _TxnService:
    """broker.txn_coordinator as FindCoordinator sees it: ensure() creates __transaction_state."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.ensured = 0
        self.active = True

    def ensure(self):
        if self.fail:
            raise KafkaError(E.KAFKA_STORAGE_ERROR, "disk full")
        self.ensured += 1
        return self


async def test_loading_shard_answers_load_in_progress(broker):
    for shard in broker.group_coordinator.shards:
        shard.loaded = False
    r = await broker.call(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})
    assert r["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    r = await broker.call(9, 8, {"groups": [{"group_id": "g", "topics": None}], "require_stable": False})
    assert r["groups"][0]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    r = await broker.call(16, 4, {"states_filter": []})
    assert r["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("version", range(0, 7))
async def test_describe_list_delete_every_version(broker, version):
    await broker.call(8, 8, {"group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                                 {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                                  "committed_metadata": None}]}]})
    d = await broker.call(15, version, {"groups": ["simple", "none"], "include_authorized_operations": True})
    # KIP-1043: from v6 a missing group is GROUP_ID_NOT_FOUND rather than a Dead group
    missing = E.GROUP_ID_NOT_FOUND if version >= 6 else 0
    assert [(g["group_id"], g["group_state"], g["error_code"]) for g in d["groups"]] == [
        ("simple", "Empty", 0), ("none", "Dead", missing)]
    if version >= 6:
        assert d["groups"][1]["error_message"] == "Group none not found."
    version = min(version, 5)  # ListGroups and DeleteGroups stop at v5 / v2
    if version >= 3:
        assert d["groups"][0]["authorized_operations"] == apis.GROUP_AUTHORIZED_OPERATIONS
    listed = await broker.call(16, version, {"states_filter": ["Empty"], "types_filter": []})
    assert [g["group_id"] for g in listed["groups"]] == ["simple"]
    if version >= 4:
        assert listed["groups"][0]["group_state"] == "Empty"
        none = await broker.call(16, version, {"states_filter": ["Stable"], "types_filter": []})
        assert none["groups"] == []
    if version <= 2:
        r = await broker.call(42, version, {"groups_names": ["simple", "none", ""]})
        assert [(x["group_id"], x["error_code"]) for x in r["results"]] == [
            ("simple", 0), ("none", E.GROUP_ID_NOT_FOUND), ("", E.GROUP_ID_NOT_FOUND)]  # Kafka 4.2 (tests/conformance): a missing group


async def test_offset_delete(broker):
    await broker.call(8, 8, {"group_id": "s", "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                                 {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                                  "committed_metadata": ""}]}]})
    r = await broker.call(47, 0, {"group_id": "s", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 99}]},
        {"name": "ghost", "partitions": [{"partition_index": 0}]}]})
    assert r["error_code"] == 0
    assert [[p["error_code"] for p in t["partitions"]] for t in r["topics"]] == [
        [0, E.UNKNOWN_TOPIC_OR_PARTITION], [E.UNKNOWN_TOPIC_OR_PARTITION]]
    f = await broker.call(9, 7, {"group_id": "s", "require_stable": False, "topics": None})
    assert f["topics"] == []
    r = await broker.call(47, 0, {"group_id": "nope", "topics": []})
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND


async def test_parked_join_does_not_block_the_loop(broker):
    """Two members: the second join parks until the first rejoins; other requests are answered meanwhile."""
    loop = asyncio.get_running_loop()
    r = await broker.call(11, 5, join_body("p"))
    a = (await broker.call(11, 5, join_body("p", r["member_id"])))["member_id"]
    await broker.call(14, 3, {"group_id": "p", "generation_id": 1, "member_id": a, "group_instance_id": None,
                              "assignments": []})
    r = await broker.call(11, 5, join_body("p"))
    ctx = RequestContext(11, 5, 99, "c2", "127.0.0.1", broker)
    body = decode_request(encode_request(11, 5, 99, "c2", join_body("p", r["member_id"]))[4:]).body
    parked = loop.create_task(apis.join_group(ctx, body))
    await asyncio.sleep(0)
    assert not parked.done()
    h = await broker.call(12, 3, {"group_id": "p", "generation_id": 1, "member_id": a, "group_instance_id": None})
    assert h["error_code"] == E.REBALANCE_IN_PROGRESS and not parked.done()
    rejoin = await broker.call(11, 5, join_body("p", a))
    assert rejoin["generation_id"] == 2
    done = await asyncio.wait_for(parked, 1)
    assert done["generation_id"] == 2 and done["leader"] == a


def test_txn_offset_commit_registered_only_with_a_transaction_coordinator():
    from minikafka.protocol.apis import ApiRegistry

    without = ApiRegistry()
    apis.register(without, types.SimpleNamespace(txn_coordinator=None, group_coordinator=None))
    assert without.version_range(apis.TXN_OFFSET_COMMIT) is None
    assert without.version_range(apis.JOIN_GROUP) == (0, 9)
    with_txn = ApiRegistry()
    apis.register(with_txn, types.SimpleNamespace(txn_coordinator=object(), group_coordinator=None))
    assert with_txn.version_range(apis.TXN_OFFSET_COMMIT) == (0, 5)


@pytest.mark.parametrize("version", range(0, 5))
async def test_txn_offset_commit_every_version(broker, version):
    r = await broker.call(28, version, {
        "transactional_id": "tx", "group_id": "tg", "producer_id": 11, "producer_epoch": 0, "generation_id": -1,
        "member_id": "", "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 4, "committed_leader_epoch": -1, "committed_metadata": "x"}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == 0
    f = await broker.call(9, 7, {"group_id": "tg", "require_stable": True,
                                 "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert f["topics"][0]["partitions"][0]["error_code"] == E.UNSTABLE_OFFSET_COMMIT
    assert broker.group_coordinator.complete_transaction(11, 0, commit=True)
    f = await broker.call(9, 7, {"group_id": "tg", "require_stable": True,
                                 "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert f["topics"][0]["partitions"][0]["committed_offset"] == 4
