"""Crash safety of share-partition state: kill -9 the broker while the share coordinator is being
written to, restart it on the same data dir, and check that every write the broker acknowledged is in
the state it reads back (and nothing that was never sent), across ShareSnapshot/ShareUpdate records
(a snapshot every 3 updates here) and a prune of the log below the last snapshot.  Also, on a broker
of its own, the authorization of the share-state APIs with an authorizer and no ACLs."""

from __future__ import annotations

import base64
import threading
import time
import uuid

import pytest

from conftest import RawClient, start_broker

pytestmark = pytest.mark.minikafka_only(reason="kills the broker process (kill -9) while it writes share state")

OVERRIDES = dict(share_coordinator_state_topic_num_partitions=3,
                 share_coordinator_snapshot_update_records_per_snapshot=3,
                 share_coordinator_state_topic_prune_interval_ms=200)
WAIT_S = 30
ACKED, ARCHIVED, AVAILABLE = 2, 4, 0


def wait_for(call, ok, what: str):
    deadline = time.monotonic() + WAIT_S
    while True:
        out = call()
        if ok(out):
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {out}")
        time.sleep(0.1)


def partition_errors(out: dict) -> list[int]:
    return [p["error_code"] for r in out["results"] for p in r["partitions"]]


def setup_state(port: int, group: str) -> uuid.UUID:
    with RawClient(port) as c:
        out = c.request(19, 7, {"topics": [{"name": "crash", "num_partitions": 1, "replication_factor": 1,
                                            "assignments": [], "configs": []}], "timeout_ms": 10000})
        topic_id = out["topics"][0]["topic_id"]
        key = f"{group}:{base64.urlsafe_b64encode(topic_id.bytes).rstrip(b'=').decode()}:0"
        wait_for(lambda: c.request(10, 6, {"key_type": 2, "coordinator_keys": [key]}),
                 lambda o: o["coordinators"][0]["error_code"] == 0, "share coordinator")
        out = c.request(83, 0, {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "state_epoch": 1, "start_offset": 0}]}]})
        assert partition_errors(out) == [0]
    return topic_id


def write_body(group, topic_id, i, start=-1):
    return {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
        {"partition": 0, "state_epoch": 1, "leader_epoch": 0, "start_offset": start,
         "delivery_complete_count": -1,
         "state_batches": [{"first_offset": i, "last_offset": i, "delivery_state": ACKED if i % 3 else ARCHIVED,
                            "delivery_count": 1 + i % 2}]}]}]}


