"""ListConfigResources, WriteTxnMarkers, UnregisterBroker and the Raft voter APIs with real admin
clients, on one embedded broker:

* kafka-python's ``list_config_resources`` (ListConfigResources v1) and ``abort_transaction``
  (WriteTxnMarkers) ending a transaction that a librdkafka producer left open, after
  ``describe_producers`` found it;
* the Java Admin of kafka-clients 4.1+ (``java/Kafka42Membership.java``): listConfigResources,
  unregisterBroker of an unknown id, addRaftVoter / removeRaftVoter on the static quorum.  It
  needs the oracle's 4.x jars (``tests/kafka/target/libs`` or ``MINIKAFKA_KAFKA_CLIENT_LIBS``) and
  is skipped without them.

The answers are the ones Kafka 4.2.2 gave to the same requests (see the unit tests'
``test_issue20_admin.py``).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from clienttools import ROOT, require_tool
from conftest import RawClient

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "UnregisterBroker, Raft voters and WriteTxnMarkers change the broker's state; compared with Kafka "
    "4.2.2 as recorded frames in tests/unit/protocol/test_issue20_specs.py"))]


@pytest.fixture(scope="module")
def kafka():
    from minikafka import Broker

    with Broker() as broker:
        yield broker


@pytest.fixture(scope="module")
def admin(kafka):
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    yield client
    client.close()


def test_kafka_python_list_config_resources(kafka, admin):
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic("lcr-b", 1, 1)])
    listed = admin.list_config_resources()
    node = str(kafka.server.config.node_id)
    assert listed["broker"] == [node] and listed["broker_logger"] == [node]
    assert "lcr-b" in listed["topic"]
    assert set(admin.list_config_resources(["TOPIC"])) == {"topic"}
    assert admin.list_config_resources(["GROUP", "CLIENT_METRICS"]) == {}


def test_kafka_python_abort_transaction_of_a_librdkafka_producer(kafka, admin):
    from confluent_kafka import Consumer, Producer, TopicPartition as CTP
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec, NewTopic

    topic = "hanging-txn"
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": "left-open",
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"never committed")
    assert producer.flush(10) == 0
    tp = TopicPartition(topic, 0)
    (state,) = [p for p in admin.describe_producers([tp])[tp].active_producers
                if p.current_transaction_start_offset >= 0]

    def last_stable() -> int:
        c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "lso-probe",
                      "isolation.level": "read_committed"})
        try:
            return c.get_watermark_offsets(CTP(topic, 0), timeout=10, cached=False)[1]
        finally:
            c.close()

    assert last_stable() == 0
    admin.abort_transaction(AbortTransactionSpec(tp, state.producer_id, state.producer_epoch))
    deadline = time.monotonic() + 10
    while last_stable() != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert last_stable() == 2  # the data and the abort marker; read_committed skips the data
    producer.abort_transaction(10)  # the producer's own abort still completes


def _kafka4_client_classpath() -> str | None:
    for folder in (os.environ.get("MINIKAFKA_KAFKA_CLIENT_LIBS"), ROOT / "tests" / "kafka" / "target" / "libs"):
        if folder and list(Path(folder).glob("kafka-clients-4*.jar")):
            return ":".join(str(j) for j in Path(folder).glob("*.jar")
                            if j.name.startswith(("kafka-clients-", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api")))
    return None


def test_java_admin_membership_and_config_resources(kafka, admin, tmp_path):
    classpath = _kafka4_client_classpath()
    if classpath is None:
        pytest.skip("kafka-clients 4.x jars not found (tests/kafka/target/libs or MINIKAFKA_KAFKA_CLIENT_LIBS)")
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic("membership", 1, 1)])
    javac, java = require_tool("javac"), require_tool("java")
    src = ROOT / "tests" / "integration" / "java" / "Kafka42Membership.java"
    subprocess.run([javac, "-cp", classpath, "-d", str(tmp_path), str(src)], check=True, timeout=180)
    proc = subprocess.run([java, "-cp", f"{tmp_path}:{classpath}", "Kafka42Membership", kafka.bootstrap_servers,
                           "membership"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert [line for line in proc.stdout.splitlines() if line.startswith("OK ")] == [
        "OK list-config-resources", "OK unregister-unknown", "OK raft-voters"]


def test_write_txn_markers_commits_transactional_offsets(kafka, admin):
    """A COMMIT marker written with WriteTxnMarkers to ``__consumer_offsets`` makes a transaction's
    offsets (sent with ``send_offsets_to_transaction``) committed, as the coordinator's marker
    would; Kafka 4.2.2 answers this sequence the same way (offset 5, LSO past the marker)."""
    from confluent_kafka import Consumer, Producer, TopicPartition as CTP
    from kafka import TopicPartition
    from kafka.admin import NewTopic


    admin.create_topics([NewTopic("wo-t", 1, 1)])
    group = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "wo-g"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": "wo",
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("wo-t", b"x")
    assert producer.flush(10) == 0
    producer.send_offsets_to_transaction([CTP("wo-t", 0, 5)], group.consumer_group_metadata(), 10)
    tp = TopicPartition("wo-t", 0)
    (state,) = [s for s in admin.describe_producers([tp])[tp].active_producers if s.current_transaction_start_offset >= 0]
    offsets_partitions = kafka.server.controller.topic("__consumer_offsets").num_partitions

    with RawClient(kafka.port) as raw:
        def committed():
            reply = raw.request(9, 8, {"groups": [{"group_id": "wo-g", "topics": [
                {"name": "wo-t", "partition_indexes": [0]}]}], "require_stable": True})
            part = reply["groups"][0]["topics"][0]["partitions"][0]
            return part["committed_offset"], part["error_code"]

        assert committed() == (-1, 88)  # UNSTABLE_OFFSET_COMMIT while the transaction is open
        reply = raw.request(27, 1, {"markers": [{
            "producer_id": state.producer_id, "producer_epoch": state.producer_epoch, "transaction_result": True,
            "coordinator_epoch": 0, "topics": [{"name": "wo-t", "partition_indexes": [0]},
                                               {"name": "__consumer_offsets",
                                                "partition_indexes": list(range(offsets_partitions))}]}]})
        assert {p["error_code"] for t in reply["markers"][0]["topics"] for p in t["partitions"]} == {0}
        assert committed() == (5, 0)
    producer.commit_transaction(10)
    group.close()
