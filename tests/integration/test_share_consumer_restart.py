"""Share groups across a broker restart and on the steerable clock, with confluent-kafka's
``ShareConsumer``: a broker killed while a consumer holds acquired records redelivers, after restart,
exactly the records that were not acknowledged (the share state lives in ``__share_group_state``),
and a lock that times out on the broker clock hands its records to another consumer with the next
delivery count."""

from __future__ import annotations

import time
import uuid

import pytest

from conftest import SHARE_FAST, start_broker

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.minikafka_only(reason=(
    "kills and restarts the broker, and advances the broker clock through the control API; the shared "
    "Apache Kafka can do neither"))

SENTINEL = b"sentinel"


def _consumer(bootstrap, group, topic):
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    return c


def _ready(producer, topic, c, timeout=40.0):
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, "never assigned"
        producer.produce(topic, SENTINEL)
        producer.flush(10)
        msgs = c.poll(0.5)
        if msgs:
            for m in msgs:
                assert m.value() == SENTINEL
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
            return


def test_a_killed_broker_redelivers_exactly_what_was_not_acknowledged(tmp_path):
    broker = start_broker(tmp_path, offsets_topic_num_partitions=3, **SHARE_FAST)
    try:
        topic, group = f"sr-{uuid.uuid4().hex[:8]}", f"sr-g-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        c = _consumer(broker.bootstrap, group, topic)
        _ready(producer, topic, c)
        for i in range(10):
            producer.produce(topic, b"v%d" % i)
        producer.flush(10)
        held = []
        deadline = time.monotonic() + 30
        while len(held) < 10 and time.monotonic() < deadline:
            msgs = c.poll(0.5)
            for m in msgs:
                held.append(m)
                # accept the even records, keep the odd ones acquired
                if int(m.value()[1:]) % 2 == 0:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if len(held) == 10:
                break
        assert len(held) == 10
        # Send the even acknowledgements and wait for the broker's answer; the odd ones stay acquired.
        c.commit_sync()
        broker.restart(kill=True)
        c2 = _consumer(broker.bootstrap, group, topic)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            msgs = c2.poll(0.5)
            for m in msgs:
                got.append(m.value())
                c2.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                c2.commit_sync()
        assert sorted(got) == [b"v1", b"v3", b"v5", b"v7", b"v9"]
        for cons in (c, c2):
            try:
                cons.close()
            except Exception:
                pass
    finally:
        broker.stop()


def test_a_lock_timeout_on_the_broker_clock_redelivers_to_another_consumer():
    from minikafka import Broker

    with Broker(config={"offsets.topic.num.partitions": 3}) as broker:
        topic, group = f"sl-{uuid.uuid4().hex[:8]}", f"sl-g-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        a = _consumer(broker.bootstrap_servers, group, topic)
        b = _consumer(broker.bootstrap_servers, group, topic)
        try:
            _ready(producer, topic, a)
            _ready(producer, topic, b)
            producer.produce(topic, b"held")
            producer.flush(10)
            held = []
            deadline = time.monotonic() + 20
            while not held and time.monotonic() < deadline:
                held = [m for m in a.poll(0.5) if m.value() == b"held"]
                if not held:  # b may have got it: then b holds it and a waits for the timeout
                    held = [m for m in b.poll(0.2) if m.value() == b"held"]
                    a, b = (b, a) if held else (a, b)
            assert held and held[0].delivery_count() == 1
            assert [m for m in b.poll(1.0) if m.value() == b"held"] == []  # locked: not redelivered
            broker.control.advance_clock(30000)  # group.share.record.lock.duration.ms
            again = []
            deadline = time.monotonic() + 10
            while not again and time.monotonic() < deadline:
                again = [m for m in b.poll(0.5) if m.value() == b"held"]
            assert again and again[0].delivery_count() == 2
        finally:
            for cons in (a, b):
                try:
                    cons.close()
                except Exception:
                    pass
