"""Coordinators, the classic group protocol, offsets and KIP-848 heartbeats."""

from __future__ import annotations

from ..engine import scenario
from .common import batch, create_topic, find_coordinator, ok, produce, scoped_names

PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00"}]


@scenario
def find_coordinator_paths(ctx):
    group = ctx.name("g")
    find_coordinator(ctx, group)
    find_coordinator(ctx, ctx.name("tx"), key_type=1)  # __transaction_state exists before what is compared
    for v in ctx.versions(10):
        ctx.call(10, v, {"key": group, "key_type": 0, "coordinator_keys": [group, ctx.name("g2")]},
                 label="group")
        if v >= 1:
            ctx.call(10, v, {"key": ctx.name("tx"), "key_type": 1, "coordinator_keys": [ctx.name("tx")]},
                     label="transaction", conn="txn")
            ctx.call(10, v, {"key": group, "key_type": 7, "coordinator_keys": [group]},
                     label="invalid key type", conn=f"k7-{v}")
        ctx.call(10, v, {"key": "", "key_type": 0, "coordinator_keys": [""]}, label="empty group id")


def join(ctx, group, version, member_id="", session_timeout=10000, label="", conn="main", record=True,
         instance=None, protocol_type="consumer", protocols=PROTOCOLS):
    body = {"group_id": group, "session_timeout_ms": session_timeout, "rebalance_timeout_ms": 10000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": protocols, "reason": None}
    if record:
        return ctx.call(11, version, body, label=label, conn=conn)
    return ctx.setup(11, version, body, conn=conn)


@scenario
def join_group_errors(ctx):
    for v in ctx.versions(11):
        group = ctx.name(f"j{v}")
        find_coordinator(ctx, group)
        join(ctx, "", v, label="empty group id")
        join(ctx, group, v, session_timeout=10, label="session timeout too small")
        join(ctx, group, v, session_timeout=10_000_000, label="session timeout too large")
        join(ctx, group, v, member_id="nobody", label="unknown member id")
        join(ctx, group, v, protocols=[], label="no protocols")
        join(ctx, group, v, protocol_type="", label="empty protocol type")


@scenario
def classic_group_lifecycle(ctx):
    topic = ctx.name("t")
    create_topic(ctx, topic)
    for v in ctx.versions(11, lo=4):
        group = ctx.name(f"life{v}")
        find_coordinator(ctx, group)
        first = join(ctx, group, v, label="first join")
        member = first["member_id"]
        joined = join(ctx, group, v, member_id=member, label="join with member id")
        gen = joined.get("generation_id", -1)
        sv = min(v, 5) if v >= 4 else 3
        ctx.call(14, sv, {"group_id": group, "generation_id": gen, "member_id": member,
                          "protocol_type": "consumer", "protocol_name": "range",
                          "assignments": [{"member_id": member, "assignment": b"\x00\x01"}]}, label=f"sync (JoinGroup v{v})")
        for hv in ctx.versions(12):
            ctx.call(12, hv, {"group_id": group, "generation_id": gen, "member_id": member}, label=f"heartbeat (JoinGroup v{v})")
        ctx.call(12, 4, {"group_id": group, "generation_id": gen + 5, "member_id": member}, label="heartbeat, wrong generation")
        ctx.call(12, 4, {"group_id": group, "generation_id": gen, "member_id": "other"}, label="heartbeat, unknown member")
        ctx.call(14, sv, {"group_id": group, "generation_id": gen + 1, "member_id": member,
                          "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
                 label="sync, wrong generation")
        ctx.call(14, 5, {"group_id": group, "generation_id": gen, "member_id": member,
                         "protocol_type": "other", "protocol_name": "range", "assignments": []},
                 label="sync, wrong protocol type")
        ctx.call(8, 9, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": "m"}]}]},
                 label="commit as member")
        for dv in ctx.versions(15):
            ctx.call(15, dv, {"groups": [group], "include_authorized_operations": False}, label=f"describe stable (JoinGroup v{v})")
        ctx.call(13, min(v, 5), {"group_id": group, "member_id": member,
                                 "members": [{"member_id": member, "group_instance_id": None, "reason": None}]},
                 label="leave")
        ctx.call(15, 5, {"groups": [group]}, label="describe after leave")
        ctx.call(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False}, label="fetch all offsets")


@scenario
def classic_group_unknown(ctx):
    group = ctx.name("unknown")
    find_coordinator(ctx, group)
    for v in ctx.versions(12):
        ctx.call(12, v, {"group_id": group, "generation_id": 1, "member_id": "m"}, label="heartbeat unknown group")
    for v in ctx.versions(14):
        ctx.call(14, v, {"group_id": group, "generation_id": 1, "member_id": "m", "protocol_type": "consumer",
                         "protocol_name": "range", "assignments": []}, label="sync unknown group")
    for v in ctx.versions(13):
        ctx.call(13, v, {"group_id": group, "member_id": "m",
                         "members": [{"member_id": "m", "group_instance_id": None}]}, label="leave unknown group")
    for v in ctx.versions(15):
        ctx.call(15, v, {"groups": [group, ""]}, label="describe unknown and empty")
    for v in ctx.versions(42):
        ctx.call(42, v, {"groups_names": [group, ""]}, label="delete unknown and empty")
    topic = ctx.name("t")
    create_topic(ctx, topic)
    for v in ctx.versions(8):
        ctx.call(8, v, {"group_id": ctx.name(f"nog{v}"), "generation_id_or_member_epoch": 3, "member_id": "m",
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": ""}]}]},
                 label="commit with a generation to a group that does not exist")
        ctx.call(8, v, {"group_id": "", "generation_id_or_member_epoch": -1, "member_id": "",
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": ""}]}]},
                 label="commit to the empty group id")
    for v in ctx.versions(9):
        ctx.call(9, v, {"group_id": "", "topics": [{"name": topic, "partition_indexes": [0]}],
                        "groups": [{"group_id": "", "topics": [{"name": topic, "partition_indexes": [0]}]}]},
                 label="fetch for the empty group id")


@scenario
def static_member(ctx):
    for v in ctx.versions(11, lo=5):
        group = ctx.name(f"static{v}")
        find_coordinator(ctx, group)
        first = join(ctx, group, v, instance="inst-1", label="static join")
        member = first["member_id"]
        gen = first.get("generation_id", -1)
        ctx.call(14, min(v, 5), {"group_id": group, "generation_id": gen, "member_id": member,
                                 "group_instance_id": "inst-1", "protocol_type": "consumer", "protocol_name": "range",
                                 "assignments": [{"member_id": member, "assignment": b""}]}, label="static sync")
        again = join(ctx, group, v, instance="inst-1", label="static rejoin, new member id")
        ctx.call(12, min(v, 4), {"group_id": group, "generation_id": gen, "member_id": member,
                                 "group_instance_id": "inst-1"}, label="fenced old member")
        ctx.call(13, min(v, 5), {"group_id": group, "members": [
            {"member_id": again.get("member_id", ""), "group_instance_id": "inst-1"},
            {"member_id": "", "group_instance_id": "inst-unknown"}]}, label="leave static and unknown instance")


@scenario
def offsets_standalone(ctx):
    topic = ctx.name("t")
    create_topic(ctx, topic, partitions=2)
    produce(ctx, topic, 0, batch(b"a", b"b"))
    for v in ctx.versions(8):
        group = ctx.name(f"o{v}")
        find_coordinator(ctx, group)
        ctx.call(8, v, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                        "retention_time_ms": -1,
                        "topics": [{"name": topic, "partitions": [
                            {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                             "commit_timestamp": -1, "committed_metadata": "meta"},
                            {"partition_index": 1, "committed_offset": 0, "committed_leader_epoch": -1,
                             "commit_timestamp": -1, "committed_metadata": None},
                            {"partition_index": 9, "committed_offset": 0, "committed_leader_epoch": -1,
                             "commit_timestamp": -1, "committed_metadata": ""}]},
                            {"name": ctx.name("absent"), "partitions": [
                                {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                 "commit_timestamp": -1, "committed_metadata": ""}]}]},
                 label="standalone commit")
        ctx.call(8, v, {"group_id": group, "generation_id_or_member_epoch": 3, "member_id": "ghost",
                        "retention_time_ms": -1,
                        "topics": [{"name": topic, "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                             "commit_timestamp": -1, "committed_metadata": ""}]}]},
                 label="commit with unknown member")
        ctx.call(8, v, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                        "topics": [{"name": topic, "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                             "committed_metadata": "x" * 5000}]}]}, label="metadata too large")
    for v in ctx.versions(9):
        group = ctx.name(f"o{min(max(v, 2), 9)}")
        body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1, 5]},
                                              {"name": ctx.name("absent"), "partition_indexes": [0]}],
                "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                            "topics": [{"name": topic, "partition_indexes": [0, 1, 5]},
                                       {"name": ctx.name("absent"), "partition_indexes": [0]}]},
                           {"group_id": ctx.name("nogroup"), "topics": None}],
                "require_stable": True}
        ctx.call(9, v, body, label="fetch some")
        if v >= 2:
            ctx.call(9, v, {"group_id": group, "topics": None,
                            "groups": [{"group_id": group, "topics": None}], "require_stable": False},
                     label="fetch all")
    for v in ctx.versions(47):
        group = ctx.name("o9")
        ctx.call(47, v, {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]},
                                                       {"name": ctx.name("absent"), "partitions": [{"partition_index": 0}]}]},
                 label="offset delete")
        ctx.call(47, v, {"group_id": ctx.name("nogroup"), "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
                 label="offset delete, unknown group")
    for v in ctx.versions(42):
        ctx.call(42, v, {"groups_names": [ctx.name(f"o{min(max(v, 2), 9)}")]}, label="delete group with offsets")


@scenario
def list_and_describe_groups(ctx):
    group = ctx.name("lg")
    find_coordinator(ctx, group)
    first = join(ctx, group, 9, record=False)
    join(ctx, group, 9, member_id=first["member_id"], record=False)
    for v in ctx.versions(16):
        ctx.call(16, v, {"states_filter": [], "types_filter": []}, label="all (scoped)", scoped=scoped_names(ctx.prefix))
        if v >= 4:
            ctx.call(16, v, {"states_filter": ["CompletingRebalance", "Stable"], "types_filter": []},
                     label="state filter (scoped)", scoped=scoped_names(ctx.prefix))
        if v >= 5:
            ctx.call(16, v, {"states_filter": [], "types_filter": ["consumer"]},
                     label="type filter (scoped)", scoped=scoped_names(ctx.prefix))


@scenario
def consumer_group_heartbeat(ctx):
    topic = ctx.name("t")
    create_topic(ctx, topic, partitions=2)
    for v in ctx.versions(68):
        group = ctx.name(f"cg{v}")
        find_coordinator(ctx, group)
        base = {"group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": 10000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                "server_assignor": None, "topic_partitions": []}
        ctx.call(68, v, dict(base, subscribed_topic_names=None), label="join without subscription")
        ctx.call(68, v, dict(base, rebalance_timeout_ms=-5), label="negative rebalance timeout")
        ctx.call(68, v, dict(base, member_epoch=3, member_id="ghost"), label="unknown member epoch 3")
        ctx.call(68, v, dict(base, server_assignor="nope"), label="unknown assignor")
        if v >= 1:
            first = ctx.call(68, v, dict(base, member_id="m-" + "0" * 20), label="join")
        else:
            first = ctx.call(68, v, base, label="join")
        member = first.get("member_id") or ""
        epoch = first.get("member_epoch", 0)
        ctx.call(68, v, dict(base, member_id=member, member_epoch=epoch + 10), label="fenced epoch")
        ctx.call(68, v, dict(base, member_id=member, member_epoch=epoch, subscribed_topic_names=None,
                             topic_partitions=None), label="steady heartbeat")
        for dv in ctx.versions(69):
            ctx.call(69, dv, {"group_ids": [group, ctx.name("none")], "include_authorized_operations": False},
                     label="describe")
        ctx.call(68, v, dict(base, member_id=member, member_epoch=-1), label="leave")


@scenario
def classic_rebalance(ctx):
    """Two members: the second join starts a rebalance; the first member's heartbeat, commit and
    sync during it; both rejoin; a stale generation afterwards."""
    import threading

    topic = ctx.name("t")
    create_topic(ctx, topic, partitions=2)
    group = ctx.name("rb")
    find_coordinator(ctx, group)
    a1 = join(ctx, group, 9, conn="a", label="a joins")
    a = a1["member_id"]
    a2 = join(ctx, group, 9, member_id=a, conn="a", label="a joins with its id")
    gen = a2.get("generation_id", -1)
    ctx.call(14, 5, {"group_id": group, "generation_id": gen, "member_id": a, "protocol_type": "consumer",
                     "protocol_name": "range", "assignments": [{"member_id": a, "assignment": b"\x00"}]},
             label="a syncs", conn="a")
    b1 = join(ctx, group, 9, conn="b", label="b joins")
    b = b1["member_id"]
    holder: dict = {}
    t = threading.Thread(target=lambda: holder.setdefault("out", ctx.conn("b").call(11, 9, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": b,
        "group_instance_id": None, "protocol_type": "consumer", "protocols": PROTOCOLS, "reason": None})))
    t.start()
    # Kafka moves the group to PreparingRebalance when b's join arrives: wait for it (bounded).
    ctx.setup(15, 5, {"groups": [group]}, retries=80,
              expect=lambda o: ok(o) and o["groups"][0]["group_state"] == "PreparingRebalance")
    for hv in ctx.versions(12):
        ctx.call(12, hv, {"group_id": group, "generation_id": gen, "member_id": a}, label="a heartbeats during the rebalance",
                 conn="a")
    for cv in ctx.versions(8):
        ctx.call(8, cv, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": a,
                         "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                    "committed_leader_epoch": -1,
                                                                    "committed_metadata": ""}]}]},
                 label="a commits during the rebalance", conn="a")
    ctx.call(14, 5, {"group_id": group, "generation_id": gen, "member_id": a, "protocol_type": "consumer",
                     "protocol_name": "range", "assignments": []}, label="a syncs during the rebalance", conn="a")
    ctx.call(15, 5, {"groups": [group]}, label="describe during the rebalance")
    a3 = join(ctx, group, 9, member_id=a, conn="a", label="a rejoins")
    t.join(30)
    ctx.record(11, 9, holder.get("out") or __import__("tests.conformance.wire", fromlist=["Outcome"]).Outcome("timeout"),
               label="b's join completes")
    gen2 = a3.get("generation_id", -1)
    ctx.call(12, 4, {"group_id": group, "generation_id": gen, "member_id": a}, label="a heartbeats, old generation",
             conn="a")
    ctx.call(8, 9, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": a,
                    "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
             label="a commits with the old generation", conn="a")
    ctx.call(15, 5, {"groups": [group]}, label="describe while completing")
    del gen2


