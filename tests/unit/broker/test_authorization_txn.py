"""Authorization of the transaction APIs, InitProducerId, DescribeCluster, Metadata by topic id and
transactional Produce, as Kafka's KafkaApis does it: handlers on real storage logs with a
StandardAuthorizer over the controller's ACL store, no sockets."""

from __future__ import annotations

import itertools
import types

import pytest

from minikafka.broker.handlers import admin_cluster, init_producer_id, metadata, produce
from minikafka.broker.security import authorizer as az
from minikafka.broker.txn import apis as txn_apis
from minikafka.broker.group import apis as group_apis
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import build_batch

from broker_fakes import Ctx, FakeBroker

_ids = itertools.count()


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path), **{"authorizer.class.name": "StandardAuthorizer", "super.users": "User:admin"})
    b.security = types.SimpleNamespace(authorizer=az.build(b))
    b.controller.create_topic("orders", 2)
    b.controller.create_topic("secret", 1)
    yield b
    b.logs.close()


def allow(broker, principal, resource_type, name, operation, pattern=az.LITERAL, permission=az.ALLOW):
    broker.controller.security.add_acl(f"acl-{next(_ids)}", {
        "resource_type": resource_type, "resource_name": name, "pattern_type": pattern,
        "principal": principal, "host": "*", "operation": operation, "permission_type": permission})


def deny(broker, principal, resource_type, name, operation, pattern=az.LITERAL):
    allow(broker, principal, resource_type, name, operation, pattern, az.DENY)


def ctx(broker, api_key, version, principal="User:alice"):
    c = Ctx(broker, api_key, version)
    c.connection = types.SimpleNamespace(principal=principal)
    return c


def with_txn_coordinator(broker):
    import asyncio

    broker.loop = asyncio.get_running_loop()  # the coordinator's timers (expiry, timeouts) run on it
    broker.txn_coordinator = txn_apis.TxnService(broker)
    return broker.txn_coordinator


# -- InitProducerId ----------------------------------------------------------------------------

