"""Share groups (KIP-932), the share coordinator: the share-group-state RPCs (Initialize/Read/Write/
Delete/ReadSummary ShareGroupState, 83-87), FindCoordinator key type 2, and the share-group offsets
admin APIs (Describe/Alter/DeleteShareGroupOffsets, 90-92)."""

from __future__ import annotations

import base64
import uuid

from ..engine import scenario
from .common import batch, create_topic, find_coordinator, ok, produce
from .share_group import heartbeat, settle

UNKNOWN_ID = uuid.UUID(int=77)


def share_key(group: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group}:{base64.urlsafe_b64encode(topic_id.bytes).rstrip(b'=').decode()}:{partition}"


def share_coordinator(ctx, group: str, topic_id: uuid.UUID) -> None:
    """FindCoordinator key type 2 (set-up) until it answers, then a summary until the share
    coordinator has loaded the key's partition of __share_group_state."""
    key = share_key(group, topic_id, 0)
    ctx.setup(10, 6, {"key_type": 2, "coordinator_keys": [key]}, retries=80,
              expect=lambda o: ok(o) and o["coordinators"][0]["error_code"] == 0)
    ctx.setup(87, 1, state_body(group, topic_id, {"partition": 0, "leader_epoch": 0}), retries=80,
              expect=lambda o: ok(o) and all(p["error_code"] not in (14, 15, 16)
                                             for r in o["results"] for p in r["partitions"]))


def state_body(group: str, topic_id: uuid.UUID, *partitions: dict) -> dict:
    return {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": list(partitions)}]}


def write(partition, state_epoch, leader_epoch, start, batches=(), dcc=-1):
    return {"partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start, "delivery_complete_count": dcc,
            "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                              for f, la, s, c in batches]}


@scenario
def share_state_find_coordinator(ctx):
    """Key type 2 once the share coordinator exists: this broker; a group id with colons; bad keys."""
    topic = ctx.name("t")
    topic_id = create_topic(ctx, topic)
    group = ctx.name("g")
    share_coordinator(ctx, group, topic_id)
    # Keys name a fixed topic id (the coordinator does not look the topic up), so that both brokers
    # are asked the same key.
    fixed = uuid.UUID("6b1750ce-03cf-470d-9a8e-f1d9c62b1076")
    text = base64.urlsafe_b64encode(fixed.bytes).rstrip(b"=").decode()
    for v in ctx.versions(10, lo=4):
        for key, label in ((share_key(group, fixed, 0), "share key"),
                           (share_key(group + ":a:b", fixed, 3), "group id with colons"),
                           (share_key(group, UNKNOWN_ID, 0), "unknown topic id"),
                           (f"{group}:{text}==:0", "padded topic id"),
                           (f" :{text}:0", "blank group"),
                           (f"{group}:{text}:0:", "trailing colon"),
                           (f"{group}:{text}:+5", "partition +5"),
                           (f"{group}:{text}:2147483648", "partition too big")):
            ctx.call(10, v, {"key_type": 2, "coordinator_keys": [key]}, label=label)


@scenario
def share_state_rpcs(ctx):
    """Initialize, Read, Write, ReadSummary, Delete on one share partition: epochs, fencing, errors."""
    topic = ctx.name("t")
    topic_id = create_topic(ctx, topic, partitions=2)
    group = ctx.name("g")
    share_coordinator(ctx, group, topic_id)
    body = lambda *p: state_body(group, topic_id, *p)  # noqa: E731
    for v in ctx.versions(87):
        ctx.call(87, v, body({"partition": 0, "leader_epoch": 0}), label="summary, no state")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 0}), label="read, no state")
    ctx.call(85, 1, body(write(0, 1, 0, 5)), label="write, no state")
    ctx.call(83, 0, body({"partition": 0, "state_epoch": 1, "start_offset": 5}), label="initialize")
    for v in ctx.versions(87):
        ctx.call(87, v, body({"partition": 0, "leader_epoch": 0}), label="summary after initialize")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": -1}), label="read, leader epoch -1")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 0}), label="read, leader epoch 0")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 3}), label="read, newer leader epoch")
    ctx.call(87, 1, body({"partition": 0, "leader_epoch": 0}), label="summary, leader epoch recorded")
    ctx.call(85, 1, body(write(0, 1, 3, 5, [(5, 6, 2, 1), (7, 9, 0, 1)], dcc=2)), label="write v1")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 3}), label="read after write")
    ctx.call(85, 0, body(write(0, 1, 3, 7, [(7, 7, 4, 2), (12, 14, 0, 1)])), label="write v0, start moves")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 3}), label="read, batches combined")
    for v in ctx.versions(87):
        ctx.call(87, v, body({"partition": 0, "leader_epoch": 0}), label="summary after writes")
    ctx.call(85, 1, body(write(0, 0, 3, 7)), label="write, older state epoch")
    ctx.call(85, 1, body(write(0, 1, 2, 7)), label="write, older leader epoch")
    ctx.call(85, 1, body(write(0, -1, -1, -1, [(8, 8, 2, 1)])), label="write, epochs -1")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 2}), label="read, older leader epoch")
    ctx.call(83, 0, body({"partition": 0, "state_epoch": 0, "start_offset": 0}), label="initialize, older state epoch")
    ctx.call(83, 0, body({"partition": 0, "state_epoch": 2, "start_offset": 20}), label="initialize again, newer")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 3}), label="read after reset")
    ctx.call(83, 0, body({"partition": 1, "state_epoch": 0, "start_offset": -1}), label="initialize, start -1")
    ctx.call(87, 1, body({"partition": 1, "leader_epoch": 0}), label="summary, start -1")
    ctx.call(83, 0, state_body(group, UNKNOWN_ID, {"partition": 0, "state_epoch": 0, "start_offset": 0}),
             label="initialize, unknown topic")
    for api, p in ((83, {"partition": 2, "state_epoch": 0, "start_offset": 0}),
                   (84, {"partition": 2, "leader_epoch": 0}), (85, write(2, 0, 0, 0)),
                   (86, {"partition": 2}), (87, {"partition": 2, "leader_epoch": 0})):
        ctx.call(api, 0, body(p), label="partition out of range")
        ctx.call(api, 0, body({**p, "partition": -1}), label="negative partition")
    ctx.call(86, 0, body({"partition": 0}), label="delete")
    ctx.call(86, 0, body({"partition": 0}), label="delete again")
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 3}), label="read after delete")
    ctx.call(87, 1, body({"partition": 0, "leader_epoch": 0}), label="summary after delete")
    for api in (83, 84, 85, 86, 87):
        ctx.call(api, 0, {"group_id": group, "topics": []}, label="no topics")
        ctx.call(api, 0, {"group_id": "", "topics": body({"partition": 0})["topics"]}
                 if api == 86 else {"group_id": "", "topics": []}, label="no group id")


