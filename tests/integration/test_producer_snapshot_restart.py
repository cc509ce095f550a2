"""Producer-state snapshots across restarts of the real broker: a clean stop writes
``<offset>.snapshot`` into each partition the idempotent producer wrote to, and after the
restart the producer state comes from the snapshot: a resent batch is still recognised as a
duplicate (acknowledged at its original offset, not appended again) and the next sequence is
checked against the snapshot's, without replaying the log before the snapshot."""

import os
import re

import pytest

from conftest import BrokerProcess, RawClient
from minikafka.protocol.records import build_batch
from minikafka.storage import producer_snapshot

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "restarts the broker process and reads its snapshot files"))]

TOPIC = "snap"


def produce(client, pid, epoch, seq, partition=0, n=2):
    batch = build_batch([(None, b"v%d" % (seq + i), [], 1_700_000_000_000 + seq + i) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    resp = client.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
    p = resp["responses"][0]["partition_responses"][0]
    return p["error_code"], p["base_offset"]


def test_snapshot_on_clean_stop_restores_idempotent_state(tmp_path):
    broker = BrokerProcess(tmp_path, {"num.partitions": 2}, extra_args=("--log-level", "DEBUG"))
    try:
        client = RawClient(broker.port)
        client.request(3, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True,
                              "include_cluster_authorized_operations": False,
                              "include_topic_authorized_operations": False})
        init = client.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                      "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init["producer_id"], init["producer_epoch"]
        offsets = [produce(client, pid, epoch, seq) for seq in range(0, 20, 2)]
        assert [e for e, _ in offsets] == [0] * 10
        client.sock.close()
        broker.restart()
        part_dir = os.path.join(broker.data_dir, f"{TOPIC}-0")
        assert producer_snapshot.list_snapshots(part_dir) == [20]
        assert producer_snapshot.list_snapshots(os.path.join(broker.data_dir, f"{TOPIC}-1")) == []
        client = RawClient(broker.port)
        # The last batch again: a duplicate, acknowledged at its original offset.
        assert produce(client, pid, epoch, 18) == (0, 18)
        # A gap in the sequence is refused; the next sequence is accepted at the log end.
        assert produce(client, pid, epoch, 24)[0] == 45
        assert produce(client, pid, epoch, 20) == (0, 20)
        client.sock.close()
        broker.restart()
        assert producer_snapshot.list_snapshots(part_dir) == [20, 22]
        client = RawClient(broker.port)
        assert produce(client, pid, epoch, 20) == (0, 20)
        assert produce(client, pid, epoch, 22) == (0, 22)
        client.sock.close()
        assert not re.search(r"ignoring producer snapshot|could not write the producer snapshot", broker.read_log())
    finally:
        broker.stop()
