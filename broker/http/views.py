"""Read-only views of a running broker for the metrics and the console.

Only public surfaces are used: the controller (topics, ``log(topic, p)`` and a log's offsets),
the group coordinator's shards (``list_groups``, ``describe_group``, ``fetch_offsets``).  Nothing
here writes, and nothing reads a whole topic.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PartitionView:
    topic: str
    partition: int
    log_start: int
    log_end: int
    high_watermark: int
    last_stable: int
    size: int
    segments: int


def partition_view(broker, topic: str, partition: int) -> PartitionView:
    plog = broker.controller.log(topic, partition)
    return PartitionView(topic, partition, plog.log_start_offset, plog.log_end_offset, plog.high_watermark,
                         plog.last_stable_offset, plog.size_bytes, len(plog.segments))


def topic_partitions(broker, topic: str) -> list[PartitionView]:
    info = broker.controller.topic(topic)
    if info is None:
        return []
    return [partition_view(broker, topic, p) for p in range(info.num_partitions)]


def all_partitions(broker):
    for name in sorted(broker.controller.topics):
        yield from topic_partitions(broker, name)


def coordinators(broker) -> list:
    return [c for c in (broker.group_coordinator, broker.txn_coordinator) if c is not None]


def coordinators_loaded(broker) -> bool:
    """Every coordinator active and every one of its shards loaded."""
    for c in coordinators(broker):
        if not getattr(c, "active", True):
            return False
        if not all(getattr(s, "loaded", True) for s in getattr(c, "shards", ())):
            return False
    return True


def groups(broker) -> list[dict]:
    """[{group_id, group_state, protocol_type, group_type}] of every loaded group shard."""
    gc = broker.group_coordinator
    if gc is None:
        return []
    out = []
    for shard in gc.loaded_shards():
        out.extend(shard.list_groups())
    return sorted(out, key=lambda g: g["group_id"])


def describe_group(broker, group_id: str) -> dict | None:
    gc = broker.group_coordinator
    if gc is None:
        return None
    shard, error = gc.check(group_id)
    if shard is None:
        return None
    return shard.describe_group(group_id)


def committed_offsets(broker, group_id: str) -> dict[tuple[str, int], int]:
    gc = broker.group_coordinator
    if gc is None:
        return {}
    shard, _ = gc.check(group_id)
    if shard is None:
        return {}
    out = {}
    for t in shard.fetch_offsets(group_id, None)["topics"]:
        for p in t["partitions"]:
            if p["committed_offset"] >= 0:
                out[(t["name"], p["partition_index"])] = p["committed_offset"]
    return out


def group_lag(broker, group_id: str) -> list[dict]:
    """Committed offset, log end (high watermark) and lag per partition the group has offsets for."""
    out = []
    for (topic, partition), committed in sorted(committed_offsets(broker, group_id).items()):
        try:
            plog = broker.controller.log(topic, partition)
        except Exception:  # the topic was deleted since the commit
            continue
        hw = plog.high_watermark
        out.append({"topic": topic, "partition": partition, "committed_offset": committed,
                    "log_end_offset": hw, "lag": max(hw - committed, 0)})
    return out
