"""Broker configs, their update modes, KIP-966's cluster-level min.insync.replicas and GROUP
config resources through real admin clients (confluent-kafka, kafka-python), on minikafka and on
Apache Kafka 4.2 alike (issue 20, helper "configs").

Changes on the shared Kafka are to settings no other test reads (a per-broker SASL setting, a
group id of this module) and are undone; Kafka applies a change a moment after answering, so
reads after writes are retried (bounded).
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid

import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)

from minikafka.protocol import codec

from conftest import broker_for, start_broker

from pathlib import Path

try:  # tests/integration as a package or as a rootdir module
    from .clienttools import require_java_jars, require_tool
except ImportError:
    from clienttools import require_java_jars, require_tool

TIMEOUT = 30


# The group settings of the shared Kafka (conftest KAFKA_SETTINGS), which minikafka now has too.
GROUP_SETTINGS = {"group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "6000",
                  "group.consumer.min.heartbeat.interval.ms": "300", "group.consumer.min.session.timeout.ms": "6000",
                  "group.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def kafka_broker(request, broker_kind, tmp_path_factory):
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("configs"), **GROUP_SETTINGS)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def admin(kafka_broker):
    return AdminClient({"bootstrap.servers": kafka_broker.bootstrap})


def _describe(admin, resource: ConfigResource) -> dict:
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def _call(bootstrap: str, api: int, version: int, body: dict) -> dict:
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(codec.encode_request(api, version, 1, "configs-test", body))
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        return codec.decode_response(api, version, sock.recv(size, socket.MSG_WAITALL))[1]


def _eventually(check, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def test_every_broker_config_is_described(admin):
    configs = _describe(admin, ConfigResource(ResourceType.BROKER, "1"))
    # Kafka 4.2 describes ~320 broker configs; before issue 20 minikafka described ~120.
    assert len(configs) >= 300
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert relogin.value == "60000" and not relogin.is_read_only
    assert relogin.source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["log.cleaner.threads"].value == "1"
    assert configs["num.partitions"].is_read_only
    assert not configs["message.max.bytes"].is_read_only
    assert configs["group.consumer.max.session.timeout.ms"].value == "60000"


def test_per_broker_setting_changes_at_broker_level_only(admin, kafka_broker):
    name = "sasl.kerberos.min.time.before.relogin"
    broker = ConfigResource(ResourceType.BROKER, "1",
                            incremental_configs=[ConfigEntry(name, "57000", incremental_operation=AlterConfigOpType.SET)])
    # The cluster default (confluent-kafka does not send an empty broker name: the raw request).
    refused = _call(kafka_broker.bootstrap, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": name, "config_operation": 0, "value": "57000"}]}], "validate_only": False})["responses"][0]
    assert (refused["error_code"], refused["error_message"]) == (
        42, f"Cannot update these configs at default cluster level, broker id must be specified: Set({name})")
    admin.incremental_alter_configs([broker])[broker].result(TIMEOUT)
    try:
        entry = _eventually(lambda: (lambda c: c if c.value == "57000" else None)(
            _describe(admin, ConfigResource(ResourceType.BROKER, "1"))[name]), "the new value described")
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    finally:
        undo = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([undo])[undo].result(TIMEOUT)
    _eventually(lambda: _describe(admin, ConfigResource(ResourceType.BROKER, "1"))[name].value == "60000",
                "the default again")


def test_read_only_setting_is_refused(admin):
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as refused:
        admin.incremental_alter_configs([res], validate_only=True)[res].result(TIMEOUT)
    assert "Cannot update these configs dynamically: Set(num.partitions)" in str(refused.value)


def test_topics_take_the_cluster_level_min_insync_replicas(admin):
    topic = f"mir-{uuid.uuid4().hex[:8]}"
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    entry = _eventually(lambda: _describe(admin, ConfigResource(ResourceType.TOPIC, topic)).get("min.insync.replicas"),
                        "the topic described")
    assert entry.value == "1"
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

def test_cluster_default_holds_min_insync_replicas(kafka_broker):
    # The clients refuse an empty broker name themselves: raw requests.
    described = _call(kafka_broker.bootstrap, 32, 4, {"resources": [
        {"resource_type": 4, "resource_name": "", "configuration_keys": ["min.insync.replicas"]}],
        "include_synonyms": True, "include_documentation": False})["results"][0]["configs"]
    assert [(c["name"], c["value"], c["config_source"]) for c in described] == [("min.insync.replicas", "1", 3)]
    refused = _call(kafka_broker.bootstrap, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": "min.insync.replicas", "config_operation": 1, "value": None}]}], "validate_only": True})["responses"][0]
    assert (refused["error_code"], refused["error_message"]) == (
        40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


def test_group_configs_with_kafka_python(kafka_broker):
    """kafka-python's admin: GROUP resources (type 32) described and altered within the bounds."""
    group = f"cfg-{uuid.uuid4().hex[:8]}"

    def call(api, version, body):
        return _call(kafka_broker.bootstrap, api, version, body)

    def iac(*ops, validate_only=False):
        return call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": n, "config_operation": 0, "value": v} for n, v in ops]}], "validate_only": validate_only})[
            "responses"][0]

    low = iac(("consumer.session.timeout.ms", "1000"), validate_only=True)
    assert (low["error_code"], low["error_message"]) == (
        40, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms")
    # The broker's session timeout (6000) stands in for the group's own.
    slow = iac(("consumer.heartbeat.interval.ms", "6000"), validate_only=True)
    assert (slow["error_code"], slow["error_message"]) == (
        40, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert iac(("consumer.heartbeat.interval.ms", "1000"))["error_code"] == 0

    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=20000)
    try:
        def described():
            result = kp.describe_configs([KpResource(ConfigResourceType.GROUP, group)], config_filter="all")
            entries = next(iter(next(iter(result.values())).values()))
            value = entries.get("consumer.heartbeat.interval.ms")
            value = value.get("value") if isinstance(value, dict) else value
            return entries if value == "1000" else None

        entries = _eventually(described, "the group's heartbeat interval")
        session = entries["consumer.session.timeout.ms"]
        assert (session.get("value") if isinstance(session, dict) else session) == "6000"  # the broker's
    finally:
        kp.close()

    # A consumer group of that id is told the group's heartbeat interval (KIP-848 heartbeat).
    def heartbeat():
        out = call(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        coordinator = out["coordinators"][0]
        if coordinator["error_code"]:
            return None
        with socket.create_connection((coordinator["host"], coordinator["port"]), timeout=10) as sock:
            sock.sendall(codec.encode_request(68, 0, 2, "configs-test", {
                "group_id": group, "member_id": uuid.uuid4().hex[:22], "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"],
                "server_assignor": None, "topic_partitions": []}))
            size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
            answer = codec.decode_response(68, 0, sock.recv(size, socket.MSG_WAITALL))[1]
        return answer if answer["error_code"] == 0 else None

    answer = _eventually(heartbeat, "a ConsumerGroupHeartbeat answer")
    assert answer["heartbeat_interval_ms"] == 1000


@pytest.mark.minikafka_only(reason="restarts the broker process (the shared Kafka cannot be restarted)")
def test_group_and_broker_configs_survive_a_killed_broker(tmp_path):
    """Both kinds of dynamic config are metadata-log records: a killed broker comes back with them."""
    broker = start_broker(tmp_path, **GROUP_SETTINGS)
    try:
        group = "durable-group"
        set_group = _call(broker.bootstrap, 44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "2000"}]}],
            "validate_only": False})["responses"][0]
        set_broker = _call(broker.bootstrap, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
            {"name": "sasl.kerberos.min.time.before.relogin", "config_operation": 0, "value": "55000"}]}],
            "validate_only": False})["responses"][0]
        assert set_group["error_code"] == 0 and set_broker["error_code"] == 0
        broker.restart(kill=True)
        group_entry = _call(broker.bootstrap, 32, 4, {"resources": [{"resource_type": 32, "resource_name": group,
                                                                     "configuration_keys": ["consumer.heartbeat.interval.ms"]}],
                                                     "include_synonyms": False})["results"][0]["configs"][0]
        assert (group_entry["value"], group_entry["config_source"]) == ("2000", 8)
        broker_entry = _call(broker.bootstrap, 32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                                      "configuration_keys": ["sasl.kerberos.min.time.before.relogin"]}],
                                                      "include_synonyms": False})["results"][0]["configs"][0]
        assert (broker_entry["value"], broker_entry["config_source"]) == ("55000", 2)
    finally:
        broker.stop()


