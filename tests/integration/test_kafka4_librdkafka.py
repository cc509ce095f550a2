"""librdkafka (confluent-kafka) against issue 14's Kafka 4.x surface: it fetches by topic id
(Fetch v13+) and, with client telemetry on, pushes its metrics (KIP-714)."""

import re
import time

import pytest

from conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "minikafka's client telemetry setting (client.telemetry.enable) and its log of pushes"))]

confluent_kafka = pytest.importorskip("confluent_kafka")


def test_librdkafka_fetches_by_topic_id_and_pushes_telemetry(tmp_path):
    broker = BrokerProcess(tmp_path, {"client.telemetry.enable": True, "client.telemetry.push.interval.ms": 500},
                           extra_args=("--log-level", "DEBUG"))
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "rdk-tele"})
        for i in range(50):
            producer.produce("rdk-k4", value=b"v%d" % i)
        assert producer.flush(15) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "rdk-consumer",
                                             "group.id": "rdk-k4", "auto.offset.reset": "earliest"})
        consumer.subscribe(["rdk-k4"])
        got, deadline = 0, time.monotonic() + 30
        while got < 50 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got += 1
        assert got == 50
        # keep the producer alive for its first push (jittered around the 500 ms interval)
        deadline = time.monotonic() + 10
        while "client metrics from client_id=rdk-tele" not in broker.read_log() and time.monotonic() < deadline:
            producer.poll(0.2)
        consumer.close()
        log = broker.read_log()
        versions = {int(v) for v in re.findall(r"request api=1 v(\d+) .*client_id=rdk-consumer", log)}
        assert versions and min(versions) >= 13, versions
        assert "client metrics from client_id=rdk-tele" in log
    finally:
        broker.stop()
