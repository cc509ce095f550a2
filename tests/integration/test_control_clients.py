"""The control API with real clients: faults, session expiry, the steerable clock, stalls, holds,
the Java consumer's coordinator rediscovery, and the HTTP JSON API driven by a plain HTTP client.

One embedded broker (thread mode, ``from minikafka import Broker``) serves the module; every test
uses its own topic and group and resets the faults it added.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from clienttools import require_java_jars, require_tool
from minikafka import Broker, ControlError

pytestmark = pytest.mark.minikafka_only(reason="minikafka's control API (faults, clock, stalls)")

SETTINGS = {"group.min.session.timeout.ms": 1000, "offsets.topic.num.partitions": 5,
            "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def kafka():
    with Broker(config=SETTINGS, http_port=0) as broker:
        yield broker


@pytest.fixture
def control(kafka):
    yield kafka.control
    kafka.control.reset()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _read_all(bootstrap: str, topic: str, partition: int = 0, timeout: float = 15.0) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


# -- error after append: idempotence -----------------------------------------------------------

def _produce_confluent(bootstrap: str, topic: str, idempotent: bool) -> list:
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "acks": "all",
                         "linger.ms": 0, "retry.backoff.ms": 50, "max.in.flight.requests.per.connection": 1})
    for i in range(10):
        producer.produce(topic, value=f"v{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    return errors


def test_idempotent_producer_survives_an_error_after_append_without_duplicates(kafka, control):
    topic = _name("idem")
    control.create_topic(topic, 1)
    fault = control.fail("Produce", "NOT_LEADER_OR_FOLLOWER", after=True, count=1, topic=topic)
    assert _produce_confluent(kafka.bootstrap_servers, topic, idempotent=True) == []
    assert [f["hits"] for f in control.faults() if f["id"] == fault] == [1]
    values = _read_all(kafka.bootstrap_servers, topic)
    assert values == [f"v{i}".encode() for i in range(10)]  # the retried batch was not written twice


def test_without_idempotence_the_same_fault_duplicates_the_batch(kafka, control):
    # The contrast that shows the fault really took effect after the append.
    topic = _name("dup")
    control.create_topic(topic, 1)
    control.fail("Produce", "NOT_LEADER_OR_FOLLOWER", after=True, count=1, topic=topic)
    assert _produce_confluent(kafka.bootstrap_servers, topic, idempotent=False) == []
    values = _read_all(kafka.bootstrap_servers, topic)
    assert len(values) > 10 and set(values) == {f"v{i}".encode() for i in range(10)}


# -- groups: expiry from the API and by the clock ----------------------------------------------

class _Member:
    """A kafka-python consumer polling in its own thread, as an application would."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_timeout_ms: int):
        import threading

        self.args = (bootstrap, group, topic, session_timeout_ms)
        self.assignment: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kafka import KafkaConsumer

        bootstrap, group, topic, session_timeout_ms = self.args
        # metadata_max_age_ms: a leader that assigned before its topic metadata arrived rejoins when
        # the metadata changes; refresh often so that never waits for the 5-minute default.
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 heartbeat_interval_ms=300, metadata_max_age_ms=1000,
                                 session_timeout_ms=session_timeout_ms)
        # Know the topic before joining: a kafka-python leader that assigns before its first topic
        # metadata arrives hands out nothing and does not always rejoin when the metadata comes.
        consumer.partitions_for_topic(topic)
        consumer.subscribe([topic])
        try:
            while not self._stop.is_set():
                # Not shorter: kafka-python 3.0.12 can lose a rebalance when poll() times out between
                # its JoinGroup and SyncGroup (heartbeats never resume; see test_group_clients.Consumer).
                consumer.poll(timeout_ms=1000)
                self.assignment = set(consumer.assignment())
        finally:
            consumer.close(autocommit=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)


def _until(predicate, timeout=30.0, what="condition", state=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f"; state: {state()}" if state else ""))


def _group_state(control, group, members):
    """What a failed wait shows: the broker's view of the group and each client's assignment."""
    def state():
        try:
            described = control.describe_group(group)
        except ControlError as exc:
            described = repr(exc)
        return {"group": described, "assignments": [sorted(map(tuple, m.assignment)) for m in members]}
    return state


def _stable(control, group, members):
    try:
        d = control.describe_group(group)
    except ControlError:
        return None
    return d if d["state"] == "Stable" and len(d["members"]) == members else None


def test_kafka_python_group_rebalances_when_a_session_is_expired_from_the_api(kafka, control):
    topic, group = _name("exp"), _name("g")
    control.create_topic(topic, 2)
    members = [_Member(kafka.bootstrap_servers, group, topic, 10000) for _ in range(2)]
    try:
        _until(lambda: _stable(control, group, 2) and all(len(m.assignment) == 1 for m in members),
               what="two members with one partition each")
        before = control.describe_group(group)
        victim = before["members"][0]
        assert control.expire_member(group, victim) == [victim]
        after = control.describe_group(group)
        assert victim not in after["members"] and after["state"] == "PreparingRebalance"
        # A consumer rejoins only from its poll loop: on a loaded 2-core CI machine that is slow, hence
        # the generous bound (the wait ends as soon as the group is Stable again).
        _until(lambda: (d := _stable(control, group, 2)) and d["generation"] > before["generation"]
               and all(len(m.assignment) == 1 for m in members), timeout=60.0,
               what="the rebalance after the expiry", state=_group_state(control, group, members))
        final = control.describe_group(group)
        assert victim not in final["members"]  # the expired client rejoined under a new member id
    finally:
        for m in members:
            m.close()


