"""Share groups (KIP-932), the group side: ShareGroupHeartbeat, ShareGroupDescribe, and ListGroups,
DescribeGroups, DeleteGroups and the other group APIs on a share group's id."""

from __future__ import annotations

from ..engine import scenario
from .common import create_topic, find_coordinator, ok, scoped_names


def heartbeat(group, member, epoch, topics=None, rack=None):
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
            "subscribed_topic_names": topics}


def settle(ctx, group, member, epoch, conn="main"):
    """Heartbeat (set-up) until the member has an assignment: the share state of its partitions is
    initialized after the join's answer, and the next heartbeat brings the partitions."""
    out = ctx.setup(76, 1, heartbeat(group, member, epoch), conn=conn, retries=80,
                    expect=lambda o: ok(o) and o["error_code"] == 0 and o["assignment"] is not None
                    and any(tp["partitions"] for tp in o["assignment"]["topic_partitions"]))
    return out["member_epoch"]


@scenario
def share_group_heartbeat_errors(ctx):
    topic = ctx.name("t")
    create_topic(ctx, topic)
    group = ctx.name("sg")
    find_coordinator(ctx, group)
    ctx.call(76, 1, heartbeat(group, "", 0, [topic]), label="empty member id")
    ctx.call(76, 1, heartbeat("", "m1", 0, [topic]), label="empty group id")
    ctx.call(76, 1, heartbeat(group, "m1", 0, [topic], rack=""), label="empty rack id")
    ctx.call(76, 1, heartbeat(group, "m1", 0, None), label="join without topics")
    ctx.call(76, 1, heartbeat(group, "m1", 0, []), label="join with no topics")
    ctx.call(76, 1, heartbeat(group, "m1", -2, [topic]), label="epoch -2")
    ctx.call(76, 1, heartbeat(group, "m1", 3, None), label="unknown group, epoch 3")
    ctx.call(76, 1, heartbeat(group, "m1", -1, None), label="leave an unknown group")
    ctx.call(76, 1, heartbeat(group, "m1", 0, [topic, ctx.name("missing")]), label="join, one topic missing")
    ctx.call(76, 1, heartbeat(group, "ghost", 1, None), label="unknown member")
    ctx.call(76, 1, heartbeat(group, "ghost", -1, None), label="unknown member leaves")
    ctx.call(76, 1, heartbeat(group, "m1", 7, None), label="epoch ahead")
    ctx.call(76, 1, heartbeat(group, "m1", -1, None), label="leave")
    ctx.call(77, 1, {"group_ids": [""], "include_authorized_operations": False}, label="describe empty id")
    ctx.call(77, 1, {"group_ids": [ctx.name("nope")], "include_authorized_operations": False},
             label="describe unknown")