@scenario
def consumer_group_offsets(ctx):
    """KIP-848 members commit and fetch offsets with their member epoch (OffsetCommit v9,
    OffsetFetch v9): current, stale and future epochs, unknown members."""
    topic = ctx.name("t")
    create_topic(ctx, topic, partitions=2)
    group = ctx.name("cgo")
    find_coordinator(ctx, group)
    v = max(ctx.versions(68))
    first = ctx.call(68, v, {"group_id": group, "member_id": "m-" + "1" * 20 if v >= 1 else "", "member_epoch": 0,
                             "rebalance_timeout_ms": 10000, "subscribed_topic_names": [topic],
                             "topic_partitions": []}, label="join")
    member = first.get("member_id") or ""
    epoch = first.get("member_epoch", 0)

    def commit(e, m, label):
        ctx.call(8, 9, {"group_id": group, "generation_id_or_member_epoch": e, "member_id": m,
                        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": ""}]}]}, label=label)

    commit(epoch, member, "commit at the member epoch")
    commit(epoch + 1, member, "commit at a future epoch")
    commit(epoch - 1, member, "commit at a stale epoch")
    commit(epoch, "ghost", "commit by an unknown member")
    commit(-1, "", "commit without a member (admin)")
    for fv in ctx.versions(9, lo=9):
        for e, m, label in ((epoch, member, "current"), (epoch + 5, member, "future epoch"),
                            (epoch, "ghost", "unknown member"), (-1, None, "no member")):
            ctx.call(9, fv, {"groups": [{"group_id": group, "member_id": m, "member_epoch": e,
                                         "topics": [{"name": topic, "partition_indexes": [0, 1]}]}],
                             "require_stable": False}, label=f"fetch, {label}")
    ctx.call(68, v, {"group_id": group, "member_id": member, "member_epoch": -1}, label="leave")


@scenario
def group_admin(ctx):
    """Admin views and deletions of live groups of both protocols: DeleteGroups of a non-empty
    group, OffsetDelete of a subscribed topic, ListGroups filters, DescribeGroups of a KIP-848
    group and ConsumerGroupDescribe of a classic one."""
    topic = ctx.name("t")
    create_topic(ctx, topic)
    classic = ctx.name("classic")
    modern = ctx.name("modern")
    find_coordinator(ctx, classic)
    find_coordinator(ctx, modern)
    first = join(ctx, classic, 9, record=False)
    member = first["member_id"]
    joined = join(ctx, classic, 9, member_id=member, record=False)
    ctx.setup(14, 5, {"group_id": classic, "generation_id": joined["generation_id"], "member_id": member,
                      "protocol_type": "consumer", "protocol_name": "range",
                      "assignments": [{"member_id": member, "assignment": b""}]})
    ctx.setup(8, 9, {"group_id": classic, "generation_id_or_member_epoch": joined["generation_id"], "member_id": member,
                     "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    v68 = max(ctx.versions(68))
    ctx.setup(68, v68, {"group_id": modern, "member_id": "m-" + "2" * 20 if v68 >= 1 else "", "member_epoch": 0,
                        "rebalance_timeout_ms": 10000, "subscribed_topic_names": [topic], "topic_partitions": []})
    for v in ctx.versions(42):
        ctx.call(42, v, {"groups_names": [classic, modern]}, label="delete non-empty groups")
    for v in ctx.versions(47):
        ctx.call(47, v, {"group_id": classic, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
                 label="offset delete, topic in use")
    for v in ctx.versions(16, lo=4):
        ctx.call(16, v, {"states_filter": ["Stable", "stable", "Empty"], "types_filter": []},
                 label="states filter (scoped)", scoped=scoped_names(ctx.prefix))
    for v in ctx.versions(16, lo=5):
        for types in (["classic"], ["consumer"], ["Consumer", "nope"]):
            ctx.call(16, v, {"states_filter": [], "types_filter": types}, label=f"types {types} (scoped)",
                     scoped=scoped_names(ctx.prefix))
    for v in ctx.versions(15):
        ctx.call(15, v, {"groups": [modern]}, label="classic describe of a consumer group")
    # A classic group whose members' subscriptions name the topic (a well-formed subscription).
    import struct
    named = ctx.name("named")
    other = ctx.name("other")
    create_topic(ctx, other)
    find_coordinator(ctx, named)
    sub = struct.pack(">hih", 0, 1, len(topic.encode())) + topic.encode() + struct.pack(">i", -1)
    protocols = [{"name": "range", "metadata": sub}]
    j1 = join(ctx, named, 9, record=False, protocols=protocols)
    j2 = join(ctx, named, 9, member_id=j1["member_id"], record=False, protocols=protocols)
    ctx.setup(14, 5, {"group_id": named, "generation_id": j2["generation_id"], "member_id": j1["member_id"],
                      "protocol_type": "consumer", "protocol_name": "range",
                      "assignments": [{"member_id": j1["member_id"], "assignment": b""}]})
    for t in (topic, other):
        ctx.setup(8, 9, {"group_id": named, "generation_id_or_member_epoch": j2["generation_id"],
                         "member_id": j1["member_id"], "topics": [{"name": t, "partitions": [
                             {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                              "committed_metadata": ""}]}]})
    for v in ctx.versions(47):
        ctx.call(47, v, {"group_id": named, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]},
                                                       {"name": other, "partitions": [{"partition_index": 0}]}]},
                 label="offset delete, subscribed and other topic")
    for v in ctx.versions(69):
        ctx.call(69, v, {"group_ids": [classic]}, label="consumer describe of a classic group")


@scenario
def classic_protocol_mismatch(ctx):
    """Joining a live group with another protocol type or no common protocol; a group instance
    id on v4 (before static membership)."""
    group = ctx.name("pm")
    find_coordinator(ctx, group)
    first = join(ctx, group, 9, record=False)
    join(ctx, group, 9, member_id=first["member_id"], record=False)
    for v in ctx.versions(11):
        join(ctx, group, v, protocol_type="connect", label="other protocol type", conn=f"pt{v}")
        join(ctx, group, v, protocols=[{"name": "roundrobin", "metadata": b""}], label="no common protocol",
             conn=f"np{v}")
