"""Admin APIs against the real broker with kafka-python, confluent-kafka and aiokafka admin clients:
create/describe/delete topics and configs, create partitions, delete records (consumers then
start at the new log start), describe cluster, and the errors for duplicates, invalid names, a
bad replication factor and unknown configs.  One broker serves the whole module (start-up is the
slow part); every test uses its own topic names."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

try:  # tests/integration as a package or as a rootdir module
    from .conftest import broker_for
except ImportError:
    from conftest import broker_for

TIMEOUT_S = 10


@pytest.fixture(scope="module")
def kafka(request, broker_kind, tmp_path_factory):
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("admin"))
    yield handle
    handle.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eventually(read, ok, timeout: float = TIMEOUT_S):
    """``read()`` until ``ok(result)`` or the timeout; returns the last result.  Apache Kafka answers
    an admin change once its controller committed it and its broker applies it from the metadata log
    a moment later, so a read right after the change may still see the old state (minikafka applies
    it before answering)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = read()
        except Exception:
            if time.monotonic() > deadline:
                raise
            result = None
        else:
            if ok(result) or time.monotonic() > deadline:
                return result
        time.sleep(0.05)


# -- kafka-python ---------------------------------------------------------------------------

@pytest.fixture
def kp_admin(kafka):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, client_id="admin-kp", request_timeout_ms=10000)
    yield admin
    admin.close()


def test_kafka_python_topic_lifecycle(kp_admin):
    from kafka.admin import ConfigResource, ConfigResourceType

    name = unique("kp")
    res = kp_admin.create_topics({name: {"num_partitions": 3, "replication_factor": 1,
                                         "configs": {"retention.ms": "3600000"}}})
    assert res["topics"][0]["error_code"] == 0
    assert name in eventually(kp_admin.list_topics, lambda topics: name in topics)

    configs = eventually(lambda: kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)],
                                                           include_synonyms=True, config_filter="all")["topic"][name],
                         lambda c: "retention.ms" in c)
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

    result = kp_admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                    configs={"segment.ms": "60000"})])
    assert result["topic"][name] == "OK"
    modified = eventually(lambda: kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])["topic"][name],
                          lambda c: c.get("segment.ms", {}).get("value") == "60000")
    assert modified["segment.ms"]["value"] == "60000"
    assert modified["retention.ms"]["value"] == "3600000"

    kp_admin.create_partitions({name: 5})
    meta = eventually(lambda: kp_admin.describe_topics([name]), lambda m: len(m[0]["partitions"]) == 5)
    assert len(meta[0]["partitions"]) == 5

    kp_admin.delete_topics([name])
    assert name not in eventually(kp_admin.list_topics, lambda topics: name not in topics)


def test_kafka_python_errors(kp_admin):
    from kafka.errors import TopicAlreadyExistsError

    name = unique("kperr")
    kp_admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
    res = kp_admin.create_topics({
        "bad name!": {"num_partitions": 1, "replication_factor": 1},
        unique("rf"): {"num_partitions": 1, "replication_factor": 3},
        unique("cfg"): {"num_partitions": 1, "replication_factor": 1, "configs": {"no.such": "1"}},
    }, raise_errors=False)
    codes = sorted((t["error_code"], t["error_message"]) for t in res["topics"])
    assert [c for c, _ in codes] == [17, 38, 40]
    assert "only 1 broker(s) are registered" in codes[1][1]
    assert codes[2][1] == "Unknown topic config name: no.such"
    res = kp_admin.create_partitions({name: 1}, raise_errors=False)
    assert res.results[0].error_code == 37


def test_kafka_python_delete_records_moves_consumers(kafka, kp_admin):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    name = unique("kpdr")
    kp_admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}})
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(10):
        producer.send(name, value=b"v%d" % i, partition=0)
    producer.flush(TIMEOUT_S)
    producer.close()
    tp = TopicPartition(name, 0)
    result = kp_admin.delete_records({tp: 6})
    assert result[tp]["low_watermark"] == 6

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([tp])
    assert consumer.beginning_offsets([tp])[tp] == 6
    records = []
    for record in consumer:
        records.append(record)
        if len(records) == 4:
            break
    consumer.close()
    assert [r.offset for r in records] == [6, 7, 8, 9]
    assert records[0].value == b"v6"