@scenario
def share_group_lifecycle(ctx):
    topic = ctx.name("t")
    create_topic(ctx, topic, partitions=1)
    group = ctx.name("sg")
    find_coordinator(ctx, group)
    a, b = "member-a-0000000000000001", "member-b-0000000000000002"
    first = ctx.call(76, 1, heartbeat(group, a, 0, [topic]), label="a joins", conn="a")
    epoch_a = settle(ctx, group, a, first.get("member_epoch", 0), conn="a")
    ctx.call(76, 1, heartbeat(group, a, epoch_a), label="a steady heartbeat", conn="a")
    ctx.call(76, 1, heartbeat(group, a, epoch_a, [topic]), label="a full heartbeat", conn="a")
    ctx.call(77, 1, {"group_ids": [group], "include_authorized_operations": True}, label="describe one member")
    joined_b = ctx.call(76, 1, heartbeat(group, b, 0, [topic], rack="r1"), label="b joins (partition shared)",
                        conn="b")
    epoch_b = joined_b.get("member_epoch", 0)
    ctx.call(76, 1, heartbeat(group, a, epoch_a), label="a heartbeats after b joined", conn="a")
    ctx.call(76, 1, heartbeat(group, a, epoch_a - 1), label="a with an older epoch", conn="a")
    ctx.call(76, 1, heartbeat(group, a, epoch_b + 5), label="a with a newer epoch", conn="a")
    ctx.call(77, 1, {"group_ids": [group], "include_authorized_operations": False}, label="describe two members")
    for v in ctx.versions(16):
        ctx.call(16, v, {"states_filter": [], "types_filter": []}, label="list all (scoped)",
                 scoped=scoped_names(ctx.prefix))
        if v >= 4:
            ctx.call(16, v, {"states_filter": ["stable"], "types_filter": []}, label="list stable (scoped)",
                     scoped=scoped_names(ctx.prefix))
            ctx.call(16, v, {"states_filter": ["Empty"], "types_filter": []}, label="list empty (scoped)",
                     scoped=scoped_names(ctx.prefix))
        if v >= 5:
            ctx.call(16, v, {"states_filter": [], "types_filter": ["share"]}, label="list share (scoped)",
                     scoped=scoped_names(ctx.prefix))
            ctx.call(16, v, {"states_filter": [], "types_filter": ["consumer", "classic"]},
                     label="list other types (scoped)", scoped=scoped_names(ctx.prefix))
    for v in ctx.versions(15):
        ctx.call(15, v, {"groups": [group], "include_authorized_operations": False}, label="DescribeGroups")
    for v in ctx.versions(42):
        ctx.call(42, v, {"groups_names": [group]}, label="delete a non-empty share group")
    ctx.call(76, 1, heartbeat(group, b, -1), label="b leaves", conn="b")
    ctx.call(76, 1, heartbeat(group, a, -1), label="a leaves", conn="a")
    ctx.call(77, 1, {"group_ids": [group], "include_authorized_operations": False}, label="describe empty")
    for v in ctx.versions(16, lo=4):
        ctx.call(16, v, {"states_filter": ["empty"], "types_filter": []}, label="list empty (scoped)",
                 scoped=scoped_names(ctx.prefix))
    ctx.call(42, 2, {"groups_names": [group]}, label="delete the empty share group")
    ctx.call(77, 1, {"group_ids": [group], "include_authorized_operations": False}, label="describe deleted")
    ctx.call(42, 2, {"groups_names": [group]}, label="delete again")


@scenario
def share_group_id_across_group_types(ctx):
    """A share group's id is not a consumer or classic group's, and the other way round."""
    topic = ctx.name("t")
    create_topic(ctx, topic)
    group = ctx.name("sg")
    find_coordinator(ctx, group)
    ctx.setup(76, 1, heartbeat(group, "member-a-0000000000000001", 0, [topic]),
              expect=lambda o: ok(o) and o["error_code"] == 0)
    for v in ctx.versions(68, lo=1):
        ctx.call(68, v, {"group_id": group, "member_id": "cm-00000000000000000001", "member_epoch": 0,
                         "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000,
                         "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                         "server_assignor": None, "topic_partitions": []}, label="ConsumerGroupHeartbeat")
    for v in ctx.versions(69):
        ctx.call(69, v, {"group_ids": [group], "include_authorized_operations": False}, label="ConsumerGroupDescribe")
    ctx.call(11, 9, {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00"}], "reason": None},
             label="JoinGroup")
    ctx.call(14, 5, {"group_id": group, "generation_id": 1, "member_id": "m1", "group_instance_id": None,
                     "protocol_type": "consumer", "protocol_name": "range", "assignments": []}, label="SyncGroup")
    ctx.call(12, 4, {"group_id": group, "generation_id": 1, "member_id": "m1", "group_instance_id": None},
             label="Heartbeat")
    ctx.call(13, 5, {"group_id": group, "members": [{"member_id": "m1", "group_instance_id": None, "reason": None}]},
             label="LeaveGroup")
    ctx.call(8, 9, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None, "retention_time_ms": -1,
                    "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                               "committed_leader_epoch": -1,
                                                               "committed_metadata": ""}]}]},
             label="OffsetCommit")
    ctx.call(9, 8, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}],
                    "require_stable": False}, label="OffsetFetch")
    ctx.call(9, 9, {"groups": [{"group_id": group, "member_id": "member-a-0000000000000001", "member_epoch": 1,
                                "topics": None}], "require_stable": False}, label="OffsetFetch as a member")
    ctx.call(47, 0, {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
             label="OffsetDelete")
    # And a consumer group's / a classic group's id for a share heartbeat.
    cgroup = ctx.name("cg")
    find_coordinator(ctx, cgroup)
    ctx.setup(68, 1, {"group_id": cgroup, "member_id": "cm-00000000000000000001", "member_epoch": 0,
                      "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000,
                      "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                      "server_assignor": None, "topic_partitions": []},
              expect=lambda o: ok(o) and o["error_code"] == 0)
    ctx.call(76, 1, heartbeat(cgroup, "m1", 0, [topic]), label="share heartbeat on a consumer group")
    ctx.call(77, 1, {"group_ids": [cgroup], "include_authorized_operations": False},
             label="ShareGroupDescribe of a consumer group")
    kgroup = ctx.name("kg")
    find_coordinator(ctx, kgroup)
    ctx.setup(8, 9, {"group_id": kgroup, "generation_id_or_member_epoch": -1, "member_id": "",
                     "group_instance_id": None, "retention_time_ms": -1,
                     "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": ""}]}]},
              expect=lambda o: ok(o))
    ctx.call(76, 1, heartbeat(kgroup, "m1", 0, [topic]), label="share heartbeat on a classic group")


