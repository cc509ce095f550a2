"""Log compaction (cleanup.policy=compact): keep the latest record of every key.

One pass (``compact_log``):

1. Scan the whole log and map every key to the offset of its latest record, and every producer id to
   its last data batch and its last marker.
2. Rewrite each closed segment (never the active one) that is older than ``min.compaction.lag.ms``:
   a record survives when it is the latest for its key, when it has no key, or when it is a
   tombstone (null value) younger than ``delete.retention.ms``.  Batches keep their base offset,
   their last offset delta, producer id/epoch/sequence, attributes and compression, so every
   surviving record keeps its offset and producers' sequence numbers stay consistent; a batch that
   loses some records is re-encoded with explicit offset deltas.  A batch that loses all its
   records disappears, except the last data batch of a producer id, which stays as an empty batch
   so the producer's state can still be rebuilt from the log (Kafka does the same).  Markers: see
   below.
3. Swap each rewritten segment in atomically: write ``<base>.log.cleaned``, fsync, delete the old
   indexes, rename over the ``.log`` (a crash in between leaves either file complete; a missing
   index is rebuilt on open).  A segment left empty is deleted, except the first one, which keeps
   the log's first offset in place.

Deliberate simplifications against Kafka: tombstones expire by the age of the segment that holds
them (largest timestamp older than ``delete.retention.ms``) instead of a delete horizon stamped into
the batch on the first pass (KIP-534); segments are not merged; ``max.compaction.lag.ms`` is not implemented (``min.cleanable.dirty.ratio`` decides).
The map is built over the whole log rather than only the dirty section, and a pass runs on the
caller's thread with a cost proportional to the log's size (the broker's tick compacts at most one
log per call, and only when the dirty ratio or a tombstone deadline asks for it).

Transactions, as Kafka's cleaner: only segments wholly below the last stable offset are cleaned (an
open transaction's records are not yet known to be committed); records of aborted transactions
(storage/txn_index.py) neither count as the latest value of their key nor survive.  A commit or
abort marker stays while any batch of its transaction (the producer's transactional batches since
its previous marker) is left after the pass; the pass that leaves none stamps a delete horizon
(now + delete.retention.ms, KIP-534: attribute bit 6 and the base timestamp) into the marker, and
the first pass after that horizon removes it, so a read_committed consumer that fetched the
transaction's start in time still meets its abort marker (Kafka's CleanedTransactionMetadata).
Kafka needs a second pass to notice the data is gone; here the pass that removes the data stamps
the horizon, so the marker lives delete.retention.ms from the data's removal either way.  The
aborted-transaction index of a cleaned segment keeps only the entries whose data is left, as
Kafka's cleaned index does.  A marker whose epoch is newer than its producer's last data batch (an
epoch bumped by a timeout or a new instance) is never removed: the log is the only record of that
epoch here (Kafka keeps it in producer-state snapshots and keeps an empty control batch).  The
deadline of the earliest stamped marker, like that of the oldest kept tombstone, asks the broker's
tick for the pass that removes it.
"""

from __future__ import annotations

import os
import struct
from typing import Protocol

from minikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
    build_batch,
    control_record_type,
    iter_records,
    set_crc,
)

from . import fs
from .segment import CLEANED_SUFFIX, Segment



class CompactedLog(Protocol):
    """What the cleaner needs of a partition log (storage/log.py's PartitionLog is one): its
    segments and settings, its public offsets and transaction index, and three calls to record
    what a pass did.  The cleaner imports nothing from log.py."""

    segments: list
    config: object
    directory: str
    cleaned_offset: int

    @property
    def last_stable_offset(self) -> int: ...

    @property
    def txn(self): ...

    @property
    def tombstone_deadline_ms(self) -> int | None: ...

    def now_ms(self) -> int: ...

    def replace_segment(self, old: Segment, new: Segment | None) -> None: ...

    def finish_compaction(self, cleaned_offset: int, tombstone_deadline_ms: int | None) -> None: ...

_HEADER = struct.Struct(">qiibIhiqqqhii")


