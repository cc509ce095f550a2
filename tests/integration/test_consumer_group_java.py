"""The Java client (kafka-clients 3.9) with ``group.protocol=consumer`` (KIP-848) against minikafka:
two members split a topic, a third joins and partitions move, the Admin client describes the group through
ConsumerGroupDescribe (type Consumer, members with assignment and target assignment) and lists it with its
type, the third member leaves and its partitions move back, and the commits made with member epochs are
there.  And online migration: a group of two Java consumers rolled one member at a time from the classic
protocol (cooperative-sticky) to the consumer protocol, and back, while a producer writes.

The Java programs are written into the test's temporary directory and compiled against the
kafka-clients jar that ``make test`` unpacks.
"""

from __future__ import annotations

import subprocess

from clienttools import require_java_jars, require_tool
from conftest import start_broker
from test_group_clients import create_topic, produce
import pytest

pytestmark = pytest.mark.minikafka_only(
    reason="budget: a broker per test and three Java programs; KIP-848 on Apache Kafka is covered by test_consumer_group_protocol.py")

PROGRAM = r"""
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class CgRun {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int expected = Integer.parseInt(args[3]);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean stopThird = new AtomicBoolean();
        Map<Integer, Set<Integer>> assigned = new ConcurrentHashMap<>();
        List<Thread> threads = new ArrayList<>();
        AtomicInteger active = new AtomicInteger(2);
        for (int i = 0; i < 3; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("group.protocol", "consumer");
                p.put("client.id", "java-cg-" + id);
                p.put("enable.auto.commit", "false");
                p.put("auto.offset.reset", "earliest");
                p.put("key.deserializer", StringDeserializer.class.getName());
                p.put("value.deserializer", StringDeserializer.class.getName());
                while (id >= active.get() && !stop.get()) { try { Thread.sleep(20); } catch (InterruptedException e) { return; } }
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 40000;
                    while (!stop.get() && !(id == 2 && stopThird.get()) && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                        for (ConsumerRecord<String, String> r : recs) seen.add(r.value());
                        if (!recs.isEmpty()) c.commitSync();
                        Set<Integer> parts = new TreeSet<>();
                        for (TopicPartition tp : c.assignment()) parts.add(tp.partition());
                        assigned.put(id, parts);
                    }
                } catch (Exception e) { e.printStackTrace(); }
            });
            threads.add(t);
            t.start();
        }
        long deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline && !(seen.size() >= expected && assigned.size() == 2
                && assigned.values().stream().allMatch(s -> s.size() == 3))) Thread.sleep(50);
        System.out.println("TWO " + new TreeMap<>(assigned));
        active.set(3);
        deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline && !(assigned.size() == 3
                && assigned.values().stream().allMatch(s -> s.size() == 2))) Thread.sleep(50);
        System.out.println("THREE " + new TreeMap<>(assigned));
        System.out.println("DISTINCT " + seen.size());
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            System.out.println("DESCRIBE " + d.type() + " " + d.state() + " " + d.members().size() + " " + d.partitionAssignor());
            for (MemberDescription m : d.members())
                System.out.println("MEMBER " + m.clientId() + " " + m.assignment().topicPartitions().size() + " " + m.targetAssignment().map(a -> a.topicPartitions().size()).orElse(-1));
            System.out.println("LISTED " + admin.listConsumerGroups().all().get().stream()
                .filter(l -> l.groupId().equals(group)).map(l -> l.type().toString()).findFirst().orElse("none"));
        }
        // The third member leaves (close() sends epoch -1): its partitions go back to the two others.
        stopThird.set(true);
        threads.get(2).join(20000);
        assigned.remove(2);
        deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline && !(assigned.size() == 2
                && assigned.values().stream().allMatch(s -> s.size() == 3))) Thread.sleep(50);
        System.out.println("AFTERLEAVE " + new TreeMap<>(assigned));
        stop.set(true);
        for (Thread t : threads) t.join(20000);
        try (Admin admin = Admin.create(ap)) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            long sum = 0;
            for (OffsetAndMetadata om : offsets.values()) sum += om.offset();
            System.out.println("COMMITTED " + offsets.size() + " " + sum);
        }
    }
}
"""


