"""Consumer groups with real clients: kafka-python, confluent-kafka (librdkafka) and aiokafka.

Each consumer runs its poll loop in a thread (aiokafka on its own event loop in that thread),
commits synchronously after every batch it processed, and records what it consumed and what it
owns.  Timeouts are short (broker min session timeout 1000 ms, heartbeats every 300 ms) and every
wait is bounded.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter

import pytest
from conftest import RawClient, broker_for


TOPIC = "orders"
PARTITIONS = 4
WAIT_S = 20.0

BROKER_OVERRIDES = dict(group_min_session_timeout_ms=1000, offsets_topic_num_partitions=5)


def unique(prefix: str) -> str:
    """Topic and group names of their own: on Apache Kafka every test shares one broker."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(predicate, timeout=WAIT_S, what="condition", interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def create_topic(bootstrap, name=TOPIC, partitions=PARTITIONS):
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap, start, count, topic=TOPIC, partitions=PARTITIONS):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(start, start + count):
            producer.send(topic, f"m{i}".encode(), partition=i % partitions)
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=5)


class Consumer:
    """A consumer running its poll loop in a thread, committing after every batch."""

    def __init__(self, kind, bootstrap, group, *, topic=TOPIC, session_ms=6000, heartbeat_ms=300,
                 max_poll_ms=30000, instance_id=None, name=None):
        self.kind = kind
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.session_ms = session_ms
        self.heartbeat_ms = heartbeat_ms
        self.max_poll_ms = max_poll_ms
        self.instance_id = instance_id
        self.name = name or kind
        self.values: list[str] = []
        self.uncommitted = 0  # records consumed whose commit failed: the allowed duplicates
        self.assigned: frozenset[int] = frozenset()
        self.assignment_changes = 0
        self.rebalance_callbacks = 0  # confluent: on_assign/on_revoke calls
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"consumer-{self.name}", daemon=True)
        self._thread.start()
        assert self._ready.wait(15), f"{self.name} did not start"

    # -- poll loops ----------------------------------------------------------------------------

    def _run(self):
        try:
            if self.kind == "aiokafka":
                asyncio.run(self._run_aiokafka())
            else:
                getattr(self, f"_run_{self.kind.replace('-', '_')}")()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc
            self._ready.set()

    def _set_assigned(self, partitions):
        new = frozenset(partitions)
        if new != self.assigned:
            self.assignment_changes += 1
            self.assigned = new

    def _run_kafka_python(self):
        from kafka import KafkaConsumer

        c = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          session_timeout_ms=self.session_ms, heartbeat_interval_ms=self.heartbeat_ms,
                          max_poll_interval_ms=self.max_poll_ms, client_id=self.name,
                          # A leader that assigned before its first topic metadata arrived rejoins when the
                          # metadata changes; refresh often so that never waits for the 5-minute default.
                          metadata_max_age_ms=1000)
        self._ready.set()
        try:
            while not self._stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                # kafka-python 3.0.12 can lose a rebalance when poll() times out between its JoinGroup
                # and SyncGroup: the SyncGroup answer arrives but heartbeats never resume and the
                # session expires (seen under load; the broker's answers were all correct).  A poll
                # timeout longer than a join + sync round trip keeps the client out of that path.
                batch = c.poll(timeout_ms=1000)
                got = [r.value.decode() for recs in batch.values() for r in recs]
                self.values.extend(got)
                if got:
                    try:
                        c.commit()
                    except Exception:
                        self.uncommitted += len(got)
                self._set_assigned(tp.partition for tp in c.assignment())
        finally:
            c.close()

    def _run_confluent(self):
        from confluent_kafka import Consumer as CKConsumer, KafkaException

        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": self.session_ms,
                "heartbeat.interval.ms": self.heartbeat_ms, "max.poll.interval.ms": self.max_poll_ms,
                "client.id": self.name, "topic.metadata.refresh.interval.ms": 1000}
        if self.instance_id:
            conf["group.instance.id"] = self.instance_id
        c = CKConsumer(conf)

        def on_rebalance(_consumer, _partitions):
            self.rebalance_callbacks += 1

        c.subscribe([self.topic], on_assign=on_rebalance, on_revoke=on_rebalance)
        self._ready.set()
        try:
            while not self._stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                msgs = c.consume(num_messages=500, timeout=0.1)
                got = [m.value().decode() for m in msgs if m.error() is None]
                self.values.extend(got)
                if got:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException:
                        self.uncommitted += len(got)
                self._set_assigned(tp.partition for tp in c.assignment())
        finally:
            c.close()

    async def _run_aiokafka(self):
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=self.session_ms, heartbeat_interval_ms=self.heartbeat_ms,
                             max_poll_interval_ms=self.max_poll_ms, client_id=self.name,
                             metadata_max_age_ms=1000)
        await c.start()
        self._ready.set()
        try:
            while not self._stop.is_set():
                if self.paused.is_set():
                    await asyncio.sleep(0.05)
                    continue
                batch = await c.getmany(timeout_ms=100)
                got = [r.value.decode() for recs in batch.values() for r in recs]
                self.values.extend(got)
                if got:
                    try:
                        await c.commit()
                    except Exception:
                        self.uncommitted += len(got)
                self._set_assigned(tp.partition for tp in c.assignment())
        finally:
            await c.stop()

    def stop(self):
        self._stop.set()
        self._thread.join(20)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def partitions_split(consumers, expect_nonempty=True):
    sets = [c.assigned for c in consumers]
    union = frozenset().union(*sets)
    disjoint = sum(len(s) for s in sets) == len(union)
    return union == frozenset(range(PARTITIONS)) and disjoint and (not expect_nonempty or all(sets))


