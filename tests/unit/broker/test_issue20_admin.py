"""UnregisterBroker, AddRaftVoter, RemoveRaftVoter, ListConfigResources and WriteTxnMarkers on a
FakeBroker.  The expected answers (codes and messages) are the ones Apache Kafka 4.2.2 gave to the
same requests, on a one-node combined broker/controller with a static quorum (kraft.version 0)."""

from __future__ import annotations

import types
import uuid

import pytest

from minikafka.broker.handlers import config_resources as lcr
from minikafka.broker.handlers import kraft_membership as km
from minikafka.broker.handlers import write_txn_markers as wtm
from minikafka.broker.security import authorizer as az
from minikafka.broker.txn import apis as txn_apis
from minikafka.protocol.records import build_batch

from broker_fakes import Ctx, FakeBroker

DIR = uuid.UUID("11111111-2222-3333-4444-555555555555")


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("t", 2)
    yield b
    b.logs.close()


def ctx(broker, api_key, version, principal="User:alice"):
    c = Ctx(broker, api_key, version)
    c.connection = types.SimpleNamespace(principal=principal)
    return c


def with_authorizer(broker):
    broker.config.set("authorizer.class.name", "StandardAuthorizer")
    broker.config.set("super.users", "User:admin")
    broker.security = types.SimpleNamespace(authorizer=az.build(broker))


# -- UnregisterBroker ------------------------------------------------------------------------

async def test_unregister_broker(broker):
    ok = await km.unregister_broker(ctx(broker, 64, 0), {"broker_id": broker.config.node_id})
    assert ok == {"throttle_time_ms": 0, "error_code": 0, "error_message": ""}
    for other in (7, -1):
        got = await km.unregister_broker(ctx(broker, 64, 0), {"broker_id": other})
        assert got["error_code"] == 102 and got["error_message"] == f"Broker ID {other} is not currently registered"
    # Kafka 4.2: this node stays unregistered until it restarts, so a second request is refused.
    again = await km.unregister_broker(ctx(broker, 64, 0), {"broker_id": broker.config.node_id})
    assert (again["error_code"], again["error_message"]) == (102, "Broker ID 1 is not currently registered")
    broker.unregistered = False  # as after a restart
    with_authorizer(broker)
    assert (await km.unregister_broker(ctx(broker, 64, 0), {"broker_id": 1}))["error_code"] == 31
    assert (await km.unregister_broker(ctx(broker, 64, 0, "User:admin"), {"broker_id": 1}))["error_code"] == 0


# -- Raft voters -----------------------------------------------------------------------------

