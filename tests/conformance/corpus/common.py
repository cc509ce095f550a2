"""Helpers shared by the scenarios: set-up requests and record batches with fixed contents."""

from __future__ import annotations

from minikafka.protocol.records import build_batch

import time

# One CreateTime per run (a minute ago), the same for both brokers so that they store and return
# identical batch bytes.  Recent on purpose: Kafka rolls a segment when a batch's timestamp is
# segment.ms past the segment's first one, and answers a Fetch from one segment only, so an old
# fixed timestamp followed by a transaction marker (stamped now) would split what Kafka returns.
TS = (int(time.time()) - 60) * 1000


def batch(*values: bytes, ts: int = TS, **kw) -> bytes:
    return bytes(build_batch([(b"k%d" % i, v, [], ts + i) for i, v in enumerate(values)], **kw))


def ok(out) -> bool:
    return out.kind == "response"


def create_topic(ctx, name: str, partitions: int = 1, configs: dict | None = None):
    """CreateTopics v7 (set-up); returns the topic id."""
    out = ctx.setup(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                            "timeout_ms": 30000},
                    expect=lambda o: ok(o) and o["topics"][0]["error_code"] == 0)
    topic_id = out["topics"][0]["topic_id"]
    # A topic is usable once Metadata shows a leader for every partition (Kafka: at once, one node).
    ctx.setup(3, 12, {"topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False},
              expect=lambda o: ok(o) and o["topics"][0]["error_code"] == 0
              and all(p["leader_id"] >= 0 for p in o["topics"][0]["partitions"]), retries=40)
    # ... and once its log exists on the leader (Kafka answers NOT_LEADER_OR_FOLLOWER briefly).
    ctx.setup(2, 7, {"replica_id": -1, "topics": [{"name": name, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(max(partitions, 1))]}]},
              expect=lambda o: ok(o) and all(p["error_code"] == 0 for p in o["topics"][0]["partitions"]),
              retries=60)
    return topic_id


def produce(ctx, topic: str, partition: int, records: bytes, *, version: int = 9, acks: int = -1,
            transactional_id: str | None = None, check: bool = False, label: str = ""):
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if check:
        return ctx.call(0, version, body, label=label)
    return ctx.setup(0, version, body, retries=20, expect=lambda o: ok(o)
                     and o["responses"][0]["partition_responses"][0]["error_code"] == 0)


def find_coordinator(ctx, key: str, key_type: int = 0):
    """FindCoordinator v3 (set-up) until the coordinator is available (it may be loading)."""
    out = ctx.setup(10, 3, {"key": key, "key_type": key_type}, retries=60,
                    expect=lambda o: ok(o) and o["error_code"] == 0)
    if key_type == 1 and key:
        # The same for __transaction_state: DescribeTransactions answers once it is loaded.
        ctx.setup(65, 0, {"transactional_ids": [key]}, retries=80,
                  expect=lambda o: ok(o) and o["transaction_states"][0]["error_code"] not in (14, 15, 16))
    if key_type == 0 and key:
        # FindCoordinator answers before the coordinator has loaded its partition of
        # __consumer_offsets (Kafka loads it in the background): wait until it serves the group.
        ctx.setup(9, 7, {"group_id": key, "topics": None, "require_stable": False}, retries=80,
                  expect=lambda o: ok(o) and o["error_code"] not in (14, 15, 16))
    return out


def scoped_names(prefix: str, *keys: str):
    """A normaliser that keeps, in every list of dicts, only entries whose name-like field starts
    with ``prefix`` (other scenarios' topics and groups share the broker)."""
    fields = keys or ("name", "topic", "group_id", "transactional_id", "topic_name")

    def keep(value):
        if isinstance(value, dict):
            return {k: keep(v) for k, v in value.items()}
        if isinstance(value, list):
            out = []
            for item in value:
                if isinstance(item, dict):
                    names = [item[f] for f in fields if isinstance(item.get(f), str)]
                    if names and not any(n.startswith(prefix) for n in names):
                        continue
                out.append(keep(item))
            return out
        return value

    return keep


def sort_by(key: str):
    """A normaliser that sorts every list of dicts having ``key`` by it (for answers whose order
    Kafka leaves unspecified, e.g. topics from a hash map)."""

    def keep(value):
        if isinstance(value, dict):
            return {k: keep(v) for k, v in value.items()}
        if isinstance(value, list):
            items = [keep(v) for v in value]
            if items and all(isinstance(i, dict) and key in i for i in items):
                items.sort(key=lambda i: str(i[key]))
            return items
        return value

    return keep


def chain(*fns):
    def run(value):
        for fn in fns:
            value = fn(value)
        return value
    return run
