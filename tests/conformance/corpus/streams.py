"""KIP-1071 streams groups: StreamsGroupHeartbeat (88), StreamsGroupDescribe (89) and the other group APIs on a
streams group (issue 20).

Both brokers run with group.streams.initial.rebalance.delay.ms at Kafka's default (3000): the first
assignment of a new group is delayed on both (status ASSIGNMENT_DELAYED), so the lifecycle scenario waits
that long once.  Member and process ids are fixed, so the sticky assignor's choices (ties broken by Java's
HashMap and PriorityQueue orders) are compared too.
"""

from __future__ import annotations

import time

from ..engine import scenario
from .common import create_topic, find_coordinator, scoped_names

INITIAL_DELAY_S = 3.0


def topic_info(name: str, partitions: int = 0, configs: dict | None = None) -> dict:
    return {"name": name, "partitions": partitions, "replication_factor": 0,
            "topic_configs": [{"key": k, "value": v} for k, v in (configs or {}).items()]}


def subtopology(sid: str, sources=(), sinks=(), repartition=(), changelogs=(), copartition=(), regex=()):
    return {"subtopology_id": sid, "source_topics": list(sources), "source_topic_regex": list(regex),
            "state_changelog_topics": [topic_info(n, 0, {"cleanup.policy": "compact"}) for n in changelogs],
            "repartition_sink_topics": list(sinks),
            "repartition_source_topics": [topic_info(n, p) for n, p in repartition],
            "copartition_groups": [{"source_topics": list(s), "source_topic_regex": [],
                                    "repartition_source_topics": list(r)} for s, r in copartition]}


def word_count(ctx, source: str, epoch: int = 0) -> dict:
    app = ctx.name("app")
    return {"epoch": epoch, "subtopologies": [
        subtopology("0", sources=[source], sinks=[f"{app}-rep"]),
        subtopology("1", repartition=[(f"{app}-rep", 0)], changelogs=[f"{app}-store-changelog"])]}


def heartbeat(group: str, member: str, epoch: int, topology=None, process="p1", owned=None, **extra) -> dict:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
            "topology": topology, "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
            "process_id": process if epoch == 0 else None, "user_endpoint": None,
            "client_tags": [] if epoch == 0 else None, "task_offsets": None, "task_end_offsets": None,
            "shutdown_application": False}
    if epoch == 0:
        body.update(active_tasks=[], standby_tasks=[], warmup_tasks=[])
    if owned is not None:
        body.update(active_tasks=owned, standby_tasks=[], warmup_tasks=[])
    body.update(extra)
    return body


def wait_coordinator(ctx, group: str) -> None:
    """FindCoordinator, then a StreamsGroupDescribe until the group's shard answers (it may be loading)."""
    find_coordinator(ctx, group)
    ctx.setup(89, 0, {"group_ids": [group], "include_authorized_operations": False}, retries=80,
              expect=lambda o: o.kind == "response" and o["groups"][0]["error_code"] not in (14, 15, 16))


