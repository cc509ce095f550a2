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
* State survives a restart: it is rebuilt from the batch headers in the log
  (``PartitionLog.iter_batches``), lazily on the first produce to a partition so start-up stays fast.

Producer ids are handed out from blocks whose upper bound is persisted before any id of the
block is used, so an id is never reused across restarts (Kafka's ProducerIdsRecord idea).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2147483647
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


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

    def check(self, producer_id: int, epoch: int, base_sequence: int, last_offset_delta: int,
              *, is_transactional: bool = False) -> Check:
        """Validate a batch before it is appended; does not change the state."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return Check(NONE, None)
        first_seq = base_sequence
        last_seq = last_sequence(base_sequence, last_offset_delta)
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return Check(NONE, duplicate)
        if epoch < entry.epoch:
            return Check(INVALID_PRODUCER_EPOCH, None)
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                return Check(OUT_OF_ORDER_SEQUENCE_NUMBER, None)
            return Check(NONE, None)
        if entry.epoch == NO_PRODUCER_EPOCH:
            return Check(NONE, None)
        if not in_sequence(entry.last_seq, first_seq):
            return Check(OUT_OF_ORDER_SEQUENCE_NUMBER, None)
        return Check(NONE, None)

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
                state.rebuild(header for _, header in _iter_headers(log))
            self._partitions[key] = state
        return state

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