def read_state(port: int, group: str, topic_id: uuid.UUID) -> dict:
    with RawClient(port) as c:
        out = wait_for(lambda: c.request(84, 0, {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "leader_epoch": 0}]}]}),
            lambda o: partition_errors(o)[0] not in (14, 15, 16), "read after restart")
    p = out["results"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return p


def per_offset(batches) -> dict[int, tuple[int, int]]:
    return {o: (b["delivery_state"], b["delivery_count"]) for b in batches
            for o in range(b["first_offset"], b["last_offset"] + 1)}


@pytest.fixture
def broker(tmp_path):
    b = start_broker(tmp_path, **OVERRIDES)
    yield b
    b.kill()


def test_acknowledged_writes_survive_kill_9(broker):
    group = "crash-g"
    topic_id = setup_state(broker.port, group)
    acknowledged, sent = [], []
    stop = threading.Event()

    def writer():
        try:
            with RawClient(broker.port, timeout=5) as c:
                i = 0
                while not stop.is_set():
                    sent.append(i)
                    out = c.request(85, 1, write_body(group, topic_id, i))
                    assert partition_errors(out) == [0]
                    acknowledged.append(i)
                    i += 1
        except (ConnectionError, OSError):
            pass  # the broker is gone

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while len(acknowledged) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.kill()  # SIGKILL in the middle of the writes
    stop.set()
    thread.join(WAIT_S)
    assert len(acknowledged) >= 40
    broker.restart(kill=True)
    state = read_state(broker.port, group, topic_id)
    got = per_offset(state["state_batches"])
    for i in acknowledged:
        assert got.get(i) == (ACKED if i % 3 else ARCHIVED, 1 + i % 2), i
    assert set(got) <= set(sent)  # nothing that was never sent
    assert state["state_epoch"] == 1 and state["start_offset"] == 0


def test_state_survives_restarts_snapshots_pruning_and_deletes(broker):
    group = "restart-g"
    topic_id = setup_state(broker.port, group)
    with RawClient(broker.port) as c:
        for i in range(10):
            assert partition_errors(c.request(85, 1, write_body(group, topic_id, i))) == [0]
        # the start offset moves: batches before it are dropped
        assert partition_errors(c.request(85, 1, write_body(group, topic_id, 10, start=4))) == [0]
    expected = {i: (ACKED if i % 3 else ARCHIVED, 1 + i % 2) for i in range(4, 11)}
    # the log below the last snapshot is pruned (DeleteRecords on __share_group_state)
    from minikafka.broker.share.state.coordinator import coordinator_key
    from minikafka.broker.group.partitioner import partition_for

    state_partition = partition_for(coordinator_key(group, topic_id, 0), 3)
    with RawClient(broker.port) as c:
        def earliest():
            out = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "__share_group_state", "partitions": [
                    {"partition_index": state_partition, "current_leader_epoch": -1, "timestamp": -2}]}]})
            return out["topics"][0]["partitions"][0]["offset"]
        assert wait_for(earliest, lambda o: o > 0, "pruned log start") > 0
    broker.kill()
    broker.restart(kill=True)
    state = read_state(broker.port, group, topic_id)
    assert per_offset(state["state_batches"]) == expected and state["start_offset"] == 4
    broker.stop()
    broker.restart()
    state = read_state(broker.port, group, topic_id)
    assert per_offset(state["state_batches"]) == expected
    with RawClient(broker.port) as c:
        out = c.request(86, 0, {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0}]}]})
        assert partition_errors(out) == [0]
    broker.kill()
    broker.restart(kill=True)
    with RawClient(broker.port) as c:
        out = wait_for(lambda: c.request(84, 0, {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "leader_epoch": 0}]}]}),
            lambda o: partition_errors(o)[0] not in (14, 15, 16), "read after delete and restart")
        assert partition_errors(out) == [42]  # the tombstone held: no state


def test_without_acls_an_authorizer_denies_every_share_state_api(tmp_path):
    """StandardAuthorizer with no ACLs (allow.everyone.if.no.acl.found=false): the share-group-state
    RPCs and FindCoordinator key type 2 need CLUSTER_ACTION, the offsets admin APIs the group."""
    b = start_broker(tmp_path, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    try:
        topic_id = uuid.uuid4()
        with RawClient(b.port) as c:
            key = f"g:{base64.urlsafe_b64encode(topic_id.bytes).rstrip(b'=').decode()}:0"
            out = c.request(10, 6, {"key_type": 2, "coordinator_keys": [key]})
            assert out["coordinators"][0]["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED
            body = {"group_id": "g", "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "leader_epoch": 0, "state_epoch": 0, "start_offset": 0}]}]}
            for api in (83, 84, 86, 87):
                out = c.request(api, 0, body)
                p = out["results"][0]["partitions"][0]
                assert (p["error_code"], p["error_message"]) == (31, "Cluster authorization failed."), api
            out = c.request(90, 1, {"groups": [{"group_id": "g", "topics": None}]})
            assert out["groups"][0]["error_code"] == 30  # GROUP_AUTHORIZATION_FAILED
            assert c.request(91, 0, {"group_id": "g", "topics": []})["error_code"] == 30
            assert c.request(92, 0, {"group_id": "g", "topics": []})["error_code"] == 30
    finally:
        b.stop()
