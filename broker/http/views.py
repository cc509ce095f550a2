"""Read-only views of a running broker for the metrics and the console.

Only public surfaces are used: the controller (topics, ``log(topic, p)`` and a log's offsets),
the group coordinator's shards (``list_groups``, ``describe_group``, ``fetch_offsets``).  Nothing
here writes, and nothing reads a whole topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.protocol.errors import ErrorCode


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


def txn_coordinator(broker):
    """The transaction coordinator, or None before __transaction_state exists (it is created on
    the first FindCoordinator for a transactional id)."""
    return getattr(broker.txn_coordinator, "coordinator", None)


def transaction_ids(broker, state: str = "") -> list[str]:
    """Transactional ids the coordinator holds, optionally in one state (Kafka's label, such as
    ``Ongoing``); Dead ones are left out as ListTransactions does."""
    coordinator = txn_coordinator(broker)
    if coordinator is None:
        return []
    listed = coordinator.list([state] if state else ())["transaction_states"]
    return sorted(t["transactional_id"] for t in listed)


def describe_transaction(broker, transactional_id: str) -> dict | None:
    """DescribeTransactions' answer for one id (state, producer id/epoch, timeout, start time,
    partitions by topic), or None when the coordinator does not know it."""
    coordinator = txn_coordinator(broker)
    if coordinator is None:
        return None
    desc = coordinator.describe(transactional_id)
    return desc if desc["error_code"] == ErrorCode.NONE else None


def partition_producers(broker, topic: str, partition: int) -> list[dict]:
    """DescribeProducers' view of one partition: each active producer's epoch, last sequence, last
    timestamp, coordinator epoch and the first offset of its open transaction (-1: none).  Loads
    the partition's producer state (snapshot, then the log's batch headers) if nothing did yet."""
    controller = broker.controller
    plog = controller.log(topic, partition)
    state = controller.producer_states.for_partition(topic, partition, plog)
    txn = plog.txn
    return [{"producer_id": pid, "producer_epoch": entry.epoch, "last_sequence": entry.last_seq,
             "last_timestamp": entry.last_timestamp, "coordinator_epoch": txn.coordinator_epochs.get(pid, -1),
             "current_txn_start_offset": txn.open_transaction_start(pid)}
            for pid, entry in sorted(state.producers.items())]
