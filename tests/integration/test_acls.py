"""ACLs with StandardAuthorizer semantics, driven by real clients over SASL_PLAINTEXT (PLAIN).

One broker for the module: ``authorizer.class.name`` set, ``super.users=User:admin``, no
``allow.everyone.if.no.acl.found``.  ACLs are created with kafka-python's admin client
(CreateAcls), checked with DescribeAcls, survive a restart (metadata log), and deny produce,
consume with a group, idempotent and transactional producer ids, admin operations and topic
visibility, each with Kafka's error (the clients raise their authorization exceptions).
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from clienttools import ROOT, require_java_jars, require_tool
from conftest import BrokerProcess, RawClient

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "a broker of its own with StandardAuthorizer, SASL listeners and minikafka's users; ACL "
        "answers are compared with Kafka in tests/conformance"))]

LISTENER_LINE = re.compile(r"listener (\S+) \((\S+)\) on 127\.0\.0\.1:(\d+)")
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "mallory": "mallory-pw",
         "carol": "carol-pw"}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acl-broker")
    jaas = "x required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    args = []
    for name, value in settings.items():
        args += ["--override", f"{name}={value}"]
    handle = BrokerProcess(tmp, {}, extra_args=tuple(args))
    _read_ports(handle)
    admin = _admin(handle)
    try:
        admin.create_topics([_new_topic("app-orders"), _new_topic("app-audit"), _new_topic("secret")])
        _create(admin, [
            ("alice", "TOPIC", "app-", "PREFIXED", "WRITE", "ALLOW"),
            ("alice", "TOPIC", "app-", "PREFIXED", "READ", "ALLOW"),
            ("alice", "TOPIC", "app-audit", "LITERAL", "WRITE", "DENY"),  # deny wins
            ("alice", "GROUP", "alice-", "PREFIXED", "READ", "ALLOW"),
            ("alice", "TRANSACTIONAL_ID", "alice-tx", "LITERAL", "WRITE", "ALLOW"),
            ("bob", "TOPIC", "app-orders", "LITERAL", "READ", "ALLOW"),
        ])
    finally:
        admin.close()
    yield handle
    handle.stop()


def _read_ports(handle):
    deadline = time.monotonic() + 5
    ports = {}
    while len(ports) < 2 and time.monotonic() < deadline:
        ports = {m[0]: int(m[2]) for m in LISTENER_LINE.findall(handle.read_log())}
        time.sleep(0.02)
    assert len(ports) == 2, handle.read_log()
    handle.ports = ports


def _security(user):
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username=user,
                sasl_plain_password=USERS[user])


def _bootstrap(broker):
    return f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"


def _admin(broker, user="admin"):
    from kafka.admin import KafkaAdminClient

    # Log lines of a restarted broker repeat; the last listener line is the current port.
    ports = {m[0]: int(m[2]) for m in LISTENER_LINE.findall(broker.read_log())}
    broker.ports = ports
    return KafkaAdminClient(bootstrap_servers=_bootstrap(broker), **_security(user))


def _new_topic(name):
    from kafka.admin import NewTopic

    return NewTopic(name, 1, 1)


def _create(admin, specs):
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourceType)

    acls = [ACL(f"User:{user}", "*", ACLOperation[op], ACLPermissionType[perm],
                ResourcePattern(ResourceType[rtype], name, ACLResourcePatternType[pattern]))
            for user, rtype, name, pattern, op, perm in specs]
    result = admin.create_acls(acls)
    assert not result["failed"], result


def _produce(broker, user, topic, **extra):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=_bootstrap(broker), max_block_ms=5000,
                             request_timeout_ms=5000, **_security(user), **extra)
    try:
        return producer.send(topic, b"x").get(timeout=10)
    finally:
        producer.close(timeout=2)


def test_describe_acls_lists_the_bindings(acl_broker):
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePatternFilter, ResourceType)

    admin = _admin(acl_broker)
    try:
        acls, error = admin.describe_acls(ACLFilter(
            principal="User:alice", host=None, operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)))
        assert len(acls) == 5
        denies = [a for a in acls if a.permission_type == ACLPermissionType.DENY]
        assert [(d.resource_pattern.resource_name, d.operation) for d in denies] == [("app-audit", ACLOperation.WRITE)]
    finally:
        admin.close()


def test_produce_allowed_by_prefix_and_denied_by_deny_or_missing_acl(acl_broker):
    from kafka.errors import TopicAuthorizationFailedError

    assert _produce(acl_broker, "alice", "app-orders").offset >= 0  # idempotent by default: KIP-679
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(acl_broker, "alice", "app-audit")  # the DENY wins over the prefixed ALLOW
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(acl_broker, "alice", "secret")


def test_idempotent_producer_id_needs_write_somewhere(acl_broker):
    with RawClient(acl_broker.ports["PLAINTEXT"]) as raw:  # User:ANONYMOUS has no ACL at all
        reply = raw.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                    "producer_id": -1, "producer_epoch": -1})
        assert reply["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED


def test_transactional_id_needs_write(acl_broker):
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError

    producer = KafkaProducer(bootstrap_servers=_bootstrap(acl_broker), transactional_id="bob-tx",
                             max_block_ms=5000, **_security("bob"))
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
    finally:
        producer.close(timeout=2)


def test_consume_with_group_needs_read_on_group_and_topic(acl_broker):
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    _produce(acl_broker, "alice", "app-orders")
    consumer = KafkaConsumer("app-orders", bootstrap_servers=_bootstrap(acl_broker), group_id="alice-g1",
                             auto_offset_reset="earliest", consumer_timeout_ms=8000, **_security("alice"))
    try:
        assert next(iter(consumer)).value == b"x"
        consumer.commit()
    finally:
        consumer.close()
    consumer = KafkaConsumer("app-orders", bootstrap_servers=_bootstrap(acl_broker), group_id="bob-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=5000, **_security("bob"))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            next(iter(consumer))
    finally:
        consumer.close()


def test_metadata_shows_only_describable_topics(acl_broker):
    admin = _admin(acl_broker, "alice")
    try:
        visible = set(admin.list_topics())
    finally:
        admin.close()
    assert visible == {"app-orders", "app-audit"}  # DESCRIBE implied by READ/WRITE; not "secret"
    admin = _admin(acl_broker, "bob")
    try:
        assert set(admin.list_topics()) == {"app-orders"}
    finally:
        admin.close()
    with RawClient(acl_broker.ports["PLAINTEXT"]) as raw:
        reply = raw.request(3, 8, {"topics": [{"name": "secret"}, {"name": "auto-nope"}],
                                   "allow_auto_topic_creation": True,
                                   "include_cluster_authorized_operations": True,
                                   "include_topic_authorized_operations": True})
        assert [t["error_code"] for t in reply["topics"]] == [29, 29]
        assert reply["cluster_authorized_operations"] == 0
    admin = _admin(acl_broker)
    try:
        assert "auto-nope" not in admin.list_topics()  # no CREATE: not auto-created
    finally:
        admin.close()


def test_admin_operations_need_create_and_delete(acl_broker):
    from kafka.errors import TopicAuthorizationFailedError

    admin = _admin(acl_broker, "alice")
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics([_new_topic("app-new")])
        with pytest.raises(TopicAuthorizationFailedError):
            admin.delete_topics(["app-orders"])
    finally:
        admin.close()
    with RawClient(acl_broker.ports["PLAINTEXT"]) as raw:
        reply = raw.request(30, 1, {"creations": [{
            "resource_type": 2, "resource_name": "x", "resource_pattern_type": 3, "principal": "User:a",
            "host": "*", "operation": 3, "permission_type": 3}]})
        assert reply["results"][0]["error_code"] == 31  # CreateAcls needs ALTER on the cluster
        offsets = raw.request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "app-orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                   "timestamp": -1}]}]})
        assert offsets["topics"][0]["partitions"][0]["error_code"] == 29  # ListOffsets: DESCRIBE
        epochs = raw.request(23, 3, {"replica_id": -1, "topics": [{"topic": "app-orders", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        assert epochs["topics"][0]["partitions"][0]["error_code"] == 29
        assert raw.request(50, 0, {"users": None})["error_code"] == 31  # SCRAM admin: cluster


def test_java_client_sees_authorization_exception(acl_broker, tmp_path):
    javac, java = require_tool("javac"), require_tool("java")
    jars = require_java_jars()
    out = tmp_path / "classes"
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(out),
                    str(ROOT / "tests/integration/java/SecureRoundTrip.java")], check=True, timeout=120)
    props = tmp_path / "mallory.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     'username="mallory" password="mallory-pw";\nenable.idempotence=false\n')
    proc = subprocess.run([java, "-cp", f"{out}:{jars}/*", "SecureRoundTrip", _bootstrap(acl_broker),
                           "app-orders", "1", str(props)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "AUTHORIZATION TopicAuthorizationException" in proc.stdout


def test_acls_survive_a_restart(acl_broker):
    from kafka.errors import TopicAuthorizationFailedError

    acl_broker.restart()
    _read_ports(acl_broker)
    assert _produce(acl_broker, "alice", "app-orders").offset >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(acl_broker, "alice", "app-audit")
    admin = _admin(acl_broker)
    try:
        from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                                 ResourcePatternFilter, ResourceType)

        everything = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                      ACLResourcePatternType.ANY))
        assert len(admin.describe_acls(everything)[0]) == 6
        deleted = admin.delete_acls([ACLFilter(
            principal="User:bob", host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
        assert len(deleted[0][1]) == 1
        assert len(admin.describe_acls(everything)[0]) == 5
    finally:
        admin.close()


def test_configs_and_group_listing_are_authorized(acl_broker):
    from kafka.admin import ConfigResource, ConfigResourceType

    with RawClient(acl_broker.ports["PLAINTEXT"]) as raw:  # User:ANONYMOUS
        reply = raw.request(32, 1, {"resources": [
            {"resource_type": 2, "resource_name": "app-orders", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False})
        assert [r["error_code"] for r in reply["results"]] == [29, 31]
        altered = raw.request(44, 0, {"resources": [{"resource_type": 2, "resource_name": "app-orders", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True})
        assert altered["responses"][0]["error_code"] == 29
        assert raw.request(16, 0, {})["groups"] == []
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("app-orders", bootstrap_servers=_bootstrap(acl_broker), group_id="admin-g",
                             auto_offset_reset="earliest", consumer_timeout_ms=8000, **_security("admin"))
    try:
        next(iter(consumer))
        consumer.commit()
    finally:
        consumer.close()
    admin = _admin(acl_broker)
    try:
        all_groups = admin.list_groups()
    finally:
        admin.close()
    admin = _admin(acl_broker, "alice")
    try:
        # Without DESCRIBE on the cluster alice sees only her groups (READ implies DESCRIBE).
        mine = admin.list_groups()
        described = admin.describe_groups(["alice-g1"], include_authorized_operations=True)
    finally:
        admin.close()
    names = lambda groups: sorted(str(g) for g in groups)  # noqa: E731
    assert "admin-g" in repr(all_groups) and "alice-g1" in repr(all_groups)
    assert "alice-g1" in repr(mine) and "admin-g" not in repr(mine), (names(mine), names(all_groups))
    assert "alice-g1" in repr(described)


def _confluent_security(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": USERS[user]}


def test_confluent_transactions_need_the_transactional_id_and_group_acls(acl_broker):
    """librdkafka's transactional producer as User:carol: InitProducerId is refused without WRITE on
    the transactional id; with it (and WRITE on the topic), sending offsets is refused without READ
    on the group (AddOffsetsToTxn), then without READ on the topic (TxnOffsetCommit); with those,
    produce + offsets commit atomically."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    bootstrap = _bootstrap(acl_broker)
    conf = {"bootstrap.servers": bootstrap, "transactional.id": "carol-tx", "linger.ms": 5,
            "transaction.timeout.ms": 10000, **_confluent_security("carol")}
    for grant in ([], [("carol", "TRANSACTIONAL_ID", "carol-tx", "LITERAL", "DESCRIBE", "ALLOW")]):
        # Nothing: FindCoordinator refuses (DESCRIBE); DESCRIBE only: InitProducerId refuses (WRITE).
        if grant:
            admin = _admin(acl_broker)
            try:
                _create(admin, grant)
            finally:
                admin.close()
        producer = Producer(conf)
        with pytest.raises(KafkaException) as denied:
            producer.init_transactions(10)
        assert denied.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        del producer
    assert "denied User:carol operation 4 on resource type 5 'carol-tx'" in acl_broker.read_log()

    admin = _admin(acl_broker)
    try:
        _create(admin, [("carol", "TRANSACTIONAL_ID", "carol-tx", "LITERAL", "WRITE", "ALLOW"),
                        ("carol", "TOPIC", "app-orders", "LITERAL", "WRITE", "ALLOW")])
    finally:
        admin.close()
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "carol-g", **_confluent_security("carol")})
    producer = Producer(conf)
    try:
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("app-orders", b"aborted")
        offsets = [TopicPartition("app-orders", 0, 1)]
        with pytest.raises(KafkaException) as denied:
            producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 10)
        assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        producer.abort_transaction(10)

        admin = _admin(acl_broker)
        try:
            _create(admin, [("carol", "GROUP", "carol-g", "LITERAL", "READ", "ALLOW")])
        finally:
            admin.close()
        producer.begin_transaction()
        producer.produce("app-orders", b"aborted")
        with pytest.raises(KafkaException) as denied:  # TxnOffsetCommit also needs READ on the topic
            producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 10)
        assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        producer.abort_transaction(10)

        admin = _admin(acl_broker)
        try:
            _create(admin, [("carol", "TOPIC", "app-orders", "LITERAL", "READ", "ALLOW")])
        finally:
            admin.close()
        producer.begin_transaction()
        producer.produce("app-orders", b"committed")
        producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 10)
        producer.commit_transaction(10)
    finally:
        group.close()
    with RawClient(acl_broker.ports["PLAINTEXT"]) as raw:  # User:ANONYMOUS may not see the id
        reply = raw.request(65, 0, {"transactional_ids": ["carol-tx"]})
        assert reply["transaction_states"][0]["error_code"] == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert raw.request(66, 0, {"state_filters": [], "producer_id_filters": []})["transaction_states"] == []
    admin = _admin(acl_broker)
    try:
        committed = admin.list_group_offsets("carol-g")["carol-g"]
    finally:
        admin.close()
    assert {tp.partition: meta.offset for tp, meta in committed.items() if tp.topic == "app-orders"} == {0: 1}


