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
