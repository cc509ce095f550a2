"""One ``__share_group_state`` partition: the share partitions whose keys hash to it.

As the group and transaction shards: an operation checks the request, builds the record of the change
and hands it back with the answer (``Result``); the coordinator appends the record and then applies it
with ``replay`` (the same function a load runs over the whole log), so the shard holds exactly what its
log says.  Kafka's ShareCoordinatorShard rules:

* Initialize writes a ShareSnapshot with the request's state epoch and start offset, leader epoch 0 and
  no batches (the snapshot epoch one above the previous one); FENCED_STATE_EPOCH when the stored state
  epoch is newer.
* Write needs an initialized state (INVALID_REQUEST otherwise), a leader epoch not older than the stored
  one (FENCED_LEADER_EPOCH; -1 skips the check) and a state epoch not older (FENCED_STATE_EPOCH; -1
  skips).  It writes a ShareUpdate, or a ShareSnapshot of the combined state once
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed the last snapshot.
* Read needs an initialized state and a leader epoch not older than the stored one (FENCED_LEADER_EPOCH,
  -1 included); a newer leader epoch is recorded (an update record) before the state is answered.
* ReadSummary answers start offset -1 for a partition without state; Delete writes a tombstone (nothing
  for a partition without state).
* Every operation but the epoch checks also answers UNKNOWN_TOPIC_OR_PARTITION for a topic or partition
  the broker does not have, and INVALID_REQUEST for a negative partition.

Leader and state epochs are remembered as the highest ever replayed (until a tombstone), as Kafka keeps
them.  ``last_redundant_offset`` is the offset below which no record is needed any more (every share
partition's latest snapshot is at or after it): the coordinator deletes the log up to it.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Optional, Protocol

from minikafka.protocol.errors import CorruptRecordError, ErrorCode
from minikafka.protocol.records import iter_records, read_header

from .batches import combine
from .records import SNAPSHOT, UPDATE, Batch, ShareValue, StateKey, decode_key, decode_value

log = logging.getLogger("minikafka.share.state")

MSG_NEGATIVE_PARTITION = "The partition id cannot be a negative number."
MSG_WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
MSG_READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
MSG_UNKNOWN_TOPIC = "This server does not host this topic-partition."
MSG_FENCED_LEADER_EPOCH = "The leader epoch in the request is older than the epoch on the broker."
MSG_FENCED_STATE_EPOCH = ("The share coordinator rejected the request because the share-group state "
                          "epoch did not match.")

# A ShareUpdateValue: int16 version, int32 snapshot epoch, then the int32 leader epoch.
_LEADER_EPOCH = struct.Struct(">i")

# (record type, key, value or None) as appended to the log
Record = tuple[int, StateKey, Optional[ShareValue]]


class StateLog(Protocol):
    def append(self, records: list[Record], now_ms: int) -> int: ...   # base offset

    def iter_records(self) -> Iterator[tuple[int, bytes, bytes | None]]: ...  # (offset, key, value)


@dataclass
class Result:
    """What an operation returns: the records to append and the per-partition answer."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[Record] = field(default_factory=list)
    state: ShareValue | None = None


def _error(code: ErrorCode, message: str | None) -> Result:
    return Result(code, message)


