"""KIP-848 consumer groups (``group.protocol=consumer``) with confluent-kafka/librdkafka against minikafka.

One broker for the module (short heartbeat interval and session timeout), one group per test.  Each
consumer polls in its own thread and records when it got which message, so the tests can measure that
members keeping their partitions keep consuming while partitions move.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from conftest import RawClient, broker_for, start_broker
from test_group_clients import create_topic, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

HEARTBEAT_MS = 300
# The min bounds too: a broker refuses to start with timeouts below them (Kafka's rule).
OVERRIDES = dict(offsets_topic_num_partitions=3, group_consumer_heartbeat_interval_ms=HEARTBEAT_MS,
                 group_consumer_session_timeout_ms=6000, group_consumer_min_heartbeat_interval_ms=HEARTBEAT_MS,
                 group_consumer_min_session_timeout_ms=6000)
WAIT = 30.0


@pytest.fixture(scope="module")
def broker(request, broker_kind, tmp_path_factory):
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("cg"), **OVERRIDES)
    yield handle
    handle.stop()


class Producer(threading.Thread):
    """Produces to every partition of a topic every few milliseconds until stopped; each value carries
    the monotonic time it was handed to the client (``m<n>@<seconds>``), so a consumer can tell how
    long a message waited before it was consumed."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, period: float = 0.01):
        super().__init__(daemon=True)
        self.p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.topic, self.partitions, self.period = topic, partitions, period
        self.stop_event = threading.Event()
        self.sent = 0
        self.log: list[tuple[int, int, float]] = []  # (number, partition, send time) of every message

    def run(self):
        while not self.stop_event.is_set():
            for p in range(self.partitions):
                now = time.monotonic()
                self.p.produce(self.topic, f"m{self.sent}@{now:.6f}".encode(), partition=p)
                self.log.append((self.sent, p, now))
                self.sent += 1
            self.p.poll(0)
            time.sleep(self.period)
        self.p.flush(10)

    def stop(self):
        self.stop_event.set()
        self.join(15)


class Member(threading.Thread):
    """A consumer-protocol member polling in its own thread; records (time, partition, value)."""

    def __init__(self, bootstrap: str, group: str, topics, name: str, **conf):
        super().__init__(daemon=True)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf}
        self.topics, self.name = topics, name
        self.received: list[tuple[float, int, bytes]] = []
        self.assignment: set[int] = set()
        self.history: list[tuple[float, frozenset]] = []  # every assignment change, with its time
        self.assignment_topics: set[str] = set()
        self.stop_event = threading.Event()
        self.paused = threading.Event()
        self.commit_each = False
        self.error = None
        self.start()

    def run(self):
        c = confluent_kafka.Consumer(self.conf)
        try:
            c.subscribe(self.topics)
            while not self.stop_event.is_set():
                if self.paused.is_set():
                    time.sleep(0.02)
                    continue
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    self.received.append((time.monotonic(), m.partition(), m.value()))
                    if self.commit_each:
                        c.commit(m, asynchronous=False)
                tps = c.assignment()
                self.assignment = {tp.partition for tp in tps}
                if not self.history or self.history[-1][1] != frozenset(self.assignment):
                    self.history.append((time.monotonic(), frozenset(self.assignment)))
                self.assignment_topics = {tp.topic for tp in tps}
        except Exception as exc:  # surfaced by the test
            self.error = exc
        finally:
            if not self.paused.is_set():
                c.close()

    def stop(self):
        self.stop_event.set()
        self.paused.clear()
        self.join(20)
        assert self.error is None, self.error


def _sent_at(value: bytes) -> float:
    return float(value.split(b"@", 1)[1])


def _number(value: bytes) -> int:
    return int(value[1:].split(b"@", 1)[0])


def _topic(bootstrap, partitions=6, prefix="cg"):
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, partitions)
    return name


def _describe(broker, group: str, version: int = 1) -> dict:
    client = RawClient(broker.port)
    try:
        return client.request(69, version, {"group_ids": [group], "include_authorized_operations": False})["groups"][0]
    finally:
        client.sock.close()


