"""Transactions with the Java client (kafka-clients 3.9): KafkaProducer begin/send/commit/abort, a
consume-transform-produce loop with sendOffsetsToTransaction and a read_committed KafkaConsumer, a
zombie fenced by a newer instance, a transaction aborted by its timeout, a read_committed consumer
held at the LSO while a transaction is open, and Admin describeTransactions / listTransactions /
describeProducers.

The Java program is written into the test's temporary directory and compiled against the
kafka-clients jar that ``make test`` unpacks; it prints KEY VALUE lines the test asserts on.
"""

from __future__ import annotations

import subprocess
import uuid

from clienttools import require_java_jars, require_tool
from conftest import broker_for


PROGRAM = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.*;

public class TxnRun {
    static String bootstrap;
    static String prefix = "";  // transactional ids and groups of this run (a shared broker holds others)

    static KafkaProducer<String, String> producer(String tid, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", prefix + tid);
        p.put("transaction.timeout.ms", String.valueOf(timeoutMs));
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static KafkaConsumer<String, String> consumer(String group, String isolation) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", prefix + group);
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static List<String> readAll(String topic, String isolation, int expected) {
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer("reader-" + UUID.randomUUID(), isolation)) {
            c.assign(List.of(new TopicPartition(topic, 0)));
            long deadline = System.currentTimeMillis() + 15000;
            int idle = 0;
            while (System.currentTimeMillis() < deadline && (out.size() < expected || idle < 3)) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) idle++; else idle = 0;
                for (ConsumerRecord<String, String> r : recs) out.add(r.value());
            }
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String in = args[1], out = args[2], plain = args[3], slow = args[4];
        if (args.length > 5) prefix = args[5];
        // 1. commit and abort
        try (KafkaProducer<String, String> p = producer("java-basic", 60000)) {
            p.beginTransaction();
            for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>(in, "k" + i, "in" + i));
            p.commitTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(in, "x", "aborted")).get();
            p.abortTransaction();
            p.beginTransaction();
            for (int i = 5; i < 10; i++) p.send(new ProducerRecord<>(in, "k" + i, "in" + i));
            p.commitTransaction();
        }
        System.out.println("COMMITTED_READ " + String.join(",", readAll(in, "read_committed", 10)));
        System.out.println("UNCOMMITTED_READ " + readAll(in, "read_uncommitted", 11).size());

        // 1b. a read_committed consumer is held at the LSO while a transaction is open
        try (KafkaProducer<String, String> p = producer("java-lso", 60000);
             KafkaConsumer<String, String> c = consumer("java-lso-reader", "read_committed")) {
            TopicPartition tp = new TopicPartition(plain, 0);
            c.assign(List.of(tp));
            c.seekToEnd(List.of(tp));
            long start = c.position(tp);
            p.beginTransaction();
            p.send(new ProducerRecord<>(plain, "o", "pending")).get();
            int during = 0;
            long until = System.currentTimeMillis() + 1500;
            while (System.currentTimeMillis() < until) during += c.poll(Duration.ofMillis(100)).count();
            long lso = c.endOffsets(List.of(tp)).get(tp);
            p.commitTransaction();
            List<String> after = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15000;
            while (after.isEmpty() && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) after.add(r.value());
            System.out.println("LSO_HELD " + during + " " + (lso - start) + " " + after);
        }

        // 2. consume-transform-produce with offsets in the transaction
        int moved = 0;
        try (KafkaProducer<String, String> p = producer("java-ctp", 60000);
             KafkaConsumer<String, String> c = consumer("java-ctp-group", "read_committed")) {
            c.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + 30000;
            while (moved < 10 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    p.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    moved++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
            }
            OffsetAndMetadata committed = c.committed(Set.of(new TopicPartition(in, 0))).get(new TopicPartition(in, 0));
            System.out.println("CTP_MOVED " + moved + " COMMITTED_OFFSET " + (committed == null ? -1 : committed.offset()));
        }
        System.out.println("CTP_OUT " + String.join(",", readAll(out, "read_committed", 10)));

        // 3. a zombie is fenced by a newer instance with the same transactional id
        KafkaProducer<String, String> zombie = producer("java-zombie", 60000);
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>(plain, "z", "zombie")).get();
        try (KafkaProducer<String, String> fresh = producer("java-zombie", 60000)) {
            fresh.beginTransaction();
            fresh.send(new ProducerRecord<>(plain, "f", "fresh"));
            fresh.commitTransaction();
        }
        try {
            zombie.commitTransaction();
            System.out.println("ZOMBIE committed");
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            System.out.println("ZOMBIE " + e.getClass().getSimpleName());
        } catch (KafkaException e) {
            System.out.println("ZOMBIE other " + e);
        }
        zombie.close(Duration.ZERO);
        System.out.println("ZOMBIE_READ " + String.join(",", readAll(plain, "read_committed", 2)));

        // 4. a transaction that outlives its timeout is aborted and its producer fenced
        KafkaProducer<String, String> late = producer("java-slow", 1500);
        late.beginTransaction();
        late.send(new ProducerRecord<>(slow, "l", "late")).get();
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            long deadline = System.currentTimeMillis() + 20000;
            String state = "";
            while (System.currentTimeMillis() < deadline) {
                state = admin.describeTransactions(List.of(prefix + "java-slow")).all().get().get(prefix + "java-slow").state().toString();
                if (state.equals("CompleteAbort")) break;
                Thread.sleep(100);
            }
            System.out.println("SLOW_STATE " + state);
            try {
                late.commitTransaction();
                System.out.println("SLOW committed");
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                System.out.println("SLOW " + e.getClass().getSimpleName());
            } catch (KafkaException e) {
                System.out.println("SLOW other " + e);
            }
            late.close(Duration.ZERO);
            System.out.println("SLOW_READ " + readAll(slow, "read_committed", 0).size());

            // Admin views
            Collection<TransactionListing> listed = admin.listTransactions().all().get();
            Set<String> ids = new TreeSet<>();
            for (TransactionListing l : listed)
                if (l.transactionalId().startsWith(prefix)) ids.add(l.transactionalId().substring(prefix.length()));
            System.out.println("LISTED " + ids);
            TransactionDescription d = admin.describeTransactions(List.of(prefix + "java-basic")).all().get().get(prefix + "java-basic");
            System.out.println("DESCRIBED " + d.state() + " " + d.topicPartitions().size());
            DescribeProducersResult.PartitionProducerState ps =
                admin.describeProducers(List.of(new TopicPartition(in, 0))).partitionResult(new TopicPartition(in, 0)).get();
            System.out.println("PRODUCERS " + ps.activeProducers().size()
                + " OPEN " + ps.activeProducers().stream().filter(x -> x.currentTransactionStartOffset().isPresent()).count());
        }
    }
}
"""


def test_java_transactions(request, broker_kind, tmp_path):
    javac = require_tool("javac")
    java = require_tool("java")
    jars = require_java_jars()
    src = tmp_path / "TxnRun.java"
    src.write_text(PROGRAM)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(tmp_path), str(src)], check=True, timeout=120)
    broker = broker_for(request, broker_kind, tmp_path / "b", offsets_topic_num_partitions=3,
                        transaction_state_log_num_partitions=3, group_min_session_timeout_ms=1000)
    run = uuid.uuid4().hex[:8]
    topics = [f"{name}-{run}" for name in ("in", "out", "plain", "slow")]
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            f.result(10)
        out = subprocess.run([java, "-cp", f"{tmp_path}:{jars}/*", "TxnRun", broker.bootstrap, *topics,
                              f"{run}-"], capture_output=True, text=True, timeout=150)
        assert out.returncode == 0, out.stdout + out.stderr[-4000:]
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
        expected = ",".join(f"in{i}" for i in range(10))
        assert lines["COMMITTED_READ"] == expected
        assert lines["UNCOMMITTED_READ"] == "11"
        assert lines["CTP_MOVED"] == "10 COMMITTED_OFFSET 13"  # last record in9 at 12: 10 records, 1 aborted, 2 markers
        assert lines["CTP_OUT"] == expected.upper()
        assert lines["ZOMBIE"] in ("ProducerFencedException", "InvalidProducerEpochException"), lines["ZOMBIE"]
        assert lines["LSO_HELD"] == "0 0 [pending]"
        assert lines["ZOMBIE_READ"] == "pending,fresh"
        assert lines["SLOW_STATE"] == "CompleteAbort"
        assert lines["SLOW"] in ("ProducerFencedException", "InvalidProducerEpochException"), lines["SLOW"]
        assert lines["SLOW_READ"] == "0"
        assert lines["LISTED"] == "[java-basic, java-ctp, java-lso, java-slow, java-zombie]"
        assert lines["DESCRIBED"] == "CompleteCommit 0"
        assert lines["PRODUCERS"] == "1 OPEN 0"
    finally:
        broker.stop()