@scenario
def streams_heartbeat_validation(ctx):
    topic = ctx.name("in")
    create_topic(ctx, topic, partitions=2)
    group = ctx.name("sg")
    wait_coordinator(ctx, group)
    topology = word_count(ctx, topic)
    call = lambda label, body: ctx.call(88, 0, body, label=label)  # noqa: E731
    call("empty group id", heartbeat("", "m1", 0, topology))
    call("empty member id", heartbeat(group, "", 0, topology))
    call("blank rack id", heartbeat(group, "m1", 0, topology, rack_id=" "))
    call("static member", heartbeat(group, "m1", 0, topology, instance_id="i1"))
    call("task offsets", heartbeat(group, "m1", 0, topology, task_offsets=[]))
    call("task end offsets", heartbeat(group, "m1", 0, topology, task_end_offsets=[]))
    call("warm-up tasks", heartbeat(group, "m1", 0, topology, warmup_tasks=[{"subtopology_id": "0", "partitions": [0]}]))
    call("source regex", heartbeat(group, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[topic], regex=["x.*"])]}))
    call("join without topology", heartbeat(group, "m1", 0, None))
    call("join without rebalance timeout", heartbeat(group, "m1", 0, topology, rebalance_timeout_ms=-1))
    call("join owning tasks", heartbeat(group, "m1", 0, topology, active_tasks=[{"subtopology_id": "0", "partitions": [0]}]))
    call("one task list null", heartbeat(group, "m1", 3, None, active_tasks=[], standby_tasks=None, warmup_tasks=[]))
    call("topology when not joining", heartbeat(group, "m1", 3, topology))
    call("epoch -3", heartbeat(group, "m1", -3, None))
    call("static leave without instance", heartbeat(group, "m1", -2, None))
    bad = word_count(ctx, topic)
    bad["subtopologies"][1]["state_changelog_topics"][0]["partitions"] = 3
    call("changelog with partitions", heartbeat(group, "m1", 0, bad))
    call("internal topic in topology", heartbeat(group, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=["__consumer_offsets", topic])]}))
    call("illegal topic name", heartbeat(group, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[topic, "bad name!"])]}))
    call("unknown group, epoch 1", heartbeat(group, "m1", 1, None))
    call("leave of an unknown group", heartbeat(group, "m1", -1, None))
    call("repartition topic never written", heartbeat(group, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[topic]), subtopology("1", repartition=[(ctx.name("orphan"), 0)])]}))
    ctx.call(89, 0, {"group_ids": [group, "", ctx.name("none")], "include_authorized_operations": True},
             label="describe: unknown, empty and missing ids")


@scenario
def streams_group_lifecycle(ctx):
    source = ctx.name("in")
    create_topic(ctx, source, partitions=2)
    group = ctx.name("app")
    wait_coordinator(ctx, group)
    topology = word_count(ctx, source)
    first = ctx.call(88, 0, heartbeat(group, "m1", 0, topology, process="p1"), label="m1 joins")
    epoch = first.get("member_epoch", 0)
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": False}, label="describe: not ready")
    time.sleep(INITIAL_DELAY_S + 0.5)
    owned = []
    for i in range(3):
        out = ctx.call(88, 0, heartbeat(group, "m1", epoch, owned=owned), label=f"m1 heartbeat {i}")
        epoch = out.get("member_epoch", epoch)
        if out.get("active_tasks") is not None:
            owned = out["active_tasks"]
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": True}, label="describe: stable")
    ctx.call(16, 5, {"states_filter": [], "types_filter": ["streams"]}, label="list streams groups",
             scoped=scoped_names(ctx.prefix))
    ctx.call(16, 5, {"states_filter": ["stable"], "types_filter": []}, label="list stable groups",
             scoped=scoped_names(ctx.prefix))
    ctx.call(16, 3, {}, label="list groups v3", scoped=scoped_names(ctx.prefix))
    ctx.call(15, 5, {"groups": [group], "include_authorized_operations": False}, label="DescribeGroups v5")
    ctx.call(15, 6, {"groups": [group], "include_authorized_operations": False}, label="DescribeGroups v6")
    ctx.call(69, 1, {"group_ids": [group], "include_authorized_operations": False}, label="ConsumerGroupDescribe")
    # A second member (another process) joins: the tasks are split once m1 gives half of them up.
    second = ctx.call(88, 0, heartbeat(group, "m2", 0, topology, process="p2"), label="m2 joins")
    epoch2 = second.get("member_epoch", 0)
    owned2 = []
    for i in range(3):
        out = ctx.call(88, 0, heartbeat(group, "m1", epoch, owned=owned), label=f"m1 reconciles {i}")
        epoch = out.get("member_epoch", epoch)
        if out.get("active_tasks") is not None:
            owned = out["active_tasks"]
        out = ctx.call(88, 0, heartbeat(group, "m2", epoch2, owned=owned2), label=f"m2 reconciles {i}")
        epoch2 = out.get("member_epoch", epoch2)
        if out.get("active_tasks") is not None:
            owned2 = out["active_tasks"]
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": False}, label="describe: two members")
    # Offsets by member epoch (OffsetCommit v9 names topics; v10 ids are compared elsewhere).
    commit = {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": "m1",
              "group_instance_id": None, "topics": [{"name": source, "partitions": [
                  {"partition_index": p, "committed_offset": 3, "committed_leader_epoch": -1,
                   "committed_metadata": ""} for p in (0, 1)]}]}
    ctx.call(8, 9, commit, label="commit at the member epoch")
    ctx.call(8, 9, dict(commit, generation_id_or_member_epoch=epoch + 7), label="commit at a newer epoch")
    ctx.call(8, 9, dict(commit, member_id="ghost"), label="commit by an unknown member")
    ctx.call(8, 8, commit, label="commit v8")
    ctx.call(9, 9, {"groups": [{"group_id": group, "member_id": "m1", "member_epoch": epoch + 1, "topics": None}],
                    "require_stable": False}, label="fetch at a stale epoch")
    ctx.call(42, 2, {"groups_names": [group]}, label="delete a non-empty group")
    ctx.call(88, 0, heartbeat(group, "m2", epoch2 + 9, owned=owned2), label="m2 fenced epoch")
    ctx.call(88, 0, heartbeat(group, "m1", -1, None), label="m1 leaves")
    ctx.call(88, 0, heartbeat(group, "ghost", -1, None), label="unknown member leaves")
    ctx.call(88, 0, heartbeat(group, "m2", -1, None, shutdown_application=True), label="m2 leaves with shutdown")
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": False}, label="describe: empty")
    ctx.call(11, 9, {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                     "member_id": "", "group_instance_id": "static-1", "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": b""}], "reason": None},
             label="classic JoinGroup into the empty streams group")
    ctx.call(42, 2, {"groups_names": [group]}, label="delete the group")
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": False}, label="describe: deleted")


