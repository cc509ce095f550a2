"""UnregisterBroker of this node, and what the node answers afterwards until it restarts.

A one-node Kafka 4.2.2 asked to unregister its own broker fences it: Metadata lists no broker and no
controller and every partition is LEADER_NOT_AVAILABLE (leader -1, leader epoch 1, empty ISR, the
replica offline), DescribeCluster lists no broker, FindCoordinator answers COORDINATOR_NOT_AVAILABLE
(node -1, message "" in v4), Produce and ListOffsets answer NOT_LEADER_OR_FOLLOWER, and a second
UnregisterBroker answers BROKER_ID_NOT_REGISTERED.  Those answers were recorded from Kafka 4.2.2 with
the same requests (2026-11-26); the shared Apache Kafka of the test session cannot be fenced without
breaking every other test, so this test runs on minikafka only.  A restart registers the node again.
"""

from __future__ import annotations

import pytest

from conftest import RawClient, start_broker
from minikafka.protocol.records import build_batch

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "fences the node until it restarts; Kafka 4.2.2's answers to the same requests are recorded above"))]

NONE, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 0, 5, 6
COORDINATOR_NOT_AVAILABLE, BROKER_ID_NOT_REGISTERED = 15, 102


def _metadata(raw: RawClient, topic: str) -> dict:
    return raw.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})


def _produce(raw: RawClient, topic: str) -> int:
    batch = bytes(build_batch([(b"k", b"v", [], 0)]))
    response = raw.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return response["responses"][0]["partition_responses"][0]["error_code"]


def test_an_unregistered_node_is_fenced_until_it_restarts(tmp_path):
    broker = start_broker(tmp_path)
    topic = "fenced"
    try:
        raw = RawClient(broker.port)
        created = raw.request(19, 5, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                                  "assignments": [], "configs": []}],
                                      "timeout_ms": 10000, "validate_only": False})
        assert created["topics"][0]["error_code"] == NONE
        assert _produce(raw, topic) == NONE
        assert raw.request(64, 0, {"broker_id": 1})["error_code"] == NONE

        md = _metadata(raw, topic)
        assert (md["brokers"], md["controller_id"]) == ([], -1)
        (partition,) = md["topics"][0]["partitions"]
        assert partition == {"error_code": LEADER_NOT_AVAILABLE, "partition_index": 0, "leader_id": -1,
                             "leader_epoch": 1, "replica_nodes": [1], "isr_nodes": [], "offline_replicas": [1]}
        cluster = raw.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        assert (cluster["error_code"], cluster["controller_id"], cluster["brokers"]) == (NONE, -1, [])
        (coordinator,) = raw.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})["coordinators"]
        assert coordinator == {"key": "g", "node_id": -1, "host": "", "port": -1,
                               "error_code": COORDINATOR_NOT_AVAILABLE, "error_message": ""}
        offsets = raw.request(2, 8, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert offsets["topics"][0]["partitions"][0]["error_code"] == NOT_LEADER_OR_FOLLOWER
        assert _produce(raw, topic) == NOT_LEADER_OR_FOLLOWER
        again = raw.request(64, 0, {"broker_id": 1})
        assert (again["error_code"], again["error_message"]) == (
            BROKER_ID_NOT_REGISTERED, "Broker ID 1 is not currently registered")
        raw.close()

        broker.restart()
        raw = RawClient(broker.port)
        md = _metadata(raw, topic)
        assert [b["node_id"] for b in md["brokers"]] == [1] and md["controller_id"] == 1
        assert md["topics"][0]["partitions"][0]["leader_id"] == 1
        assert _produce(raw, topic) == NONE
        raw.close()
    finally:
        broker.stop()
