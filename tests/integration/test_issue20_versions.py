"""Issue 20: the API versions Kafka 4.2 serves above Kafka 4.0's, on the wire with raw requests
(protocol.codec), each version's own semantics: Fetch 18, ListOffsets 11 (sentinel timestamps
only from their version), FindCoordinator 5-6 (share keys), ListTransactions 2 (transactional id
pattern), Produce 12-13 (13 by topic id) and OffsetCommit / OffsetFetch 10 (by topic id).
tests/conformance/corpus/issue20.py compares the same requests with Apache Kafka 4.2's answers."""

from __future__ import annotations

import time
import uuid

import pytest

from conftest import RawClient, start_broker

from minikafka.protocol.records import build_batch

pytestmark = pytest.mark.minikafka_only(reason=(
    "raw requests at the new versions on a broker of its own; the same requests are compared with "
    "Apache Kafka 4.2 in tests/conformance/corpus/issue20.py"))

TS = int(time.time() * 1000)
UNKNOWN_ID = uuid.UUID(int=4242)
ZERO_ID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("issue20-versions"), offsets_topic_num_partitions=3,
                          transaction_state_log_num_partitions=3)
    with RawClient(handle.port) as client:
        yield client
    handle.stop()


def _topic(c, name, partitions=1) -> uuid.UUID:
    resp = c.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                         "assignments": [], "configs": []}],
                             "timeout_ms": 10000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0
    return resp["topics"][0]["topic_id"]


def _records(*values):
    return bytes(build_batch([(b"k", v, [], TS + i) for i, v in enumerate(values)]))


def _ready_coordinator(c, key, key_type=0):
    for _ in range(100):
        r = c.request(10, 3, {"key": key, "key_type": key_type})
        if r["error_code"] == 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"no coordinator for {key}")


def test_api_versions_matches_kafka_4_2_for_the_raised_apis(raw):
    ranges = {e["api_key"]: (e["min_version"], e["max_version"]) for e in raw.request(18, 3, {
        "client_software_name": "t", "client_software_version": "1"})["api_keys"]}
    assert {k: ranges[k] for k in (0, 1, 2, 8, 9, 10, 66)} == {
        0: (0, 13), 1: (4, 18), 2: (1, 11), 8: (2, 10), 9: (1, 10), 10: (0, 6), 66: (0, 2)}


def test_produce_13_by_topic_id_and_fetch_18(raw):
    tid = _topic(raw, "v13", partitions=2)
    resp = raw.request(0, 13, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": "", "topic_id": tid, "partition_data": [{"index": 0, "records": _records(b"a", b"b")},
                                                         {"index": 5, "records": _records(b"c")}]},
        {"name": "", "topic_id": UNKNOWN_ID, "partition_data": [{"index": 0, "records": _records(b"x")}]},
        {"name": "", "topic_id": ZERO_ID, "partition_data": [{"index": 0, "records": _records(b"y")}]}]})
    by_id = {t["topic_id"]: {p["index"]: p["error_code"] for p in t["partition_responses"]}
             for t in resp["responses"]}
    assert by_id == {tid: {0: 0, 5: 3}, UNKNOWN_ID: {0: 100}, ZERO_ID: {0: 100}}
    # v12 is v11 (transaction.version 1): by name.
    resp = raw.request(0, 12, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": "v13", "partition_data": [{"index": 0, "records": _records(b"d")}]}]})
    assert resp["responses"][0]["name"] == "v13"
    assert resp["responses"][0]["partition_responses"][0]["base_offset"] == 2
    fetched = raw.request(1, 18, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                  "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                      {"topic_id": tid, "partitions": [
                                          {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                           "last_fetched_epoch": -1, "log_start_offset": -1,
                                           "partition_max_bytes": 1 << 20}]}],
                                  "forgotten_topics_data": [], "rack_id": ""})
    part = fetched["responses"][0]["partitions"][0]
    assert fetched["responses"][0]["topic_id"] == tid and part["error_code"] == 0 and part["high_watermark"] == 3


@pytest.mark.parametrize("version", range(1, 12))
def test_list_offsets_sentinels_from_their_version(raw, version):
    if version == 1:
        _topic(raw, "sent")
        raw.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": "sent", "partition_data": [{"index": 0, "records": _records(b"a", b"b")}]}]})
    first = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}
    for ts in (-1, -2, -3, -4, -5, -6, -7, -100):
        resp = raw.request(2, version, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [
            {"name": "sent", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts,
                                             "max_num_offsets": 1}]}]})
        p = resp["topics"][0]["partitions"][0]
        if version < first.get(ts, 99):
            assert (p["error_code"], p["offset"], p["timestamp"]) == (35, -1, -1), (ts, version)
        elif ts == -6:  # no remote storage: nothing pending upload
            assert (p["error_code"], p["offset"], p["leader_epoch"]) == (0, -1, -1)
        else:
            assert p["error_code"] == 0, (ts, version)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_share_keys_from_v6(raw, version):
    _ready_coordinator(raw, "g")
    share = "g:AAAAAAAAAAAAAAAAAAAAAA:0"
    resp = raw.request(10, version, {"key_type": 2, "coordinator_keys": [share, "g:bad", "no-colons"]})
    codes = {c["key"]: c["error_code"] for c in resp["coordinators"]}
    # Well-formed from v6: the first one creates __share_group_state and answers
    # COORDINATOR_NOT_AVAILABLE (retriable), as Kafka 4.2; then this broker (issue 21).
    assert codes == {share: 15 if version >= 6 else 42, "g:bad": 42, "no-colons": 42}
    if version >= 6:
        again = raw.request(10, version, {"key_type": 2, "coordinator_keys": [share]})["coordinators"]
        assert again[0]["error_code"] == 0 and again[0]["node_id"] == 1
    groups = raw.request(10, version, {"key_type": 0, "coordinator_keys": ["g"]})["coordinators"]
    assert groups[0]["error_code"] == 0 and groups[0]["node_id"] == 1


