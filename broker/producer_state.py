"""Idempotent producers: producer id allocation and per-partition sequence checks.

Facts from Kafka 3.9 (``ProducerStateManager``, ``ProducerAppendInfo``, ``UnifiedLog``):

* Each partition remembers, per producer id, the current epoch and the metadata of the last
  five batches (first/last sequence, first/last offset, max timestamp).
* A batch whose epoch and first/last sequence equal one of those five is a duplicate (the
  producer resent after losing a response): it is not appended and is acknowledged with the
  original base offset and no error.
* An epoch lower than the current one is INVALID_PRODUCER_EPOCH.  A new (higher) epoch must
  start at sequence 0 unless the producer has no recorded epoch, else OUT_OF_ORDER_SEQUENCE_NUMBER.
* Same epoch: the first sequence must follow the last one (with int32 wrap-around), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.  When the partition knows nothing about the producer (never seen,
  or its batches were removed by retention or DeleteRecords) any sequence is accepted: since
  KIP-360 Kafka no longer answers UNKNOWN_PRODUCER_ID here.
* State survives a restart: it is rebuilt lazily on the first idempotent produce to a
  partition, from the latest producer snapshot (``storage.producer_snapshot``) plus the batch
  headers after it (``PartitionLog.iter_batches``), or from the whole log without a snapshot.
  As Kafka does, a snapshot is written when the partition's log rolls a segment (checked by the
  maintenance tick) and on clean shutdown, for each partition whose state was loaded.

Producer ids are handed out from blocks whose upper bound is persisted before any id of the
block is used, so an id is never reused across restarts (Kafka's ProducerIdsRecord idea).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from minikafka.protocol.errors import ErrorCode
from minikafka.storage import producer_snapshot

log = logging.getLogger("minikafka.producer_state")

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2147483647
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1



def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of a batch's last record; sequences wrap from INT32_MAX to 0."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


class Check(NamedTuple):
    """The verdict for one incoming batch."""

    error: int  # NONE, OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH
    duplicate: BatchMetadata | None  # set when the batch was already appended


class PartitionProducerState:
    """Sequence bookkeeping of one partition.  Mutated only on the event loop."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.snapshot_offset = -1  # offset of the last snapshot read or written (-1: none)

    def check(self, producer_id: int, epoch: int, base_sequence: int, last_offset_delta: int,
              *, is_transactional: bool = False) -> Check:
        """Validate a batch before it is appended; does not change the state."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return Check(ErrorCode.NONE, None)
        first_seq = base_sequence
        last_seq = last_sequence(base_sequence, last_offset_delta)
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return Check(ErrorCode.NONE, duplicate)
        if epoch < entry.epoch:
            return Check(ErrorCode.INVALID_PRODUCER_EPOCH, None)
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                return Check(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
            return Check(ErrorCode.NONE, None)
        if entry.epoch == NO_PRODUCER_EPOCH:
            return Check(ErrorCode.NONE, None)
        if not in_sequence(entry.last_seq, first_seq):
            return Check(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
        return Check(ErrorCode.NONE, None)

    def record(self, producer_id: int, epoch: int, base_sequence: int, last_offset_delta: int,
               first_offset: int, max_timestamp: int) -> None:
        """Remember a batch that was appended at ``first_offset``."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            # A new epoch starts a new sequence space: older batches can no longer be duplicates.
            entry.epoch = epoch
            entry.batches.clear()
        if base_sequence >= 0:
            entry.batches.append(BatchMetadata(
                base_sequence, last_sequence(base_sequence, last_offset_delta),
                first_offset, first_offset + last_offset_delta, max_timestamp))
        entry.last_timestamp = max(entry.last_timestamp, max_timestamp)

    def end_transaction(self, producer_id: int, epoch: int) -> None:
        """A commit/abort marker was written: its epoch becomes the producer's (a marker written after
        a timeout carries a bumped epoch, which fences the producer's later batches)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()

    def rebuild(self, headers: Iterable) -> None:
        """Replay batch headers (protocol.records.BatchHeader) from the log, oldest first."""
        for header in headers:
            if header.producer_id < 0:
                continue
            if header.attributes & 0x20:  # control batch: ends a transaction, no sequence
                entry = self.producers.get(header.producer_id)
                if entry is None:
                    entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
                if header.producer_epoch > entry.epoch:
                    entry.epoch = header.producer_epoch
                    entry.batches.clear()
                continue
            self.record(header.producer_id, header.producer_epoch, header.base_sequence,
                        header.last_offset_delta, header.base_offset, header.max_timestamp)

    # -- snapshots ---------------------------------------------------------------------------
    # One dict per producer (storage.producer_snapshot's extension point): a feature with more
    # per-producer state adds keys in entry_to_dict and reads them (with a default) in
    # entry_from_dict; older files simply lack the key.

    @staticmethod
    def entry_to_dict(entry: ProducerEntry) -> dict:
        return {"producer_id": entry.producer_id, "epoch": entry.epoch, "last_timestamp": entry.last_timestamp,
                "batches": [list(b) for b in entry.batches]}

    @staticmethod
    def entry_from_dict(d: dict) -> ProducerEntry:
        entry = ProducerEntry(int(d["producer_id"]), int(d.get("epoch", NO_PRODUCER_EPOCH)))
        entry.last_timestamp = int(d.get("last_timestamp", -1))
        for b in d.get("batches") or ():
            entry.batches.append(BatchMetadata(*(int(x) for x in b)))
        return entry

    def to_snapshot(self) -> list[dict]:
        return [self.entry_to_dict(e) for e in self.producers.values()]

    def load_snapshot(self, producers: list[dict]) -> None:
        for d in producers:
            entry = self.entry_from_dict(d)
            self.producers[entry.producer_id] = entry

    def forget_before(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords removed offsets below ``log_start_offset``."""
        for pid in [pid for pid, e in self.producers.items()
                    if e.batches and e.batches[-1].last_offset < log_start_offset]:
            del self.producers[pid]


