"""Transactions V2 (KIP-890 part 2) with real clients.

* kafka-clients 4.2 (``java/TxnV2.java``): reads ``transaction.version`` 2 from the finalized
  features and so produces with Produce v12 (partitions added by the broker), TxnOffsetCommit v5
  and EndTxn v5; the producer epoch is bumped by each of its three transaction ends, the
  committed offsets are there and a read_committed consumer sees only the committed records.
  The same program against Apache Kafka 4.2.2 prints the same lines.
* librdkafka (confluent-kafka): whatever protocol it picks, commit/abort/commit reads back right.
* kafka-python (its transaction manager stops at EndTxn v3, i.e. transactions V1): epoch unchanged.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from clienttools import ROOT, require_tool
from conftest import RawClient
from test_issue20_admin_clients import _kafka4_client_classpath

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "a broker of its own; the Java 4.2 program printed the same lines against Kafka 4.2.2 by hand"))]


@pytest.fixture(scope="module")
def kafka():
    from minikafka import Broker

    with Broker(config={"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}) as broker:
        yield broker


def test_java_4_2_producer_uses_transactions_v2(kafka, tmp_path):
    classpath = _kafka4_client_classpath()
    if classpath is None:
        pytest.skip("kafka-clients 4.x jars not found (tests/kafka/target/libs or MINIKAFKA_KAFKA_CLIENT_LIBS)")
    javac, java = require_tool("javac"), require_tool("java")
    src = ROOT / "tests" / "integration" / "java" / "TxnV2.java"
    subprocess.run([javac, "-cp", classpath, "-d", str(tmp_path), str(src)], check=True, timeout=180)
    proc = subprocess.run([java, "-cp", f"{tmp_path}:{classpath}", "TxnV2", kafka.bootstrap_servers, "tv2-java",
                           "tv2-java-tid", "tv2-java-group"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert lines["TRANSACTION_VERSION"] == "2"
    assert lines["STATE"] == "CompleteCommit"
    # InitProducerId gives epoch 0; each of the three ends (commit, abort, commit) bumps it.
    assert lines["EPOCH"] == "3"
    assert lines["GROUP_OFFSET"] == "7"  # TxnOffsetCommit v5 added the offsets partition itself
    assert lines["READ"] == "commit-1-0,commit-1-1,commit-1-2,commit-2"


def _epoch(kafka, tid: str) -> tuple[str, int]:

    with RawClient(int(kafka.bootstrap_servers.rpartition(":")[2])) as c:
        state = c.request(65, 0, {"transactional_ids": [tid]})["transaction_states"][0]
    return state["transaction_state"], state["producer_epoch"]


def _read_committed(bootstrap: str, topic: str, want: int, timeout: float = 15.0) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    out, eof = [], set()
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (len(out) >= want and eof):
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
                continue
            out.append(m.value())
    finally:
        c.close()
    return out


def test_librdkafka_transactions(kafka):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic("tv2-rdk", 1, 1)])["tv2-rdk"].result(10)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": "tv2-rdk-tid",
                  "transaction.timeout.ms": 30000})
    p.init_transactions(20)
    for values, commit in (([b"a", b"b"], True), ([b"x"], False), ([b"c"], True)):
        p.begin_transaction()
        for v in values:
            p.produce("tv2-rdk", v, partition=0)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(20)
    assert sorted(_read_committed(kafka.bootstrap_servers, "tv2-rdk", 3)) == [b"a", b"b", b"c"]
    # librdkafka (2.x) runs transactions V1: EndTxn below v5, so its epoch is not bumped.
    assert _epoch(kafka, "tv2-rdk-tid") == ("CompleteCommit", 0)


def test_kafka_python_stays_on_transactions_v1(kafka):
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    admin.create_topics([NewTopic("tv2-kp", 1, 1)])
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, transactional_id="tv2-kp-tid")
    p.init_transactions()
    for value, commit in ((b"a", True), (b"x", False), (b"b", True)):
        p.begin_transaction()
        p.send("tv2-kp", value, partition=0).get(10)
        (p.commit_transaction if commit else p.abort_transaction)()
    p.close()
    assert sorted(_read_committed(kafka.bootstrap_servers, "tv2-kp", 2)) == [b"a", b"b"]
    admin.close()
    assert _epoch(kafka, "tv2-kp-tid") == ("CompleteCommit", 0)  # V1: no bump on a transaction end
