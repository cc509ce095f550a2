"""The share coordinator: one shard per ``__share_group_state`` partition and the routing between them.

A share partition's state lives on partition ``abs(javaHash("group:topicId:partition")) % N`` of
``__share_group_state`` (N = ``share.coordinator.state.topic.num.partitions``, 50 by default), the topic
id written as Kafka writes a Uuid (URL-safe base64 without padding), as Kafka's ShareCoordinatorService
places it.  One broker leads every partition, so every shard is local.

The five operations take and answer the bodies of the share-group-state RPCs (Initialize 83, Read 84,
Write 85, Delete 86, ReadSummary 87), one partition at a time as Kafka's service splits them:

* a request without topics, with a topic without partitions, or without a group id answers an empty
  result list (Kafka logs and answers nothing for it); an inactive coordinator answers
  COORDINATOR_NOT_AVAILABLE "Share coordinator is not available." for every partition;
* a shard still loading answers COORDINATOR_LOAD_IN_PROGRESS for its partitions.

Housekeeping, on the broker's timers (``apis``): every ``share.coordinator.state.topic.prune.interval.ms``
the state of share partitions whose topic was deleted is tombstoned (Kafka does it when the deletion
reaches its metadata image; here at the next prune) and the log of each shard is deleted up to the
shard's last redundant offset (records every share partition
has a newer snapshot for; Kafka's topic has cleanup.policy=delete and is pruned this way, not compacted);
every ``share.coordinator.cold.partition.snapshot.interval.ms`` share partitions not snapshotted for that
long get a fresh snapshot, so pruning can move past their old records.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Callable

from minikafka.protocol.errors import ErrorCode

from ...group.partitioner import partition_for
from ...clock import Clock
from .records import Batch, StateKey
from .shard import Result, ShareStateShard, StateLog

log = logging.getLogger("minikafka.share.state")

MSG_NOT_AVAILABLE = "Share coordinator is not available."
MSG_LOADING = "The coordinator is loading and hence can't process requests."


def kafka_uuid(u: uuid.UUID) -> str:
    """A Uuid as Kafka prints it: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: the FindCoordinator key of key type 2."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """The (group, topic id, partition) of a key type 2 coordinator key, None when malformed.

    As Kafka's SharePartitionKey reads it: split on ":" (Java's split, trailing empty parts dropped),
    at least three parts, the last two the topic id (a Kafka Uuid) and the partition (a Java int), the
    rest, joined again, a group id that is not blank."""
    tokens = (key or "").split(":")
    while tokens and tokens[-1] == "":
        tokens.pop()
    if len(tokens) < 3:
        return None
    group = ":".join(tokens[:-2])
    if not group.strip():
        return None
    raw_id, raw_partition = tokens[-2], tokens[-1]
    try:
        if len(raw_id) > 24:
            return None
        raw = base64.urlsafe_b64decode(raw_id + "=" * (-len(raw_id) % 4))
        if len(raw) != 16:
            return None
        if not re.fullmatch(r"[+-]?[0-9]+", raw_partition):
            return None
        partition = int(raw_partition)
    except (ValueError, TypeError):
        return None
    if not -2**31 <= partition < 2**31:
        return None
    return group, uuid.UUID(bytes=raw), partition


@dataclass
class ShareStateConfig:
    num_partitions: int = 50
    updates_per_snapshot: int = 500
    prune_interval_ms: int = 300000
    cold_snapshot_interval_ms: int = 300000

    @classmethod
    def from_broker_config(cls, config) -> "ShareStateConfig":
        def get(name: str, default: int) -> int:
            try:
                value = config.get(name)
            except Exception:
                return default
            return default if value is None else int(value)

        return cls(get("share.coordinator.state.topic.num.partitions", 50),
                   get("share.coordinator.snapshot.update.records.per.snapshot", 500),
                   get("share.coordinator.state.topic.prune.interval.ms", 300000),
                   get("share.coordinator.cold.partition.snapshot.interval.ms", 300000))


def _partition_result(partition: int, error: ErrorCode = ErrorCode.NONE, message: str | None = None) -> dict:
    return {"partition": partition, "error_code": error, "error_message": message}


class ShareCoordinator:
    def __init__(self, num_partitions: int, log_factory: Callable[[int], StateLog], clock: Clock,
                 config: ShareStateConfig | None = None,
                 partitions_of: Callable[[uuid.UUID], int | None] = lambda topic_id: None) -> None:
        self.config = config or ShareStateConfig(num_partitions)
        self.num_partitions = num_partitions
        self.clock = clock
        self.shards = [ShareStateShard(p, log_factory(p), self.config.updates_per_snapshot, partitions_of)
                       for p in range(num_partitions)]
        self.active = False

    # == routing and loading ======================================================================

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition), self.num_partitions)

    def shard_for(self, key: StateKey) -> ShareStateShard:
        return self.shards[self.partition_for(key.group_id, key.topic_id, key.partition)]

    def load(self) -> None:
        self.active = True
        for shard in self.shards:
            shard.load()

    def unload(self) -> None:
        self.active = False
        for shard in self.shards:
            shard.loaded = False

    def _run(self, key: StateKey, operation: Callable[[ShareStateShard], Result]) -> Result:
        """One partition's operation on its shard, its records appended and replayed."""
        if not self.active:
            return Result(ErrorCode.COORDINATOR_NOT_AVAILABLE, MSG_NOT_AVAILABLE)
        shard = self.shard_for(key)
        if not shard.loaded:
            return Result(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, MSG_LOADING)
        return shard.apply(operation(shard), self.clock.now_ms())

    # == the operations, one partition each (used by the persister and the RPCs) =================

    def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> Result:
        now = self.clock.now_ms()
        return self._run(key, lambda s: s.initialize(key, state_epoch, start_offset, now))

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              delivery_complete_count: int, batches: list[Batch]) -> Result:
        now = self.clock.now_ms()
        return self._run(key, lambda s: s.write(key, state_epoch, leader_epoch, start_offset,
                                                delivery_complete_count, batches, now))

    def read(self, key: StateKey, leader_epoch: int) -> Result:
        now = self.clock.now_ms()
        return self._run(key, lambda s: s.read(key, leader_epoch, now))

    def read_summary(self, key: StateKey) -> Result:
        return self._run(key, lambda s: s.read_summary(key))

    def delete(self, key: StateKey) -> Result:
        return self._run(key, lambda s: s.delete(key))

    # == the RPC bodies ===========================================================================

    def _each(self, body: dict, need_partitions: bool = True):
        """The (topic id, partition dict) pairs of a request, or None when Kafka answers it empty."""
        topics = body.get("topics") or []
        if not body.get("group_id") or not topics:
            return None
        if need_partitions and any(not t.get("partitions") for t in topics):
            return None
        return [(t["topic_id"], p) for t in topics for p in t.get("partitions") or []]

    @staticmethod
    def _group(pairs: list[tuple[uuid.UUID, dict]]) -> list[dict]:
        out: dict[uuid.UUID, list] = {}
        for topic_id, result in pairs:
            out.setdefault(topic_id, []).append(result)
        return [{"topic_id": t, "partitions": parts} for t, parts in out.items()]

    def _serve(self, body: dict, one: Callable[[StateKey, dict], dict], need_partitions: bool = True) -> dict:
        pairs = self._each(body, need_partitions)
        if pairs is None:
            return {"results": []}
        results = []
        for topic_id, p in pairs:
            key = StateKey(body["group_id"], topic_id, p["partition"])
            results.append((topic_id, one(key, p)))
        return {"results": self._group(results)}

    def initialize_state(self, body: dict) -> dict:
        def one(key: StateKey, p: dict) -> dict:
            r = self.initialize(key, p["state_epoch"], p["start_offset"])
            return _partition_result(key.partition, r.error, r.message)
        return self._serve(body, one, need_partitions=False)

    def write_state(self, body: dict) -> dict:
        def one(key: StateKey, p: dict) -> dict:
            batches = [Batch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                       for b in p.get("state_batches") or ()]
            r = self.write(key, p["state_epoch"], p["leader_epoch"], p["start_offset"],
                           p.get("delivery_complete_count", -1), batches)
            return _partition_result(key.partition, r.error, r.message)
        return self._serve(body, one)

    def read_state(self, body: dict) -> dict:
        def one(key: StateKey, p: dict) -> dict:
            r = self.read(key, p["leader_epoch"])
            out = _partition_result(key.partition, r.error, r.message)
            s = r.state
            out.update(state_epoch=s.state_epoch if s else 0, start_offset=s.start_offset if s else 0,
                       state_batches=[{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                       "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                      for b in (s.batches if s else ())])
            return out
        return self._serve(body, one)

    def read_state_summary(self, body: dict) -> dict:
        def one(key: StateKey, p: dict) -> dict:
            r = self.read_summary(key)
            out = _partition_result(key.partition, r.error, r.message)
            s = r.state
            out.update(state_epoch=s.state_epoch if s else 0, leader_epoch=s.leader_epoch if s else 0,
                       start_offset=s.start_offset if s else 0,
                       delivery_complete_count=s.delivery_complete_count if s else -1)
            return out
        return self._serve(body, one)

    def delete_state(self, body: dict) -> dict:
        def one(key: StateKey, p: dict) -> dict:
            r = self.delete(key)
            return _partition_result(key.partition, r.error, r.message)
        return self._serve(body, one)

    # == housekeeping =============================================================================

    def prune_points(self) -> list[tuple[int, int]]:
        """(partition, offset) pairs: delete each loaded shard's log below the offset."""
        out = []
        for shard in self.shards:
            if shard.loaded:
                offset = shard.last_redundant_offset()
                if offset is not None:
                    out.append((shard.partition, offset))
        return out

    def snapshot_cold_partitions(self) -> int:
        now = self.clock.now_ms()
        written = 0
        for shard in self.shards:
            if shard.loaded:
                records = shard.snapshot_cold_partitions(now, self.config.cold_snapshot_interval_ms)
                if records:
                    shard.apply(Result(records=records), now)
                    written += len(records)
        return written

    def forget_deleted_topics(self) -> int:
        """Tombstones for the share partitions of topics the broker no longer has."""
        gone = {key.topic_id for shard in self.shards if shard.loaded for key in shard.states
                if shard.partitions_of(key.topic_id) is None}
        return self.forget_topics(gone) if gone else 0

    def forget_topics(self, topic_ids: set) -> int:
        """Tombstones for the share partitions of deleted topics (Kafka's onTopicsDeleted)."""
        now = self.clock.now_ms()
        written = 0
        for shard in self.shards:
            if shard.loaded:
                records = shard.forget_topics(topic_ids)
                if records:
                    shard.apply(Result(records=records), now)
                    written += len(records)
        return written