@scenario
def streams_topology_statuses(ctx):
    left, right = ctx.name("left"), ctx.name("right")
    create_topic(ctx, left, partitions=2)
    create_topic(ctx, right, partitions=3)
    group = ctx.name("join")
    wait_coordinator(ctx, group)
    join_topology = {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[left, right], changelogs=[ctx.name("join-store-changelog")],
                    copartition=[([0, 1], [])])]}
    ctx.call(88, 0, heartbeat(group, "m1", 0, join_topology), label="copartitioned topics differ")
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": False}, label="describe: not ready")
    missing = ctx.name("missing")
    group2 = ctx.name("absent")
    wait_coordinator(ctx, group2)
    ctx.call(88, 0, heartbeat(group2, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[missing, left])]}), label="missing source topic")
    ctx.call(88, 0, heartbeat(group2, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[left, missing])]}), label="rejoin with another topology")
    ctx.call(88, 0, heartbeat(group2, "m2", 0, {"epoch": 1, "subtopologies": [
        subtopology("0", sources=[missing, left])]}), label="a newer topology epoch")
    ctx.call(88, 0, heartbeat(group2, "m3", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[missing, left])]}), label="the same topology")
    ctx.call(89, 0, {"group_ids": [group2], "include_authorized_operations": False}, label="describe: missing source")


