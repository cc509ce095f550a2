"""The log cleaner's schedule, as Kafka's cleaner threads keep it.

A compacted topic is compacted within log.cleaner.backoff.ms of its segment rolling, not at the
next retention check (log.retention.check.interval.ms, 5 minutes by default), which is how it
used to be; the backoff is a dynamic setting (per broker or cluster-wide).  Driven by confluent-kafka.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from conftest import start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "needs log.cleaner.backoff.ms=200 on the broker; minikafka also rolls an idle segment by age on its "
    "maintenance tick, where Kafka rolls only at the next append"))]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # The retention check stays at Kafka's 5 minutes: only the cleaner can compact in time.
    handle = start_broker(tmp_path_factory.mktemp("cleaner"), log_cleaner_backoff_ms=200)
    yield handle
    handle.stop()


def values_from_start(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                return out
            out.append(m.value())
        raise AssertionError("no end of partition within 10 s")
    finally:
        c.close()


def test_a_compacted_topic_is_compacted_within_the_cleaner_backoff(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"compact-{uuid.uuid4().hex[:6]}"
    # segment.ms 100: the light maintenance tick rolls the segment; the cleaner does the rest.
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                                         "min.cleanable.dirty.ratio": "0.01"})])[topic].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(50):
        p.produce(topic, key=b"same", value=b"v%d" % i, partition=0)
        assert p.flush(10) == 0  # one batch each: the segment holds fifty records of one key
    # The maintenance tick rolls the segment once it is older than segment.ms (within about a
    # second); the cleaner then compacts it within its backoff.
    deadline = time.monotonic() + 10
    values = values_from_start(broker.bootstrap, topic)
    while len(values) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        values = values_from_start(broker.bootstrap, topic)
    assert values == [b"v49"]


def test_the_cleaner_backoff_is_a_dynamic_setting(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.cleaner.backoff.ms", "300", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entry = next(iter(described.values())).result(10)["log.cleaner.backoff.ms"]
    assert (entry.value, entry.source) == ("300", 2)  # DYNAMIC_BROKER_CONFIG
