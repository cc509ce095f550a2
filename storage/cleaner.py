"""Log compaction (cleanup.policy=compact): keep the latest record of every key.

One pass (``compact_log``):

1. Scan the whole log and map every key to the offset of its latest record, and every producer id to
   its last batch.
2. Rewrite each closed segment (never the active one) that is older than ``min.compaction.lag.ms``:
   a record survives when it is the latest for its key, when it has no key, or when it is a
   tombstone (null value) younger than ``delete.retention.ms``.  Batches keep their base offset,
   their last offset delta, producer id/epoch/sequence, attributes and compression, so every
   surviving record keeps its offset and producers' sequence numbers stay consistent; a batch that
   loses some records is re-encoded with explicit offset deltas.  A batch that loses all its
   records disappears, except the last batch of a producer id, which stays as an empty batch so the
   producer's state can still be rebuilt from the log (Kafka does the same).  Control batches stay.
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
(storage/txn_index.py) neither count as the latest value of their key nor survive; commit and abort
markers are kept (Kafka drops them once no older data of their transaction is left and
delete.retention.ms passed; keeping them costs one small batch per transaction).
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

from minikafka.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, build_batch, iter_records, set_crc

from . import fs
from .segment import CLEANED_SUFFIX, Segment

if TYPE_CHECKING:
    from .log import PartitionLog

_HEADER = struct.Struct(">qiibIhiqqqhii")


def needs_compaction(log: "PartitionLog") -> bool:
    closed = log.segments[:-1]
    total = sum(s.size for s in closed)
    if not total:
        return False
    dirty = sum(s.size for s in closed if s.next_offset > log.cleaned_offset)
    if dirty and dirty / total >= log.config.min_cleanable_dirty_ratio:
        return True
    deadline = log._tombstone_deadline_ms
    return deadline is not None and log._now() >= deadline


def compact_log(log: "PartitionLog") -> int:
    config = log.config
    now = log._now()
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
    last_batch_of_producer: dict[int, int] = {}
    for seg in list(log.segments):
        for _, h, view in seg.iter_views():
            if h.producer_id >= 0:
                last_batch_of_producer[h.producer_id] = h.base_offset
            if h.is_control or (aborted and is_aborted(h)):
                continue
            for record in iter_records(view):
                if record.key is not None:
                    latest[record.key] = record.offset

    reclaimed = 0
    tombstone_deadline = None
    horizon = now - config.delete_retention_ms
    interval = config.index_interval_bytes
    for seg in cleanable:
        drop_tombstones = seg.largest_timestamp < horizon
        out = bytearray()
        changed = False
        kept_tombstone = False
        for _, h, batch in seg.iter_views():
            if h.is_control:
                out += batch
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
            if len(keep) == len(records):
                out += batch
                continue
            changed = True
            if keep:
                out += build_batch(
                    [(r.key, r.value, r.headers, r.timestamp, r.offset - h.base_offset) for r in keep],
                    base_offset=h.base_offset, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                    base_sequence=h.base_sequence, transactional=h.is_transactional,
                    compression=h.compression, timestamp_type=h.timestamp_type,
                    partition_leader_epoch=h.partition_leader_epoch, last_offset_delta=h.last_offset_delta)
            elif h.producer_id >= 0 and last_batch_of_producer.get(h.producer_id) == h.base_offset:
                out += _empty_batch(h)
        if kept_tombstone:
            expiry = seg.largest_timestamp + config.delete_retention_ms + 1
            tombstone_deadline = expiry if tombstone_deadline is None else min(tombstone_deadline, expiry)
        if not changed:
            continue
        reclaimed += seg.size - len(out)
        _swap_in(log, seg, out, interval)
    log.cleaned_offset = max(log.cleaned_offset, log.segments[-1].base_offset if len(cleanable) == len(closed)
                             else cleanable[-1].next_offset)
    log._tombstone_deadline_ms = tombstone_deadline
    log._write_checkpoint(clean=False)
    return reclaimed


def _empty_batch(h) -> bytearray:
    """A batch with no records that keeps the producer's offsets and sequence range."""
    batch = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(batch, 0, h.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD, h.partition_leader_epoch, 2, 0,
                      h.attributes & ~0x07, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
                      h.producer_id, h.producer_epoch, h.base_sequence, 0)
    set_crc(batch, 0)
    return batch


def _swap_in(log: "PartitionLog", seg: Segment, data: bytearray, interval: int) -> None:
    first = seg is log.segments[0]
    i = log.segments.index(seg)
    next_base = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else None
    if not data and not first:
        seg.delete_files()
        fs.fsync_dir(log.directory)
        log._replace_segment(seg, None)
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
    log._replace_segment(seg, new)