def test_advancing_the_clock_expires_a_member_without_waiting(kafka, control):
    topic, group = _name("clk"), _name("g")
    control.create_topic(topic, 1)
    member = _Member(kafka.bootstrap_servers, group, topic, 30000)
    try:
        _until(lambda: _stable(control, group, 1) and member.assignment, what="a stable group")
        (member_id,) = control.describe_group(group)["members"]
        started = time.monotonic()
        control.advance_clock(31_000)  # past the 30 s session timeout
        described = control.describe_group(group)
        elapsed = time.monotonic() - started
        assert member_id not in described["members"] and described["state"] == "Empty"
        assert elapsed < 5, elapsed  # no real waiting for the session timeout
        # The live client finds out on its next heartbeat and joins again.
        _until(lambda: (d := _stable(control, group, 1)) and member_id not in d["members"],
               what="the consumer rejoining")
    finally:
        member.close()


def test_forced_rebalance_moves_a_stable_group_to_a_new_generation(kafka, control):
    topic, group = _name("reb"), _name("g")
    control.create_topic(topic, 1)
    member = _Member(kafka.bootstrap_servers, group, topic, 10000)
    try:
        _until(lambda: _stable(control, group, 1) and member.assignment, what="a stable group")
        before = control.describe_group(group)
        control.rebalance(group)
        assert control.describe_group(group)["state"] == "PreparingRebalance"
        _until(lambda: (d := _stable(control, group, 1)) and d["generation"] > before["generation"],
               what="the forced rebalance to complete")
        assert control.describe_group(group)["members"] == before["members"]  # same member rejoined
    finally:
        member.close()
    with pytest.raises(ControlError, match="only a Stable"):
        control.rebalance(group)  # Empty now: nothing to rebalance


def test_advancing_the_clock_runs_retention(kafka, control):
    from kafka import KafkaProducer

    topic = _name("ret")
    control.create_topic(topic, 1, {"retention.ms": 60000, "segment.bytes": 100})
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0)
    for i in range(5):
        producer.send(topic, f"record-{i}".encode(), partition=0).get(10)
    producer.close()
    assert _read_all(kafka.bootstrap_servers, topic)[0] == b"record-0"
    control.advance_clock(120_000)  # a full maintenance tick runs at the new time
    values = _read_all(kafka.bootstrap_servers, topic)
    assert b"record-0" not in values and len(values) < 5


# -- stall, hold, close ------------------------------------------------------------------------

def test_stalled_partition_holds_produce_until_released(kafka, control):
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    topic = _name("stall")
    control.create_topic(topic, 2)
    control.stall(topic, 0)
    # One producer per partition: a Produce request naming a stalled partition waits as a whole.
    stalled_producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0)
    free_producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0)
    try:
        stalled = stalled_producer.send(topic, b"a", partition=0)
        assert free_producer.send(topic, b"b", partition=1).get(10).offset == 0
        with pytest.raises(KafkaTimeoutError):
            stalled.get(timeout=0.5)
        with pytest.raises(ControlError) as info:
            control.wait_for_hwm(topic, 0, 1, timeout=0.3)
        assert info.value.status == 408
        control.release_partition(topic, 0)
        assert stalled.get(10).offset == 0
        assert control.wait_for_hwm(topic, 0, 1, timeout=5) == 1
    finally:
        stalled_producer.close(timeout=5)
        free_producer.close(timeout=5)


def test_hold_delay_and_close_with_a_real_producer(kafka, control):
    from kafka import KafkaProducer

    topic = _name("hold")
    control.create_topic(topic, 1)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0)
    try:
        producer.send(topic, b"warm", partition=0).get(10)
        held = control.hold("Produce", topic=topic, count=1)
        future = producer.send(topic, b"held", partition=0)
        time.sleep(0.3)  # the hold must still be holding after a while; no condition to wait for
        assert not future.is_done
        control.release(held)
        assert future.get(10).offset == 1
        control.delay("Produce", 400, topic=topic, count=1)
        started = time.monotonic()
        assert producer.send(topic, b"delayed", partition=0).get(10).offset == 2
        assert time.monotonic() - started >= 0.4
        control.close_connection("Produce", topic=topic, count=1)
        assert producer.send(topic, b"after-close", partition=0).get(30).offset >= 3
        assert _read_all(kafka.bootstrap_servers, topic)[:3] == [b"warm", b"held", b"delayed"]
    finally:
        producer.close()


# -- Java: NOT_COORDINATOR on commit -----------------------------------------------------------

