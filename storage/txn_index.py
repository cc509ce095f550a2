"""Transaction bookkeeping of one partition: open transactions, the LSO and the aborted-transaction index.

Facts from Kafka 3.9 (``ProducerStateManager``, ``TransactionIndex``, ``UnifiedLog.collectAbortedTransactions``):

* A transactional batch (attribute bit 4) of producer P opens P's transaction at its base offset
  unless one is already open; the transaction stays open until a control batch (bits 4 and 5) of P
  arrives: the commit or abort marker written by the transaction coordinator.
* The last stable offset (LSO) is the first offset of the oldest open transaction, capped by the
  high watermark; read_committed consumers read only below it.
* An aborted transaction is remembered as (producer id, first offset, last offset = the marker's
  offset, LSO when it was aborted) in the index of the segment that holds its marker.  Fetch in
  read_committed returns the entries overlapping the range it returns, and the consumer drops
  that producer's batches from ``first_offset`` until it meets the abort marker.

Differences from Kafka, on purpose: the index lives in memory, per segment, and is rebuilt from
the partition's batches the first time anything asks for it after the log is opened (the scan
reads batch headers and the one record of each control batch); Kafka persists ``.txnindex``
files and producer-state snapshots to skip that scan.  The cost is one pass over the headers of a
partition on its first read_committed fetch or transactional append after a restart.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterable, NamedTuple

from minikafka.protocol.records import (
    CONTROL_ABORT,
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    control_record_type,
    iter_records,
)


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the abort marker
    last_stable_offset: int


class TxnIndex:
    """Open transactions and the aborted-transaction index of one partition (event loop only)."""

    def __init__(self) -> None:
        # producer id -> first offset of its open transaction (insertion order = age).
        self.open: dict[int, int] = {}
        # segment base offset -> aborted transactions whose marker is in that segment, by marker offset.
        self.aborted: dict[int, list[AbortedTxn]] = {}
        # producer id -> coordinator epoch of its last marker (DescribeProducers).
        self.coordinator_epochs: dict[int, int] = {}

    @classmethod
    def build(cls, batches: Iterable[tuple[int, BatchHeader, object]]) -> "TxnIndex":
        """From (segment base, header, view) of every batch of a log, oldest first."""
        index = cls()
        for segment_base, header, view in batches:
            if header.attributes & TRANSACTIONAL_BIT:
                index.note(segment_base, header, view)
        return index

    def note(self, segment_base: int, header: BatchHeader, view) -> None:
        """Apply a transactional batch just appended (or read while rebuilding)."""
        pid = header.producer_id
        if not header.attributes & CONTROL_BIT:
            self.open.setdefault(pid, header.base_offset)
            return
        kind = _marker_type(view)
        if kind is None:
            return
        self.coordinator_epochs[pid] = _coordinator_epoch(view)
        first = self.open.pop(pid, None)
        if first is not None and kind == CONTROL_ABORT:
            lso = self.first_unstable_offset
            self.aborted.setdefault(segment_base, []).append(
                AbortedTxn(pid, first, header.base_offset, header.base_offset if lso is None else lso))

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self.open.values()) if self.open else None

    def open_transaction_start(self, producer_id: int) -> int:
        return self.open.get(producer_id, -1)

    def aborted_between(self, start: int, end: int, log_start: int = 0) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end).

        Entries are in marker order, so a binary search skips those ending before ``start``; the
        scan stops after the first entry whose recorded LSO is at or above ``end`` (as Kafka's
        collectAbortedTxns does): every transaction aborted later was opened at or after it.
        """
        out = []
        start = max(start, log_start)
        for base in sorted(self.aborted):
            entries = self.aborted[base]
            if not entries or entries[-1].last_offset < start:
                continue
            for a in entries[bisect_left(entries, start, key=_last_offset):]:
                if a.first_offset < end:
                    out.append((a.producer_id, a.first_offset))
                if a.last_stable_offset >= end:
                    out.sort(key=lambda t: t[1])
                    return out
        out.sort(key=lambda t: t[1])
        return out

    def drop_segments(self, bases: Iterable[int]) -> None:
        """Retention, DeleteRecords or compaction removed these segments: their index goes with them."""
        for base in bases:
            self.aborted.pop(base, None)

    def replace_segment(self, old_base: int, new_base: int | None) -> None:
        entries = self.aborted.pop(old_base, None)
        if entries and new_base is not None:
            self.aborted.setdefault(new_base, []).extend(entries)

    def retain_aborted(self, segment_base: int, marker_offsets: set[int]) -> None:
        """Compaction: keep only the entries of this segment whose abort marker is at one of
        ``marker_offsets`` (the others' data is gone, so no reader needs to filter it)."""
        entries = self.aborted.get(segment_base)
        if entries is None:
            return
        kept = [a for a in entries if a.last_offset in marker_offsets]
        if kept:
            self.aborted[segment_base] = kept
        else:
            del self.aborted[segment_base]

    def aborted_ranges(self) -> list[AbortedTxn]:
        return sorted((a for entries in self.aborted.values() for a in entries), key=lambda a: a.first_offset)


def _last_offset(a: AbortedTxn) -> int:
    return a.last_offset


def _marker_type(view) -> int | None:
    for record in iter_records(view):
        try:
            return control_record_type(record)
        except Exception:
            return None
    return None


def _coordinator_epoch(view) -> int:
    for record in iter_records(view):
        value = record.value
        if value is not None and len(value) >= 6:
            return int.from_bytes(bytes(value[2:6]), "big", signed=True)
        return -1
    return -1
