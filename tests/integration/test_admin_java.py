"""The Java Admin client (kafka-clients, Kafka's reference implementation) against minikafka's
admin APIs: the exceptions it maps our error codes to are what Java applications see.

The program is kept in this file and compiled into a temporary directory by the test run.
"""

import subprocess
import uuid

import pytest

try:  # tests/integration as a package or as a rootdir module
    from .clienttools import require_java_jars, require_tool
except ImportError:
    from clienttools import require_java_jars, require_tool

pytestmark = pytest.mark.integration

JAVA_SOURCE = r'''
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.*;

public class AdminCheck {
    static void check(boolean ok, String what) {
        if (!ok) throw new IllegalStateException("check failed: " + what);
    }

    static Throwable cause(KafkaFuture<?> f) throws InterruptedException {
        try { f.get(); return null; } catch (ExecutionException e) { return e.getCause(); }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        String topic = args[1];
        try (Admin admin = Admin.create(p)) {
            DescribeClusterResult cluster = admin.describeCluster();
            check(cluster.controller().get().id() == 1, "controller id");
            check(cluster.nodes().get().size() == 1, "one node");
            check(cluster.clusterId().get() != null, "cluster id");

            CreateTopicsResult created = admin.createTopics(List.of(
                new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "3600000"))));
            created.all().get();
            check(created.numPartitions(topic).get() == 2, "numPartitions from CreateTopics v5+");
            check(created.topicId(topic).get() != null, "topic id from CreateTopics v7");
            check("3600000".equals(created.config(topic).get().get("retention.ms").value()), "created config");

            Throwable dup = cause(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            check(dup instanceof TopicExistsException, "duplicate: " + dup);
            Throwable rf = cause(admin.createTopics(List.of(new NewTopic(topic + "-rf", 1, (short) 3))).all());
            check(rf instanceof InvalidReplicationFactorException, "replication factor: " + rf);
            Throwable bad = cause(admin.createTopics(List.of(new NewTopic("bad name", 1, (short) 1))).all());
            check(bad instanceof InvalidTopicException, "invalid name: " + bad);
            Throwable cfg = cause(admin.createTopics(List.of(
                new NewTopic(topic + "-cfg", 1, (short) 1).configs(Map.of("no.such.config", "1")))).all());
            check(cfg instanceof InvalidConfigurationException, "unknown config: " + cfg);

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("segment.ms", "600000"), AlterConfigOp.OpType.SET)))).all().get();
            Config config = admin.describeConfigs(List.of(res),
                new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get().get(res);
            ConfigEntry retention = config.get("retention.ms");
            check("3600000".equals(retention.value()), "retention.ms value");
            check(retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms source");
            check("600000".equals(config.get("segment.ms").value()), "segment.ms value");
            check(config.get("cleanup.policy").source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG, "default source");
            check(config.get("cleanup.policy").type() == ConfigEntry.ConfigType.LIST, "config type");
            check(config.get("cleanup.policy").documentation() != null, "documentation");

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            int parts = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            check(parts == 3, "partitions after CreatePartitions: " + parts);
            Throwable shrink = cause(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all());
            check(shrink instanceof InvalidPartitionsException, "shrink: " + shrink);

            TopicPartition tp = new TopicPartition(topic, 0);
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(0))).lowWatermarks().get(tp).get().lowWatermark();
            check(low == 0, "low watermark " + low);
            Throwable range = cause(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(5))).all());
            check(range instanceof OffsetOutOfRangeException, "delete above HW: " + range);

            admin.deleteTopics(List.of(topic)).all().get();
            check(!admin.listTopics().names().get().contains(topic), "deleted");
            Throwable gone = cause(admin.deleteTopics(List.of(topic)).all());
            check(gone instanceof UnknownTopicOrPartitionException, "delete unknown: " + gone);
        }
        System.out.println("OK");
    }
}
'''


@pytest.fixture(scope="module")
def admin_classes(tmp_path_factory):
    javac = require_tool("javac")
    jars = require_java_jars()
    out = tmp_path_factory.mktemp("java-admin")
    source = out / "AdminCheck.java"
    source.write_text(JAVA_SOURCE)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(out), str(source)], check=True, timeout=120)
    return f"{out}:{jars}/*"


def test_java_admin_client(any_broker, admin_classes):
    java = require_tool("java")
    proc = subprocess.run([java, "-cp", admin_classes, "AdminCheck", any_broker.bootstrap,
                           f"java-admin-{uuid.uuid4().hex[:8]}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"
