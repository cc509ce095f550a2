"""InitProducerId and the transaction error paths."""

from __future__ import annotations

from ..engine import scenario
from .common import batch, create_topic, find_coordinator, ok


def init(ctx, tid, version, timeout=60000, pid=-1, epoch=-1, label="", record=True):
    body = {"transactional_id": tid, "transaction_timeout_ms": timeout, "producer_id": pid, "producer_epoch": epoch}
    if record:
        return ctx.call(22, version, body, label=label)
    return ctx.setup(22, version, body, expect=lambda o: ok(o) and o["error_code"] == 0, retries=60)


@scenario
def init_producer_id(ctx):
    # Kafka hands out producer ids from blocks it asks its controller for: wait for the first.
    ctx.setup(22, 0, {"transactional_id": None, "transaction_timeout_ms": 60000}, retries=80,
              expect=lambda o: ok(o) and o["error_code"] == 0)
    for v in ctx.versions(22):
        init(ctx, None, v, label="idempotent")
        tid = ctx.name(f"tx{v}")
        find_coordinator(ctx, tid, key_type=1)
        init(ctx, tid, v, timeout=10_000_000, label="timeout too large")
        init(ctx, tid, v, timeout=0, label="timeout zero")
        first = init(ctx, tid, v, label="transactional")
        init(ctx, tid, v, label="again (epoch bump)")
        if v >= 3:
            init(ctx, tid, v, pid=first.get("producer_id", -1), epoch=first.get("producer_epoch", -1),
                 label="with stale epoch")
            init(ctx, tid, v, pid=424242, epoch=0, label="with wrong producer id")
        init(ctx, "", v, label="empty transactional id")
        if v >= 3:
            idem = init(ctx, None, v, label="idempotent again")
            init(ctx, None, v, pid=idem.get("producer_id", -1), epoch=idem.get("producer_epoch", -1),
                 label="idempotent epoch bump (KIP-360)")
            init(ctx, None, v, pid=idem.get("producer_id", -1), epoch=-1, label="idempotent, id without epoch")


@scenario
def transaction_errors(ctx):
    topic = ctx.name("t")
    create_topic(ctx, topic)
    for v in ctx.versions(24, hi=3):  # v4+ (batched form): corpus/issue20.py
        tid = ctx.name(f"a{v}")
        find_coordinator(ctx, tid, key_type=1)
        out = init(ctx, tid, 4, record=False)
        pid, epoch = out["producer_id"], out["producer_epoch"]
        body = lambda p, e, parts: {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": p,  # noqa: E731
                                    "v3_and_below_producer_epoch": e,
                                    "v3_and_below_topics": [{"name": topic, "partitions": parts}]}
        ctx.call(24, v, body(pid + 1, epoch, [0]), label="wrong producer id")
        ctx.call(24, v, body(pid, epoch + 1, [0]), label="future epoch")
        ctx.call(24, v, body(pid, epoch, [0, 3]), label="unknown partition")
        ctx.call(24, v, body(pid, epoch, [0]), label="add")
        ctx.call(24, v, body(pid, epoch, [0]), label="add again")
        ctx.call(24, v, {"v3_and_below_transactional_id": ctx.name("never"), "v3_and_below_producer_id": pid,
                         "v3_and_below_producer_epoch": epoch,
                         "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}, label="unknown transactional id")
        ctx.setup(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": False},
                  expect=lambda o: ok(o) and o["error_code"] == 0, retries=40)
    for v in ctx.versions(26):
        tid = ctx.name(f"e{v}")
        find_coordinator(ctx, tid, key_type=1)
        out = init(ctx, tid, 4, record=False)
        pid, epoch = out["producer_id"], out["producer_epoch"]
        end = lambda p, e, c: {"transactional_id": tid, "producer_id": p, "producer_epoch": e, "committed": c}  # noqa: E731
        ctx.call(26, v, end(pid, epoch, True), label="commit with no transaction")
        ctx.call(26, v, end(pid, epoch, False), label="abort with no transaction")
        ctx.call(26, v, end(pid + 1, epoch, True), label="wrong producer id")
        ctx.call(26, v, end(pid, epoch - 1 if epoch > 0 else epoch + 1, True), label="wrong epoch")
        ctx.call(26, v, {"transactional_id": ctx.name("never"), "producer_id": pid, "producer_epoch": epoch,
                         "committed": True}, label="unknown transactional id")
    for v in ctx.versions(25):
        tid = ctx.name(f"o{v}")
        find_coordinator(ctx, tid, key_type=1)
        out = init(ctx, tid, 4, record=False)
        pid, epoch = out["producer_id"], out["producer_epoch"]
        ctx.call(25, v, {"transactional_id": tid, "producer_id": pid + 1, "producer_epoch": epoch,
                         "group_id": ctx.name("g")}, label="wrong producer id")
        ctx.call(25, v, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                         "group_id": ctx.name("g")}, label="add offsets")
        ctx.setup(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": False},
                  expect=lambda o: ok(o) and o["error_code"] == 0, retries=40)
    for v in ctx.versions(28):
        tid = ctx.name(f"c{v}")
        group = ctx.name(f"cg{v}")
        find_coordinator(ctx, tid, key_type=1)
        find_coordinator(ctx, group)
        out = init(ctx, tid, 4, record=False)
        pid, epoch = out["producer_id"], out["producer_epoch"]
        body = {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
        ctx.call(28, v, body, label="without AddOffsetsToTxn")
        ctx.setup(25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": group},
                  expect=lambda o: ok(o) and o["error_code"] == 0, retries=40)
        ctx.call(28, v, body, label="after AddOffsetsToTxn")
        ctx.call(28, v, dict(body, producer_epoch=epoch + 2), label="wrong epoch")
        ctx.call(9, 7, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                        "require_stable": True}, label="offset fetch require_stable, pending")
        ctx.setup(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True},
                  expect=lambda o: ok(o) and o["error_code"] == 0, retries=40)


