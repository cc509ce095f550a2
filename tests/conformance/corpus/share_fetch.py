"""Issue 21: ShareFetch (78) and ShareAcknowledge (79) of share groups (KIP-932), raw, compared with
Apache Kafka 4.2: acquisition ranges and delivery counts, per-offset acknowledgements, release and
redelivery, two members on one partition, share-session epochs and their errors, malformed
acknowledgement batches, unknown topics and partitions, batch sizing, record-limit mode, renew.

Kafka serves ShareFetch to members of the share group: each scenario joins with ShareGroupHeartbeat
(76) as set-up, on minikafka only once it serves that API (the group side of issue 21).  Topics are
empty when the first fetch initializes the share partition (``share.auto.offset.reset`` latest, the
default), records are produced after it, so both brokers start at offset 0.
"""

from __future__ import annotations

import base64
import time
import uuid

from ..engine import ScenarioFailed, scenario
from .common import batch, create_topic, find_coordinator, ok, produce

UNKNOWN_ID = uuid.UUID(int=4242)


def _heartbeat_spec_for_set_up() -> None:
    """ShareGroupHeartbeat v1 (76) for the set-up only, while the codec has no spec of it (the group
    side of issue 21 adds the real one; then this does nothing).  Fields as Kafka 4.2 defines them."""
    from minikafka.protocol import specs, specs_kafka4

    if specs.message(76, "request") is not None:
        return
    f = specs_kafka4._f
    specs_kafka4.SPECS["ShareGroupHeartbeatRequest"] = {
        "apiKey": 76, "type": "request", "name": "ShareGroupHeartbeatRequest", "validVersions": "1",
        "flexibleVersions": "0+", "fields": [
            f("GroupId", "string"), f("MemberId", "string"), f("MemberEpoch", "int32"),
            f("RackId", "string", nullableVersions="0+", default="null"),
            f("SubscribedTopicNames", "[]string", nullableVersions="0+", default="null")]}
    specs_kafka4.SPECS["ShareGroupHeartbeatResponse"] = {
        "apiKey": 76, "type": "response", "name": "ShareGroupHeartbeatResponse", "validVersions": "1",
        "flexibleVersions": "0+", "fields": [
            f("ThrottleTimeMs", "int32"), f("ErrorCode", "int16"),
            f("ErrorMessage", "string", nullableVersions="0+", default="null"),
            f("MemberId", "string", nullableVersions="0+", default="null"), f("MemberEpoch", "int32"),
            f("HeartbeatIntervalMs", "int32"),
            f("Assignment", "Assignment", nullableVersions="0+", default="null", fields=[
                f("TopicPartitions", "[]TopicPartitions", fields=[
                    f("TopicId", "uuid"), f("Partitions", "[]int32")])])]}
    specs_kafka4.SPEC_BY_KEY[(76, "request")] = "ShareGroupHeartbeatRequest"
    specs_kafka4.SPEC_BY_KEY[(76, "response")] = "ShareGroupHeartbeatResponse"
    specs.message.cache_clear()


_heartbeat_spec_for_set_up()


def _member() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def join(ctx, group: str, topic: str, member: str | None = None, conn: str = "main") -> str:
    """ShareGroupHeartbeat until the member is assigned the topic's partitions (set-up)."""
    member = member or _member()
    if 76 not in ctx.plan.mk_versions and ctx.side == "minikafka":
        return member  # the group side is not served yet: minikafka's ShareFetch does not need it
    find_coordinator(ctx, group)
    epoch = 0
    for _ in range(100):
        out = ctx.setup(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                                "subscribed_topic_names": [topic] if epoch == 0 else None}, conn=conn)
        if ok(out) and out["error_code"] == 0:
            epoch = out["member_epoch"]
            assignment = out.get("assignment")
            if assignment and assignment["topic_partitions"]:
                return member
        time.sleep(0.1)
    raise ScenarioFailed(f"{ctx.side}: {member} was never assigned {topic}")