def add_body(**kw):
    body = {"cluster_id": None, "timeout_ms": 2000, "voter_id": 2, "voter_directory_id": DIR,
            "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}], "ack_when_committed": True}
    body.update(kw)
    return body


async def test_add_raft_voter_on_a_static_quorum(broker):
    cid = broker.controller.cluster_id
    for version in (0, 1):
        got = await km.add_raft_voter(ctx(broker, 80, version), add_body(cluster_id=cid))
        assert got == {"throttle_time_ms": 0, "error_code": 35, "error_message":
                       "Cluster doesn't support adding voter because the kraft.version feature is 0"}
    got = await km.add_raft_voter(ctx(broker, 80, 1), add_body(cluster_id="wrong", voter_directory_id=uuid.UUID(int=0)))
    assert (got["error_code"], got["error_message"]) == (
        104, f'The given id "wrong" doesn\'t match the cluster id "{cid}"')
    for bad in ({"voter_directory_id": uuid.UUID(int=0)}, {"voter_id": -1}):
        got = await km.add_raft_voter(ctx(broker, 80, 1), add_body(**bad))
        assert (got["error_code"], got["error_message"]) == (42, "Add voter request didn't include a valid voter")
    got = await km.add_raft_voter(ctx(broker, 80, 1), add_body(listeners=[]))
    assert got["error_message"] == ("Add voter request didn't include the endpoint (Endpoints(endpoints={})) "
                                    "for the default listener ListenerName(CONTROLLER)")
    # Kafka prints its HashMap of endpoints: X before PLAINTEXT, whatever the request's order
    got = await km.add_raft_voter(ctx(broker, 80, 1), add_body(listeners=[
        {"name": "PLAINTEXT", "host": "localhost", "port": 9092}, {"name": "X", "host": "10.0.0.1", "port": 1}]))
    assert got["error_message"] == (
        "Add voter request didn't include the endpoint (Endpoints(endpoints={ListenerName(X)=10.0.0.1/<unresolved>:1, "
        "ListenerName(PLAINTEXT)=localhost/<unresolved>:9092})) for the default listener ListenerName(CONTROLLER)")


async def test_remove_raft_voter_on_a_static_quorum(broker):
    body = {"cluster_id": None, "voter_id": 1, "voter_directory_id": DIR}
    got = await km.remove_raft_voter(ctx(broker, 81, 0), body)
    assert (got["error_code"], got["error_message"]) == (
        35, "Cluster doesn't support removing voter because the kraft.version feature is 0")
    got = await km.remove_raft_voter(ctx(broker, 81, 0), dict(body, voter_directory_id=uuid.UUID(int=0)))
    assert (got["error_code"], got["error_message"]) == (42, "Remove voter request didn't include a valid voter")
    assert (await km.remove_raft_voter(ctx(broker, 81, 0), dict(body, cluster_id="x")))["error_code"] == 104
    with_authorizer(broker)
    assert (await km.remove_raft_voter(ctx(broker, 81, 0), body))["error_code"] == 31


def test_java_string_hash_and_hashmap_order():
    assert km._java_string_hash("") == 0
    assert km._java_string_hash("X") == 88
    assert km._java_string_hash("PLAINTEXT") == 464861655  # "PLAINTEXT".hashCode() in Java
    assert km._java_string_hash("ünï€𝄞") == 0xFFFFFFFF & -1256870983  # UTF-16 code units, surrogates too
    # the orders Kafka 4.2 printed for these requests' listeners
    assert km._java_hashmap_order(["PLAINTEXT", "X"]) == ["X", "PLAINTEXT"]
    assert km._java_hashmap_order(["X", "PLAINTEXT"]) == ["X", "PLAINTEXT"]
    assert km._java_hashmap_order(["PLAINTEXT", "Y", "X"]) == ["X", "Y", "PLAINTEXT"]
    assert km._java_hashmap_order(["A", "B", "C", "D", "E", "PLAINTEXT"])[:3] == ["A", "B", "PLAINTEXT"]


# -- ListConfigResources ---------------------------------------------------------------------

async def test_list_config_resources(broker):
    broker.controller.create_topic("a", 1)
    call = lambda v, body: lcr.list_config_resources(ctx(broker, 74, v), body)  # noqa: E731
    pairs = lambda r: [(x["resource_name"], x["resource_type"]) for x in r["config_resources"]]  # noqa: E731
    assert await call(0, {}) == {"throttle_time_ms": 0, "error_code": 0, "config_resources": []}
    assert pairs(await call(1, {"resource_types": []})) == [("1", 8), ("1", 4), ("a", 2), ("t", 2)]
    assert pairs(await call(1, {"resource_types": [2]})) == [("a", 2), ("t", 2)]
    assert pairs(await call(1, {"resource_types": [16, 32]})) == []
    broker.controller.set_resource_configs(32, "g1", {"consumer.heartbeat.interval.ms": "6000"})
    assert pairs(await call(1, {"resource_types": []}))[:2] == [("g1", 32), ("1", 8)]  # groups with configs first
    for unknown in ([99], [4, 0], [1], [3]):
        assert await call(1, {"resource_types": unknown}) == {
            "throttle_time_ms": 0, "error_code": 35, "config_resources": []}
    assert (await call(0, {"resource_types": [2]}))["error_code"] == 35  # v0 knows client metrics only
    with_authorizer(broker)
    assert (await call(1, {}))["error_code"] == 31


# -- WriteTxnMarkers -------------------------------------------------------------------------

def marker(pid, epoch, commit, topics, cepoch=0):
    return {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
            "topics": [{"name": n, "partition_indexes": p} for n, p in topics], "coordinator_epoch": cepoch}


def codes(reply):
    return [[(t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]]) for t in m["topics"]]
            for m in reply["markers"]]


@pytest.fixture
async def txn_broker(broker):
    import asyncio

    broker.loop = asyncio.get_running_loop()
    broker.txn_coordinator = txn_apis.TxnService(broker)
    return broker


async def test_write_txn_markers_errors_as_kafka(txn_broker):
    b = txn_broker
    call = lambda *markers, v=1: wtm.write_txn_markers(ctx(b, 27, v), {"markers": list(markers)})  # noqa: E731
    assert await call() == {"markers": []}
    assert codes(await call(marker(1000, 3, True, [("t", [0, 1, 7]), ("nope", [0])]))) == [
        [("t", [(0, 0), (1, 0), (7, 3)]), ("nope", [(0, 3)])]]
    assert codes(await call(marker(1000, 3, False, [("t", [0])], cepoch=5))) == [[("t", [(0, 0)])]]
    assert codes(await call(marker(1000, 3, False, [("t", [0])], cepoch=2))) == [[("t", [(0, 52)])]]
    assert codes(await call(marker(1000, 2, False, [("t", [0])], cepoch=5))) == [[("t", [(0, 47)])]]
    assert codes(await call(marker(1000, 2, False, [("t", [0])], cepoch=2))) == [[("t", [(0, 47)])]]  # epoch first
    assert codes(await call(marker(1000, 4, True, [("t", [0])], cepoch=5), marker(1001, 0, True, [("t", [1])]))) == [
        [("t", [(0, 0)])], [("t", [(1, 0)])]]
    reply = await call({**marker(1000, 4, True, [("t", [0])], cepoch=5), "transaction_version": 2}, v=2)
    assert codes(reply) == [[("t", [(0, 0)])]]
    # one marker per NONE answer is in the log: 4 on t-0, 2 on t-1
    assert b.controller.log("t", 0).log_end_offset == 4
    assert b.controller.log("t", 1).log_end_offset == 2


