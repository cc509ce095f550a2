"""Where one group id meets two kinds of state: offsets of KIP-848 consumer groups deleted by an
admin, and transactional offsets committed into a consumer group (issue 24, the group managers)."""

from __future__ import annotations

from ..engine import scenario
from .common import create_topic, find_coordinator, ok, scoped_names
from .txn import init


def _consumer_group(ctx, group, topic, member):
    v = max(ctx.versions(68))
    out = ctx.setup(68, v, {"group_id": group, "member_id": member if v >= 1 else "", "member_epoch": 0,
                            "rebalance_timeout_ms": 10000, "subscribed_topic_names": [topic],
                            "topic_partitions": []}, expect=lambda o: ok(o) and o["error_code"] == 0)
    return out["member_id"], out["member_epoch"]


def _commit_body(group, epoch, member, topics):
    return {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
            "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}
                       for t in topics]}


@scenario
def consumer_group_offset_delete(ctx):
    """OffsetDelete on a KIP-848 consumer group with a member: a topic it subscribes to and one it
    does not."""
    subscribed, other = ctx.name("sub"), ctx.name("other")
    create_topic(ctx, subscribed)
    create_topic(ctx, other)
    group = ctx.name("cgdel")
    find_coordinator(ctx, group)
    member, epoch = _consumer_group(ctx, group, subscribed, "m-" + "3" * 20)
    ctx.setup(8, 9, _commit_body(group, epoch, member, [subscribed, other]),
              expect=lambda o: ok(o) and all(p["error_code"] == 0 for t in o["topics"] for p in t["partitions"]))
    for v in ctx.versions(47):
        ctx.call(47, v, {"group_id": group, "topics": [{"name": subscribed, "partitions": [{"partition_index": 0}]},
                                                       {"name": other, "partitions": [{"partition_index": 0}]}]},
                 label="offset delete, subscribed and other topic")
    for v in ctx.versions(9, lo=8):
        ctx.call(9, v, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                    "topics": [{"name": t, "partition_indexes": [0]} for t in (subscribed, other)]}],
                        "require_stable": False}, label="offsets after the delete")


@scenario
def consumer_group_transactional_offsets(ctx):
    """TxnOffsetCommit into a KIP-848 consumer group, the transaction committed: the group stays one
    consumer group (ListGroups, DescribeGroups) and its offsets are committed."""
    topic = ctx.name("t")
    create_topic(ctx, topic)
    group = ctx.name("cgtx")
    find_coordinator(ctx, group)
    member, epoch = _consumer_group(ctx, group, topic, "m-" + "4" * 20)
    tid = ctx.name("tx")
    find_coordinator(ctx, tid, key_type=1)
    out = init(ctx, tid, 4, record=False)
    pid, pepoch = out["producer_id"], out["producer_epoch"]
    ctx.setup(25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": pepoch, "group_id": group},
              expect=lambda o: ok(o) and o["error_code"] == 0)
    ctx.call(28, 3, {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": pepoch,
                     "generation_id": epoch, "member_id": member, "group_instance_id": None,
                     "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": ""}]}]},
             label="transactional commit by the member")
    ctx.call(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": pepoch, "committed": True},
             label="commit")
    ctx.setup(65, 0, {"transactional_ids": [tid]}, retries=80,
              expect=lambda o: ok(o) and o["transaction_states"][0]["transaction_state"] == "CompleteCommit")
    # The marker reaches __consumer_offsets asynchronously in Kafka: wait until the offset is committed.
    ctx.setup(9, 8, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                 "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": True},
              retries=80, expect=lambda o: ok(o) and o["groups"][0]["topics"][0]["partitions"][0][
                  "committed_offset"] == 7)
    for v in ctx.versions(16, lo=5):
        ctx.call(16, v, {"states_filter": [], "types_filter": []}, label="list groups (scoped)",
                 scoped=scoped_names(ctx.prefix))
    for v in ctx.versions(15, lo=5):
        ctx.call(15, v, {"groups": [group]}, label="classic describe of the consumer group")