JAVA_COMMIT = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class CommitRun {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[2]);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(args[1], 0);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            c.commitSync(Map.of(tp, new OffsetAndMetadata(7)), Duration.ofSeconds(30));
            System.out.println("COMMITTED " + c.committed(Set.of(tp)).get(tp).offset());
        }
    }
}
"""


def test_java_consumer_rediscovers_the_coordinator_after_not_coordinator_on_commit(kafka, control, tmp_path):
    javac, java, jars = require_tool("javac"), require_tool("java"), require_java_jars()
    src = tmp_path / "CommitRun.java"
    src.write_text(JAVA_COMMIT)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(tmp_path), str(src)], check=True, timeout=120)
    topic, group = _name("jcommit"), _name("jg")
    control.create_topic(topic, 1)
    fault = control.fail("OffsetCommit", "NOT_COORDINATOR", count=1, group=group)
    # A 1 ms delay fault only to count FindCoordinator requests for this group.
    finds = control.delay("FindCoordinator", 1, group=group)
    out = subprocess.run([java, "-cp", f"{tmp_path}:{jars}/*", "CommitRun", kafka.bootstrap_servers, topic, group],
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    assert "COMMITTED 7" in out.stdout
    hits = {f["id"]: f["hits"] for f in control.faults()}
    assert hits[fault] == 1
    assert hits[finds] >= 2  # the first lookup, and the rediscovery after NOT_COORDINATOR


# -- HTTP ----------------------------------------------------------------------------------------

def _http(kafka, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{kafka.http_port}{path}", data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("path, body, status, message", [
    ("/control/faults.add", b"{not json", 400, "not JSON"),
    ("/control/faults.add", b"[1, 2]", 400, "JSON object"),
    ("/control/faults.add", b'{"api": "NoSuchApi", "error": "NOT_COORDINATOR"}', 400, "unknown api"),
    ("/control/faults.add", b'{"api": "Produce", "error": "NO_SUCH_ERROR"}', 400, "unknown error"),
    ("/control/faults.add", b'{"api": "Produce", "action": "delay", "delay_ms": 999999999}', 400, "delay_ms"),
    ("/control/faults.add", b'{"api": "Produce", "error": 6, "probability": 7}', 400, "probability"),
    ("/control/clock.advance", b'{"ms": -5}', 400, "ms"),
    ("/control/clock.advance", b'{"ms": "soon"}', 400, "integer"),
    ("/control/partitions.stall", b'{"topic": "no-such-topic", "partition": 0}', 404, "no topic"),
    ("/control/groups.expire", b'{"group": "no-such-group"}', 404, "no group"),
    ("/control/faults.remove", b'{"id": 424242}', 404, "no fault"),
    ("/control/no.such.op", b"{}", 404, "unknown control operation"),
])
def test_bad_http_control_requests_get_4xx_and_change_nothing(kafka, control, path, body, status, message):
    clock_before = _http(kafka, "GET", "/control/clock")[1]["offset_ms"]
    code, answer = _http(kafka, "POST", path, body)
    assert code == status and message in answer["error"], answer
    assert _http(kafka, "GET", "/control/faults")[1] == {"faults": [], "stalled": []}
    assert _http(kafka, "GET", "/control/clock")[1]["offset_ms"] == clock_before


def test_http_faults_with_a_plain_http_client_and_curl(kafka, control):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import PolicyViolationError

    code, fault = _http(kafka, "POST", "/control/faults.add",
                        json.dumps({"api": "CreateTopics", "error": "POLICY_VIOLATION", "count": 1}).encode())
    assert code == 200 and fault["error_code"] == 44 and fault["hits"] == 0
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        topic = _name("http")
        with pytest.raises(PolicyViolationError):
            admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_topics([NewTopic(topic, 1, 1)])  # count 1 used up: handled normally
    finally:
        admin.close()
    (listed,) = _http(kafka, "GET", "/control/faults")[1]["faults"]
    assert listed["id"] == fault["id"] and listed["hits"] == 1
    curl = require_tool("curl")
    base = f"http://127.0.0.1:{kafka.http_port}"
    out = subprocess.run([curl, "-s", "-XPOST", f"{base}/control/clock.advance", "-d", '{"ms": 1000}'],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out)["offset_ms"] >= 1000
    out = subprocess.run([curl, "-s", "-XPOST", f"{base}/control/reset"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert json.loads(out) == {"ok": True}
    assert _http(kafka, "GET", "/control/faults")[1]["faults"] == []


# -- transactions: advancing the clock aborts a transaction that timed out ---------------------

def test_advancing_the_clock_aborts_an_open_transaction_and_fences_its_producer(kafka, control):
    from confluent_kafka import Consumer, KafkaException, Producer

    topic = _name("txn-clock")
    control.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": _name("tid"),
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"never committed")
    assert producer.flush(10) == 0
    control.advance_clock(61_000)  # past the transaction's timeout, without waiting a minute
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)  # fenced: the coordinator aborted with an epoch bump
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": _name("g"),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline, seen = time.time() + 5, []
    while time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    assert seen == []  # the aborted record never reaches read_committed