def needs_compaction(log: CompactedLog) -> bool:
    closed = log.segments[:-1]
    total = sum(s.size for s in closed)
    if not total:
        return False
    dirty_segments = [s for s in closed if s.next_offset > log.cleaned_offset]
    dirty = sum(s.size for s in dirty_segments)
    if dirty and dirty / total >= log.config.min_cleanable_dirty_ratio:
        return True
    # max.compaction.lag.ms (KIP-354): a dirty record older than that is compacted whatever the
    # dirty ratio, counting from the first batch of the earliest dirty segment, as Kafka does.
    firsts = [s.first_batch_timestamp for s in dirty_segments if s.size and (s.first_batch_timestamp or 0) > 0]
    if firsts and log.now_ms() - log.config.max_compaction_lag_ms >= min(firsts):
        return True
    deadline = log.tombstone_deadline_ms
    return deadline is not None and log.now_ms() >= deadline


def compact_log(log: CompactedLog) -> int:
    config = log.config
    now = log.now_ms()
    closed = log.segments[:-1]
    cleanable: list[Segment] = []
    stable = log.last_stable_offset
    for seg in closed:
        if seg.next_offset > stable:
            break  # an open transaction: its records may still be aborted
        if seg.size and config.min_compaction_lag_ms > 0 and now - seg.largest_timestamp < config.min_compaction_lag_ms:
            break
        cleanable.append(seg)
    if not cleanable:
        return 0

    aborted: dict[int, list[tuple[int, int]]] = {}
    for a in log.txn.aborted_ranges():
        aborted.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))

    def is_aborted(h) -> bool:
        return h.is_transactional and any(first <= h.base_offset < last
                                           for first, last in aborted.get(h.producer_id, ()))

    latest: dict[bytes, int] = {}
    # producer id -> (base offset, epoch) of its last data batch / its last control batch.
    last_data: dict[int, tuple[int, int]] = {}
    last_control: dict[int, tuple[int, int]] = {}
    for seg in list(log.segments):
        for _, h, view in seg.iter_views():
            if h.producer_id >= 0:
                (last_control if h.is_control else last_data)[h.producer_id] = (h.base_offset, h.producer_epoch)
            if h.is_control or (aborted and is_aborted(h)):
                continue
            for record in iter_records(view):
                if record.key is not None:
                    latest[record.key] = record.offset

    def keeps_producer_state(h) -> bool:
        """A batch kept (emptied if need be) so the producer's state can be rebuilt from the log."""
        pid = h.producer_id
        if pid < 0:
            return False
        data = last_data.get(pid)
        if not h.is_control:
            return data is not None and data[0] == h.base_offset
        # The last marker of a producer whose epoch it bumped (a timeout or a fenced instance):
        # Kafka keeps that epoch in producer-state snapshots, here the log is the only record.
        control = last_control.get(pid)
        return control is not None and control[0] == h.base_offset and (data is None or data[1] < h.producer_epoch)

    reclaimed = 0
    deadline = None  # when the next tombstone or marker may go
    horizon = now - config.delete_retention_ms
    interval = config.index_interval_bytes
    # Producers with data of their current transaction still in the log after this pass: their
    # next marker stays.  Every marker, kept or not, ends its producer's transaction here.
    txn_data_left: set[int] = set()
    for seg in cleanable:
        drop_tombstones = seg.largest_timestamp < horizon
        out = bytearray()
        changed = False
        kept_tombstone = False
        kept_aborts: set[int] = set()  # marker offsets of aborted transactions with data left
        for _, h, batch in seg.iter_views():
            if h.is_control:
                kept, marker_deadline = _clean_marker(h, batch, txn_data_left, keeps_producer_state(h), now,
                                                      config.delete_retention_ms, kept_aborts)
                if marker_deadline is not None:
                    deadline = marker_deadline if deadline is None else min(deadline, marker_deadline)
                if kept is batch:
                    out += batch
                    continue
                changed = True
                if kept is not None:
                    out += kept
                continue
            records = list(iter_records(batch))
            keep = []
            for r in ([] if aborted and is_aborted(h) else records):
                if r.key is None:
                    keep.append(r)
                elif latest.get(r.key) != r.offset:
                    continue
                elif r.value is None and drop_tombstones:
                    continue
                else:
                    keep.append(r)
                    kept_tombstone |= r.value is None
            if keep and len(keep) == len(records):
                out += batch
            elif keep:
                out += build_batch(
                    [(r.key, r.value, r.headers, r.timestamp, r.offset - h.base_offset) for r in keep],
                    base_offset=h.base_offset, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                    base_sequence=h.base_sequence, transactional=h.is_transactional,
                    compression=h.compression, timestamp_type=h.timestamp_type,
                    partition_leader_epoch=h.partition_leader_epoch, last_offset_delta=h.last_offset_delta)
            elif keeps_producer_state(h):
                out += batch if not records else _empty_batch(h)
            else:
                changed = True
                continue
            changed |= len(keep) != len(records)
            if h.is_transactional:
                # Kept, even empty: an empty transactional batch still opens its transaction when
                # the index is rebuilt, so the marker that closes it stays (Kafka counts it too).
                txn_data_left.add(h.producer_id)
        if kept_tombstone:
            expiry = seg.largest_timestamp + config.delete_retention_ms + 1
            deadline = expiry if deadline is None else min(deadline, expiry)
        # Aborted transactions whose data is gone leave the index, even while their marker waits
        # for its horizon (Kafka's cleaned index keeps only entries with batches left).
        log.txn.retain_aborted(seg.base_offset, kept_aborts)
        if not changed:
            continue
        reclaimed += seg.size - len(out)
        _swap_in(log, seg, out, interval)
    log.finish_compaction(log.segments[-1].base_offset if len(cleanable) == len(closed)
                          else cleanable[-1].next_offset, deadline)
    return reclaimed


