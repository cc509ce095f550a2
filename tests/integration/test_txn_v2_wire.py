"""Transactions V2 (KIP-890 part 2) on the wire, raw requests (protocol.codec): Produce v12 adds
the partition itself, EndTxn v5 bumps the epoch and the markers carry the bumped epoch, the next
transaction goes on at the new epoch from sequence 0, TxnOffsetCommit v5 adds the offsets
partition itself, AddPartitionsToTxn v4-5, and with ``transaction.version`` lowered to 1 by
UpdateFeatures Produce v12 is v11 again.  tests/conformance/corpus/issue20.py compares the same
exchanges with Apache Kafka 4.2's answers."""

from __future__ import annotations

import struct
import time

import pytest

from conftest import RawClient, start_broker

from minikafka.protocol.records import build_batch

pytestmark = pytest.mark.minikafka_only(reason=(
    "raw TV2 requests and a transaction.version change on a broker of its own; compared with Apache "
    "Kafka 4.2 in tests/conformance/corpus/issue20.py"))

TS = int(time.time() * 1000)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("txn-v2-wire"), offsets_topic_num_partitions=3,
                          transaction_state_log_num_partitions=3)
    with RawClient(handle.port) as client:
        yield client
    handle.stop()


def _create(c, topic):
    r = c.request(19, 7, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False})
    assert r["topics"][0]["error_code"] == 0


def _init(c, tid):
    for _ in range(100):
        c.request(10, 3, {"key": tid, "key_type": 1})
        r = c.request(22, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
                              "producer_epoch": -1})
        if r["error_code"] == 0:
            return r["producer_id"], r["producer_epoch"]
        time.sleep(0.05)
    raise AssertionError(r)


def _produce(c, tid, topic, pid, epoch, seq, value=b"v", version=12):
    records = bytes(build_batch([(b"k", value, [], TS)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                transactional=True))
    r = c.request(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                               "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return r["responses"][0]["partition_responses"][0]["error_code"]


def _end(c, tid, pid, epoch, commit, version=5):
    r = c.request(26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                "committed": commit})
    return (r["error_code"], r.get("producer_id"), r.get("producer_epoch")) if version >= 5 else r["error_code"]


def _describe(c, tid):
    s = c.request(65, 0, {"transactional_ids": [tid]})["transaction_states"][0]
    return s["transaction_state"], s["producer_epoch"], sorted((t["topic"], p) for t in s["topics"]
                                                                for p in t["partitions"])


def _batches(c, topic, isolation=0):
    """(is_control, producer_epoch, control type or value) of every batch in partition 0."""
    r = c.request(1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                          "isolation_level": isolation, "session_id": 0, "session_epoch": -1, "topics": [
                              {"topic": topic, "partitions": [
                                  {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                   "last_fetched_epoch": -1, "log_start_offset": -1,
                                   "partition_max_bytes": 1 << 20}]}],
                          "forgotten_topics_data": [], "rack_id": ""})
    part = r["responses"][0]["partitions"][0]
    data = b"".join(bytes(chunk) for chunk in part["records"]) if isinstance(part["records"], list) \
        else bytes(part["records"] or b"")
    out, pos = [], 0
    while pos + 61 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        attributes = struct.unpack_from(">h", data, pos + 21)[0]
        epoch = struct.unpack_from(">h", data, pos + 51)[0]
        control = bool(attributes & 0x20)
        out.append((control, epoch))
        pos += 12 + length
    return out, part["last_stable_offset"], part["aborted_transactions"]


def test_v2_round_trip_bumps_the_epoch_on_every_end(raw):
    _create(raw, "v2-flow")
    pid, epoch = _init(raw, "v2-flow")
    assert _produce(raw, "v2-flow", "v2-flow", pid, epoch, 0, b"one") == 0  # no AddPartitionsToTxn
    assert _describe(raw, "v2-flow") == ("Ongoing", epoch, [("v2-flow", 0)])
    assert _end(raw, "v2-flow", pid, epoch, True) == (0, pid, epoch + 1)
    assert _end(raw, "v2-flow", pid, epoch, True) == (0, pid, epoch + 1)  # retry of a lost answer
    assert _end(raw, "v2-flow", pid, epoch, False)[0] == 48  # INVALID_TXN_STATE
    assert _produce(raw, "v2-flow", "v2-flow", pid, epoch, 1) == 47  # the old epoch: INVALID_PRODUCER_EPOCH
    assert _produce(raw, "v2-flow", "v2-flow", pid, epoch + 1, 0, b"two") == 0  # new epoch, sequence 0
    assert _end(raw, "v2-flow", pid, epoch + 1, False) == (0, pid, epoch + 2)
    batches, lso, aborted = _batches(raw, "v2-flow")
    # data at epoch e, its COMMIT marker at e+1; data at e+1, its ABORT marker at e+2
    assert batches == [(False, epoch), (True, epoch + 1), (False, epoch + 1), (True, epoch + 2)]
    assert lso == 4
    committed, _, aborted = _batches(raw, "v2-flow", isolation=1)
    assert [a["producer_id"] for a in aborted] == [pid]