def test_list_transactions_pattern(raw):
    ids = ["lt-abc-1", "lt-abd-2", "lt-xyz"]
    for tid in ids:
        _ready_coordinator(raw, tid, key_type=1)
        for _ in range(50):
            r = raw.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
                                    "producer_epoch": -1})
            if r["error_code"] == 0:
                break
            time.sleep(0.05)
        assert r["error_code"] == 0

    def listed(pattern, version=2):
        r = raw.request(66, version, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                      "transactional_id_pattern": pattern})
        return r["error_code"], sorted(s["transactional_id"] for s in r["transaction_states"]
                                       if s["transactional_id"].startswith("lt-"))

    assert listed(None) == listed("") == (0, ids)
    assert listed("lt-abc.*") == (0, ["lt-abc-1"])
    assert listed("lt-ab") == (0, [])  # the whole id must match
    assert listed("lt-ab[cd]-\\d") == (0, ["lt-abc-1", "lt-abd-2"])
    assert listed("[") == (128, [])  # INVALID_REGULAR_EXPRESSION
    assert listed("lt-abc.*", version=1) == (0, ids)  # v1 has no pattern


def test_offset_commit_and_fetch_10_by_topic_id(raw):
    tid = _topic(raw, "oid")
    _ready_coordinator(raw, "g10")

    def commit(topic_id, version=10):
        return raw.request(8, version, {
            "group_id": "g10", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "oid", "topic_id": topic_id, "partitions": [
                {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1, "committed_metadata": "m"},
                {"partition_index": 7, "committed_offset": 3, "committed_leader_epoch": -1,
                 "committed_metadata": "m"}]}]})["topics"]

    known = commit(tid)
    assert [t["topic_id"] for t in known] == [tid]
    assert {p["partition_index"]: p["error_code"] for p in known[0]["partitions"]} == {0: 0, 7: 3}
    for bad in (UNKNOWN_ID, ZERO_ID):
        (answer,) = commit(bad)
        assert answer["topic_id"] == bad and {p["error_code"] for p in answer["partitions"]} == {100}

    def fetch(topics):
        return raw.request(9, 10, {"groups": [{"group_id": "g10", "member_id": None, "member_epoch": -1,
                                               "topics": topics}], "require_stable": False})["groups"][0]

    everything = fetch(None)
    assert [(t["topic_id"], [p["committed_offset"] for p in t["partitions"]]) for t in everything["topics"]] \
        == [(tid, [3])]
    mixed = fetch([{"name": "", "topic_id": UNKNOWN_ID, "partition_indexes": [0]},
                   {"name": "", "topic_id": tid, "partition_indexes": [0]}])
    # Known topics first, then the unknown ids (Kafka 4.2's order).
    assert [(t["topic_id"], t["partitions"][0]["error_code"], t["partitions"][0]["committed_offset"])
            for t in mixed["topics"]] == [(tid, 0, 3), (UNKNOWN_ID, 100, -1)]


def test_check_order_of_the_topic_id_versions(raw):
    """Kafka 4.2's order: the transactional id before topic ids (Produce 13); an unknown topic id
    of OffsetCommit 10 answers UNKNOWN_TOPIC_ID whatever the group (the empty one here)."""
    tid = _topic(raw, "order")
    txn_batch = bytes(build_batch([(b"k", b"v", [], TS)], producer_id=1, producer_epoch=0, base_sequence=0,
                                  transactional=True))
    resp = raw.request(0, 13, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": "", "topic_id": UNKNOWN_ID, "partition_data": [{"index": 0, "records": txn_batch}]},
        {"name": "", "topic_id": tid, "partition_data": [{"index": 0, "records": txn_batch}]}]})
    assert sorted((t["topic_id"] == tid, t["partition_responses"][0]["error_code"]) for t in resp["responses"]) \
        == [(False, 53), (True, 53)]  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED, even for the unknown id

    def commit(topic_id):
        return raw.request(8, 10, {
            "group_id": "", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "", "topic_id": topic_id, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})["topics"][0]["partitions"][0]["error_code"]

    assert commit(UNKNOWN_ID) == 100