def test_members_split_a_third_joins_without_stopping_the_others(broker):
    topic = _topic(broker.bootstrap)
    producer = Producer(broker.bootstrap, topic, 6)
    producer.start()
    group = f"split-{uuid.uuid4().hex[:6]}"
    a = Member(broker.bootstrap, group, [topic], "a")
    b = Member(broker.bootstrap, group, [topic], "b")
    members = [a, b]
    try:
        wait_until(lambda: len(a.assignment) == 3 and len(b.assignment) == 3 and a.received and b.received,
                   WAIT, "two members with three partitions each")
        before = {m.name: set(m.assignment) for m in (a, b)}
        assert before["a"].isdisjoint(before["b"])
        joined = time.monotonic()
        c = Member(broker.bootstrap, group, [topic], "c")
        members.append(c)
        wait_until(lambda: all(len(m.assignment) == 2 for m in members) and c.received, WAIT,
                   "three members with two partitions each")
        settled = time.monotonic()
        after = {m.name: set(m.assignment) for m in members}
        assert set().union(*after.values()) == set(range(6))
        # The members that keep partitions kept them and kept consuming them during the whole rebalance:
        # no assignment they went through lacked a kept partition (an eager classic rebalance revokes
        # everything), and every message produced to a kept partition while partitions moved reached
        # its owner within a second.  Waits are measured from each message's own send time, so a
        # stalled test process (a loaded CI machine holding the producer back too) is not mistaken
        # for a pause of the consumers.
        wait_until(lambda: all(_sent_at(v) > settled + 0.5 for m in (a, b) for _, p, v in m.received[-1:]),
                   WAIT, "the members past the rebalance window")
        for m in (a, b):
            kept = before[m.name] & after[m.name]
            assert kept, (before, after)
            during = [owned for t, owned in m.history if t >= joined]
            assert during and all(kept <= owned for owned in during), (m.name, kept, during)
            waits = [t - _sent_at(v) for t, p, v in m.received if p in kept and joined <= _sent_at(v) <= settled]
            sent = sum(1 for _, p, v in producer.log if p in kept and joined <= v <= settled)
            assert waits and len(waits) == sent, (m.name, len(waits), sent, settled - joined)
            assert max(waits) < 1.0, (m.name, max(waits), settled - joined)
        # Describe: the group is a consumer group, every member at the group epoch with its target.
        wait_until(lambda: _describe(broker, group)["group_state"] == "Stable", WAIT, "Stable group")
        d = _describe(broker, group)
        assert d["error_code"] == 0 and d["assignor_name"] == "uniform"
        assert len(d["members"]) == 3
        for m in d["members"]:
            assert m["member_epoch"] == d["group_epoch"] == d["assignment_epoch"]
            assert m["assignment"] == m["target_assignment"] and m["member_type"] == 1
            assert m["assignment"]["topic_partitions"][0]["topic_name"] == topic
        # A member leaves: its partitions move to the others.
        c.stop()
        members.remove(c)
        wait_until(lambda: len(a.assignment) == 3 and len(b.assignment) == 3, WAIT, "back to two members")
        assert a.assignment.isdisjoint(b.assignment)
    finally:
        producer.stop()
        for m in members:
            m.stop()


def test_member_that_stops_polling_is_removed(broker):
    topic = _topic(broker.bootstrap, 4)
    group = f"stall-{uuid.uuid4().hex[:6]}"
    a = Member(broker.bootstrap, group, [topic], "a")
    b = Member(broker.bootstrap, group, [topic], "b", **{"max.poll.interval.ms": 3000})
    try:
        wait_until(lambda: len(a.assignment) == 2 and len(b.assignment) == 2, WAIT, "split")
        b.paused.set()  # stops calling poll(); librdkafka leaves after max.poll.interval.ms
        wait_until(lambda: len(a.assignment) == 4, WAIT, "a gets every partition")
        d = _describe(broker, group)
        assert len(d["members"]) == 1
    finally:
        a.stop()
        b.stop_event.set()


def test_regex_subscription_picks_up_a_later_topic(broker):
    prefix = f"re{uuid.uuid4().hex[:6]}"
    first = _topic(broker.bootstrap, 2, prefix)
    group = f"regex-{uuid.uuid4().hex[:6]}"
    a = Member(broker.bootstrap, group, [f"^{prefix}-.*"], "a", **{"topic.metadata.refresh.interval.ms": 500})
    try:
        wait_until(lambda: a.assignment_topics == {first}, WAIT, "first topic assigned")
        second = _topic(broker.bootstrap, 3, prefix)
        wait_until(lambda: a.assignment_topics == {first, second}, WAIT, "later topic assigned")
        d = _describe(broker, group)
        # librdkafka sends its regex subscriptions joined as "(re1)|(re2)".
        assert d["members"][0]["subscribed_topic_regex"] == f"(^{prefix}-.*)"
    finally:
        a.stop()