def _clean_marker(h, batch, txn_data_left: set[int], keep_for_producer: bool, now: int, delete_retention_ms: int,
                  kept_aborts: set[int]):
    """What a commit/abort marker becomes: ``(batch | rewritten bytes | None, deadline or None)``.

    As Kafka's cleaner (CleanedTransactionMetadata and KIP-534): a marker stays while any batch
    of its transaction is left in the log.  Once none is, the pass that sees it so stamps a
    delete horizon (now + delete.retention.ms) into the batch, and the first pass after that
    horizon removes it, so a read_committed consumer that fetched the transaction's start in
    time still meets its abort marker.  Deadline: when the stamped marker may go.
    """
    pid = h.producer_id
    had_data = pid in txn_data_left
    txn_data_left.discard(pid)
    records = list(iter_records(batch))
    if had_data and records:
        if control_record_type(records[0]) == CONTROL_ABORT:
            kept_aborts.add(h.base_offset)
        return batch, None
    if not h.attributes & DELETE_HORIZON_BIT:
        if not records:
            return (batch if keep_for_producer else None), None
        expiry = now + delete_retention_ms
        stamped = build_batch(
            [(r.key, r.value, r.headers, r.timestamp, r.offset - h.base_offset) for r in records],
            base_offset=h.base_offset, producer_id=pid, producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence, transactional=True, control=True, compression=h.compression,
            timestamp_type=h.timestamp_type, partition_leader_epoch=h.partition_leader_epoch,
            last_offset_delta=h.last_offset_delta, delete_horizon_ms=expiry)
        return stamped, expiry
    if h.base_timestamp > now:
        return batch, h.base_timestamp
    # Past its horizon.  A marker that is the last word on its producer's epoch stays whole
    # (Kafka would keep it as an empty control batch; a whole one is safer for clients).
    return (batch if keep_for_producer else None), None


def _empty_batch(h) -> bytearray:
    """A batch with no records that keeps the producer's offsets and sequence range."""
    batch = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(batch, 0, h.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD, h.partition_leader_epoch, 2, 0,
                      h.attributes & ~0x07, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
                      h.producer_id, h.producer_epoch, h.base_sequence, 0)
    set_crc(batch, 0)
    return batch


def _swap_in(log: CompactedLog, seg: Segment, data: bytearray, interval: int) -> None:
    first = seg is log.segments[0]
    i = log.segments.index(seg)
    next_base = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else None
    if not data and not first:
        seg.delete_files()
        fs.fsync_dir(log.directory)
        log.replace_segment(seg, None)
        return
    cleaned = seg.log_path + CLEANED_SUFFIX
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fs.fsync(fd)
    finally:
        os.close(fd)
    seg.release()
    for path in (seg.index.path, seg.time_index.path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    os.replace(cleaned, seg.log_path)
    fs.fsync_dir(log.directory)
    new = Segment(log.directory, seg.base_offset)
    new.load_trusted(next_base, interval)
    new.sync()
    new.release()
    log.replace_segment(seg, new)
