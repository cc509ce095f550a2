"""Issue 20: the versions Kafka 4.2 serves above Kafka 4.0's (ListOffsets 11 sentinels,
FindCoordinator 5-6 share keys, ListTransactions 2 patterns, Produce 13 and OffsetCommit /
OffsetFetch 10 by topic id)."""

from __future__ import annotations

import uuid

from ..engine import scenario
from .common import batch, create_topic, find_coordinator, ok, produce

UNKNOWN_ID = uuid.UUID(int=4242)
ZERO_ID = uuid.UUID(int=0)


@scenario
def list_offsets_sentinels(ctx):
    """Each negative timestamp from the version that introduced it; UNSUPPORTED_VERSION before."""
    topic = ctx.name("sent")
    create_topic(ctx, topic)
    produce(ctx, topic, 0, batch(b"a", b"b"))
    for v in ctx.versions(2):
        for ts in (-1, -2, -3, -4, -5, -6, -7, -100):
            ctx.call(2, v, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000,
                            "topics": [{"name": topic, "partitions": [
                                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts,
                                 "max_num_offsets": 1}]}]}, label=f"timestamp {ts}")


@scenario
def find_coordinator_key_types(ctx):
    group = ctx.name("g")
    find_coordinator(ctx, group)
    find_coordinator(ctx, ctx.name("tx"), key_type=1)
    share_key = f"{group}:AAAAAAAAAAAAAAAAAAAAAA:0"
    # The first share key creates __share_group_state (COORDINATOR_NOT_AVAILABLE until it is there,
    # Kafka for a while after): wait for it, so that the answers below do not depend on timing or on
    # which scenario got there first (issue 21).
    ctx.setup(10, 6, {"key_type": 2, "coordinator_keys": [share_key]}, retries=80,
              expect=lambda o: ok(o) and o["coordinators"][0]["error_code"] == 0)
    for v in ctx.versions(10, lo=4):
        for key_type, key, label in ((0, group, "group"), (1, ctx.name("tx"), "transaction"),
                                     (2, share_key, "share key"), (2, "no-colons", "malformed share key"),
                                     (2, f"{group}:notauuid:0", "share key with a bad topic id"),
                                     (2, f"{group}:AAAAAAAAAAAAAAAAAAAAAA:-1", "share key, negative partition")):
            ctx.call(10, v, {"key_type": key_type, "coordinator_keys": [key]}, label=label)


@scenario
def list_transactions_pattern(ctx):
    prefix = ctx.name("lt")
    ids = [f"{prefix}-abc-1", f"{prefix}-abd-2", f"{prefix}-xyz"]
    find_coordinator(ctx, ids[0], key_type=1)
    for tid in ids:
        find_coordinator(ctx, tid, key_type=1)
        ctx.setup(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1,
                          "producer_epoch": -1}, retries=60, expect=lambda o: ok(o) and o["error_code"] == 0)

    def mine(body):
        return {**body, "transaction_states": sorted(
            (s for s in body.get("transaction_states") or [] if s["transactional_id"].startswith(prefix)),
            key=lambda s: s["transactional_id"])}

    for v in ctx.versions(66, lo=2):
        for pattern in (None, "", f"{prefix}-abc.*", "ab", f".*-ab[cd]-\\d", f"{prefix}-xyz|{prefix}-abc-1", "["):
            ctx.call(66, v, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                             "transactional_id_pattern": pattern}, label=f"pattern {pattern!r}", scoped=mine)


@scenario
def produce_by_topic_id(ctx):
    topic = ctx.name("pid")
    topic_id = create_topic(ctx, topic, partitions=2)
    for v in ctx.versions(0, lo=13):
        for tid, label in ((topic_id, "known id"), (UNKNOWN_ID, "unknown id"), (ZERO_ID, "zero id")):
            ctx.call(0, v, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
                {"name": "", "topic_id": tid, "partition_data": [{"index": 0, "records": batch(b"a")},
                                                                 {"index": 5, "records": batch(b"b")}]}]},
                     label=label)


@scenario
def offsets_by_topic_id(ctx):
    topic = ctx.name("oid")
    topic_id = create_topic(ctx, topic)
    for v in ctx.versions(8, lo=10):
        group = ctx.name(f"g{v}")
        find_coordinator(ctx, group)
        for tid, label in ((topic_id, "known id"), (UNKNOWN_ID, "unknown id"), (ZERO_ID, "zero id")):
            ctx.call(8, v, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                            "group_instance_id": None, "topics": [{"name": "", "topic_id": tid, "partitions": [
                                {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                                 "committed_metadata": "m"},
                                {"partition_index": 7, "committed_offset": 3, "committed_leader_epoch": -1,
                                 "committed_metadata": "m"}]}]}, label=f"commit {label}")
    for v in ctx.versions(9, lo=10):
        group = ctx.name(f"g{v}")
        find_coordinator(ctx, group)
        for topics, label in ((None, "all topics"),
                              ([{"name": "", "topic_id": topic_id, "partition_indexes": [0, 7]}], "known id"),
                              ([{"name": "", "topic_id": UNKNOWN_ID, "partition_indexes": [0]},
                                {"name": "", "topic_id": topic_id, "partition_indexes": [0]}], "unknown and known id")):
            ctx.call(9, v, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
                            "require_stable": False}, label=f"fetch {label}")
        ctx.call(9, v, {"groups": [{"group_id": ctx.name("nogroup"), "member_id": None, "member_epoch": -1,
                                    "topics": [{"name": "", "topic_id": UNKNOWN_ID, "partition_indexes": [0]}]}],
                        "require_stable": False}, label="fetch unknown id, unknown group")