def test_kafka_python_describe_cluster_and_broker_configs(kafka, kp_admin):
    from kafka.admin import ConfigResource, ConfigResourceType

    cluster = kp_admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, kafka.port)]
    assert cluster["cluster_id"]
    broker_configs = kp_admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                               config_filter="all")["broker"]["1"]
    assert broker_configs["message.max.bytes"]["value"] == "1048588"
    assert broker_configs["num.partitions"]["read_only"] is True


# -- confluent-kafka ------------------------------------------------------------------------

@pytest.fixture
def ck_admin(kafka):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka.bootstrap, "client.id": "admin-ck"})


def _ck_code(future):
    from confluent_kafka import KafkaException

    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0].code()
    return 0


def test_confluent_topics_configs_partitions(ck_admin):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                       ResourceType)

    name = unique("ck")
    futures = ck_admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1,
                                               config={"cleanup.policy": "compact"})])
    futures[name].result(timeout=TIMEOUT_S)

    futures = ck_admin.create_topics([NewTopic(name, 1, 1), NewTopic("bad/name", 1, 1), NewTopic(unique("rf"), 1, 2),
                                      NewTopic(unique("cfg"), 1, 1, config={"retention.ms": "soon"})])
    codes = sorted(_ck_code(f) for f in futures.values())
    assert codes == sorted([KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.TOPIC_EXCEPTION,
                            KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_CONFIG])

    resource = ConfigResource(ResourceType.TOPIC, name)

    def describe():
        return ck_admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)

    entries = eventually(describe, lambda e: e["cleanup.policy"].value == "compact")
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert entries["retention.ms"].is_default

    change = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)])
    ck_admin.incremental_alter_configs([change])[change].result(timeout=TIMEOUT_S)
    entries = eventually(describe, lambda e: e["retention.bytes"].value == "1048576")
    assert entries["cleanup.policy"].value == "compact,delete"
    assert entries["retention.bytes"].value == "1048576"

    ck_admin.create_partitions([NewPartitions(name, 4)])[name].result(timeout=TIMEOUT_S)
    metadata = eventually(lambda: ck_admin.list_topics(topic=name, timeout=TIMEOUT_S),
                          lambda m: len(m.topics[name].partitions) == 4)
    assert len(metadata.topics[name].partitions) == 4
    assert _ck_code(ck_admin.create_partitions([NewPartitions(name, 2)])[name]) == KafkaError.INVALID_PARTITIONS

    ck_admin.delete_topics([name])[name].result(timeout=TIMEOUT_S)
    assert _ck_code(ck_admin.delete_topics([name])[name]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_delete_records_and_cluster(kafka, ck_admin):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    name = unique("ckdr")
    ck_admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(5):
        producer.produce(name, value=b"m%d" % i, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    futures = ck_admin.delete_records([TopicPartition(name, 0, -1)])  # -1: up to the high watermark
    deleted = list(futures.values())[0].result(timeout=TIMEOUT_S)
    assert deleted.low_watermark == 5

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT_S)
    consumer.close()
    assert (low, high) == (5, 5)

    cluster = ck_admin.describe_cluster().result(timeout=TIMEOUT_S)
    assert cluster.controller.id == 1
    assert [(n.id, n.port) for n in cluster.nodes] == [(1, kafka.port)]


# -- aiokafka -------------------------------------------------------------------------------

def test_aiokafka_admin(kafka):
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            name = unique("aio")
            resp = await admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "120000"})])
            assert resp.topic_errors[0][1] == 0  # (name, error_code, ...)
            resp = await admin.create_topics([NewTopic(name, 2, 1)])
            assert resp.topic_errors[0][1] == 36

            async def topic_entries(want):
                # Kafka's broker learns a topic (and a change of its configs) from the metadata log a
                # moment after the controller answered; minikafka at once.  Read until it shows.
                deadline = time.monotonic() + TIMEOUT_S
                while True:
                    described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
                    entries = {e[0]: e[1] for e in described[0].resources[0][4]}
                    if entries.get("retention.ms") == want or time.monotonic() > deadline:
                        return entries
                    await asyncio.sleep(0.05)

            entries = await topic_entries("120000")
            assert entries["retention.ms"] == "120000"

            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                      configs={"retention.ms": "240000"})])
            entries = await topic_entries("240000")
            assert entries["retention.ms"] == "240000"

            await admin.create_partitions({name: NewPartitions(3)})
            low = await admin.delete_records({TopicPartition(name, 0): RecordsToDelete(0)})
            assert low == {TopicPartition(name, 0): 0}

            cluster = await admin.describe_cluster()
            assert cluster["controller_id"] == 1

            resp = await admin.delete_topics([name])
            assert resp.topic_error_codes[0][1] == 0
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_confluent_dynamic_broker_config(kafka, ck_admin):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    broker_resource = ConfigResource(ResourceType.BROKER, "1")
    entries = ck_admin.describe_configs([broker_resource])[broker_resource].result(timeout=TIMEOUT_S)
    assert entries["log.retention.ms"].is_read_only is False
    assert entries["num.partitions"].is_read_only is True

    read_only = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "7", incremental_operation=AlterConfigOpType.SET)])
    assert _ck_code(ck_admin.incremental_alter_configs([read_only])[read_only]) == KafkaError.INVALID_REQUEST

    dynamic = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    ck_admin.incremental_alter_configs([dynamic])[dynamic].result(timeout=TIMEOUT_S)

    def broker_entries_once(predicate):
        # Kafka answers the alteration once it is in the metadata log and applies it to the broker a
        # moment later (minikafka at once): read until the change shows, boundedly.
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            entries = ck_admin.describe_configs([broker_resource])[broker_resource].result(timeout=TIMEOUT_S)
            if predicate(entries) or time.monotonic() > deadline:
                return entries
            time.sleep(0.05)

    try:
        entries = broker_entries_once(lambda e: e["log.retention.ms"].value is not None)
        assert entries["log.retention.ms"].value == "7200000"
        assert entries["log.retention.ms"].source == 2  # DYNAMIC_BROKER_CONFIG
        # A new topic's default follows the dynamic broker value.
        name = unique("ckdyn")
        ck_admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=TIMEOUT_S)
        topic_resource = ConfigResource(ResourceType.TOPIC, name)
        topic_entries = eventually(
            lambda: ck_admin.describe_configs([topic_resource])[topic_resource].result(timeout=TIMEOUT_S),
            lambda e: e is not None)
        assert topic_entries["retention.ms"].value == "7200000"
        assert topic_entries["retention.ms"].source == 2
    finally:
        reset = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
        ck_admin.incremental_alter_configs([reset])[reset].result(timeout=TIMEOUT_S)
    entries = broker_entries_once(lambda e: e["log.retention.ms"].value is None)
    assert entries["log.retention.ms"].value is None