@scenario
def share_state_snapshots(ctx):
    """More writes than one snapshot holds (share.coordinator.snapshot.update.records.per.snapshot is
    500): the state read back is the combination of every write."""
    topic = ctx.name("t")
    topic_id = create_topic(ctx, topic)
    group = ctx.name("g")
    share_coordinator(ctx, group, topic_id)
    body = lambda *p: state_body(group, topic_id, *p)  # noqa: E731
    ctx.setup(83, 0, body({"partition": 0, "state_epoch": 0, "start_offset": 0}))
    for i in range(520):
        ctx.setup(85, 1, body(write(0, 0, 0, i // 4, [(i, i, 2 if i % 3 else 4, 1 + i % 2)])),
                  expect=lambda o: ok(o) and o["results"][0]["partitions"][0]["error_code"] == 0)
    ctx.call(84, 0, body({"partition": 0, "leader_epoch": 0}), label="read after 520 writes")
    ctx.call(87, 1, body({"partition": 0, "leader_epoch": 0}), label="summary after 520 writes")


@scenario
def share_group_offsets_admin(ctx):
    """Describe/Alter/DeleteShareGroupOffsets on unknown, empty, non-empty and non-share groups."""
    topic, other, missing = ctx.name("t"), ctx.name("o"), ctx.name("missing")
    create_topic(ctx, topic, partitions=2)
    create_topic(ctx, other)
    produce(ctx, topic, 0, batch(b"a", b"b", b"c", b"d", b"e"))
    group, busy, classic = ctx.name("sg"), ctx.name("busy"), ctx.name("classic")
    for g in (group, busy, classic):
        find_coordinator(ctx, g)
    all_topics = {"group_id": group, "topics": None}
    for v in ctx.versions(90):
        ctx.call(90, v, {"groups": [all_topics, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [0, 1]}, {"topic_name": missing, "partitions": [0]}]},
            {"group_id": group, "topics": []}]}, label="unknown group")
    ctx.call(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]}, label="delete, unknown group")
    ctx.call(92, 0, {"group_id": "", "topics": [{"topic_name": topic}]}, label="delete, empty group id")
    ctx.call(91, 0, {"group_id": "", "topics": []}, label="alter, empty group id")
    ctx.call(91, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 2},
                                             {"partition_index": 5, "start_offset": 0}]},
        {"topic_name": missing, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        label="alter, unknown group")
    for v in ctx.versions(90):
        ctx.call(90, v, {"groups": [all_topics]}, label="after alter, all topics")
        ctx.call(90, v, {"groups": [{"group_id": group, "topics": [{"topic_name": topic, "partitions": [0, 1]}]}]},
                 label="after alter, lag")
    ctx.call(91, 0, {"group_id": group, "topics": [
        {"topic_name": other, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        label="alter another topic")
    ctx.call(92, 0, {"group_id": group, "topics": [{"topic_name": topic}, {"topic_name": missing}]},
             label="delete one topic")
    ctx.call(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]}, label="delete it again")
    ctx.call(90, 1, {"groups": [all_topics]}, label="after delete, all topics")
    # a classic group of that id: not a share group
    ctx.setup(8, 9, {"group_id": classic, "generation_id_or_member_epoch": -1, "member_id": "",
                     "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                         {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                          "committed_metadata": ""}]}]},
              expect=lambda o: ok(o) and o["topics"][0]["partitions"][0]["error_code"] == 0)
    ctx.call(91, 0, {"group_id": classic, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        label="alter, a classic group")
    ctx.call(92, 0, {"group_id": classic, "topics": [{"topic_name": topic}]}, label="delete, a classic group")
    ctx.call(90, 1, {"groups": [{"group_id": classic, "topics": None}]}, label="describe, a classic group")
    # a share group with a member
    member = "member-s-0000000000000001"
    ctx.setup(76, 1, heartbeat(busy, member, 0, [topic]), expect=lambda o: ok(o) and o["error_code"] == 0)
    settle(ctx, busy, member, 1)
    ctx.call(91, 0, {"group_id": busy, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        label="alter, non-empty group")
    ctx.call(92, 0, {"group_id": busy, "topics": [{"topic_name": topic}]}, label="delete, non-empty group")
    ctx.call(90, 1, {"groups": [{"group_id": busy, "topics": None}]}, label="describe, a member's group")


@scenario(profile="acl")
def share_group_offsets_acl(ctx):
    """Describe/Alter/DeleteShareGroupOffsets with groups and topics the principal may not use:
    GROUP_AUTHORIZATION_FAILED for the group, TOPIC_AUTHORIZATION_FAILED per topic."""
    from .acls import ALL, DENY, GROUP, PREFIXED, TOPIC, _binding

    denied_topic, open_topic = ctx.name("dt"), ctx.name("ot")
    denied_group, group = ctx.name("dg"), ctx.name("g")
    create_topic(ctx, denied_topic)
    open_id = create_topic(ctx, open_topic)
    share_coordinator(ctx, group, open_id)  # Kafka reads offsets through its share coordinator
    find_coordinator(ctx, group)
    find_coordinator(ctx, denied_group)
    out = ctx.call(30, 3, {"creations": [_binding(TOPIC, denied_topic, PREFIXED, ALL, DENY),
                                         _binding(GROUP, denied_group, PREFIXED, ALL, DENY)]},
                   label="create deny ACLs")
    assert out.kind == "response"
    ctx.setup(3, 12, {"topics": [{"name": denied_topic, "topic_id": None}], "allow_auto_topic_creation": False},
              expect=lambda o: ok(o) and o["topics"][0]["error_code"] == 29, retries=80)
    ctx.setup(15, 5, {"groups": [denied_group], "include_authorized_operations": False}, retries=80,
              expect=lambda o: ok(o) and o["groups"][0]["error_code"] == 30)
    for v in ctx.versions(90):
        ctx.call(90, v, {"groups": [{"group_id": denied_group, "topics": None},
                                    {"group_id": group, "topics": [{"topic_name": denied_topic, "partitions": [0]},
                                                                   {"topic_name": open_topic, "partitions": [0]}]}]},
                 label="denied group, denied topic")
    ctx.call(91, 0, {"group_id": denied_group, "topics": []}, label="alter, denied group")
    ctx.call(91, 0, {"group_id": group, "topics": [
        {"topic_name": denied_topic, "partitions": [{"partition_index": 0, "start_offset": 0}]},
        {"topic_name": open_topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        label="alter, denied topic")
    for v in ctx.versions(90):
        ctx.call(90, v, {"groups": [{"group_id": group, "topics": None}]}, label="all topics, denied one left out")
    ctx.call(92, 0, {"group_id": denied_group, "topics": [{"topic_name": open_topic}]}, label="delete, denied group")
    ctx.call(92, 0, {"group_id": group, "topics": [{"topic_name": denied_topic}, {"topic_name": open_topic}]},
             label="delete, denied topic")


@scenario
def share_state_topic(ctx):
    """__share_group_state as Kafka 4.2 creates it: internal, its partition count, its topic configs."""
    topic_id = create_topic(ctx, ctx.name("t"))
    share_coordinator(ctx, ctx.name("g"), topic_id)

    def only_partition_count(body):
        out = dict(body)
        out["topics"] = [{**t, "partitions": len(t["partitions"] or [])} for t in body["topics"]]
        return out

    ctx.call(3, 12, {"topics": [{"name": "__share_group_state", "topic_id": None}],
                     "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
             label="metadata", scoped=only_partition_count)
    names = ["cleanup.policy", "compression.type", "segment.bytes", "min.insync.replicas", "retention.ms",
             "retention.bytes", "max.message.bytes"]
    ctx.call(32, 4, {"resources": [{"resource_type": 2, "resource_name": "__share_group_state",
                                    "configuration_keys": names}],
                     "include_synonyms": False, "include_documentation": False}, label="topic configs")
