"""The Java client (kafka-clients 3.9) against issue 14's Kafka 4.x surface, on one broker:

* the Admin client on DescribeTopicPartitions (paged), log dirs, elections, reassignments, the
  quorum, features and client quotas;
* a producer and a consumer each limited to 1 MB/s by a client-id quota: they measure about
  1 MB/s and see throttle times (``produce-throttle-time-max``, ``fetch-throttle-time-max``);
* the consumer fetches by topic id (Fetch v17, seen in the broker's debug log);
* with client telemetry on, the producer pushes its metrics (KIP-714), seen in the broker's log.

The quota window is 2 samples of 1 s so that a few MB show the rate (Kafka's 11 would let the
first 10 s of quota through at once).
"""

import re
import subprocess

import pytest

from clienttools import require_java_jars, require_tool
from conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "minikafka's client telemetry setting (client.telemetry.enable) and its log of pushes"))]

JAVA_SOURCE = r'''
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.serialization.*;

public class Kafka4Check {
    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("check failed: " + what);
    }

    static Throwable cause(KafkaFuture<?> f) throws InterruptedException {
        try { f.get(); return null; } catch (ExecutionException e) { return e.getCause(); }
    }

    static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().group().equals(group) && e.getKey().name().equals(name)) {
                Object v = e.getValue().metricValue();
                if (v instanceof Double) return (Double) v;
            }
        }
        return Double.NaN;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = "k4j";
        int megabytes = Integer.parseInt(args[1]);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
            TopicDescription td = admin.describeTopics(List.of(topic),
                new DescribeTopicsOptions().partitionSizeLimitPerResponse(1)).allTopicNames().get().get(topic);
            check(td.partitions().size() == 3, "paged describeTopics: " + td);
            TopicPartition tp0 = new TopicPartition(topic, 0);

            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1);
            check(dirs.size() == 1, "one log dir");
            String dir = dirs.keySet().iterator().next();
            check(dirs.get(dir).replicaInfos().containsKey(tp0), "replica info");
            check(dirs.get(dir).totalBytes().orElse(-1L) > 0, "total bytes");
            admin.alterReplicaLogDirs(Map.of(new TopicPartitionReplica(topic, 0, 1), dir)).all().get();
            Throwable nodir = cause(admin.alterReplicaLogDirs(
                Map.of(new TopicPartitionReplica(topic, 0, 1), "/no/such/dir")).all());
            check(nodir instanceof LogDirNotFoundException, "other dir: " + nodir);

            Map<TopicPartition, Optional<Throwable>> elected =
                admin.electLeaders(ElectionType.PREFERRED, Set.of(tp0)).partitions().get();
            check(elected.get(tp0).orElse(null) instanceof ElectionNotNeededException, "election: " + elected);
            Throwable unknown = cause(admin.electLeaders(ElectionType.PREFERRED,
                Set.of(new TopicPartition("k4j-none", 0))).all());
            check(unknown instanceof UnknownTopicOrPartitionException, "unknown election: " + unknown);

            admin.alterPartitionReassignments(Map.of(tp0, Optional.of(new NewPartitionReassignment(List.of(1))))).all().get();
            Throwable other = cause(admin.alterPartitionReassignments(
                Map.of(tp0, Optional.of(new NewPartitionReassignment(List.of(2))))).all());
            check(other instanceof InvalidReplicaAssignmentException, "reassign to 2: " + other);
            check(admin.listPartitionReassignments().reassignments().get().isEmpty(), "no reassignments");

            QuorumInfo quorum = admin.describeMetadataQuorum().quorumInfo().get();
            check(quorum.leaderId() == 1 && quorum.voters().size() == 1, "quorum: " + quorum);

            FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
            check(features.finalizedFeatures().get("metadata.version").maxVersionLevel() == 29, "metadata.version");
            // transaction.version 2 is finalized (transactions V2, as Kafka 4.2); 3 does not exist.
            check(features.finalizedFeatures().get("transaction.version").maxVersionLevel() == 2, "transaction.version");
            Throwable tv3 = cause(admin.updateFeatures(Map.of("transaction.version",
                new FeatureUpdate((short) 3, FeatureUpdate.UpgradeType.UPGRADE)), new UpdateFeaturesOptions()).all());
            check(tv3 instanceof InvalidUpdateVersionException, "transaction.version 3: " + tv3);

            double limit = 1048576.0;
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(new ClientQuotaEntity(Map.of("client-id", "quota-producer")),
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", limit))),
                new ClientQuotaAlteration(new ClientQuotaEntity(Map.of("client-id", "quota-consumer")),
                    List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", limit))))).all().get();
            Map<ClientQuotaEntity, Map<String, Double>> quotas = admin.describeClientQuotas(ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity("client-id", "quota-producer")))).entities().get();
            check(quotas.size() == 1 && quotas.values().iterator().next().get("producer_byte_rate") == limit,
                "describeClientQuotas: " + quotas);
        }

        byte[] value = new byte[10240];
        int records = megabytes * 1048576 / value.length;
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "quota-producer");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        long t0 = System.nanoTime();
        double produceThrottle;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < records; i++) producer.send(new ProducerRecord<>(topic, 0, null, value));
            producer.flush();
            produceThrottle = metric(producer.metrics(), "producer-metrics", "produce-throttle-time-max");
            // keep it alive for a telemetry push or two (push interval 500 ms)
            Thread.sleep(1500);
        }
        double produceSeconds = (System.nanoTime() - t0) / 1e9 - 1.5;
        System.out.printf("produce %d MB in %.2f s = %.2f MB/s, throttle max %.0f ms%n", megabytes, produceSeconds,
            megabytes / produceSeconds, produceThrottle);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "quota-consumer");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        long consumed = 0;
        double fetchThrottle;
        long c0 = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 60000;
            while (consumed < records && System.currentTimeMillis() < deadline) {
                consumed += consumer.poll(Duration.ofMillis(200)).count();
            }
            fetchThrottle = metric(consumer.metrics(), "consumer-fetch-manager-metrics", "fetch-throttle-time-max");
        }
        double consumeSeconds = (System.nanoTime() - c0) / 1e9;
        System.out.printf("consume %d MB in %.2f s = %.2f MB/s, throttle max %.0f ms%n", megabytes, consumeSeconds,
            megabytes / consumeSeconds, fetchThrottle);
        check(consumed == records, "consumed " + consumed + " of " + records);
        System.out.printf("RATES %.3f %.3f %.1f %.1f%n", megabytes / produceSeconds, megabytes / consumeSeconds,
            produceThrottle, fetchThrottle);
        System.out.println("OK");
    }
}
'''


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    javac = require_tool("javac")
    jars = require_java_jars()
    out = tmp_path_factory.mktemp("java-k4")
    src = out / "Kafka4Check.java"
    src.write_text(JAVA_SOURCE)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(out), str(src)], check=True, timeout=180)
    return f"{out}:{jars}/*"


