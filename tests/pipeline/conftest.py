"""Fixtures for the pipeline tests: one broker and one SparkSession for the whole session.

The broker is ours (``start_broker`` from tests/integration/conftest.py). Setting
``MINIKAFKA_PIPELINE_BOOTSTRAP=host:port`` points the tests at an already running
Kafka-compatible broker instead (to compare with Apache Kafka). Spark runs ``local[2]`` with two
shuffle partitions; its JVM starts once, which keeps Spark's share of the suite small.  The same
session has Spark's own Kafka connector (``format("kafka")``) on its classpath when
``tests/tools/spark_connector.py`` installed it (``make test`` does); tests that need it take the
``spark_kafka`` fixture, which skips without the jars (and fails under CI, where they must be).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import uuid
import warnings
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def _start_broker():
    try:
        from tests.integration.conftest import start_broker
    except ImportError:
        # tests/ is not a package: load the integration conftest from its file.
        path = REPO_ROOT / "tests" / "integration" / "conftest.py"
        spec = importlib.util.spec_from_file_location("_minikafka_integration_conftest", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        start_broker = module.start_broker
    return start_broker


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory):
    external = os.environ.get("MINIKAFKA_PIPELINE_BOOTSTRAP")
    if external:
        yield external
        return
    handle = _start_broker()(tmp_path_factory.mktemp("pipeline-broker"))
    try:
        yield handle.bootstrap
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    # Spark's Python workers run this interpreter (PYSPARK_PYTHON), where minikafka is
    # installed, and unpickle the data source by its module name, minikafka.pipeline.source.
    from pyspark.sql import SparkSession

    from minikafka.pipeline.connector import cached_jars

    builder = SparkSession.builder
    jars = cached_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = (builder.master("local[2]")
               .appName("minikafka-pipeline-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.streaming.stopTimeout", "10s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    from minikafka.pipeline import register

    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_kafka(spark):
    """The shared session, when Spark's Kafka connector is on its classpath."""
    from minikafka.pipeline.connector import cached_jars, manifest

    if not cached_jars():
        message = ("Spark's Kafka connector is not installed: run "
                   ".venv/bin/python tests/tools/spark_connector.py (make test does)")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    doc = manifest()
    if doc and not doc["coordinate"].endswith(":" + doc["pyspark"]):
        warnings.warn(f"format('kafka') tests run {doc['coordinate']} on pyspark {doc['pyspark']} "
                      "(Maven Central served no connector at pyspark's version)")
    return spark


class KafkaTool:
    """Plain confluent-kafka helpers: create topics, produce, read a whole topic back."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def topic(self, prefix: str, partitions: int = 2) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
        # Wait (bounded) until metadata shows every partition: creation is asynchronous.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=5)
            t = md.topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions:
                return name
            time.sleep(0.1)
        raise AssertionError(f"topic {name} not visible in metadata")

    def produce(self, topic: str, records, *, batch: bool = False) -> None:
        """records: iterable of (key, value, partition, headers). batch=True packs many
        records per stored batch (long linger, one flush)."""
        from confluent_kafka import Producer

        conf = {"bootstrap.servers": self.bootstrap, "acks": "all"}
        if batch:
            conf.update({"linger.ms": 500, "batch.num.messages": 100000,
                         "batch.size": 16 * 1024 * 1024, "compression.type": "none"})
        else:
            conf.update({"linger.ms": 0})
        producer = Producer(conf)
        errors = []

        def report(err, _msg):
            if err is not None:
                errors.append(err)

        for key, value, partition, headers in records:
            kwargs = {"partition": partition} if partition is not None else {}
            if headers:
                kwargs["headers"] = headers
            while True:
                try:
                    producer.produce(topic, key=key, value=value, on_delivery=report, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            if not batch:
                producer.poll(0)
        assert producer.flush(30) == 0, "records left unacknowledged"
        assert not errors, errors

    def produce_json(self, topic: str, events, partitions: int = 2) -> None:
        self.produce(topic, [(e["key"].encode(), json.dumps(e).encode(), i % partitions, None)
                             for i, e in enumerate(events)])

    def read_all(self, topic: str, timeout: float = 20.0) -> list:
        """Every record of ``topic`` from the start to the current end, as confluent Messages."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "pipeline-tests",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "isolation.level": "read_uncommitted"})
        try:
            md = consumer.list_topics(topic, timeout=10)
            parts = list(md.topics[topic].partitions)
            ends = {}
            for p in parts:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                ends[p] = high
            consumer.assign([TopicPartition(topic, p, 0) for p in parts])
            out = []
            pending = {p for p in parts if ends[p] > 0}
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                for m in consumer.consume(10000, timeout=0.5):
                    if m.error() is None:
                        out.append(m)
                        if m.offset() + 1 >= ends[m.partition()]:
                            pending.discard(m.partition())
                    elif m.error().code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[m.partition()]:
                            pending.discard(m.partition())
            assert not pending, f"could not read {topic} to its end {ends}"
            return out
        finally:
            consumer.close()


@pytest.fixture(scope="session")
def kafka(bootstrap) -> KafkaTool:
    return KafkaTool(bootstrap)