# --- Transactions V2 (KIP-890 part 2) -----------------------------------------------------------


def _init_txn(ctx, tid):
    from .txn import init

    find_coordinator(ctx, tid, key_type=1)
    out = init(ctx, tid, 5, record=False)
    return out["producer_id"], out["producer_epoch"]


def _txn_produce(ctx, version, tid, topic, pid, epoch, seq, value, label):
    return ctx.call(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch(
            value, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)}]}]}, label=label)


def _wait_state(ctx, tid, state):
    ctx.setup(65, 0, {"transactional_ids": [tid]}, retries=80,
              expect=lambda o: ok(o) and o["transaction_states"][0]["transaction_state"] == state)


@scenario
def add_partitions_batched(ctx):
    """AddPartitionsToTxn v4-5: the broker-to-broker form, verify_only, errors."""
    topic = ctx.name("apb")
    create_topic(ctx, topic)
    for v in ctx.versions(24, lo=4):
        tid = ctx.name(f"apb{v}")
        pid, epoch = _init_txn(ctx, tid)

        def body(p=pid, e=epoch, verify=False, topics=None):
            return {"transactions": [{"transactional_id": tid, "producer_id": p, "producer_epoch": e,
                                      "verify_only": verify,
                                      "topics": topics or [{"name": topic, "partitions": [0]}]}]}

        ctx.call(24, v, body(verify=True), label="verify, not added")
        ctx.call(24, v, body(e=epoch + 5), label="future epoch")
        ctx.call(24, v, body(p=pid + 1), label="wrong producer id")
        ctx.call(24, v, body(topics=[{"name": ctx.name("absent"), "partitions": [0]},
                                     {"name": topic, "partitions": [0]}]), label="unknown topic")
        ctx.call(24, v, body(), label="add")
        ctx.call(24, v, body(verify=True), label="verify, added")
        _wait_state(ctx, tid, "Ongoing")
        ctx.setup(26, 5, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": False},
                  expect=lambda o: ok(o) and o["error_code"] == 0, retries=40)


@scenario
def end_txn_v5(ctx):
    """EndTxn v5 (transactions V2): errors outside a transaction, and the epoch it hands back."""
    for v in ctx.versions(26, lo=5):
        tid = ctx.name(f"e{v}")
        pid, epoch = _init_txn(ctx, tid)
        end = lambda p, e, c: {"transactional_id": tid, "producer_id": p, "producer_epoch": e, "committed": c}  # noqa: E731
        ctx.call(26, v, end(pid, epoch, True), label="commit with no transaction")
        ctx.call(26, v, end(pid + 1, epoch, True), label="wrong producer id")
        ctx.call(26, v, end(pid, epoch + 3, True), label="wrong epoch")
        ctx.call(26, v, {"transactional_id": ctx.name("never"), "producer_id": pid, "producer_epoch": epoch,
                         "committed": True}, label="unknown transactional id")


@scenario
def transactions_v2_flow(ctx):
    """Produce v12 adds the partition itself; EndTxn v5 bumps the epoch (markers carry it); a
    retry with the old epoch; the next transaction at the new epoch; TxnOffsetCommit v5 adds the
    offsets partition itself; what read_committed consumers then see."""
    from .core import _fetch_body

    topic = ctx.name("v2")
    topic_id = create_topic(ctx, topic)
    group = ctx.name("v2g")
    find_coordinator(ctx, group)
    for v in ctx.versions(0, lo=12, hi=12):
        tid = ctx.name(f"v2t{v}")
        pid, epoch = _init_txn(ctx, tid)
        _txn_produce(ctx, v, tid, topic, pid, epoch, 0, b"one", "produce adds the partition")
        for dv in ctx.versions(65):
            ctx.call(65, dv, {"transactional_ids": [tid]}, label="describe, ongoing")
        for tv in ctx.versions(28, lo=5):
            ctx.call(28, tv, {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                              "generation_id": -1, "member_id": "", "group_instance_id": None,
                              "topics": [{"name": topic, "partitions": [
                                  {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                   "committed_metadata": ""}]}]}, label="txn offset commit adds the offsets partition")
        end = lambda e, c: {"transactional_id": tid, "producer_id": pid, "producer_epoch": e, "committed": c}  # noqa: E731
        ctx.call(26, 5, end(epoch, True), label="commit (epoch bump)")
        _wait_state(ctx, tid, "CompleteCommit")
        ctx.call(26, 5, end(epoch, True), label="commit retried with the old epoch")
        ctx.call(26, 5, end(epoch, False), label="abort with the old epoch after the commit")
        _txn_produce(ctx, v, tid, topic, pid, epoch, 1, b"stale", "produce with the old epoch")
        _txn_produce(ctx, v, tid, topic, pid, epoch + 1, 0, b"two", "produce at the new epoch")
        ctx.call(26, 5, end(epoch + 1, False), label="abort (epoch bump)")
        _wait_state(ctx, tid, "CompleteAbort")
        ctx.call(26, 5, end(epoch + 2, False), label="abort with nothing open (epoch bump)")
        ctx.setup(2, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
            retries=80, expect=lambda o: ok(o) and o["topics"][0]["partitions"][0]["offset"] == 4)
        for fv in (12, 18):
            for isolation in (0, 1):
                ctx.call(1, fv, _fetch_body(topic, topic_id, 0, 0, isolation=isolation),
                         label=f"fetch all, isolation {isolation}")
        for dv in ctx.versions(61):
            ctx.call(61, dv, {"topics": [{"name": topic, "partition_indexes": [0]}]}, label="describe producers")
        ctx.call(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True},
                 label="committed offsets")