@pytest.mark.parametrize("kind", ["kafka-python", "confluent", "aiokafka"])
def test_members_split_rebalance_and_take_over(request, broker_kind, tmp_path, kind):
    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    consumers = []
    topic = unique("split")
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, 0, 200, topic)
        group = unique(f"split-{kind}")
        c1 = Consumer(kind, broker.bootstrap, group, topic=topic, name=f"{kind}-1")
        c2 = Consumer(kind, broker.bootstrap, group, topic=topic, name=f"{kind}-2")
        consumers += [c1, c2]
        wait_until(lambda: partitions_split([c1, c2]), what="two members splitting 4 partitions")
        assert len(c1.assigned) == len(c2.assigned) == 2

        c3 = Consumer(kind, broker.bootstrap, group, topic=topic, name=f"{kind}-3")
        consumers.append(c3)
        wait_until(lambda: partitions_split([c1, c2, c3]), what="three members sharing the partitions")
        produce(broker.bootstrap, 200, 200, topic)
        wait_until(lambda: len({v for c in consumers for v in c.values}) >= 400, what="400 consumed")

        c1.stop()  # close: LeaveGroup, the others take over its partitions
        wait_until(lambda: partitions_split([c2, c3]), what="two remaining members taking over")
        produce(broker.bootstrap, 400, 200, topic)
        wait_until(lambda: len({v for c in consumers for v in c.values}) >= 600, what="600 consumed")
        for c in consumers[1:]:
            c.stop()

        everything = Counter(v for c in consumers for v in c.values)
        assert set(everything) == {f"m{i}" for i in range(600)}  # nothing lost
        duplicates = sum(n - 1 for n in everything.values())
        assert duplicates <= sum(c.uncommitted for c in consumers), (duplicates, [c.uncommitted for c in consumers])
    finally:
        for c in consumers:
            c._stop.set()
        broker.stop()


@pytest.mark.parametrize("kind", ["kafka-python", "confluent", "aiokafka"])
def test_member_that_stops_polling_is_removed_after_max_poll_interval(request, broker_kind, tmp_path, kind):
    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    consumers = []
    topic = unique("stall")
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, 0, 40, topic)
        group = unique(f"stall-{kind}")
        opts = dict(session_ms=2000, heartbeat_ms=300, max_poll_ms=3000, topic=topic)
        a = Consumer(kind, broker.bootstrap, group, name=f"{kind}-a", **opts)
        b = Consumer(kind, broker.bootstrap, group, name=f"{kind}-b", **opts)
        consumers += [a, b]
        wait_until(lambda: partitions_split([a, b]), what="two members splitting 4 partitions")
        wait_until(lambda: len(set(a.values) | set(b.values)) >= 40, what="first 40 consumed")
        paused_at = time.monotonic()
        a.paused.set()  # the application stops calling poll(); its heartbeat thread lives on
        wait_until(lambda: len(b.assigned) == PARTITIONS, timeout=15, what="b owning every partition")
        elapsed = time.monotonic() - paused_at
        assert elapsed >= 2.5, f"member removed after {elapsed:.2f}s, before its max.poll.interval.ms"
        produce(broker.bootstrap, 40, 40, topic)
        wait_until(lambda: {f"m{i}" for i in range(40, 80)} <= set(b.values), what="b consuming on")
    finally:
        for c in consumers:
            c._stop.set()
            c.paused.clear()
        broker.stop()