async def test_init_producer_id_transactional_needs_write_on_the_transactional_id(broker):
    with_txn_coordinator(broker)
    body = {"transactional_id": "tx-1", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    reply = await init_producer_id.handle_init_producer_id(ctx(broker, 22, 4), dict(body))
    assert reply["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(broker, "User:alice", az.TRANSACTIONAL_ID, "tx-", az.WRITE, az.PREFIXED)
    reply = await init_producer_id.handle_init_producer_id(ctx(broker, 22, 4), dict(body))
    assert reply["error_code"] == 0 and reply["producer_id"] >= 0


@pytest.mark.parametrize("acls,expected", [
    ([], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([(az.CLUSTER, "kafka-cluster", az.LITERAL, az.IDEMPOTENT_WRITE, az.ALLOW)], 0),
    # KIP-679: WRITE on some topic, even one that does not exist yet.
    ([(az.TOPIC, "not-yet", az.LITERAL, az.WRITE, az.ALLOW)], 0),
    ([(az.TOPIC, "app-", az.PREFIXED, az.WRITE, az.ALLOW)], 0),
    ([(az.TOPIC, "*", az.LITERAL, az.WRITE, az.ALLOW)], 0),
    # READ does not count; a DENY on the same literal or on a dominating prefix cancels the ALLOW.
    ([(az.TOPIC, "orders", az.LITERAL, az.READ, az.ALLOW)], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([(az.TOPIC, "app-x", az.LITERAL, az.WRITE, az.ALLOW), (az.TOPIC, "app-x", az.LITERAL, az.WRITE, az.DENY)],
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([(az.TOPIC, "app-x", az.PREFIXED, az.WRITE, az.ALLOW), (az.TOPIC, "app", az.PREFIXED, az.WRITE, az.DENY)],
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([(az.TOPIC, "app-x", az.LITERAL, az.WRITE, az.ALLOW), (az.TOPIC, "*", az.LITERAL, az.ALL, az.DENY)],
     ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ([(az.TOPIC, "app-x", az.LITERAL, az.WRITE, az.ALLOW), (az.TOPIC, "app-y", az.LITERAL, az.WRITE, az.DENY)], 0),
])
async def test_idempotent_init_producer_id_needs_idempotent_write_or_write_on_some_topic(broker, acls, expected):
    for resource_type, name, pattern, operation, permission in acls:
        allow(broker, "User:alice", resource_type, name, operation, pattern, permission)
    body = {"transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1, "producer_epoch": -1}
    reply = await init_producer_id.handle_init_producer_id(ctx(broker, 22, 4), body)
    assert reply["error_code"] == expected


async def test_super_user_and_no_acl_found(tmp_path):
    b = FakeBroker(str(tmp_path), **{"authorizer.class.name": "StandardAuthorizer", "super.users": "User:admin",
                                     "allow.everyone.if.no.acl.found": "true"})
    b.security = types.SimpleNamespace(authorizer=az.build(b))
    body = {"transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1, "producer_epoch": -1}
    assert (await init_producer_id.handle_init_producer_id(ctx(b, 22, 4), dict(body)))["error_code"] == 0
    # ACLs on the cluster and on every topic exist: "no ACL found" no longer applies.
    allow(b, "User:bob", az.CLUSTER, "kafka-cluster", az.IDEMPOTENT_WRITE)
    allow(b, "User:bob", az.TOPIC, "*", az.READ)
    assert (await init_producer_id.handle_init_producer_id(ctx(b, 22, 4), dict(body)))["error_code"] == 31
    assert (await init_producer_id.handle_init_producer_id(ctx(b, 22, 4, "User:admin"), dict(body)))["error_code"] == 0
    b.logs.close()


# -- AddPartitionsToTxn / AddOffsetsToTxn / EndTxn ---------------------------------------------

async def _begin(broker, tid="tx-1"):
    allow(broker, "User:alice", az.TRANSACTIONAL_ID, tid, az.WRITE)
    service = broker.txn_coordinator or with_txn_coordinator(broker)
    reply = await service.init_producer_id(ctx(broker, 22, 4), {
        "transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    assert reply["error_code"] == 0
    return reply["producer_id"], reply["producer_epoch"]


def add_partitions_body(tid, pid, epoch, topics):
    return {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": name, "partitions": parts} for name, parts in topics]}


def partition_errors(reply):
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in reply["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


async def test_add_partitions_to_txn_needs_write_on_transactional_id_then_on_each_topic(broker):
    pid, epoch = await _begin(broker)
    body = add_partitions_body("tx-2", pid, epoch, [("orders", [0, 1])])
    reply = await txn_apis.add_partitions_to_txn(ctx(broker, 24, 3), body)
    assert set(partition_errors(reply).values()) == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}

    body = add_partitions_body("tx-1", pid, epoch, [("orders", [0]), ("secret", [0]), ("missing", [0])])
    allow(broker, "User:alice", az.TOPIC, "orders", az.WRITE)
    allow(broker, "User:alice", az.TOPIC, "missing", az.WRITE)
    reply = await txn_apis.add_partitions_to_txn(ctx(broker, 24, 3), body)
    assert partition_errors(reply) == {("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                                       ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.txn_coordinator.coordinator.describe("tx-1")["topics"] == []

    reply = await txn_apis.add_partitions_to_txn(ctx(broker, 24, 3), add_partitions_body(
        "tx-1", pid, epoch, [("orders", [0, 1])]))
    assert set(partition_errors(reply).values()) == {0}


async def test_add_partitions_never_authorizes_internal_topics(broker):
    pid, epoch = await _begin(broker)
    allow(broker, "User:alice", az.TOPIC, "*", az.ALL)
    reply = await txn_apis.add_partitions_to_txn(ctx(broker, 24, 3), add_partitions_body(
        "tx-1", pid, epoch, [("__transaction_state", [0]), ("orders", [0])]))
    assert partition_errors(reply) == {("__transaction_state", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED}


async def test_add_offsets_to_txn_needs_write_on_transactional_id_then_read_on_group(broker):
    pid, epoch = await _begin(broker)
    body = {"transactional_id": "tx-other", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
    reply = await txn_apis.add_offsets_to_txn(ctx(broker, 25, 3), body)
    assert reply["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    body["transactional_id"] = "tx-1"
    reply = await txn_apis.add_offsets_to_txn(ctx(broker, 25, 3), body)
    assert reply["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    allow(broker, "User:alice", az.GROUP, "g", az.READ)
    reply = await txn_apis.add_offsets_to_txn(ctx(broker, 25, 3), body)
    assert reply["error_code"] == 0


async def test_end_txn_needs_write_on_transactional_id(broker):
    pid, epoch = await _begin(broker)
    allow(broker, "User:alice", az.TOPIC, "orders", az.WRITE)
    reply = await txn_apis.add_partitions_to_txn(ctx(broker, 24, 3), add_partitions_body(
        "tx-1", pid, epoch, [("orders", [0])]))
    assert set(partition_errors(reply).values()) == {0}
    body = {"transactional_id": "tx-1", "producer_id": pid, "producer_epoch": epoch, "committed": True}
    reply = await txn_apis.end_txn(ctx(broker, 26, 3, "User:bob"), dict(body))
    assert reply["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert broker.txn_coordinator.coordinator.describe("tx-1")["transaction_state"] == "Ongoing"
    reply = await txn_apis.end_txn(ctx(broker, 26, 3), dict(body))
    assert reply["error_code"] == 0


# -- TxnOffsetCommit -----------------------------------------------------------------------------

@pytest.fixture
def coordinator_commits(monkeypatch):
    """What reaches the coordinator shard's txn_commit_offsets (every partition accepted)."""
    seen = []

    class RecordingShard:
        def txn_commit_offsets(self, body, version):
            seen.append(body)
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0} for p in t["partitions"]]}
                for t in body["topics"]]}

    monkeypatch.setattr(group_apis, "_check", lambda ctx_, group_id, operation=az.READ: (RecordingShard(), None))
    return seen


async def test_txn_offset_commit_checks_transactional_id_group_and_topics_before_the_group_coordinator(
        broker, coordinator_commits):
    seen = coordinator_commits
    handler = group_apis.txn_offset_commit
    body = {"transactional_id": "tx-1", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 5},
                                                  {"partition_index": 7, "committed_offset": 5}]},
                {"name": "secret", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]}

    def errors(reply):
        return {(t["name"], p["partition_index"]): p["error_code"] for t in reply["topics"] for p in t["partitions"]}

    reply = await handler(ctx(broker, 28, 3), body)
    assert set(errors(reply).values()) == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED} and not seen
    allow(broker, "User:alice", az.TRANSACTIONAL_ID, "tx-1", az.WRITE)
    reply = await handler(ctx(broker, 28, 3), body)
    assert set(errors(reply).values()) == {ErrorCode.GROUP_AUTHORIZATION_FAILED} and not seen
    allow(broker, "User:alice", az.GROUP, "g", az.READ)
    reply = await handler(ctx(broker, 28, 3), body)
    assert set(errors(reply).values()) == {ErrorCode.TOPIC_AUTHORIZATION_FAILED} and not seen
    allow(broker, "User:alice", az.TOPIC, "orders", az.READ)
    reply = await handler(ctx(broker, 28, 3), body)
    assert errors(reply) == {("orders", 0): 0, ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert [t["name"] for t in seen[0]["topics"]] == ["orders"]
    assert [p["partition_index"] for p in seen[0]["topics"][0]["partitions"]] == [0]


# -- DescribeProducers / DescribeTransactions / ListTransactions --------------------------------

async def test_describe_producers_needs_read_per_topic(broker):
    allow(broker, "User:alice", az.TOPIC, "orders", az.READ)
    reply = await txn_apis.describe_producers(ctx(broker, 61, 0), {"topics": [
        {"name": "orders", "partition_indexes": [0, 9]}, {"name": "secret", "partition_indexes": [0]},
        {"name": "missing", "partition_indexes": [0]}]})
    codes = {(t["name"], p["partition_index"]): p["error_code"] for t in reply["topics"] for p in t["partitions"]}
    assert codes == {("orders", 0): 0, ("orders", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     ("missing", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}


async def test_describe_and_list_transactions_need_describe_on_the_transactional_id(broker):
    pid, epoch = await _begin(broker, "tx-1")
    await _begin(broker, "tx-2")
    allow(broker, "User:alice", az.TOPIC, "orders", az.WRITE)
    allow(broker, "User:alice", az.TOPIC, "secret", az.WRITE)
    reply = await txn_apis.add_partitions_to_txn(ctx(broker, 24, 3), add_partitions_body(
        "tx-1", pid, epoch, [("orders", [0]), ("secret", [0])]))
    assert set(partition_errors(reply).values()) == {0}

    reply = await txn_apis.describe_transactions(ctx(broker, 65, 0, "User:bob"), {"transactional_ids": ["tx-1"]})
    assert reply["transaction_states"][0]["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(broker, "User:bob", az.TRANSACTIONAL_ID, "tx-1", az.DESCRIBE)
    allow(broker, "User:bob", az.TOPIC, "orders", az.READ)
    reply = await txn_apis.describe_transactions(ctx(broker, 65, 0, "User:bob"), {"transactional_ids": ["tx-1"]})
    state = reply["transaction_states"][0]
    assert state["error_code"] == 0 and state["transaction_state"] == "Ongoing"
    assert state["topics"] == [{"topic": "orders", "partitions": [0]}]  # "secret" is not describable

    listed = await txn_apis.list_transactions(ctx(broker, 66, 1, "User:bob"), {"state_filters": [],
                                                                              "producer_id_filters": []})
    assert [s["transactional_id"] for s in listed["transaction_states"]] == ["tx-1"]
    listed = await txn_apis.list_transactions(ctx(broker, 66, 1), {"state_filters": [], "producer_id_filters": []})
    assert sorted(s["transactional_id"] for s in listed["transaction_states"]) == ["tx-1", "tx-2"]


# -- DescribeCluster / Metadata -------------------------------------------------------------------

async def test_describe_cluster_is_open_but_operations_need_describe(broker):
    body = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    reply = await admin_cluster.describe_cluster(ctx(broker, 60, 1), dict(body))
    assert reply["error_code"] == 0 and reply["brokers"]
    assert reply["cluster_authorized_operations"] == 0
    allow(broker, "User:alice", az.CLUSTER, "kafka-cluster", az.IDEMPOTENT_WRITE)
    reply = await admin_cluster.describe_cluster(ctx(broker, 60, 1), dict(body))
    assert reply["cluster_authorized_operations"] == 0  # IDEMPOTENT_WRITE alone does not show them
    allow(broker, "User:alice", az.CLUSTER, "kafka-cluster", az.DESCRIBE)
    reply = await admin_cluster.describe_cluster(ctx(broker, 60, 1), dict(body))
    assert reply["cluster_authorized_operations"] == (1 << az.DESCRIBE) | (1 << az.IDEMPOTENT_WRITE)
    reply = await admin_cluster.describe_cluster(ctx(broker, 60, 1, "User:admin"), dict(body))
    assert reply["cluster_authorized_operations"] == admin_cluster.CLUSTER_OPERATIONS


async def test_metadata_by_topic_id_answers_unauthorized_ids_without_their_name(broker):
    orders = broker.controller.topic("orders")
    secret = broker.controller.topic("secret")
    import uuid

    unknown = uuid.uuid4()
    allow(broker, "User:alice", az.TOPIC, "orders", az.READ)
    reply = metadata.build_metadata(broker, 12, {"topics": [
        {"name": None, "topic_id": orders.topic_id}, {"name": None, "topic_id": secret.topic_id},
        {"name": None, "topic_id": unknown}], "include_topic_authorized_operations": False},
        ctx=ctx(broker, 3, 12))
    got = [(t["error_code"], t["name"], t["topic_id"]) for t in reply["topics"]]
    assert got == [(0, "orders", orders.topic_id), (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, secret.topic_id),
                   (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)]
    assert reply["topics"][1]["partitions"] == []


# -- Produce --------------------------------------------------------------------------------------

def _produce_body(transactional_id, transactional: bool):
    records = build_batch([(b"k", b"v", [], 1000)], producer_id=7, producer_epoch=0, base_sequence=0,
                          transactional=transactional)
    return {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": records}]}]}


@pytest.mark.parametrize("transactional_id,transactional,expected", [
    ("tx-1", True, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (None, True, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),  # transactional records, no id
    ("tx-1", False, None),  # an id without transactional records is not checked
])
async def test_transactional_produce_needs_write_on_the_transactional_id(broker, transactional_id, transactional,
                                                                          expected):
    allow(broker, "User:alice", az.TOPIC, "orders", az.WRITE)
    body = _produce_body(transactional_id, transactional)
    denied = produce.authorize_produce(ctx(broker, 0, 9), body)
    if expected is None:
        assert denied == [] and len(body["topic_data"]) == 1
    else:
        assert [p["error_code"] for t in denied for p in t["partition_responses"]] == [expected]
        assert body["topic_data"] == []


async def test_transactional_produce_allowed_with_write_on_the_transactional_id(broker):
    allow(broker, "User:alice", az.TOPIC, "orders", az.WRITE)
    allow(broker, "User:alice", az.TRANSACTIONAL_ID, "tx-1", az.WRITE)
    body = _produce_body("tx-1", True)
    assert produce.authorize_produce(ctx(broker, 0, 9), body) == []
    assert len(body["topic_data"]) == 1


async def test_txn_offset_commit_without_an_authorizer_only_refuses_unknown_partitions(tmp_path, coordinator_commits):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("orders", 1)
    seen = coordinator_commits
    reply = await group_apis.txn_offset_commit(Ctx(b, 28, 3), {
        "transactional_id": "tx", "group_id": "g", "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0}, {"partition_index": 1}]},
            {"name": "missing", "partitions": [{"partition_index": 0}]}]})
    assert [[p["error_code"] for p in t["partitions"]] for t in reply["topics"]] == [
        [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    assert seen[0]["topics"] == [{"name": "orders", "partitions": [{"partition_index": 0}]}]
    b.logs.close()