@scenario
def share_version_feature(ctx):
    """share.version: Kafka 4.2 finalizes 1; it may go down to 0 (share groups off) and not above 1.
    Validate-only, so the shared brokers keep share groups for the other scenarios."""
    for level, upgrade_type, label in ((0, 2, "safe downgrade to 0"), (0, 1, "downgrade as an upgrade"),
                                       (1, 1, "the current level"), (2, 1, "unsupported level 2")):
        ctx.call(57, 1, {"timeout_ms": 5000, "validate_only": True, "feature_updates": [
            {"feature": "share.version", "max_version_level": level, "upgrade_type": upgrade_type}]}, label=label)
    for v in ctx.versions(57):
        ctx.call(57, v, {"timeout_ms": 5000, "validate_only": True, "feature_updates": [
            {"feature": "share.version", "max_version_level": 1, "upgrade_type": 1, "allow_downgrade": False}]},
            label="the current level, every version")


@scenario(profile="acl")
def share_group_acl_denials(ctx):
    """READ on the group and DESCRIBE on the subscribed topics for ShareGroupHeartbeat, DESCRIBE on the
    group for ShareGroupDescribe (profile "acl": StandardAuthorizer, allow.everyone.if.no.acl.found)."""
    TOPIC, GROUP, PREFIXED, ALL, DENY = 2, 3, 4, 2, 2
    denied_topic = ctx.name("dt")
    denied_group = ctx.name("dg")
    open_topic = ctx.name("ot")
    create_topic(ctx, denied_topic)
    create_topic(ctx, open_topic)
    group = ctx.name("sg")
    find_coordinator(ctx, group)

    def deny(rtype, name):
        return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": PREFIXED,
                "principal": "User:ANONYMOUS", "host": "*", "operation": ALL, "permission_type": DENY}

    ctx.setup(30, 3, {"creations": [deny(TOPIC, denied_topic), deny(GROUP, denied_group)]},
              expect=lambda o: ok(o) and all(r["error_code"] == 0 for r in o["results"]))
    ctx.setup(3, 12, {"topics": [{"name": denied_topic, "topic_id": None}], "allow_auto_topic_creation": False},
              expect=lambda o: ok(o) and o["topics"][0]["error_code"] == 29, retries=80)
    ctx.call(76, 1, heartbeat(denied_group, "m-00000000000000000001", 0, [open_topic]), label="group denied")
    ctx.call(76, 1, heartbeat(group, "m-00000000000000000001", 0, [open_topic, denied_topic]), label="topic denied")
    ctx.call(77, 1, {"group_ids": [denied_group, group], "include_authorized_operations": True},
             label="describe: one denied, one unknown")
    joined = ctx.call(76, 1, heartbeat(group, "m-00000000000000000001", 0, [open_topic]), label="allowed")
    ctx.call(77, 1, {"group_ids": [group], "include_authorized_operations": True}, label="describe with operations")
    ctx.call(76, 1, heartbeat(group, "m-00000000000000000001", -1), label="leave")
    assert joined.kind == "response"