def test_offset_fetch_and_delete_authorize_each_topic(acl_broker):
    """Kafka's OffsetFetch answers TOPIC_AUTHORIZATION_FAILED for the named partitions of topics the
    caller may not DESCRIBE and leaves such topics out of an all-topics fetch; OffsetDelete needs
    READ on each topic.  Offsets are committed by the super user; the raw client is User:ANONYMOUS."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = "anon-g"
    committer = KafkaConsumer(bootstrap_servers=_bootstrap(acl_broker), group_id=group, enable_auto_commit=False,
                              **_security("admin"))
    try:
        committer.assign([TopicPartition("app-orders", 0), TopicPartition("secret", 0)])
        committer.commit({TopicPartition("app-orders", 0): OffsetAndMetadata(3, "", -1),
                          TopicPartition("secret", 0): OffsetAndMetadata(4, "", -1)})
    finally:
        committer.close()
    specs = [("ANONYMOUS", "GROUP", group, "LITERAL", "DESCRIBE", "ALLOW"),
             ("ANONYMOUS", "GROUP", group, "LITERAL", "DELETE", "ALLOW"),
             ("ANONYMOUS", "TOPIC", "app-orders", "LITERAL", "READ", "ALLOW")]  # READ implies DESCRIBE
    admin = _admin(acl_broker)
    try:
        _create(admin, specs)
    finally:
        admin.close()
    try:
        with RawClient(acl_broker.ports["PLAINTEXT"]) as raw:
            named = raw.request(9, 7, {"group_id": group, "require_stable": False, "topics": [
                {"name": "app-orders", "partition_indexes": [0]}, {"name": "secret", "partition_indexes": [0]}]})
            assert named["error_code"] == 0
            assert [(t["name"], p["committed_offset"], p["error_code"]) for t in named["topics"]
                    for p in t["partitions"]] == [("app-orders", 3, 0), ("secret", -1, 29)]
            every = raw.request(9, 7, {"group_id": group, "require_stable": False, "topics": None})
            assert [t["name"] for t in every["topics"]] == ["app-orders"]
            deleted = raw.request(47, 0, {"group_id": group, "topics": [
                {"name": "app-orders", "partitions": [{"partition_index": 0}]},
                {"name": "secret", "partitions": [{"partition_index": 0}]}]})
            assert deleted["error_code"] == 0
            assert [(t["name"], t["partitions"][0]["error_code"]) for t in deleted["topics"]] == \
                [("app-orders", 0), ("secret", 29)]
    finally:
        admin = _admin(acl_broker)
        try:
            from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                                     ResourcePatternFilter, ResourceType)

            admin.delete_acls([ACLFilter("User:ANONYMOUS", "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                         ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
        finally:
            admin.close()
