"""Incremental fetch sessions (KIP-227) with real clients: the Java consumer and kafka-python
(3.x) open a session with a full fetch and then send incremental fetches that the broker
answers with only the changed partitions (seen in the broker's debug log), and Java consumers
keep consuming when the session cache evicts their sessions.  librdkafka (2.x) does not
implement fetch sessions: it always sends session epoch -1, which the broker answers as a
sessionless full fetch."""

import re
import subprocess
import time

import pytest

from clienttools import require_java_jars, require_tool
from conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "reads minikafka's debug log and sets its fetch-session cache size"))]

PARTITIONS = 24

INCREMENTAL = re.compile(r"fetch session (\d+) epoch (\d+): incremental, (\d+) of (\d+) partitions")

JAVA_SRC = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class SessionConsumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]), rounds = Integer.parseInt(args[3]);
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("client.id", topic);
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        c.put("fetch.max.wait.ms", "200");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            int got = 0;
            for (int r = 0; r < rounds; r++) {
                // one record on a few partitions per round: most partitions stay unchanged
                for (int i = 0; i < 3; i++)
                    producer.send(new ProducerRecord<>(topic, (r * 3 + i) % partitions, null, ("v" + r).getBytes())).get();
                long deadline = System.currentTimeMillis() + 20000;
                while (got < (r + 1) * 3 && System.currentTimeMillis() < deadline)
                    got += consumer.poll(Duration.ofMillis(200)).count();
                if (got != (r + 1) * 3) { System.out.println("FAIL round " + r + " got " + got); System.exit(1); }
                // a few idle polls, answered by empty incremental fetches
                for (int i = 0; i < 3; i++) got += consumer.poll(Duration.ofMillis(100)).count();
            }
            System.out.println("OK " + got);
        }
    }
}
"""


def incremental_lines(log: str):
    return [tuple(int(x) for x in m.groups()) for m in INCREMENTAL.finditer(log)]


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    javac = require_tool("javac")
    jars = require_java_jars()
    out = tmp_path_factory.mktemp("java-sessions")
    src = out / "SessionConsumer.java"
    src.write_text(JAVA_SRC)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(out), str(src)], check=True, timeout=180)
    return f"{out}:{jars}/*"


def java_consumer(classes, broker, topic, partitions, rounds):
    return subprocess.Popen([require_tool("java"), "-cp", classes, "SessionConsumer", broker.bootstrap, topic,
                             str(partitions), str(rounds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, expect):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.strip().endswith(f"OK {expect}"), out + err[-3000:]


def test_java_consumer_uses_incremental_fetch_sessions(tmp_path, java_classes):
    broker = BrokerProcess(tmp_path, {}, extra_args=("--log-level", "DEBUG"))
    try:
        finish(java_consumer(java_classes, broker, "java-sessions", PARTITIONS, 4), 12)
        log = broker.read_log()
        assert re.search(rf"fetch session \d+ created with {PARTITIONS} partitions \(client java-sessions\)", log)
        incremental = incremental_lines(log)
        assert len(incremental) >= 5, log[-3000:]
        # the session holds every partition, the responses carry only the changed ones
        assert all(total == PARTITIONS for _sid, _e, _n, total in incremental)
        assert any(n == 0 for _sid, _e, n, _t in incremental)
        assert all(n < PARTITIONS for _sid, _e, n, _t in incremental)
    finally:
        broker.stop()


def test_java_consumers_keep_consuming_across_session_evictions(tmp_path, java_classes):
    # One slot and a short eviction time: two consumers of different sizes keep taking the slot
    # from each other, so each gets FETCH_SESSION_ID_NOT_FOUND and starts over with a full fetch.
    # The big consumer opens its session first; the small one starts while it runs: it can only
    # take the slot when the big session has been idle for 100 ms (during a 200 ms long poll),
    # and the big one takes it back at once (it is bigger).  The big one runs 30 rounds (~10 s) so
    # that it is still consuming whenever the small one's JVM gets going on a busy machine (with
    # 12 rounds it once finished first in the whole suite: no eviction to see).
    broker = BrokerProcess(tmp_path, {"max.incremental.fetch.session.cache.slots": 1,
                                      "fetch.session.eviction.ms": 100}, extra_args=("--log-level", "DEBUG"))
    try:
        big = java_consumer(java_classes, broker, "evict-big", 60, 30)
        deadline = time.monotonic() + 60
        while not re.search(r"fetch session \d+ created with 60 partitions", broker.read_log()):
            assert big.poll() is None and time.monotonic() < deadline, "the big consumer opened no session"
            time.sleep(0.1)
        small = java_consumer(java_classes, broker, "evict-small", 6, 5)
        finish(big, 90)
        finish(small, 15)
        log = broker.read_log()
        assert incremental_lines(log), log[-3000:]
        assert re.search(r"fetch session \d+ evicted", log)
        assert re.search(r"fetch session \d+ not found", log)
    finally:
        broker.stop()


def test_librdkafka_fetches_without_a_session(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = BrokerProcess(tmp_path, {"num.partitions": 8}, extra_args=("--log-level", "DEBUG"))
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(40):
            producer.produce("rdk-sessions", value=b"v%d" % i, partition=i % 8)
        assert producer.flush(15) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rdk-sessions",
                                             "client.id": "rdk-sessions", "auto.offset.reset": "earliest"})
        consumer.subscribe(["rdk-sessions"])
        got, deadline = 0, time.monotonic() + 30
        while got < 40 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got += 1
        consumer.close()
        assert got == 40
        log = broker.read_log()
        assert "fetch without a session (epoch -1) from client rdk-sessions" in log
        assert not re.search(r"fetch session \d+ created", log)
    finally:
        broker.stop()


def test_kafka_python_consumer_uses_incremental_fetch_sessions(tmp_path):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic

    broker = BrokerProcess(tmp_path, {}, extra_args=("--log-level", "DEBUG"))
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("kp-sessions", PARTITIONS, 1)])
        admin.close()
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
        consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, client_id="kp-sessions",
                                       fetch_max_wait_ms=100, consumer_timeout_ms=200)
        consumer.assign([kafka.TopicPartition("kp-sessions", p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        got = 0
        for rnd in range(4):
            for i in range(3):
                producer.send("kp-sessions", value=b"r%d" % rnd, partition=(rnd * 3 + i) % PARTITIONS)
            producer.flush(10)
            deadline = time.monotonic() + 20
            while got < (rnd + 1) * 3 and time.monotonic() < deadline:
                got += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
            assert got == (rnd + 1) * 3
        consumer.close()
        producer.close()
        log = broker.read_log()
        assert re.search(rf"fetch session \d+ created with {PARTITIONS} partitions \(client kp-sessions\)", log)
        incremental = incremental_lines(log)
        assert len(incremental) >= 3 and all(n < total for _s, _e, n, total in incremental), log[-3000:]
    finally:
        broker.stop()
