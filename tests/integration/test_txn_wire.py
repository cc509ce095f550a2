"""Transaction APIs on the wire, version by version: raw requests built with protocol.codec.

Produce verification (a transactional batch to a partition not in the transaction), error codes
gated by version (PRODUCER_FENCED vs INVALID_PRODUCER_EPOCH), TxnOffsetCommit pending until the
commit (OffsetFetch require_stable -> UNSTABLE_OFFSET_COMMIT), EndTxn retries, ListTransactions
filters, DescribeProducers, Fetch read_committed aborted_transactions.
"""

from __future__ import annotations

import time

import pytest

from conftest import RawClient, start_broker
from minikafka.protocol.records import build_batch

pytestmark = pytest.mark.minikafka_only(reason=(
        "broker-wide transaction.max.timeout.ms=60000; the same transaction error paths are "
        "compared request by request in tests/conformance"))

TS = int(time.time() * 1000)


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("txn-wire"), offsets_topic_num_partitions=3,
                          transaction_state_log_num_partitions=3, transaction_max_timeout_ms=60000)
    with RawClient(handle.port) as client:
        yield client
    handle.stop()


def create(c, topic):
    resp = c.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": True,
                             "include_topic_authorized_operations": False})
    assert resp["topics"][0]["error_code"] == 0


def init(c, tid, version=4, timeout=60000, pid=-1, epoch=-1):
    body = {"transactional_id": tid, "transaction_timeout_ms": timeout, "producer_id": pid, "producer_epoch": epoch}
    for _ in range(50):
        r = c.request(22, version, body)
        if r["error_code"] not in (14, 15, 51):  # loading / not available / concurrent: retriable
            return r
        time.sleep(0.05)
    return r


def add(c, tid, pid, epoch, topic, partitions=(0,), version=3):
    r = c.request(24, version, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                "v3_and_below_producer_epoch": epoch,
                                "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}]})
    return [p["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]]


def end(c, tid, pid, epoch, commit, version=3):
    return c.request(26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                   "committed": commit})["error_code"]


def produce(c, tid, topic, pid, epoch, seq, version=9, value=b"v"):
    records = bytes(build_batch([(b"k", value, [], TS)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                transactional=True))
    r = c.request(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                               "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return r["responses"][0]["partition_responses"][0]["error_code"]


def test_produce_to_a_partition_outside_the_transaction_is_rejected(raw):
    create(raw, "w-verify")
    r = init(raw, "w-verify")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    assert produce(raw, "w-verify", "w-verify", pid, epoch, 0, version=9) == 48  # INVALID_TXN_STATE
    assert produce(raw, "w-verify", "w-verify", pid, epoch, 0, version=11) == 120  # TRANSACTION_ABORTABLE
    assert add(raw, "w-verify", pid, epoch, "w-verify") == [0]
    assert produce(raw, "w-verify", "w-verify", pid, epoch, 0) == 0
    assert add(raw, "w-verify", pid, epoch, "w-verify", partitions=(0, 7)) == [55, 3]  # not attempted / unknown
    assert end(raw, "w-verify", pid, epoch, True) == 0
    assert end(raw, "w-verify", pid, epoch, True) == 0  # a retry
    assert end(raw, "w-verify", pid, epoch, False) == 48


def test_fencing_errors_depend_on_the_version(raw):
    create(raw, "w-fence")
    old = init(raw, "w-fence")
    new = init(raw, "w-fence")
    assert new["producer_epoch"] == old["producer_epoch"] + 1
    pid, stale = old["producer_id"], old["producer_epoch"]
    assert add(raw, "w-fence", pid, stale, "w-fence", version=1) == [47]  # INVALID_PRODUCER_EPOCH
    assert add(raw, "w-fence", pid, stale, "w-fence", version=2) == [90]  # PRODUCER_FENCED
    assert end(raw, "w-fence", pid, stale, True, version=1) == 47
    assert end(raw, "w-fence", pid, stale, True, version=2) == 90
    assert init(raw, "w-fence", version=3, pid=pid + 1000, epoch=0)["error_code"] == 47
    assert init(raw, "w-fence", version=4, pid=pid + 1000, epoch=0)["error_code"] == 90
    assert init(raw, "w-fence", timeout=60001)["error_code"] == 50  # INVALID_TRANSACTION_TIMEOUT
    assert end(raw, "w-nobody", pid, 0, True) == 49  # INVALID_PRODUCER_ID_MAPPING


def test_txn_offset_commit_is_pending_until_the_commit(raw):
    create(raw, "w-offsets")
    group = "w-group"
    r = init(raw, "w-offsets")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    assert raw.request(25, 3, {"transactional_id": "w-offsets", "producer_id": pid, "producer_epoch": epoch,
                               "group_id": group})["error_code"] == 0
    commit = raw.request(28, 3, {"transactional_id": "w-offsets", "group_id": group, "producer_id": pid,
                                 "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                                 "group_instance_id": None,
                                 "topics": [{"name": "w-offsets", "partitions": [
                                     {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                                      "committed_metadata": ""}]}]})
    assert commit["topics"][0]["partitions"][0]["error_code"] == 0

    def fetch(stable):
        r = raw.request(9, 7, {"group_id": group, "require_stable": stable,
                               "topics": [{"name": "w-offsets", "partition_indexes": [0]}]})
        p = r["topics"][0]["partitions"][0]
        return p["error_code"], p["committed_offset"]

    assert fetch(True) == (88, -1)  # UNSTABLE_OFFSET_COMMIT
    assert fetch(False) == (0, -1)
    assert end(raw, "w-offsets", pid, epoch, True) == 0
    assert fetch(True) == (0, 42)


def test_fetch_read_committed_reports_aborted_transactions_and_list_describe(raw):
    create(raw, "w-fetch")
    r = init(raw, "w-fetch")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    add(raw, "w-fetch", pid, epoch, "w-fetch")
    assert produce(raw, "w-fetch", "w-fetch", pid, epoch, 0, value=b"aborted") == 0
    assert end(raw, "w-fetch", pid, epoch, False) == 0
    add(raw, "w-fetch", pid, epoch, "w-fetch")
    assert produce(raw, "w-fetch", "w-fetch", pid, epoch, 1, value=b"open") == 0

    def fetch(isolation):
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "w-fetch", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
        return raw.request(1, 11, body)["responses"][0]["partitions"][0]

    committed = fetch(1)
    assert committed["high_watermark"] == 3 and committed["last_stable_offset"] == 2
    assert committed["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
    assert fetch(0)["aborted_transactions"] is None

    listed = raw.request(66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [pid], "duration_filter": -1})
    assert [(t["transactional_id"], t["transaction_state"]) for t in listed["transaction_states"]] == [
        ("w-fetch", "Ongoing")]
    described = raw.request(65, 0, {"transactional_ids": ["w-fetch", "w-none"]})["transaction_states"]
    assert described[0]["topics"] == [{"topic": "w-fetch", "partitions": [0]}]
    assert described[1]["error_code"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    producers = raw.request(61, 0, {"topics": [{"name": "w-fetch", "partition_indexes": [0]}]})
    active = producers["topics"][0]["partitions"][0]["active_producers"]
    assert [(p["producer_id"], p["current_txn_start_offset"], p["last_sequence"]) for p in active] == [(pid, 2, 1)]
    assert end(raw, "w-fetch", pid, epoch, True) == 0
    assert fetch(1)["last_stable_offset"] == 4