def test_txn_offset_commit_v5_adds_the_offsets_partition(raw):
    _create(raw, "v2-offsets")
    for _ in range(100):
        if raw.request(10, 3, {"key": "v2-group", "key_type": 0})["error_code"] == 0:
            break
        time.sleep(0.05)
    pid, epoch = _init(raw, "v2-offsets")

    def commit_offsets(version):
        r = raw.request(28, version, {"transactional_id": "v2-offsets", "group_id": "v2-group", "producer_id": pid,
                                      "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                                      "group_instance_id": None, "topics": [{"name": "v2-offsets", "partitions": [
                                          {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                                           "committed_metadata": ""}]}]})
        return r["topics"][0]["partitions"][0]["error_code"]

    assert commit_offsets(4) == 120  # V1: needs AddOffsetsToTxn first (TRANSACTION_ABORTABLE)
    assert commit_offsets(5) == 0  # V2: adds the group's partition itself
    state, _, partitions = _describe(raw, "v2-offsets")
    assert state == "Ongoing" and [t for t, _ in partitions] == ["__consumer_offsets"]
    assert _end(raw, "v2-offsets", pid, epoch, True) == (0, pid, epoch + 1)
    fetched = raw.request(9, 8, {"groups": [{"group_id": "v2-group", "topics": None}], "require_stable": True})
    offsets = {(t["name"], p["partition_index"]): p["committed_offset"]
               for t in fetched["groups"][0]["topics"] for p in t["partitions"]}
    assert offsets == {("v2-offsets", 0): 5}


def test_add_partitions_to_txn_v4_v5(raw):
    _create(raw, "v2-add")
    pid, epoch = _init(raw, "v2-add")
    for version in (4, 5):
        def call(verify, e=epoch, topics=("v2-add",)):
            r = raw.request(24, version, {"transactions": [{
                "transactional_id": "v2-add", "producer_id": pid, "producer_epoch": e, "verify_only": verify,
                "topics": [{"name": t, "partitions": [0]} for t in topics]}]})
            assert r["error_code"] == 0
            return {t["name"]: t["results_by_partition"][0]["partition_error_code"]
                    for t in r["results_by_transaction"][0]["topic_results"]}

        if version == 4:
            assert call(True) == {"v2-add": 120}  # not in the transaction: TRANSACTION_ABORTABLE, at v4 too
            assert call(False, e=epoch + 5) == {"v2-add": 90}  # PRODUCER_FENCED
            assert call(False, topics=("v2-absent", "v2-add")) == {"v2-absent": 3, "v2-add": 55}
            assert call(False) == {"v2-add": 0}
        assert call(True) == {"v2-add": 0}
    assert _end(raw, "v2-add", pid, epoch, False) == (0, pid, epoch + 1)


def test_v1_clients_and_transaction_version_1(raw):
    """EndTxn v4 keeps the epoch (V1), and with transaction.version lowered to 1 Produce v12 no
    longer adds partitions; raised again, it does."""
    _create(raw, "v1-flow")
    pid, epoch = _init(raw, "v1-flow")
    raw.request(24, 3, {"v3_and_below_transactional_id": "v1-flow", "v3_and_below_producer_id": pid,
                        "v3_and_below_producer_epoch": epoch,
                        "v3_and_below_topics": [{"name": "v1-flow", "partitions": [0]}]})
    assert _produce(raw, "v1-flow", "v1-flow", pid, epoch, 0, version=11) == 0
    assert _end(raw, "v1-flow", pid, epoch, True, version=4) == 0
    assert _describe(raw, "v1-flow")[:2] == ("CompleteCommit", epoch)

    def set_tv(level, upgrade_type):
        r = raw.request(57, 1, {"timeout_ms": 1000, "validate_only": False, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": level, "upgrade_type": upgrade_type}]})
        assert r["error_code"] == 0, r

    set_tv(1, 2)
    try:
        assert _produce(raw, "v1-flow", "v1-flow", pid, epoch, 1, version=12) == 120  # not added: v11 rules
        assert _describe(raw, "v1-flow")[0] == "CompleteCommit"
    finally:
        set_tv(2, 1)
    assert _produce(raw, "v1-flow", "v1-flow", pid, epoch, 1, version=12) == 0
    assert _describe(raw, "v1-flow")[0] == "Ongoing"
