"""The Java client's classic consumer group (JoinGroup v9, SyncGroup v5, OffsetCommit/OffsetFetch v9 with
require_stable) and its Admin group calls (DescribeGroups after ConsumerGroupDescribe is not
advertised, OffsetFetch v9, DeleteGroups) against minikafka.

The Java program is written into the test's temporary directory and compiled against the
kafka-clients jar that ``make test`` unpacks.
"""

from __future__ import annotations

import subprocess

from clienttools import require_java_jars, require_tool
from conftest import broker_for
from test_group_clients import BROKER_OVERRIDES, create_topic, produce, unique

PROGRAM = r"""
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupRun {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int members = Integer.parseInt(args[3]), expected = Integer.parseInt(args[4]);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger total = new AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        Map<Integer, Set<Integer>> assigned = new ConcurrentHashMap<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("client.id", "java-" + id);
                p.put("enable.auto.commit", "false");
                p.put("auto.offset.reset", "earliest");
                p.put("session.timeout.ms", "6000");
                p.put("heartbeat.interval.ms", "300");
                p.put("key.deserializer", StringDeserializer.class.getName());
                p.put("value.deserializer", StringDeserializer.class.getName());
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 30000;
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                        for (ConsumerRecord<String, String> r : recs) { seen.add(r.value()); total.incrementAndGet(); }
                        if (!recs.isEmpty()) c.commitSync();
                        Set<Integer> parts = new TreeSet<>();
                        for (TopicPartition tp : c.assignment()) parts.add(tp.partition());
                        assigned.put(id, parts);
                        if (seen.size() >= expected && assigned.size() == members
                                && assigned.values().stream().allMatch(s -> !s.isEmpty())) {
                            // Stay in the group until everyone is done, so admin sees it Stable.
                            if (stop.get()) break;
                        }
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        long deadline = System.currentTimeMillis() + 30000;
        while (System.currentTimeMillis() < deadline && !(seen.size() >= expected && assigned.size() == members
                && assigned.values().stream().allMatch(s -> !s.isEmpty()))) Thread.sleep(50);
        System.out.println("DISTINCT " + seen.size());
        System.out.println("ASSIGNED " + new TreeMap<>(assigned));
        Thread.sleep(500);
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            System.out.println("STATE " + d.state() + " MEMBERS " + d.members().size() + " ASSIGNOR " + d.partitionAssignor());
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            long sum = 0;
            for (OffsetAndMetadata om : offsets.values()) sum += om.offset();
            System.out.println("COMMITTED " + offsets.size() + " " + sum);
            System.out.println("LISTED " + admin.listConsumerGroups().all().get().stream()
                .anyMatch(l -> l.groupId().equals(group)));
            stop.set(true);
            for (Thread t : threads) t.join(20000);
            admin.deleteConsumerGroups(List.of(group)).all().get();
            System.out.println("DELETED " + admin.listConsumerGroups().all().get().stream()
                .noneMatch(l -> l.groupId().equals(group)));
        }
    }
}
"""


def test_java_consumer_group_and_admin(request, broker_kind, tmp_path):
    javac = require_tool("javac")
    java = require_tool("java")
    jars = require_java_jars()
    src = tmp_path / "GroupRun.java"
    src.write_text(PROGRAM)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(tmp_path), str(src)], check=True, timeout=120)
    broker = broker_for(request, broker_kind, tmp_path / "b", **BROKER_OVERRIDES)
    topic, group = unique("orders"), unique("java-group")
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, 0, 80, topic)  # 20 per partition
        out = subprocess.run([java, "-cp", f"{tmp_path}:{jars}/*", "GroupRun", broker.bootstrap, topic,
                              group, "2", "80"], capture_output=True, text=True, timeout=90)
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
        assert out.returncode == 0, out.stdout + out.stderr[-4000:]
        assert lines["DISTINCT"] == "80"
        assert lines["ASSIGNED"] in ("{0=[0, 1], 1=[2, 3]}", "{0=[2, 3], 1=[0, 1]}"), lines["ASSIGNED"]
        assert lines["STATE"] == "Stable MEMBERS 2 ASSIGNOR range", lines["STATE"]
        assert lines["COMMITTED"] == "4 80"
        assert lines["LISTED"] == "true"
        assert lines["DELETED"] == "true"
    finally:
        broker.stop()