class ShareStateShard:
    def __init__(self, partition: int, log: StateLog, updates_per_snapshot: int = 500,
                 partitions_of: Callable[[object], int | None] = lambda topic_id: None) -> None:
        self.partition = partition
        self.log = log
        self.updates_per_snapshot = updates_per_snapshot
        # topic id -> partition count (None: no such topic): the broker's metadata image.
        self.partitions_of = partitions_of
        self.states: dict[StateKey, ShareValue] = {}
        self.leader_epochs: dict[StateKey, int] = {}
        self.state_epochs: dict[StateKey, int] = {}
        self.update_counts: dict[StateKey, int] = {}
        self._snapshot_offsets: dict[StateKey, int] = {}  # offset of each key's latest snapshot
        self._redundant = None  # Kafka's lastRedundantOffset (None: Long.MAX_VALUE)
        self.loaded = False

    # == replay ===================================================================================

    def replay(self, offset: int, kind: int, key: StateKey, value: ShareValue | None) -> None:
        if kind == SNAPSHOT:
            if value is None:
                for table in (self.states, self.leader_epochs, self.state_epochs, self.update_counts):
                    table.pop(key, None)
            else:
                self._raise(self.leader_epochs, key, value.leader_epoch)
                self._raise(self.state_epochs, key, value.state_epoch)
                self.states[key] = replace(value, batches=list(value.batches))
                if self.update_counts.get(key, 0) >= self.updates_per_snapshot and key in self.update_counts:
                    self.update_counts[key] = 0
            self._track_snapshot(key, offset, value is None)
        elif kind == UPDATE and value is not None:
            self._raise(self.leader_epochs, key, value.leader_epoch)
            current = self.states.get(key)
            if current is None:
                self.states[key] = replace(value, state_epoch=0, batches=list(value.batches))
            else:
                start = current.start_offset if value.start_offset == -1 else value.start_offset
                leader = current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch
                self.states[key] = replace(current, start_offset=start, leader_epoch=leader,
                                           delivery_complete_count=value.delivery_complete_count,
                                           batches=combine(current.batches, value.batches, start))
            self.update_counts[key] = self.update_counts.get(key, 0) + 1

    @staticmethod
    def _raise(table: dict, key: StateKey, epoch: int) -> None:
        if table.get(key, epoch) <= epoch:
            table[key] = epoch

    def _track_snapshot(self, key: StateKey, offset: int, deleted: bool) -> None:
        """Kafka's ShareCoordinatorOffsetsManager: the redundant offset is the smallest offset of the
        latest snapshot of any live key (a deleted key's tombstone counts once, then is forgotten)."""
        self._redundant = offset if self._redundant is None else min(self._redundant, offset)
        self._snapshot_offsets[key] = offset
        if self._snapshot_offsets:
            self._redundant = min(self._snapshot_offsets.values())
        if deleted:
            self._snapshot_offsets.pop(key, None)

    def last_redundant_offset(self) -> int | None:
        """Records below this offset are superseded; None when there is nothing to prune."""
        value = self._redundant
        return None if value is None or value <= 0 else value

    def load(self) -> None:
        """Replay the log.  An update followed later by a snapshot of the same share partition is
        superseded: only its bookkeeping is replayed (the update count and the leader epoch, read
        from its fixed place in the value), not its batches, so a restart costs one combine per
        update written since each partition's last snapshot, whatever the log holds before it."""
        self.states.clear()
        self.leader_epochs.clear()
        self.state_epochs.clear()
        self.update_counts.clear()
        self._snapshot_offsets.clear()
        self._redundant = None
        last_snapshot: dict[StateKey, int] = {}
        for offset, raw_key, _ in self.log.iter_records():
            try:
                decoded = decode_key(raw_key)
            except CorruptRecordError:
                continue
            if decoded is not None and decoded[0] == SNAPSHOT:
                last_snapshot[decoded[1]] = offset
        for offset, raw_key, raw_value in self.log.iter_records():
            try:
                decoded = decode_key(raw_key)
                if decoded is None:
                    continue
                kind, key = decoded
                if kind == UPDATE and raw_value is not None and offset < last_snapshot.get(key, -1):
                    self._raise(self.leader_epochs, key, _LEADER_EPOCH.unpack_from(raw_value, 6)[0])
                    self.update_counts[key] = self.update_counts.get(key, 0) + 1
                    continue
                value = decode_value(kind, raw_value)
            except (CorruptRecordError, struct.error) as exc:
                log.warning("__share_group_state-%d: skipping record at %d: %s", self.partition, offset, exc)
                continue
            self.replay(offset, kind, key, value)
        self.loaded = True

    def apply(self, result: Result, now_ms: int) -> Result:
        """Append the records of a result and replay them (the coordinator's write path)."""
        if result.records:
            base = self.log.append(result.records, now_ms)
            for i, (kind, key, value) in enumerate(result.records):
                self.replay(base + i, kind, key, value)
        return result

    # == checks ===================================================================================

    def _topic_error(self, key: StateKey) -> Result | None:
        count = self.partitions_of(key.topic_id)
        if count is None or count <= key.partition:
            return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, MSG_UNKNOWN_TOPIC)
        return None

    # == operations ===============================================================================

    def initialize(self, key: StateKey, state_epoch: int, start_offset: int, now_ms: int) -> Result:
        if key.partition < 0:
            return _error(ErrorCode.INVALID_REQUEST, MSG_NEGATIVE_PARTITION)
        if state_epoch != -1 and self.state_epochs.get(key, state_epoch) > state_epoch:
            return _error(ErrorCode.FENCED_STATE_EPOCH, MSG_FENCED_STATE_EPOCH)
        error = self._topic_error(key)
        if error:
            return error
        current = self.states.get(key)
        value = ShareValue(current.snapshot_epoch + 1 if current is not None else 0, 0, start_offset, [],
                           state_epoch, -1 if start_offset == -1 else 0, now_ms, now_ms)
        return Result(records=[(SNAPSHOT, key, value)])

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              delivery_complete_count: int, batches: list[Batch], now_ms: int) -> Result:
        if key.partition < 0:
            return _error(ErrorCode.INVALID_REQUEST, MSG_NEGATIVE_PARTITION)
        current = self.states.get(key)
        if current is None:
            return _error(ErrorCode.INVALID_REQUEST, MSG_WRITE_UNINITIALIZED)
        if leader_epoch != -1 and self.leader_epochs.get(key, leader_epoch) > leader_epoch:
            return _error(ErrorCode.FENCED_LEADER_EPOCH, MSG_FENCED_LEADER_EPOCH)
        if state_epoch != -1 and self.state_epochs.get(key, state_epoch) > state_epoch:
            return _error(ErrorCode.FENCED_STATE_EPOCH, MSG_FENCED_STATE_EPOCH)
        error = self._topic_error(key)
        if error:
            return error
        return Result(records=[self._state_record(key, current, start_offset, delivery_complete_count,
                                                  batches, current.leader_epoch, now_ms)])

    def _state_record(self, key: StateKey, current: ShareValue, start_offset: int, dcc: int,
                      batches: list[Batch], leader_epoch: int, now_ms: int) -> Record:
        if self.update_counts.get(key, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            return (SNAPSHOT, key, ShareValue(current.snapshot_epoch + 1, leader_epoch, start,
                                              combine(current.batches, batches, start), current.state_epoch,
                                              dcc, now_ms, now_ms))
        return (UPDATE, key, ShareValue(current.snapshot_epoch, leader_epoch, start_offset,
                                        combine([], batches, start_offset), delivery_complete_count=dcc))

    def read(self, key: StateKey, leader_epoch: int, now_ms: int) -> Result:
        """The state (``Result.state``); a newer leader epoch is recorded first."""
        if key.partition < 0:
            return _error(ErrorCode.INVALID_REQUEST, MSG_NEGATIVE_PARTITION)
        current = self.states.get(key)
        if current is None:
            return _error(ErrorCode.INVALID_REQUEST, MSG_READ_UNINITIALIZED)
        stored = self.leader_epochs.get(key)
        if stored is not None and stored > leader_epoch:
            return _error(ErrorCode.FENCED_LEADER_EPOCH, MSG_FENCED_LEADER_EPOCH)
        error = self._topic_error(key)
        if error:
            return error
        result = Result(state=replace(current, batches=list(current.batches)))
        if leader_epoch != -1 and stored != leader_epoch:
            log.info("share partition %s: read with the new leader epoch %d", key, leader_epoch)
            result.records.append(self._state_record(key, current, current.start_offset,
                                                     current.delivery_complete_count, [],
                                                     leader_epoch, now_ms))
        return result

    def read_summary(self, key: StateKey) -> Result:
        if key.partition < 0:
            return _error(ErrorCode.INVALID_REQUEST, MSG_NEGATIVE_PARTITION)
        error = self._topic_error(key)
        if error:
            return error
        current = self.states.get(key)
        if current is None:
            return Result(state=ShareValue(0, 0, -1, [], 0, -1))
        return Result(state=replace(current, batches=[]))

    def delete(self, key: StateKey) -> Result:
        if key.partition < 0:
            return _error(ErrorCode.INVALID_REQUEST, MSG_NEGATIVE_PARTITION)
        error = self._topic_error(key)
        if error:
            return error
        if key not in self.states:
            log.debug("delete of share partition %s, which has no state", key)
            return Result()
        return Result(records=[(SNAPSHOT, key, None)])

    # == housekeeping =============================================================================

    def snapshot_cold_partitions(self, now_ms: int, interval_ms: int) -> list[Record]:
        """A fresh snapshot of every share partition not snapshotted for ``interval_ms``, so that the
        log below can be pruned (Kafka's snapshotColdPartitions)."""
        if all(s.create_timestamp != s.write_timestamp for s in self.states.values()):
            return []
        records = []
        for key, state in self.states.items():
            if now_ms - state.write_timestamp >= interval_ms:
                records.append((SNAPSHOT, key, replace(state, snapshot_epoch=state.snapshot_epoch + 1,
                                                       batches=list(state.batches), write_timestamp=now_ms)))
        return records

    def forget_topics(self, topic_ids: set) -> list[Record]:
        """Tombstones for the share partitions of deleted topics (Kafka's maybeCleanupShareState)."""
        return [(SNAPSHOT, key, None) for key in self.states if key.topic_id in topic_ids]