@scenario
def streams_group_id_conflicts(ctx):
    topic = ctx.name("in")
    create_topic(ctx, topic, partitions=1)
    consumer, streams = ctx.name("cg"), ctx.name("sg")
    wait_coordinator(ctx, consumer)
    wait_coordinator(ctx, streams)
    ctx.call(68, 1, {"group_id": consumer, "member_id": "c" * 22, "member_epoch": 0, "instance_id": None,
                     "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                     "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []},
             label="a consumer group")
    ctx.call(88, 0, heartbeat(consumer, "m1", 0, {"epoch": 0, "subtopologies": [subtopology("0", sources=[topic])]}),
             label="streams join of a consumer group id")
    ctx.call(88, 0, heartbeat(consumer, "m1", 4, None), label="streams heartbeat of a consumer group id")
    ctx.call(89, 0, {"group_ids": [consumer], "include_authorized_operations": False},
             label="describe a consumer group as streams")
    ctx.call(88, 0, heartbeat(streams, "m1", 0, {"epoch": 0, "subtopologies": [subtopology("0", sources=[topic])]}),
             label="a streams group")
    ctx.call(68, 1, {"group_id": streams, "member_id": "c" * 22, "member_epoch": 0, "instance_id": None,
                     "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                     "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []},
             label="consumer join of a streams group id")
    ctx.call(11, 9, {"group_id": streams, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": b""}], "reason": None},
             label="classic join of a non-empty streams group")


@scenario
def streams_three_processes(ctx):
    """Three processes, two with two members each: ties between equal loads are broken as Kafka breaks them."""
    source = ctx.name("in")
    create_topic(ctx, source, partitions=5)
    group = ctx.name("tri")
    wait_coordinator(ctx, group)
    topology = {"epoch": 0, "subtopologies": [subtopology("0", sources=[source]),
                                              subtopology("1", sources=[source])]}
    members = [("a-1", "proc-a"), ("b-1", "proc-b"), ("a-2", "proc-a"), ("c-1", "proc-c"), ("b-2", "proc-b")]
    for member, process in members:
        ctx.call(88, 0, heartbeat(group, member, 0, topology, process=process), label=f"{member} joins")
    time.sleep(INITIAL_DELAY_S + 0.5)
    epochs = {m: 1 for m, _ in members}
    for round_ in range(2):
        for member, _ in members:
            out = ctx.call(88, 0, heartbeat(group, member, epochs[member], owned=[]), label=f"{member} round {round_}")
            epochs[member] = out.get("member_epoch", epochs[member])
    ctx.call(89, 0, {"group_ids": [group], "include_authorized_operations": False}, label="describe")


@scenario(profile="acl")
def streams_acl_denials(ctx):
    """StandardAuthorizer, everything allowed where no ACL matches; User:ANONYMOUS is denied READ on one
    group, DESCRIBE on one topic and CREATE on the internal topics of one application."""
    from .acls import ALLOW, CREATE, DESCRIBE, GROUP, LITERAL, PREFIXED, READ, TOPIC, _binding

    source = ctx.name("in")
    hidden = ctx.name("hidden")
    create_topic(ctx, source, partitions=1)
    create_topic(ctx, hidden, partitions=1)
    dgroup, tgroup, cgroup = ctx.name("dg"), ctx.name("tg"), ctx.name("cg")
    for g in (dgroup, tgroup, cgroup):
        wait_coordinator(ctx, g)
    app = ctx.name("noc")
    out = ctx.call(30, 3, {"creations": [_binding(GROUP, dgroup, LITERAL, READ), _binding(TOPIC, hidden, LITERAL, DESCRIBE),
                                         _binding(TOPIC, app, PREFIXED, CREATE),
                                         # With an ACL on them, the topics need DESCRIBE allowed explicitly.
                                         _binding(TOPIC, app, PREFIXED, DESCRIBE, ALLOW)]}, label="create deny ACLs")
    assert out.kind == "response"
    ctx.setup(3, 12, {"topics": [{"name": hidden, "topic_id": None}], "allow_auto_topic_creation": False},
              expect=lambda o: o.kind == "response" and o["topics"][0]["error_code"] == 29, retries=80)
    ctx.call(88, 0, heartbeat(dgroup, "m1", 0, {"epoch": 0, "subtopologies": [subtopology("0", sources=[source])]}),
             label="READ on the group denied")
    ctx.call(88, 0, heartbeat(tgroup, "m1", 0, {"epoch": 0, "subtopologies": [subtopology("0", sources=[source, hidden])]}),
             label="DESCRIBE on a topic denied")
    ctx.call(88, 0, heartbeat(cgroup, "m1", 0, {"epoch": 0, "subtopologies": [
        subtopology("0", sources=[source], changelogs=[f"{app}-store-changelog"])]}),
             label="CREATE on the changelog topic denied")
    ctx.call(89, 0, {"group_ids": [dgroup, cgroup], "include_authorized_operations": True}, label="describe")
