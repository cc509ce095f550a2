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


# -- answered by the group side -------------------------------------------------------------------

def share_group_state(broker, group_id: str) -> str | None:
    """Kafka's state name of share group ``group_id`` ("Empty", "Stable", "Dead"), None if no share group has that id."""
    return None


def initialized_partitions(broker, group_id: str) -> dict[uuid.UUID, set[int]]:
    """The partitions whose share state the group has initialized (Kafka's ShareGroupStatePartitionMetadata)."""
    return {}


def mark_initialized(broker, group_id: str, topic_id: uuid.UUID, partitions: set[int]) -> None:
    """Record that these partitions' share state now exists (AlterShareGroupOffsets on an empty group)."""


def share_config(broker, group_id: str) -> dict[str, Any]:
    """The effective share.* settings of a group: its GROUP config overrides over the broker's group.share.* defaults."""
    def get(name: str, default: Any) -> Any:
        # The group.share.* settings join BrokerConfig's table with the group side; until then, Kafka's defaults.
        try:
            return broker.config.get(name)
        except Exception:
            return default

    return {
        "share.record.lock.duration.ms": int(get("group.share.record.lock.duration.ms", 30000)),
        "share.delivery.count.limit": int(get("group.share.delivery.count.limit", 5)),
        "share.partition.max.record.locks": int(get("group.share.partition.max.record.locks", 2000)),
        "share.auto.offset.reset": "latest",
        "share.isolation.level": "read_uncommitted",
        "share.session.timeout.ms": int(get("group.share.session.timeout.ms", 45000)),
        "share.heartbeat.interval.ms": int(get("group.share.heartbeat.interval.ms", 5000)),
    }


# -- answered by the share partitions -------------------------------------------------------------

def on_member_leave(broker, group_id: str, member_id: str) -> None:
    """A member left or was fenced: release every record it holds acquired."""
    m = getattr(broker, "share_fetch", None)
    if m is not None:
        m.release_member(group_id, member_id)


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
    """The SharePersister that keeps share-partition state durable (``persister.MemoryPersister`` until wired)."""
    state = getattr(broker, "_share_memory_persister", None)
    if state is None:
        from .persister import MemoryPersister

        state = broker._share_memory_persister = MemoryPersister()
    return state