def _subscription(topic: str) -> bytes:
    raw = topic.encode()
    return (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + len(raw).to_bytes(2, "big") + raw \
        + (-1).to_bytes(4, "big", signed=True)


def test_rebalance_waits_exactly_for_a_member_that_does_not_rejoin(request, broker_kind, tmp_path):
    """Seed 002 at the protocol level: a member heartbeats but never rejoins; the join phase ends at
    its rebalance timeout, it is removed, and the newcomer gets every partition."""
    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    topic, group = unique("seed002"), unique("seed002")
    consumer = None
    stop = threading.Event()
    try:
        create_topic(broker.bootstrap, topic)
        raw = RawClient(broker.port)
        # As every client does: find the coordinator first (this also creates __consumer_offsets).
        found = raw.request(10, 3, {"key": group, "key_type": 0})
        assert found["error_code"] == 0 and found["port"] == broker.port
        join = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 2500,
                "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": _subscription(topic)}]}
        first = raw.request(11, 5, join)
        assert first["error_code"] == 79  # MEMBER_ID_REQUIRED
        member_id = first["member_id"]
        joined = raw.request(11, 5, {**join, "member_id": member_id})
        assert joined["error_code"] == 0 and joined["leader"] == member_id
        generation = joined["generation_id"]
        synced = raw.request(14, 3, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                     "group_instance_id": None, "assignments": []})
        assert synced["error_code"] == 0
        heartbeat_errors = []

        def heartbeats():
            while not stop.is_set():
                r = raw.request(12, 3, {"group_id": group, "generation_id": generation,
                                        "member_id": member_id, "group_instance_id": None})
                heartbeat_errors.append((time.monotonic(), r["error_code"]))
                if r["error_code"] == 25:  # UNKNOWN_MEMBER_ID: removed
                    return
                stop.wait(0.3)

        threading.Thread(target=heartbeats, daemon=True).start()
        started = time.monotonic()
        # The group's rebalance timeout is the largest member rebalance timeout (max.poll.interval.ms):
        # max(2500, 3000) = 3000 ms.
        consumer = Consumer("kafka-python", broker.bootstrap, group, topic=topic, session_ms=6000, max_poll_ms=3000)
        wait_until(lambda: consumer.assigned == frozenset(range(PARTITIONS)), timeout=15,
                   what="the newcomer owning every partition")
        elapsed = time.monotonic() - started
        assert 2.9 <= elapsed < 8, elapsed
        assert 27 in [code for _, code in heartbeat_errors]  # REBALANCE_IN_PROGRESS while it stalled
        wait_until(lambda: heartbeat_errors and heartbeat_errors[-1][1] == 25, timeout=5,
                   what="the stalled member being unknown")
        raw.close()
    finally:
        stop.set()
        if consumer is not None:
            consumer._stop.set()
        broker.stop()


def test_static_member_restart_keeps_assignment_without_rebalance(request, broker_kind, tmp_path):
    broker = broker_for(request, broker_kind, tmp_path, **BROKER_OVERRIDES)
    topic, group = unique("static"), unique("static")
    consumers = []
    try:
        create_topic(broker.bootstrap, topic)
        opts = dict(session_ms=10000, heartbeat_ms=300, topic=topic)
        a = Consumer("confluent", broker.bootstrap, group, instance_id="inst-a", name="a", **opts)
        b = Consumer("confluent", broker.bootstrap, group, instance_id="inst-b", name="b", **opts)
        consumers += [a, b]
        wait_until(lambda: partitions_split([a, b]), what="two static members splitting partitions")
        time.sleep(1.0)  # let any follow-up rebalance of the initial joins settle
        b_assignment, b_changes, b_callbacks = b.assigned, b.assignment_changes, b.rebalance_callbacks
        a_assignment = a.assigned
        a.stop()  # a static member leaves no LeaveGroup behind: its partitions wait for it
        a2 = Consumer("confluent", broker.bootstrap, group, instance_id="inst-a", name="a2", **opts)
        consumers.append(a2)
        wait_until(lambda: a2.assigned == a_assignment, timeout=15, what="the restarted member's old partitions")
        time.sleep(1.0)
        assert b.assigned == b_assignment and b.assignment_changes == b_changes, "b saw a rebalance"
        assert b.rebalance_callbacks == b_callbacks, "b's rebalance listener ran"
        produce(broker.bootstrap, 0, 40, topic)
        wait_until(lambda: len(set(a2.values) | set(b.values)) >= 40, what="both consuming")
    finally:
        for c in consumers:
            c._stop.set()
        broker.stop()