def fetch_body(group, member, epoch, topic_id=None, acks=None, *, wait=300, max_records=500, batch_size=500,
               mode=0, renew=False, partitions=(0,), forgotten=()):
    topics = []
    if topic_id is not None:
        topics = [{"topic_id": topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": (acks or {}).get(p, [])} for p in partitions]}]
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": wait,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": batch_size,
            "share_acquire_mode": mode, "is_renew_ack": renew, "topics": topics,
            "forgotten_topics_data": [{"topic_id": t, "partitions": list(ps)} for t, ps in forgotten]}


def ack_body(group, member, epoch, topic_id, acks, renew=False):
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "is_renew_ack": renew,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": p, "acknowledgement_batches": b} for p, b in acks.items()]}]}


def ack(first, last, *types):
    return {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}


def start(ctx, suffix="t", partitions=1, members=1):
    """A topic, a group with ``members`` members, and each member's share session opened (epoch 0)
    before any record exists; returns (topic, topic id, group, members)."""
    topic = ctx.name(suffix)
    topic_id = create_topic(ctx, topic, partitions)
    group = ctx.name("g")
    out = []
    for i in range(members):
        conn = f"m{i}"
        member = join(ctx, group, topic, conn=conn)
        ctx.setup(78, 2, fetch_body(group, member, 0, topic_id, partitions=range(partitions), wait=50), conn=conn,
                  expect=lambda o: ok(o) and o["error_code"] == 0)
        out.append((member, conn))
    if ctx.side == "kafka":
        # Kafka loads the share partition in the background after the first fetch and resolves
        # "latest" when the load completes: give it time before records arrive.
        time.sleep(1.0)
    return topic, topic_id, group, out


def acquired(ctx, group, member, conn, epoch, topic_id, *, label, tries=30, **kw):
    """An incremental fetch, repeated (bounded) until it acquires something: Kafka loads the share
    partition in the background.  Only the acquiring answer is compared."""
    body = fetch_body(group, member, epoch, topic_id, **kw)
    for _ in range(tries):
        out = ctx.conn(conn).call(78, 2, body)
        if ok(out) and out["error_code"] == 0 and any(
                p["acquired_records"] for t in out["responses"] for p in t["partitions"]):
            ctx.record(78, 2, out, label=label)
            return epoch + 1
        epoch += 1
        body = dict(body, share_session_epoch=epoch, topics=[])
    raise ScenarioFailed(f"{ctx.side}: nothing acquired for {label}")


@scenario
def share_fetch_acquire_and_acknowledge(ctx):
    """Two log batches acquired as one range; per-offset accept/release/reject/gap; the released
    record comes back with delivery count 2; acknowledgements below the start offset are ignored;
    one past the acquired records is INVALID_REQUEST; ShareAcknowledge and closing the session."""
    topic, tid, group, [(m, conn)] = start(ctx)
    produce(ctx, topic, 0, batch(b"a", b"b", b"c", b"d", b"e"))
    produce(ctx, topic, 0, batch(b"f", b"g", b"h"))
    epoch = acquired(ctx, group, m, conn, 1, tid, label="first acquisition")
    ctx.call(78, 2, fetch_body(group, m, epoch, tid, {0: [ack(0, 4, 1, 2, 3, 0, 1)]}), conn=conn,
             label="per-offset acknowledgement, released offset redelivered")
    ctx.call(78, 2, fetch_body(group, m, epoch + 1, tid, {0: [ack(0, 1, 1)]}, wait=100), conn=conn,
             label="acknowledge across the start offset")
    ctx.call(78, 2, fetch_body(group, m, epoch + 2, wait=100), conn=conn, label="nothing to acquire")
    ctx.call(78, 2, fetch_body(group, m, epoch + 3, tid, {0: [ack(99, 100, 1)]}, wait=100), conn=conn,
             label="acknowledge past the acquired records")
    ctx.call(79, 2, ack_body(group, m, epoch + 4, tid, {0: [ack(5, 6, 1), ack(7, 7, 3)]}), conn=conn,
             label="ShareAcknowledge accept and reject")
    ctx.call(79, 2, ack_body(group, m, epoch + 5, tid, {0: [ack(5, 5, 1)]}), conn=conn,
             label="acknowledge an acknowledged record")
    ctx.call(79, 1, ack_body(group, m, -1, tid, {}), conn=conn, label="close the session (v1)")
    ctx.call(79, 2, ack_body(group, m, 3, tid, {}), conn=conn, label="after close")


@scenario
def share_fetch_two_members(ctx):
    """Records acquired by one member are not given to another; the other cannot acknowledge them;
    closing the holder's session releases them without counting a delivery."""
    topic, tid, group, [(a, ca), (b, cb)] = start(ctx, members=2)
    produce(ctx, topic, 0, batch(b"1", b"2", b"3"))
    acquired(ctx, group, a, ca, 1, tid, label="member a acquires")
    ctx.call(78, 2, fetch_body(group, b, 1, tid, wait=200), conn=cb, label="member b gets nothing")
    ctx.call(79, 2, ack_body(group, b, 2, tid, {0: [ack(0, 2, 1)]}), conn=cb, label="b acknowledges a's records")
    ctx.call(79, 2, ack_body(group, b, 3, tid, {0: [ack(1, 1, 1)]}), conn=cb, label="b acknowledges one of a's offsets")
    ctx.call(78, 2, fetch_body(group, a, -1, tid, {0: [ack(0, 0, 1)]}), conn=ca,
             label="a closes its session with ShareFetch -1 and an acknowledgement")
    acquired(ctx, group, b, cb, 4, tid, label="b acquires the released records")


@scenario
def share_fetch_session_errors(ctx):
    topic, tid, group, [(m, conn)] = start(ctx)
    for v in ctx.versions(78):
        ctx.call(78, v, fetch_body(group, _member(), 5, tid), label="no session")
        ctx.call(78, v, fetch_body(group, _member(), -1, tid), label="close without a session")
        ctx.call(78, v, fetch_body(group, m, 0, tid, {0: [ack(0, 0, 1)]}), conn=conn,
                 label="acknowledgements when opening")
        ctx.call(78, v, fetch_body(group, m, 7, tid), conn=conn, label="wrong epoch")
        ctx.call(78, v, fetch_body(group, "", 0, tid), label="empty member id")
        ctx.call(78, v, fetch_body(group, m, 0, tid, wait=0), conn=conn, label="reopen")
        ctx.call(78, v, fetch_body(group, m, 1, wait=0), conn=conn, label="incremental, nothing new")
    for v in ctx.versions(79):
        ctx.call(79, v, ack_body(group, m, 0, tid, {}), conn=conn, label="ShareAcknowledge epoch 0")
        ctx.call(79, v, ack_body(group, _member(), 1, tid, {}), label="ShareAcknowledge without a session")
        ctx.call(79, v, ack_body(group, m, 9, tid, {}), conn=conn, label="ShareAcknowledge wrong epoch")


@scenario
def share_fetch_malformed_acknowledgements(ctx):
    topic, tid, group, [(m, conn)] = start(ctx)
    produce(ctx, topic, 0, batch(b"a", b"b", b"c", b"d"))
    epoch = acquired(ctx, group, m, conn, 1, tid, label="acquire")
    cases = [("first after last", [ack(3, 1, 1)]), ("overlapping batches", [ack(0, 2, 1), ack(2, 3, 1)]),
             ("unordered batches", [ack(2, 3, 1), ack(0, 1, 1)]), ("type count mismatch", [ack(0, 3, 1, 1)]),
             ("unknown type", [ack(0, 0, 7)]), ("no types", [ack(0, 0)]), ("renew without IsRenewAck", [ack(0, 0, 4)])]
    for label, batches in cases:
        ctx.call(79, 2, ack_body(group, m, epoch, tid, {0: batches}), conn=conn, label=f"ShareAcknowledge {label}")
        epoch += 1
    for label, batches in cases[:3]:
        ctx.call(78, 2, fetch_body(group, m, epoch, tid, {0: batches}, wait=0), conn=conn, label=f"ShareFetch {label}")
        epoch += 1


@scenario
def share_fetch_unknown_partitions(ctx):
    topic, tid, group, [(m, conn)] = start(ctx)
    # Kafka lists a response's topics in hash order of their (random) ids: compare them with the
    # unknown id first, the topic after it.
    ordered = {"conn": conn, "scoped": _unknown_id_first}
    ctx.call(78, 2, fetch_body(group, m, 1, UNKNOWN_ID, wait=0), label="unknown topic id", **ordered)
    ctx.call(78, 2, fetch_body(group, m, 2, tid, partitions=(0, 3), wait=0), label="unknown partition", **ordered)
    ctx.call(79, 2, ack_body(group, m, 3, UNKNOWN_ID, {0: [ack(0, 0, 1)]}),
             label="acknowledge on an unknown topic id", **ordered)
    ctx.call(79, 2, ack_body(group, m, 4, tid, {5: [ack(0, 0, 1)]}),
             label="acknowledge on an unknown partition", **ordered)
    ctx.call(78, 2, fetch_body(group, m, 5, tid, forgotten=[(tid, [0, 3])], wait=0),
             label="forget the partitions", **ordered)


def _unknown_id_first(body: dict) -> dict:
    responses = body.get("responses")
    if not responses:
        return body
    return {**body, "responses": sorted(responses, key=lambda r: r.get("topic_id") != UNKNOWN_ID)}


@scenario
def share_fetch_batch_size_and_max_records(ctx):
    """BatchSize splits acquired ranges at log-batch boundaries; MaxRecords is soft (whole batches)."""
    topic, tid, group, [(m, conn)] = start(ctx)
    for i in range(4):
        produce(ctx, topic, 0, batch(b"x%d" % i, b"y%d" % i))
    epoch = acquired(ctx, group, m, conn, 1, tid, label="batch size 2, max records 3", batch_size=2, max_records=3)
    epoch = acquired(ctx, group, m, conn, epoch, tid, label="the rest, batch size 3", batch_size=3)
    ctx.call(79, 2, ack_body(group, m, epoch, tid, {0: [ack(0, 7, 1)]}), conn=conn, label="accept all")


@scenario
def share_fetch_record_limit_and_renew(ctx):
    """ShareFetch v2: record-limit mode acquires exactly MaxRecords records; RENEW keeps a lock."""
    topic, tid, group, [(m, conn)] = start(ctx)
    produce(ctx, topic, 0, batch(b"a", b"b", b"c", b"d", b"e"))
    epoch = acquired(ctx, group, m, conn, 1, tid, label="record limit 2", max_records=2, mode=1)
    epoch = acquired(ctx, group, m, conn, epoch, tid, label="record limit 2 again", max_records=2, mode=1)
    ctx.call(79, 2, ack_body(group, m, epoch, tid, {0: [ack(0, 1, 4)]}, renew=True), conn=conn, label="renew")
    ctx.call(79, 2, ack_body(group, m, epoch + 1, tid, {0: [ack(0, 3, 1)]}), conn=conn, label="accept after renew")
    ctx.call(78, 2, fetch_body(group, m, epoch + 2, tid, mode=1, max_records=10, wait=100), conn=conn,
             label="the last record")


@scenario
def share_fetch_min_bytes(ctx):
    """MinBytes above what there is: the fetch waits MaxWaitMs, then acquires what there is."""
    topic, tid, group, [(m, conn)] = start(ctx)
    produce(ctx, topic, 0, batch(b"small"))
    body = dict(fetch_body(group, m, 1, wait=500), min_bytes=1 << 20)
    for _ in range(20):  # Kafka loads the share partition in the background
        out = ctx.conn(conn).call(78, 2, body)
        body["share_session_epoch"] += 1
        if ok(out) and any(p["acquired_records"] for t in out["responses"] for p in t["partitions"]):
            ctx.record(78, 2, out, label="min bytes not reached by the deadline")
            return
    raise ScenarioFailed(f"{ctx.side}: nothing acquired")