def _produce(bootstrap, topic, partitions, count):
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, f"v{i}".encode(), partition=i % partitions)
    p.flush(10)


def test_static_member_restart_keeps_its_assignment(broker):
    topic = _topic(broker.bootstrap, 4)
    group = f"static-{uuid.uuid4().hex[:6]}"
    a = Member(broker.bootstrap, group, [topic], "a", **{"group.instance.id": "inst-a"})
    b = Member(broker.bootstrap, group, [topic], "b", **{"group.instance.id": "inst-b"})
    try:
        wait_until(lambda: len(a.assignment) == 2 and len(b.assignment) == 2, WAIT, "split")
        mine = set(a.assignment)
        epoch = _describe(broker, group)["group_epoch"]
        a.stop()  # a static member leaves with epoch -2: its partitions wait for it
        time.sleep(HEARTBEAT_MS * 3 / 1000)  # a few of b's heartbeats: b must not take them
        assert len(b.assignment) == 2
        a = Member(broker.bootstrap, group, [topic], "a2", **{"group.instance.id": "inst-a"})
        wait_until(lambda: a.assignment == mine, WAIT, "same assignment after restart")
        assert _describe(broker, group)["group_epoch"] == epoch
    finally:
        a.stop()
        b.stop()


def test_commit_and_resume(broker):
    topic = _topic(broker.bootstrap, 2)
    _produce(broker.bootstrap, topic, 2, 20)
    group = f"resume-{uuid.uuid4().hex[:6]}"
    a = Member(broker.bootstrap, group, [topic], "a")
    a.commit_each = True
    try:
        wait_until(lambda: len(a.received) == 20, WAIT, "first 20")
    finally:
        a.stop()
    _produce(broker.bootstrap, topic, 2, 10)
    a = Member(broker.bootstrap, group, [topic], "a2")
    try:
        wait_until(lambda: len(a.received) >= 10, WAIT, "the next 10")
        time.sleep(0.3)
        assert len(a.received) == 10  # resumed from the commits, nothing read twice
    finally:
        a.stop()


def test_classic_group_upgraded_to_consumer_group_keeps_its_offsets(broker):
    topic = _topic(broker.bootstrap, 2)
    _produce(broker.bootstrap, topic, 2, 10)
    group = f"upgrade-{uuid.uuid4().hex[:6]}"
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + WAIT
    while got < 10 and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got += 1
            c.commit(m, asynchronous=False)
    c.close()
    assert got == 10
    _produce(broker.bootstrap, topic, 2, 6)
    a = Member(broker.bootstrap, group, [topic], "new")
    try:
        wait_until(lambda: len(a.received) >= 6, WAIT, "rest after the upgrade")
        time.sleep(0.3)
        assert len(a.received) == 6
        assert _describe(broker, group)["group_state"] in ("Stable", "Reconciling")
    finally:
        a.stop()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=10)
    types = {g.group_id: str(g.type) for g in listed.valid}
    assert "CONSUMER" in types[group].upper()


@pytest.mark.minikafka_only(reason="restarts the broker process")
def test_broker_restart_keeps_consumer_group_state(tmp_path):
    handle = start_broker(tmp_path / "b", **OVERRIDES)
    try:
        topic = _topic(handle.bootstrap, 2)
        _produce(handle.bootstrap, topic, 2, 10)
        group = "restart-cg"
        a = Member(handle.bootstrap, group, [topic], "a", **{"group.instance.id": "inst"})
        a.commit_each = True
        wait_until(lambda: len(a.received) == 10, WAIT, "first 10")
        before = _describe(handle, group)
        a.stop()  # static leave (-2): the member and its assignment stay in the group
        handle.restart()
        after = _describe(handle, group)
        assert after["error_code"] == 0
        assert after["group_epoch"] == before["group_epoch"]
        assert [m["instance_id"] for m in after["members"]] == ["inst"]
        assert after["members"][0]["member_epoch"] == -2
        _produce(handle.bootstrap, topic, 2, 4)
        a = Member(handle.bootstrap, group, [topic], "a2", **{"group.instance.id": "inst"})
        try:
            wait_until(lambda: len(a.received) >= 4, WAIT, "resume after restart")
            time.sleep(0.3)
            assert len(a.received) == 4
        finally:
            a.stop()
    finally:
        handle.stop()


