"""The seams between the three parts of share groups, as broker-level functions.

Share groups are built in three parts (issue 21): the group side (membership, assignment, the
group records in ``__consumer_offsets``), the share partitions (acquisition, acknowledgement,
ShareFetch/ShareAcknowledge) and the share coordinator (durable state in ``__share_group_state``).
Each part reaches the others only through the functions here, so none imports another's internals.

Until a part is wired in, these answer as a broker with no share groups would; the wiring replaces
the bodies, not the signatures.
"""

from __future__ import annotations

import uuid
from typing import Any


# -- answered by the group side (broker/share/group_manager.py through the group coordinator's shards) ---

def _manager(broker, group_id: str):
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None or not coordinator.active:
        return None
    shard = coordinator.shard_for(group_id)
    return shard.share if shard.loaded else None


def share_group_state(broker, group_id: str) -> str | None:
    """Kafka's state name of share group ``group_id`` ("Empty", "Stable", "Dead"), None if no share group has that id."""
    manager = _manager(broker, group_id)
    return None if manager is None else manager.state_name(group_id)


def initialized_partitions(broker, group_id: str) -> dict[uuid.UUID, set[int]]:
    """The partitions whose share state the group has initialized (Kafka's ShareGroupStatePartitionMetadata)."""
    manager = _manager(broker, group_id)
    return {} if manager is None else manager.initialized_partitions(group_id)


def mark_initialized(broker, group_id: str, topic_id: uuid.UUID, partitions: set[int]) -> None:
    """Record that these partitions' share state now exists (AlterShareGroupOffsets on an empty group)."""
    manager = _manager(broker, group_id)
    if manager is None:
        raise RuntimeError(f"no loaded group coordinator for share group {group_id}")
    manager.mark_initialized(group_id, topic_id, set(partitions))


def share_config(broker, group_id: str) -> dict[str, Any]:
    """The effective share.* settings of a group: its GROUP config overrides over the broker's group.share.* defaults."""
    def get(name: str, default: Any) -> Any:
        try:
            value = broker.config.get(name)
        except Exception:  # a config without the setting (unit tests' stand-ins)
            return default
        return default if value is None else value

    out = {
        "share.record.lock.duration.ms": int(get("group.share.record.lock.duration.ms", 30000)),
        "share.delivery.count.limit": int(get("group.share.delivery.count.limit", 5)),
        "share.partition.max.record.locks": int(get("group.share.partition.max.record.locks", 2000)),
        "share.auto.offset.reset": "latest",
        "share.isolation.level": "read_uncommitted",
        "share.session.timeout.ms": int(get("group.share.session.timeout.ms", 45000)),
        "share.heartbeat.interval.ms": int(get("group.share.heartbeat.interval.ms", 5000)),
    }
    # GROUP config resources (DescribeConfigs/IncrementalAlterConfigs on a group, broker/group_configs.py)
    # override these ...
    from minikafka.broker import group_configs

    if getattr(broker, "controller", None) is not None:
        effective = group_configs.effective(broker, group_id)
        for name in ("share.record.lock.duration.ms", "share.auto.offset.reset", "share.isolation.level",
                     "share.session.timeout.ms", "share.heartbeat.interval.ms"):
            if effective.get(name) is not None:
                out[name] = type(out[name])(effective[name])
    # ... and a test's stand-in, ``broker.group_configs(group_id)`` -> {name: value}, over those.
    overrides = getattr(broker, "group_configs", None)
    if callable(overrides):
        for name, value in (overrides(group_id) or {}).items():
            if name in out and value is not None:
                out[name] = type(out[name])(value)
    return out


# -- answered by the share partitions -------------------------------------------------------------

def on_member_leave(broker, group_id: str, member_id: str) -> None:
    """A member left or was fenced: release every record it holds acquired."""
    m = getattr(broker, "share_fetch", None)
    if m is not None:
        m.member_left(group_id, member_id)


def end_member(broker, group_id: str, member_id: str) -> None:
    """The member is gone for good (expired through the control API): its share session ends and every
    record it holds acquired is released, whether or not the session was still alive."""
    m = getattr(broker, "share_fetch", None)
    if m is not None:
        m.expire_member(group_id, member_id)


def forget_group(broker, group_id: str) -> None:
    """The group was deleted: drop its cached share partitions."""
    m = getattr(broker, "share_fetch", None)
    if m is not None:
        m.forget_group(group_id)


def partition_summaries(broker, group_id: str) -> list[dict]:
    """Per share partition of the group: topic, partition, start_offset, in_flight, acquired, archived, lag."""
    m = getattr(broker, "share_fetch", None)
    if m is None:
        return []
    out = []
    for sp in sorted(m.of_group(group_id), key=lambda p: (p.topic, p.partition)):
        counts = sp.counts()
        try:
            log_end = broker.controller.log(sp.topic, sp.partition).high_watermark
        except Exception:
            log_end = sp.next_offset
        out.append({"topic": sp.topic, "partition": sp.partition, "start_offset": sp.start_offset,
                    "in_flight": sp.in_flight(), "acquired": counts["acquired"],
                    "archived": counts["archived"], "lag": sp.lag(log_end)})
    return out


def expire_lock(broker, group_id: str, topic: str, partition: int, offset: int) -> bool:
    """Expire the acquisition lock that holds ``offset`` now (the control API); False if none does."""
    m = getattr(broker, "share_fetch", None)
    if m is None:
        return False
    for sp in m.of_group(group_id):
        if sp.topic == topic and sp.partition == partition:
            return sp.expire_lock(offset)
    return False


# -- answered by the share coordinator ------------------------------------------------------------

def persister(broker):
    """The SharePersister that keeps share-partition state durable: the share coordinator over
    ``__share_group_state`` (broker/share/state), which creates that topic on first use.  A stand-in
    broker without the share coordinator (unit tests of share partitions) gets a ``MemoryPersister``."""
    service = getattr(broker, "share_state", None)
    if service is not None:
        return service.persister()
    state = getattr(broker, "_share_memory_persister", None)
    if state is None:
        from .persister import MemoryPersister

        state = broker._share_memory_persister = MemoryPersister()
    return state
