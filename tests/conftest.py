"""Fixtures shared by every test directory.

``apache_kafka`` (session scope): one Apache Kafka 4.2 single-node KRaft broker per test run
(tests/kafka/kafka_runner.py), started on first use and stopped by its PID at the end.  When
Kafka cannot be installed or started the tests that use it are skipped, unless
``MINIKAFKA_KAFKA_ORACLE=required`` (set by ``make test``), where they fail instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "kafka"))

import kafka_runner  # noqa: E402

# Every JVM of a test run (Apache Kafka, the Java clients, Kafka Streams, Spark) lives for seconds:
# the C1 compiler alone starts them in about half the time (Kafka 5.3 -> 2.9 s here) and nothing in
# a test measures a JVM's peak speed.  A value set outside the test run is kept.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def _unavailable(reason: str):
    if os.environ.get("MINIKAFKA_KAFKA_ORACLE") == "required":
        pytest.fail(f"Apache Kafka is required (MINIKAFKA_KAFKA_ORACLE=required): {reason}")
    pytest.skip(f"Apache Kafka not available: {reason}")


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory):
    """A running :class:`kafka_runner.KafkaBroker`; ``.bootstrap`` is ``127.0.0.1:PORT``."""
    try:
        kafka_runner.ensure_installed()
    except Exception as exc:  # mvn or java missing, no network
        _unavailable(str(exc))
    broker = kafka_runner.KafkaBroker(tmp_path_factory.mktemp("apache-kafka"))
    try:
        broker.start()
    except kafka_runner.KafkaError as exc:
        _unavailable(str(exc))
    yield broker
    broker.stop()