def _parse(text: str) -> dict[int, set[int]]:
    """Java's TreeMap<Integer, Set<Integer>>.toString(): {0=[3, 4], 1=[0, 1]}."""
    out = {}
    for part in text.strip("{}").split("], "):
        key, _, values = part.partition("=")
        out[int(key)] = {int(v) for v in values.strip("[]").split(", ") if v}
    return out


def test_java_consumer_protocol_group(tmp_path):
    javac = require_tool("javac")
    java = require_tool("java")
    jars = require_java_jars()
    src = tmp_path / "CgRun.java"
    src.write_text(PROGRAM)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(tmp_path), str(src)], check=True, timeout=120)
    broker = start_broker(tmp_path / "b", offsets_topic_num_partitions=3, group_consumer_heartbeat_interval_ms=300,
                          group_consumer_min_heartbeat_interval_ms=300)
    try:
        create_topic(broker.bootstrap, "cg-java", 6)
        produce(broker.bootstrap, 0, 60, topic="cg-java", partitions=6)
        out = subprocess.run([java, "-cp", f"{tmp_path}:{jars}/*", "CgRun", broker.bootstrap, "cg-java",
                              "java-cg", "60"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr[-4000:]
        lines = [line.split(" ", 1) for line in out.stdout.splitlines() if " " in line]
        first = {k: v for k, v in lines}
        two = first["TWO"]
        assert two in ("{0=[0, 1, 2], 1=[3, 4, 5]}", "{0=[3, 4, 5], 1=[0, 1, 2]}"), two
        three = first["THREE"]
        owned = _parse(three)
        assert sorted(len(s) for s in owned.values()) == [2, 2, 2] and set().union(*owned.values()) == set(range(6))
        assert first["DISTINCT"] == "60"
        assert first["DESCRIBE"] == "Consumer Stable 3 uniform", first["DESCRIBE"]
        members = [v for k, v in lines if k == "MEMBER"]
        assert len(members) == 3 and all(m.endswith(" 2 2") for m in members), members
        assert first["LISTED"] == "Optional[Consumer]"
        after = _parse(first["AFTERLEAVE"])
        assert set(after) == {0, 1} and [len(s) for s in after.values()] == [3, 3]
        assert after[0] | after[1] == set(range(6)), after
        # commitSync() with member epochs (OffsetCommit v9) reached the group: 10 records per partition.
        assert first["COMMITTED"] == "6 60"
    finally:
        broker.stop()


ROLL = r"""
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

/** Two members with protocol args[3] replaced one at a time by members with protocol args[4] while a
 *  producer writes; prints what was produced and consumed, and the group's type at the end. */
public class Roll {
    static final Set<String> seen = ConcurrentHashMap.newKeySet();
    static final Map<String, Set<Integer>> assigned = new ConcurrentHashMap<>();

    static Thread member(String bootstrap, String topic, String group, String protocol, String name, AtomicBoolean stop) {
        Thread t = new Thread(() -> {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("group.protocol", protocol);
            if (protocol.equals("classic")) {
                p.put("session.timeout.ms", "6000");
                p.put("heartbeat.interval.ms", "300");
                p.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
            }
            p.put("client.id", name);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(50));
                    for (ConsumerRecord<String, String> r : recs) seen.add(r.value());
                    if (!recs.isEmpty()) {
                        try { c.commitSync(); } catch (Exception e) { System.out.println("COMMITFAIL " + name + " " + e); }
                    }
                    Set<Integer> parts = new TreeSet<>();
                    for (TopicPartition tp : c.assignment()) parts.add(tp.partition());
                    assigned.put(name, parts);
                }
            } catch (Exception e) { e.printStackTrace(); System.out.println("FAILED " + name + " " + e); }
            assigned.remove(name);
        });
        t.start();
        return t;
    }

    static boolean balanced(Collection<String> names) {
        Set<Integer> all = new TreeSet<>();
        int total = 0;
        for (String n : names) {
            Set<Integer> s = assigned.get(n);
            if (s == null || s.isEmpty()) return false;
            all.addAll(s);
            total += s.size();
        }
        return total == 4 && all.size() == 4;
    }

    static void await(Collection<String> names, String what) throws Exception {
        long deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline && !balanced(names)) Thread.sleep(20);
        System.out.println((balanced(names) ? "BALANCED " : "UNBALANCED ") + what + " " + new TreeMap<>(assigned));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], first = args[3], second = args[4];
        AtomicBoolean stopOld1 = new AtomicBoolean(), stopOld2 = new AtomicBoolean(), stopNew = new AtomicBoolean();
        Thread o1 = member(bootstrap, topic, group, first, "old-1", stopOld1);
        Thread o2 = member(bootstrap, topic, group, first, "old-2", stopOld2);
        await(List.of("old-1", "old-2"), "old");
        AtomicBoolean stopProducer = new AtomicBoolean();
        AtomicInteger sent = new AtomicInteger();
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        Thread producer = new Thread(() -> {
            try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
                while (!stopProducer.get()) {
                    for (int i = 0; i < 4; i++) p.send(new ProducerRecord<>(topic, i, null, "m" + sent.getAndIncrement())).get();
                    Thread.sleep(10);
                }
            } catch (Exception e) { System.out.println("PRODUCERFAIL " + e); }
        });
        producer.start();
        Thread.sleep(500);
        stopOld1.set(true); o1.join(20000);
        Thread n1 = member(bootstrap, topic, group, second, "new-1", stopNew);
        await(List.of("old-2", "new-1"), "mixed");
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            System.out.println("MIDTYPE " + admin.describeConsumerGroups(List.of(group)).all().get().get(group).type());
        }
        Thread.sleep(500);
        stopOld2.set(true); o2.join(20000);
        Thread n2 = member(bootstrap, topic, group, second, "new-2", stopNew);
        await(List.of("new-1", "new-2"), "new");
        Thread.sleep(500);
        stopProducer.set(true); producer.join(20000);
        long deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline && seen.size() < sent.get()) Thread.sleep(20);
        System.out.println("SENT " + sent.get());
        System.out.println("SEEN " + seen.size());
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            System.out.println("LISTED " + admin.listConsumerGroups().all().get().stream()
                .filter(l -> l.groupId().equals(group)).map(l -> l.type().toString()).findFirst().orElse("none"));
        }
        stopNew.set(true); n1.join(20000); n2.join(20000);
    }
}
"""


def _roll(tmp_path, first: str, second: str) -> dict[str, str]:
    javac, java, jars = require_tool("javac"), require_tool("java"), require_java_jars()
    src = tmp_path / "Roll.java"
    src.write_text(ROLL)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(tmp_path), str(src)], check=True, timeout=120)
    broker = start_broker(tmp_path / "b", offsets_topic_num_partitions=3, group_consumer_heartbeat_interval_ms=300,
                          group_consumer_session_timeout_ms=6000, group_consumer_min_heartbeat_interval_ms=300,
                          group_consumer_min_session_timeout_ms=6000)
    try:
        create_topic(broker.bootstrap, "roll", 4)
        out = subprocess.run([java, "-cp", f"{tmp_path}:{jars}/*", "Roll", broker.bootstrap, "roll", "roll-g",
                              first, second], capture_output=True, text=True, timeout=150)
        assert out.returncode == 0, out.stdout + out.stderr[-4000:]
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
        assert "FAILED" not in lines and "PRODUCERFAIL" not in lines, out.stdout + out.stderr[-4000:]
        assert "UNBALANCED" not in lines, out.stdout
        assert int(lines["SENT"]) > 0 and lines["SEEN"] == lines["SENT"], out.stdout  # nothing lost
        return lines
    finally:
        broker.stop()


def test_java_classic_group_rolled_to_the_consumer_protocol(tmp_path):
    lines = _roll(tmp_path, "classic", "consumer")
    assert lines["MIDTYPE"] == "Consumer" and lines["LISTED"] == "Optional[Consumer]"


def test_java_consumer_group_rolled_back_to_the_classic_protocol(tmp_path):
    lines = _roll(tmp_path, "consumer", "classic")
    assert lines["MIDTYPE"] == "Consumer" and lines["LISTED"] == "Optional[Classic]"