JAVA_GROUP_CONFIGS = r'''
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.*;

public class GroupConfigs {
    static void check(boolean ok, String what) { if (!ok) throw new IllegalStateException("check failed: " + what); }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, args[1]);
        ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
        try (Admin admin = Admin.create(p)) {
            Config described = admin.describeConfigs(List.of(group)).all().get().get(group);
            check("6000".equals(described.get("consumer.session.timeout.ms").value()), "the broker's session timeout");
            try {
                admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                    new ConfigEntry("consumer.session.timeout.ms", "100"), AlterConfigOp.OpType.SET)))).all().get();
                check(false, "a session timeout below the minimum was accepted");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof InvalidConfigurationException, "InvalidConfigurationException: " + e.getCause());
            }
            admin.incrementalAlterConfigs(Map.of(group, List.of(new AlterConfigOp(
                new ConfigEntry("streams.num.standby.replicas", "1"), AlterConfigOp.OpType.SET)))).all().get();
            for (int i = 0; ; i++) {
                ConfigEntry e = admin.describeConfigs(List.of(group)).all().get().get(group).get("streams.num.standby.replicas");
                if ("1".equals(e.value()) && e.source() == ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG) break;
                check(i < 100, "the group's value described");
                Thread.sleep(100);
            }
            try {
                admin.incrementalAlterConfigs(Map.of(cluster, List.of(new AlterConfigOp(
                    new ConfigEntry("sasl.kerberos.min.time.before.relogin", "30000"), AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all().get();
                check(false, "a per-broker config was accepted at the cluster default");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof InvalidRequestException, "InvalidRequestException: " + e.getCause());
            }
            Config cdefault = admin.describeConfigs(List.of(cluster)).all().get().get(cluster);
            check("1".equals(cdefault.get("min.insync.replicas").value()), "cluster-level min.insync.replicas");
        }
        System.out.println("OK");
    }
}
'''


def test_java_admin_group_configs(kafka_broker, tmp_path):
    """The Java Admin (kafka-clients 4.x): GROUP resources, Kafka's exception for a bound, the
    cluster default's update mode and min.insync.replicas."""
    javac, java = require_tool("javac"), require_tool("java")
    # kafka-clients 4.2 (ConfigResource.Type.GROUP) from the oracle's jars, which make test installs.
    jars = Path(__file__).resolve().parents[1] / "kafka" / "target" / "libs"
    if not any(jars.glob("kafka-clients-4.*.jar")):
        jars = Path(require_java_jars())
        if not any(jars.glob("kafka-clients-4.*.jar")):
            pytest.skip("no kafka-clients 4.x jar (python tests/kafka/kafka_runner.py install)")
    source = tmp_path / "GroupConfigs.java"
    source.write_text(JAVA_GROUP_CONFIGS)
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(tmp_path), str(source)], check=True, timeout=120)
    proc = subprocess.run([java, "-cp", f"{tmp_path}:{jars}/*", "GroupConfigs", kafka_broker.bootstrap,
                           f"java-group-{uuid.uuid4().hex[:8]}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"