async def test_write_txn_markers_ends_a_hanging_transaction(txn_broker):
    b = txn_broker
    plog = b.controller.log("t", 0)
    plog.append(build_batch([(b"k", b"v", [], 1000)], producer_id=77, producer_epoch=0, base_sequence=0, transactional=True))
    assert plog.last_stable_offset == 0  # the open transaction holds read_committed consumers back
    reply = await wtm.write_txn_markers(ctx(b, 27, 1), {"markers": [marker(77, 0, False, [("t", [0])])]})
    assert codes(reply) == [[("t", [(0, 0)])]]
    assert plog.last_stable_offset == plog.log_end_offset == 2
    assert plog.aborted_transactions(0, 2) == [(77, 0)]


async def test_write_txn_markers_needs_cluster_action_or_alter(txn_broker):
    b = txn_broker
    with_authorizer(b)
    body = {"markers": [marker(1, 0, True, [("t", [0, 1])])]}
    assert codes(await wtm.write_txn_markers(ctx(b, 27, 1), body)) == [[("t", [(0, 31), (1, 31)])]]
    for op in (az.CLUSTER_ACTION, az.ALTER):
        b.controller.security.add_acl(f"acl-{op}", {
            "resource_type": az.CLUSTER, "resource_name": az.CLUSTER_NAME, "pattern_type": az.LITERAL,
            "principal": f"User:op{op}", "host": "*", "operation": op, "permission_type": az.ALLOW})
        assert codes(await wtm.write_txn_markers(ctx(b, 27, 1, f"User:op{op}"), body)) == [[("t", [(0, 0), (1, 0)])]]


async def test_voters_on_a_standalone_quorum(broker):
    """kraft.version 1: the answers of a quorum formatted with --standalone (Kafka 4.2.2's)."""
    import socket

    from minikafka.broker.handlers.admin_quorum import _directory_id
    from minikafka.broker.security.tokens import kafka_uuid_string

    broker.controller.finalized_features["kraft.version"] = 1
    ours = f"ReplicaKey(id=1, directoryId={kafka_uuid_string(_directory_id(broker).bytes)})"
    again = await km.add_raft_voter(ctx(broker, 80, 1), add_body(voter_id=1, voter_directory_id=_directory_id(broker)))
    assert (again["error_code"], again["error_message"]) == (
        126, f"The voter id for {ours} is already part of the set of voters [{ours}].")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    unreachable = await km.add_raft_voter(ctx(broker, 80, 1), add_body(
        listeners=[{"name": "CONTROLLER", "host": "127.0.0.1", "port": closed}]))
    assert (unreachable["error_code"], unreachable["error_message"]) == (
        7, "Aborted add voter operation for since API_VERSIONS returned an error BROKER_NOT_AVAILABLE")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        reachable = await km.add_raft_voter(ctx(broker, 80, 1), add_body(
            listeners=[{"name": "CONTROLLER", "host": "127.0.0.1", "port": s.getsockname()[1]}]))
    assert (reachable["error_code"], reachable["error_message"]) == (
        7, "Aborted add voter operation for ReplicaKey(id=2, directoryId=ERERESIiMzNERFVVVVVVVQ) since it is lagging behind")
    for voter_id in (1, 2):  # Kafka refuses to remove the only voter the same way as a stranger
        gone = await km.remove_raft_voter(ctx(broker, 81, 0), {"cluster_id": None, "voter_id": voter_id,
                                                               "voter_directory_id": DIR})
        assert (gone["error_code"], gone["error_message"]) == (
            127, f"Cannot remove voter ReplicaKey(id={voter_id}, directoryId=ERERESIiMzNERFVVVVVVVQ) "
                 f"from the set of voters [{ours}]")


async def test_transaction_version_2_markers_need_a_bumped_epoch(txn_broker):
    """Kafka 4.2.2: a TV2 marker at the open transaction's own epoch is INVALID_PRODUCER_EPOCH;
    a TV1 marker (or none open) at the same epoch is written."""
    b = txn_broker
    plog = b.controller.log("t", 0)
    plog.append(build_batch([(b"k", b"v", [], 1000)], producer_id=88, producer_epoch=3, base_sequence=0,
                            transactional=True))

    def tv(version, epoch):
        return {**marker(88, epoch, False, [("t", [0])]), "transaction_version": version}

    assert codes(await wtm.write_txn_markers(ctx(b, 27, 2), {"markers": [tv(2, 3)]})) == [[("t", [(0, 47)])]]
    assert plog.last_stable_offset == 0
    assert codes(await wtm.write_txn_markers(ctx(b, 27, 2), {"markers": [tv(2, 4)]})) == [[("t", [(0, 0)])]]
    assert plog.last_stable_offset == plog.log_end_offset
    # nothing open any more: the same epoch is fine, as on Kafka
    assert codes(await wtm.write_txn_markers(ctx(b, 27, 2), {"markers": [tv(2, 4)]})) == [[("t", [(0, 0)])]]
