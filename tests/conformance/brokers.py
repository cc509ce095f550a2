"""Start the two brokers the corpus compares: Apache Kafka (tests/kafka) and minikafka.

minikafka runs as a child process (``minikafka.Broker(mode="process")``) with the settings
Kafka gets from tests/kafka/kafka_runner.py DEFAULT_CONFIG, so both are in the same state:
node id 1, 5 partitions per internal topic, no initial rebalance delay, one partition per
auto-created topic.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

import kafka_runner  # noqa: E402

from .engine import Broker  # noqa: E402

MINIKAFKA_CONFIG = {"node.id": "1", "num.partitions": "1", "auto.create.topics.enable": "true",
                    "offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
                    "group.initial.rebalance.delay.ms": "0",
                    # The rest of kafka_runner's DEFAULT_CONFIG: Kafka configs minikafka accepts and
                    # describes (static) without acting on them, so both describe the same sources.
                    "default.replication.factor": "1", "offsets.topic.replication.factor": "1",
                    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                    "share.coordinator.state.topic.replication.factor": "1",
                    "share.coordinator.state.topic.min.isr": "1"}


# The "acl" profile: Kafka's StandardAuthorizer on both, everything allowed where no ACL matches
# (PLAINTEXT clients are User:ANONYMOUS; the scenarios deny it on their own resources).
ACL_CONFIG = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


def start_minikafka(extra: dict | None = None):
    from minikafka import Broker as MiniKafka

    return MiniKafka(mode="process", config={**MINIKAFKA_CONFIG, **(extra or {})}).start()


def as_targets(kafka, minikafka) -> tuple[Broker, Broker]:
    host, _, port = minikafka.bootstrap_servers.rpartition(":")
    return Broker("kafka", "127.0.0.1", kafka.port), Broker("minikafka", host, int(port))


def start_pair(kafka_dir=None, extra: dict | None = None):
    """(kafka_runner.KafkaBroker, minikafka.Broker) with ``extra`` settings on both."""
    with ThreadPoolExecutor(1) as pool:
        fm = pool.submit(start_minikafka, extra)
        kafka = kafka_runner.KafkaBroker(kafka_dir, extra).start()
        try:
            mk = fm.result()
        except BaseException:
            kafka.cleanup()
            raise
    return kafka, mk


def start_both(kafka_dir=None):
    """(kafka_runner.KafkaBroker, minikafka.Broker), started concurrently."""
    # Kafka from this thread: its child dies with the thread that started it (PR_SET_PDEATHSIG).
    with ThreadPoolExecutor(1) as pool:
        fm = pool.submit(start_minikafka)
        kafka = kafka_runner.KafkaBroker(kafka_dir).start()
        try:
            mk = fm.result()
        except BaseException:
            kafka.cleanup()
            raise
    return kafka, mk
