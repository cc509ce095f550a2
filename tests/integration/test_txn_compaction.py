"""A compacted topic written by a transactional producer, cleaned by the broker until its markers go.

The broker's own maintenance tick rolls and compacts the topic (short segment.ms, maintenance
interval and delete.retention.ms).  Aborted data goes on the first pass; the markers of
transactions with no data left are stamped with a delete horizon and removed on the pass after
it; read_committed consumers (confluent-kafka and kafka-python) then still get exactly the latest
committed value of every key, and Fetch reports no aborted transactions.
"""

from __future__ import annotations

import time

import pytest

from clienttools import read_committed_to_end
from conftest import RawClient, start_broker
from minikafka.protocol.records import iter_batches

pytestmark = pytest.mark.minikafka_only(reason=(
        "minikafka-only maintenance.interval.ms and one-partition internal topics to compact "
        "quickly"))

TOPIC = "compacted-txn"
WAIT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("txn-compact"), offsets_topic_num_partitions=1,
                          transaction_state_log_num_partitions=1, maintenance_interval_ms=100,
                          log_retention_check_interval_ms=100)
    yield handle
    handle.stop()


def fetch(raw: RawClient, isolation: int) -> dict:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    return raw.request(1, 11, body)["responses"][0]["partitions"][0]


def layout(raw: RawClient) -> list[tuple[int, str]]:
    """(base offset, "data" | "marker") of every batch the partition holds."""
    records = bytes(fetch(raw, 0)["records"] or b"")
    return [(h.base_offset, "marker" if h.is_control else "data") for _, h in iter_batches(records)]


def wait_for_layout(raw: RawClient, wanted: list[tuple[int, str]]) -> None:
    deadline = time.monotonic() + WAIT_S
    while (got := layout(raw)) != wanted:
        assert time.monotonic() < deadline, got
        time.sleep(0.05)


def read_committed_kafka_python(bootstrap: str) -> list[tuple[bytes, bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        return [(m.key, m.value) for m in c]
    finally:
        c.close()


def test_markers_go_after_compaction_and_read_committed_sees_the_committed_records(broker):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # The segment does not roll (so nothing is compacted) until the test lowers segment.ms below.
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.ms": "3600000", "delete.retention.ms": "5000",
        "min.cleanable.dirty.ratio": "0.01"})])[TOPIC].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compact-txn", "linger.ms": 0})
    p.init_transactions(WAIT_S)
    for key, value, commit in [(b"k1", b"old", True), (b"k1", b"aborted", False), (b"k3", b"aborted", False),
                               (b"k1", b"new", True), (b"k2", b"v2", True)]:
        p.begin_transaction()
        p.produce(TOPIC, key=key, value=value)
        p.flush(WAIT_S)
        (p.commit_transaction if commit else p.abort_transaction)(WAIT_S)
    expected = [(b"k1", b"new"), (b"k2", b"v2")]
    with RawClient(broker.port) as raw:
        # data@0 commit@1 | data@2 abort@3 | data@4 abort@5 | data@6 commit@7 | data@8 commit@9
        assert layout(raw) == [(0, "data"), (1, "marker"), (2, "data"), (3, "marker"), (4, "data"),
                               (5, "marker"), (6, "data"), (7, "marker"), (8, "data"), (9, "marker")]
        assert read_committed_to_end(broker.bootstrap, TOPIC) == [(b"k1", b"old")] + expected
        resource = ConfigResource("topic", TOPIC, incremental_configs=[
            ConfigEntry("segment.ms", "600", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(10)
        # The segment rolls, the tick compacts it: the aborted data and the superseded k1 go at
        # once; their markers stay, stamped with a delete horizon, for delete.retention.ms.
        wait_for_layout(raw, [(1, "marker"), (3, "marker"), (5, "marker"), (6, "data"), (7, "marker"),
                              (8, "data"), (9, "marker")])
        assert fetch(raw, 1)["aborted_transactions"] in (None, [])  # nothing left to filter
    # Markers with a horizon and without data or index entry: clients skip them.
    assert read_committed_to_end(broker.bootstrap, TOPIC) == expected
    assert read_committed_kafka_python(broker.bootstrap) == expected
    with RawClient(broker.port) as raw:
        # Past the horizon the tick removes them; the live transactions keep theirs.
        wait_for_layout(raw, [(6, "data"), (7, "marker"), (8, "data"), (9, "marker")])
        part = fetch(raw, 1)
        assert part["aborted_transactions"] in (None, []) and part["last_stable_offset"] == 10
        assert part["log_start_offset"] == 0
    assert read_committed_to_end(broker.bootstrap, TOPIC) == expected
    assert read_committed_kafka_python(broker.bootstrap) == expected
    # The index rebuilt after a restart agrees: nothing is open, nothing is aborted.
    broker.restart()
    with RawClient(broker.port) as raw:
        part = fetch(raw, 1)
        assert part["last_stable_offset"] == part["high_watermark"] == 10
        assert part["aborted_transactions"] in (None, [])
    assert read_committed_to_end(broker.bootstrap, TOPIC) == expected
    # The producer's state survived the cleaning: the same transactional id carries on.
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compact-txn", "linger.ms": 0})
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    p.produce(TOPIC, key=b"k3", value=b"v3")
    p.commit_transaction(WAIT_S)
    assert read_committed_kafka_python(broker.bootstrap) == expected + [(b"k3", b"v3")]