@pytest.mark.minikafka_only(reason="needs a broker with group.coordinator.rebalance.protocols=classic "
                                   "(a second Apache Kafka for one ApiVersions answer)")
def test_consumer_protocol_can_be_switched_off(tmp_path):
    """``group.coordinator.rebalance.protocols=classic``: 68/69 are not advertised nor served."""
    handle = start_broker(tmp_path / "off", group_coordinator_rebalance_protocols="classic")
    try:
        client = RawClient(handle.port)
        try:
            keys = {k["api_key"] for k in client.request(18, 3, {"client_software_name": "t",
                                                                  "client_software_version": "1"})["api_keys"]}
        finally:
            client.sock.close()
        assert 11 in keys and 68 not in keys and 69 not in keys
    finally:
        handle.stop()


def test_consumer_protocol_is_advertised_by_default(broker):
    client = RawClient(broker.port)
    try:
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in client.request(
            18, 3, {"client_software_name": "t", "client_software_version": "1"})["api_keys"]}
    finally:
        client.sock.close()
    assert keys[68] == (0, 1) and keys[69] == (0, 1)


# == online migration: rolling a live group from one protocol to the other ==============================

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 6000, "heartbeat.interval.ms": HEARTBEAT_MS,
           "enable.auto.commit": True, "auto.commit.interval.ms": 200}
NEW = {"enable.auto.commit": True, "auto.commit.interval.ms": 200}


def _group_type(bootstrap: str, group: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client cancels its requests
    listed = admin.list_consumer_groups().result(timeout=10)
    return {g.group_id: str(g.type) for g in listed.valid}[group].upper()


def _holding_everything(members, partitions: int) -> bool:
    held = [m.assignment for m in members]
    return all(held) and set().union(*held) == set(range(partitions)) and sum(map(len, held)) == partitions


def _roll(broker, first: dict, second: dict, prefix: str):
    """Two members with ``first``'s protocol, replaced one at a time by members with ``second``'s while a
    producer writes; returns (group, members in start order, producer)."""
    topic = _topic(broker.bootstrap, 4, prefix)
    group = f"{prefix}-{uuid.uuid4().hex[:6]}"
    members = [Member(broker.bootstrap, group, [topic], "old-1", **first),
               Member(broker.bootstrap, group, [topic], "old-2", **first)]
    wait_until(lambda: _holding_everything(members, 4), WAIT, "the first pair splits the topic")
    producer = Producer(broker.bootstrap, topic, 4)
    producer.start()
    try:
        for i in (0, 1):
            time.sleep(0.5)
            members[i].stop()
            members.append(Member(broker.bootstrap, group, [topic], f"new-{i + 1}", **second))
            live = [m for m in members if m.is_alive()]
            wait_until(lambda: _holding_everything(live, 4), WAIT, f"after replacing member {i + 1}")
            if i == 0:
                # Mid-roll the group is a consumer group with one member of each protocol (0 = classic).
                described = _describe(broker, group)
                assert described["error_code"] == 0
                assert sorted(m["member_type"] for m in described["members"]) == [0, 1]
        time.sleep(0.5)
    finally:
        producer.stop()
    return group, members, producer


def _assert_nothing_lost(members, producer):
    expected = set(range(producer.sent))

    def consumed():
        return set().union(*({_number(v) for _, _, v in m.received} for m in members))
    wait_until(lambda: expected <= consumed(), WAIT, "every produced message consumed")


def test_classic_group_rolled_to_the_consumer_protocol_consumes_throughout(broker):
    group, members, producer = _roll(broker, CLASSIC, NEW, "up")
    try:
        _assert_nothing_lost(members, producer)
        assert "CONSUMER" in _group_type(broker.bootstrap, group)
        described = _describe(broker, group)
        assert sorted(m["member_type"] for m in described["members"]) == [1, 1]
        # The new members consumed while the old ones were still there (the group was mixed).
        assert all(m.received for m in members)
    finally:
        for m in members[2:]:
            m.stop()


def test_consumer_group_rolled_back_to_the_classic_protocol_consumes_throughout(broker):
    group, members, producer = _roll(broker, NEW, CLASSIC, "down")
    try:
        _assert_nothing_lost(members, producer)
        assert "CLASSIC" in _group_type(broker.bootstrap, group)
        assert all(m.received for m in members)
    finally:
        for m in members[2:]:
            m.stop()