class ProducerIdManager:
    """Hands out producer ids; persists the end of the current block before using it.

    ``load()`` returns the first id not yet reserved by any earlier run; ``save(n)`` durably
    records that ids below ``n`` are reserved.
    """

    BLOCK_SIZE = 1000

    def __init__(self, load: Callable[[], int], save: Callable[[int], None]):
        self._save = save
        self._next = max(0, load())
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + self.BLOCK_SIZE
            self._save(self._block_end)
        pid = self._next
        self._next += 1
        return pid


class ProducerStateManager:
    """Per-partition producer state, built lazily from the log."""

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], PartitionProducerState] = {}

    def for_partition(self, topic: str, partition: int, log=None) -> PartitionProducerState:
        key = (topic, partition)
        state = self._partitions.get(key)
        if state is None:
            state = PartitionProducerState()
            if log is not None:
                self._load(state, log, topic, partition)
            self._partitions[key] = state
        return state

    @staticmethod
    def _load(state: PartitionProducerState, plog, topic: str, partition: int) -> None:
        directory = getattr(plog, "directory", None)
        start = 0
        if directory is not None:
            try:
                found = producer_snapshot.latest_snapshot(directory, plog.log_end_offset)
            except OSError as exc:
                log.warning("producer snapshots of %s-%d unreadable (%s): replaying the log", topic, partition, exc)
                found = None
            if found is not None:
                start, producers = found
                try:
                    state.load_snapshot(producers)
                    state.snapshot_offset = start
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("producer snapshot %d of %s-%d unusable (%s): replaying the log",
                                start, topic, partition, exc)
                    state.producers.clear()
                    start = 0
        state.rebuild(header for header, _ in plog.iter_batches(start))
        if start:
            state.forget_before(plog.log_start_offset)

    @staticmethod
    def discard_stale_snapshots(logs) -> int:
        """At start-up, before anything is appended: drop snapshots above each log's end (the
        log lost its tail in a crash), which later appends would otherwise make look valid."""
        dropped = 0
        for plog in logs:
            directory = getattr(plog, "directory", None)
            if directory is None:
                continue
            try:
                dropped += producer_snapshot.delete_above(directory, plog.log_end_offset)
            except OSError as exc:
                log.warning("could not check the producer snapshots of %s: %s", directory, exc)
        if dropped:
            log.warning("dropped %d producer snapshots beyond the end of their logs (crash recovery)", dropped)
        return dropped

    def write_snapshot(self, topic: str, partition: int, plog) -> bool:
        """Snapshot a loaded partition's state at its log end offset (False if not loaded)."""
        state = self._partitions.get((topic, partition))
        directory = getattr(plog, "directory", None)
        if state is None or directory is None:
            return False
        offset = plog.log_end_offset
        if offset == state.snapshot_offset:
            return False
        producer_snapshot.write_snapshot(directory, offset, state.to_snapshot())
        state.snapshot_offset = offset
        return True

    def snapshot_rolled(self, get_log: Callable[[str, int], object]) -> int:
        """Snapshot each loaded partition whose log rolled a segment since its last snapshot
        (Kafka snapshots on roll), so a crash replays at most about one segment."""
        written = 0
        for (topic, partition), state in list(self._partitions.items()):
            plog = get_log(topic, partition)
            active = getattr(plog, "active", None) if plog is not None else None
            if active is not None and active.base_offset > state.snapshot_offset:
                written += self._snapshot_quietly(topic, partition, plog)
        return written

    def snapshot_all(self, get_log: Callable[[str, int], object]) -> int:
        """Clean shutdown: snapshot every loaded partition.  Partitions whose state was never
        loaded in this run keep their older snapshot, which stays valid (replay covers the rest)."""
        written = 0
        for topic, partition in list(self._partitions):
            plog = get_log(topic, partition)
            if plog is not None:
                written += self._snapshot_quietly(topic, partition, plog)
        return written

    def _snapshot_quietly(self, topic: str, partition: int, plog) -> int:
        try:
            return int(self.write_snapshot(topic, partition, plog))
        except OSError as exc:
            # Only an optimisation: the next start replays more of the log instead.
            log.warning("could not write the producer snapshot of %s-%d: %s", topic, partition, exc)
            return 0

    def expire(self, log_start_offset: Callable[[str, int], int | None], now_ms: int,
               expiration_ms: int) -> int:
        """Forget producers whose batches left the log (retention, DeleteRecords) or that were
        idle longer than ``producer.id.expiration.ms`` (by their last batch timestamp, as Kafka
        does).  Returns how many producers were forgotten."""
        removed = 0
        for (topic, partition), state in list(self._partitions.items()):
            start = log_start_offset(topic, partition)
            if start is None:
                del self._partitions[(topic, partition)]
                continue
            before = len(state.producers)
            state.forget_before(start)
            for pid in [pid for pid, e in state.producers.items() if 0 <= e.last_timestamp < now_ms - expiration_ms]:
                del state.producers[pid]
            removed += before - len(state.producers)
        return removed

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self._partitions if k[0] == topic]:
            del self._partitions[key]

    def drop_partition(self, topic: str, partition: int) -> None:
        self._partitions.pop((topic, partition), None)


def _iter_headers(log):
    """(position-or-view, BatchHeader) pairs of every batch in a PartitionLog."""
    for header, view in log.iter_batches():
        yield view, header