@scenario
def transactional_produce(ctx):
    topic = ctx.name("tp")
    create_topic(ctx, topic)
    tid = ctx.name("p")
    find_coordinator(ctx, tid, key_type=1)
    out = init(ctx, tid, 4, record=False)
    pid, epoch = out["producer_id"], out["producer_epoch"]
    for v in ctx.versions(0, lo=3):
        body = {"transactional_id": tid, "acks": -1, "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": batch(b"t", producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                                  transactional=True)}]}]}
        ctx.call(0, v, body, label="transactional batch outside the transaction")
    for v in ctx.versions(65):
        ctx.call(65, v, {"transactional_ids": [tid, ctx.name("none")]}, label="describe transactions")
    for v in ctx.versions(66):
        ctx.call(66, v, {"state_filters": ["Ongoing"], "producer_id_filters": [pid], "duration_filter": -1},
                 label="list by producer id")
    for v in ctx.versions(61):
        ctx.call(61, v, {"topics": [{"name": topic, "partition_indexes": [0, 4]},
                                    {"name": ctx.name("absent"), "partition_indexes": [0]}]},
                 label="describe producers")


@scenario
def transaction_flow(ctx):
    """A committed and an aborted transaction, then what consumers see: Fetch read_committed and
    read_uncommitted (markers, aborted_transactions), ListOffsets by isolation, the admin views."""
    from .core import _fetch_body

    topic = ctx.name("flow")
    topic_id = create_topic(ctx, topic)
    tid = ctx.name("t")
    find_coordinator(ctx, tid, key_type=1)
    out = init(ctx, tid, 4, record=False)
    pid, epoch = out["producer_id"], out["producer_epoch"]

    def add():
        return ctx.call(24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                "v3_and_below_producer_epoch": epoch,
                                "v3_and_below_topics": [{"name": topic, "partitions": [0]}]}, label="add partition")

    def produce(seq, value):
        return ctx.call(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch(
                value, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)}]}]},
            label="transactional produce")

    add()
    produce(0, b"committed")
    for v in ctx.versions(65):
        ctx.call(65, v, {"transactional_ids": [tid]}, label="describe, ongoing")
    for v in ctx.versions(66):
        ctx.call(66, v, {"state_filters": ["Ongoing"], "producer_id_filters": [pid], "duration_filter": -1},
                 label="list ongoing")
    for v in ctx.versions(2, lo=2):
        ctx.call(2, v, {"replica_id": -1, "isolation_level": 1, "timeout_ms": 1000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
            label="latest, read_committed, open transaction")
    ctx.call(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True},
             label="commit")
    ctx.setup(65, 0, {"transactional_ids": [tid]}, retries=80,
              expect=lambda o: ok(o) and o["transaction_states"][0]["transaction_state"] == "CompleteCommit")
    add()
    produce(1, b"aborted")
    ctx.call(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": False},
             label="abort")
    ctx.setup(65, 0, {"transactional_ids": [tid]}, retries=80,
              expect=lambda o: ok(o) and o["transaction_states"][0]["transaction_state"] == "CompleteAbort")
    # Markers are written asynchronously by Kafka: wait until the partition's LSO is past them.
    ctx.setup(2, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
        retries=80, expect=lambda o: ok(o) and o["topics"][0]["partitions"][0]["offset"] == 4)
    for v in ctx.versions(1):
        for isolation in (0, 1):
            ctx.call(1, v, _fetch_body(topic, topic_id, 0, 0, isolation=isolation),
                     label=f"fetch all, isolation {isolation}")
    for v in ctx.versions(61):
        ctx.call(61, v, {"topics": [{"name": topic, "partition_indexes": [0]}]}, label="describe producers")
    ctx.call(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True},
             label="commit after abort")