@pytest.mark.minikafka_only(reason="restarts the broker process")
def test_dynamic_broker_configs_survive_restart(broker):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    def describe(admin):
        return admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                      include_synonyms=True, config_filter="all")["broker"]["1"]

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                                     configs={"log.segment.bytes": "2097152"})])
        assert result["broker"]["1"] == "OK"
    finally:
        admin.close()
    broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        entry = describe(admin)["log.segment.bytes"]
        assert entry["value"] == "2097152"
        assert entry["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert [s["source"] for s in entry["synonyms"]] == ["DYNAMIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
    finally:
        admin.close()


def test_confluent_describes_every_scram_user_with_an_empty_list_or_none(kafka):
    """librdkafka asks for "all users" with an empty user list; Kafka (ScramImage.describe) treats
    an empty list as null.  An unknown user named explicitly is RESOURCE_NOT_FOUND."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialsDescription, UserScramCredentialUpsertion)

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    user = unique("scram-user")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000)
    assert admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, b"password", b"salt")])[user].result(15) is None
    for args in ([], [None]):
        described = admin.describe_user_scram_credentials(*args).result(15)
        assert isinstance(described[user], UserScramCredentialsDescription)
        assert [(i.mechanism, i.iterations) for i in described[user].scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 10000)]
    nobody = unique("nobody")
    with pytest.raises(KafkaException) as err:
        admin.describe_user_scram_credentials([nobody])[nobody].result(15)
    assert err.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