def test_java_admin_quotas_topic_id_fetch_and_telemetry(tmp_path, java_classes):
    broker = BrokerProcess(tmp_path, {"quota.window.num": 2, "client.telemetry.enable": True,
                                      "client.telemetry.push.interval.ms": 500},
                           extra_args=("--log-level", "DEBUG"))
    try:
        java = require_tool("java")
        proc = subprocess.run([java, "-cp", java_classes, "Kafka4Check", broker.bootstrap, "4"],
                              capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
        lines = proc.stdout.strip().splitlines()
        assert lines[-1] == "OK"
        produce_rate, consume_rate, produce_throttle, fetch_throttle = map(
            float, next(l for l in lines if l.startswith("RATES")).split()[1:])
        print("\n".join(lines))
        # 4 MB against 1 MB/s with a 2 s window: the first second's worth passes at once.  The upper
        # bound is the quota's; the lower one only catches throttling far beyond it (a busy machine
        # alone slowed the Java client to 0.58 MB/s once).
        assert 0.4 <= produce_rate <= 1.8, produce_rate
        assert 0.4 <= consume_rate <= 1.8, consume_rate
        assert produce_throttle > 0 and fetch_throttle > 0
        log = broker.read_log()
        # the consumer fetched by topic id
        assert re.search(r"request api=1 v17 .*client_id=quota-consumer", log)
        # and the producer pushed its metrics (KIP-714)
        assert re.search(r"client metrics from client_id=quota-producer .*org\.apache\.kafka", log) or \
            "client metrics from client_id=quota-producer" in log
    finally:
        broker.stop()
