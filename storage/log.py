"""PartitionLog: one topic partition as a directory of segments (see storage/__init__.py).

Offsets::

    log_start_offset <= ... <= last_stable_offset <= high_watermark == log_end_offset

* ``log_end_offset`` (LEO): the offset the next appended record gets.
* ``high_watermark`` (HW): what consumers may read.  One node and no replicas, so a write counts as
  committed once it is as durable as the flush policy promises, which ``append`` ensures before it
  returns: HW == LEO whenever the broker can look.
* ``last_stable_offset`` (LSO): HW, or the first offset of the oldest open transaction once the
  transaction code sets ``first_unstable_offset``.
* ``log_start_offset``: moved by retention (whole segments) and DeleteRecords (any offset).

Recovery on open (``_load``): a clean shutdown (checkpoint flag) trusts every file.  After a crash,
segments wholly below the checkpoint's recovery point (they were fsynced when they were rolled) are
trusted, and every later segment is validated batch by batch: header, CRC-32C, and offsets that
continue exactly where the previous batch ended.  The first batch that fails cuts the segment there
and removes every later segment, because nothing after an unreadable batch can be trusted to be in
order.  Indexes of validated segments are rebuilt; trusted segments reuse theirs when they pass a
sanity check and are rebuilt otherwise.

Opening a trusted segment reads no more than its first batch header, the last entry of each index
and the batches after the last indexed one (storage/segment.py ``load_trusted``); the index entries
are read and checked on first use.  So a clean restart costs about the same per partition whatever
the data size, and writes nothing: the clean flag stays until the first change (``_mark_unclean``).
"""

from __future__ import annotations

import logging
import os
import re
import struct
import time
from bisect import bisect_right
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator, NamedTuple

from minikafka.protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from minikafka.protocol.primitives import crc32c as _crc32c
from minikafka.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_BIT,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    compute_crc,
    iter_batches,
    iter_records,
    read_header,
    set_base_offset,
    set_crc,
)

from . import fs
from .checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from .config import LogConfig
from .segment import CLEANED_SUFFIX, Segment
from .txn_index import TxnIndex

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header, as protocol/records.py lays it out
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_log = logging.getLogger("minikafka.storage")
_MAX_RELATIVE_OFFSET = 2147483647


# Callables given the seconds each fsync of log data took (the broker's metrics); called from
# the flusher thread too, so an observer must be thread-safe.
_FSYNC_OBSERVERS: list[Callable[[float], None]] = []


def add_fsync_observer(observer: Callable[[float], None]) -> None:
    _FSYNC_OBSERVERS.append(observer)


def remove_fsync_observer(observer: Callable[[float], None]) -> None:
    if observer in _FSYNC_OBSERVERS:
        _FSYNC_OBSERVERS.remove(observer)


def _observe_fsync(started: float) -> None:
    elapsed = time.perf_counter() - started
    for observer in list(_FSYNC_OBSERVERS):
        observer(elapsed)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime


class PartitionLog:
    def __init__(self, directory: str, config: LogConfig | dict | None = None,
                 now_ms: Callable[[], int] | None = None):
        self.directory = directory
        if not isinstance(config, LogConfig):
            config = LogConfig.from_kafka(config or {})
        self.config = config
        self._now = now_ms or wall_clock_ms
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        # Counts the calls that may change what the log reports (offsets, size, segments): an
        # observer that saw the same count has nothing new to read (broker/http/metrics.py).
        self.changes = 0
        self.recovery_point = 0
        self.cleaned_offset = 0
        # When the oldest tombstone or stamped marker kept by the last compaction may go (not persisted: after a
        # restart tombstones go with the next compaction that new dirty data triggers).
        self._tombstone_deadline_ms: int | None = None
        # Open transactions and aborted-transaction index (storage/txn_index.py), built on first use.
        self._txn: TxnIndex | None = None
        self.recovered_bytes_cut = 0  # how much a crash recovery cut off (for logs and tests)
        self._unflushed = 0
        self._first_unflushed_ms: int | None = None
        self._pending_flush: tuple[Future, int] | None = None  # (fsync in the flusher thread, LEO then)
        self._closed = False
        self._storage_failing = False  # a storage error was logged; cleared by the next good write
        # The checkpoint on disk still says "clean shutdown": true after a clean open until the
        # first change to the files, which must clear it first (see _mark_unclean).
        self._clean_on_disk = False
        os.makedirs(directory, exist_ok=True)
        self._load()

    # --- offsets --------------------------------------------------------------------------------

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self.segments[-1].next_offset

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        first = self.txn.first_unstable_offset
        if first is None:
            return hw
        return min(hw, max(first, self.log_start_offset))

    @property
    def first_unstable_offset(self) -> int | None:
        return self.txn.first_unstable_offset

    @property
    def txn(self) -> TxnIndex:
        if self._txn is None:
            self._txn = TxnIndex.build(self._segment_batches())
        return self._txn

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, end)."""
        return self.txn.aborted_between(start, end, self.log_start_offset)

    def _segment_batches(self):
        for seg in list(self.segments):
            for _, header, view in seg.iter_views(0):
                yield seg.base_offset, header, view

    def _note_transactional(self, seg: Segment, view) -> None:
        """A transactional batch was written to ``seg``; ``view`` holds its bytes as written."""
        if self._txn is None:
            self._txn = TxnIndex.build(self._segment_batches())  # the scan includes this batch
            return
        self._txn.note(seg.base_offset, read_header(view, 0), view)

    def earliest(self) -> int:
        return self.log_start_offset

    def latest(self) -> int:
        return self.log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- append ---------------------------------------------------------------------------------

    def append(self, batch, *, validated: bool = False) -> AppendInfo:
        """Append one record batch; its base offset (and for LogAppendTime its timestamp) is set here.

        ``batch`` is modified in place when writable (bytearray, writable memoryview); other
        buffers are copied first.  Raises CorruptRecordError for a malformed batch or a bad CRC
        and KafkaError(MESSAGE_TOO_LARGE) above ``max.message.bytes``.  ``validated=True`` says
        the caller ran protocol.validation on these bytes (CRC and keys included), so they are
        not checked twice on the produce path.
        """
        self.changes += 1
        buf = batch if type(batch) is bytearray else _writable(batch)
        if len(buf) < BATCH_HEADER_SIZE:
            raise CorruptRecordError("record batch shorter than its 61-byte header")
        # The header fields this path needs, unpacked without building a BatchHeader (this is
        # the produce path; read_header's checks are repeated inline).
        (_, batch_length, _, magic, crc, attributes, last_offset_delta, _, max_timestamp,
         _, _, _, record_count) = _HEADER.unpack_from(buf, 0)
        if magic != 2:
            raise CorruptRecordError(f"unsupported record batch magic {magic}")
        size = batch_length + LOG_OVERHEAD
        if size != len(buf):
            raise CorruptRecordError("append takes exactly one whole record batch")
        config = self.config
        if size > config.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"record batch of {size} bytes exceeds max.message.bytes")
        if last_offset_delta < 0 or record_count != last_offset_delta + 1:
            raise CorruptRecordError("record count does not match the last offset delta")
        if not validated:
            if _crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]) != crc:
                raise CorruptRecordError("record batch CRC mismatch")
            if config.compact and not attributes & CONTROL_BIT:
                _require_keys(buf)
        if self._closed:
            self._check_open()
        if self._clean_on_disk:
            self._mark_unclean()
        # From here on this is _append() for a single batch, written out: it is the produce path.
        now = self._now()
        span = record_count
        seg = self.segments[-1]
        if seg.size and (seg.size + size > config.segment_bytes or now - seg.created_ms > config.max_segment_ms
                         or len(seg.index) >= self._max_index_entries
                         or seg.next_offset + span - 1 - seg.base_offset > _MAX_RELATIVE_OFFSET):
            seg = self._roll_for_append()
        offset = seg.next_offset
        _INT64.pack_into(buf, 0, offset)
        ts = max_timestamp
        log_append = config.log_append_time
        if log_append:
            ts = self._stamp_log_append_time(buf, 0, now)
        position = seg.size
        try:
            seg.write(buf)
        except OSError as exc:
            raise self._storage_error(f"cannot write {seg.log_path}", exc) from exc
        self._storage_failing = False
        next_offset = offset + span
        seg.note_batch(position, offset, next_offset, ts, size, config.index_interval_bytes)
        if attributes & TRANSACTIONAL_BIT:
            self._note_transactional(seg, memoryview(buf))
        self._unflushed += span
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        self._flush_after_append(now)
        return AppendInfo(offset, next_offset - 1, ts, now if log_append else -1)

    def _flush_after_append(self, now: int) -> None:
        """flush.messages / flush.ms after an append whose bytes already reached the OS.

        A failing fsync here must not fail the append: its bytes are written and will be
        acknowledged as with any append within flush.ms; failing it would make the producer
        send them again.  The next flush tries again."""
        config = self.config
        try:
            if self._unflushed >= config.flush_messages:
                self.flush()
            elif now - self._first_unflushed_ms >= config.flush_ms:
                self.flush_in_background()
        except (OSError, KafkaError) as exc:
            self._storage_error("flush after append failed", exc)

    def _roll_for_append(self) -> Segment:
        try:
            return self.roll()
        except OSError as exc:
            raise self._storage_error("cannot roll a new segment", exc) from exc

    def _storage_error(self, what: str, exc: BaseException) -> KafkaError:
        """KAFKA_STORAGE_ERROR for the request; the cause is logged once until a write succeeds."""
        if not self._storage_failing:
            self._storage_failing = True
            _log.error("%s in %s: %s", what, self.directory, exc)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {exc}")

    @property
    def _max_index_entries(self) -> int:
        # the time index has the larger entries, so it fills segment.index.bytes first
        return self.config.segment_index_bytes // 12

    @staticmethod
    def _stamp_log_append_time(buf, pos: int, now: int) -> int:
        attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_BIT
        _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(buf, pos + 35, now)
        set_crc(buf, pos)
        return now

    def append_batches(self, batches) -> AppendInfo:
        """Append a concatenation of record batches (offsets assigned consecutively)."""
        buf = _writable(batches)
        found = list(iter_batches(buf))
        end = found[-1][0] + found[-1][1].size if found else 0
        if not found or end != len(buf):
            raise CorruptRecordError("buffer is not a whole number of record batches")
        return self._append(buf, found)

    def _append(self, buf, batches: list[tuple[int, BatchHeader]]) -> AppendInfo:
        self.changes += 1
        self._check_open()
        if self._clean_on_disk:
            self._mark_unclean()
        config = self.config
        for pos, h in batches:
            if h.size > config.max_message_bytes:
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"record batch of {h.size} bytes exceeds max.message.bytes")
            if h.record_count != h.last_offset_delta + 1:
                raise CorruptRecordError("record count does not match the last offset delta")
            if compute_crc(buf, pos, h.size) != h.crc:
                raise CorruptRecordError("record batch CRC mismatch")
            if config.compact and not h.is_control:
                _require_keys(memoryview(buf)[pos:pos + h.size])
        now = self._now()
        span = sum(h.last_offset_delta + 1 for _, h in batches)
        try:
            self._roll_if_needed(len(buf), span, now)
        except OSError as exc:
            raise self._storage_error("cannot roll a new segment", exc) from exc
        seg = self.active
        offset = seg.next_offset
        first_offset = offset
        max_ts = -1
        log_append = config.log_append_time
        notes = []
        for pos, h in batches:
            set_base_offset(buf, pos, offset)
            ts = h.max_timestamp
            if log_append:
                ts = self._stamp_log_append_time(buf, pos, now)
            max_ts = max(max_ts, ts)
            next_offset = offset + h.last_offset_delta + 1
            notes.append((seg.size + pos, offset, next_offset, ts, h.size))
            offset = next_offset
        try:
            seg.write(buf)
        except OSError as exc:
            raise self._storage_error(f"cannot write {seg.log_path}", exc) from exc
        interval = config.index_interval_bytes
        for note in notes:
            seg.note_batch(*note, interval)
        if any(h.attributes & TRANSACTIONAL_BIT for _, h in batches):
            if self._txn is None:
                self._txn = TxnIndex.build(self._segment_batches())  # the scan includes these
            else:
                for pos, h in batches:
                    if h.attributes & TRANSACTIONAL_BIT:
                        self._note_transactional(seg, memoryview(buf)[pos:pos + h.size])
        self._unflushed += span
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        self._flush_after_append(now)
        return AppendInfo(first_offset, offset - 1, max_ts, now if log_append else -1)

    # --- roll -----------------------------------------------------------------------------------

    def _roll_if_needed(self, size: int, span: int, now: int) -> None:
        seg = self.active
        if seg.size == 0:
            return
        config = self.config
        if (seg.size + size > config.segment_bytes
                or now - self._roll_base(seg) > config.max_segment_ms
                or len(seg.index) >= self._max_index_entries
                or seg.next_offset + span - 1 - seg.base_offset > _MAX_RELATIVE_OFFSET):
            self.roll()

    @staticmethod
    def _roll_base(seg: Segment) -> int:
        # Kafka measures segment.ms from the first batch's timestamp; a producer replaying old
        # timestamps would then roll on every append, so this uses the creation time instead.
        return seg.created_ms

    def maybe_roll(self) -> bool:
        """Timer entry point: roll an old non-empty active segment (segment.ms, or
        max.compaction.lag.ms on a compacted topic when that is shorter)."""
        seg = self.active
        if seg.size and self._now() - self._roll_base(seg) > self.config.max_segment_ms:
            self.roll()
            return True
        return False

    def roll(self) -> Segment:
        """Close the active segment (fsynced, indexes written) and start a new one at the LEO.

        Syncing here is what lets recovery trust every closed segment after a crash.
        """
        self.changes += 1
        self._check_open()
        old = self.active
        if old.size == 0:
            return old
        if self._clean_on_disk:
            self._mark_unclean()
        self._finish_background_flush(wait=True)  # its data must be on disk before we say so
        # On a full disk any step below can fail; until the new segment exists the old one
        # stays the active segment, open and intact, so the log keeps working once there is room.
        old.sync()
        new = Segment.create(self.directory, old.next_offset, self._now())
        old.release()  # the next read maps it as a closed segment (bounded number of mappings)
        self.segments.append(new)
        self._bases.append(new.base_offset)
        self.recovery_point = max(self.recovery_point, new.base_offset)
        try:
            self._write_checkpoint(clean=False)
        except OSError as exc:
            # The checkpoint only shortens recovery; an older one is still correct.
            _log.warning("checkpoint of %s not written after a roll: %s", self.directory, exc)
        return new

    # --- flush ----------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment with unsynced data, now; the recovery point moves to the LEO."""
        self._finish_background_flush(wait=True)
        for seg in self.segments:
            if seg.unsynced:
                # Index files are only trusted for segments closed by a roll (written there).
                started = time.perf_counter()
                seg.sync(indexes=False)
                if _FSYNC_OBSERVERS:
                    _observe_fsync(started)
        self.recovery_point = self.log_end_offset
        self._unflushed = 0
        self._first_unflushed_ms = None

    def flush_in_background(self) -> None:
        """Start an fsync of the unsynced data in the flusher thread and return at once.

        This is what flush.ms triggers: the appends that follow are not held up by the disk
        (they are already safe from a process crash).  Only the fsync runs in the thread, on
        duplicated descriptors, so rolling or closing segments meanwhile is harmless; the
        recovery point moves when the event loop next looks (append, maybe_flush, flush).
        """
        if not self._finish_background_flush(wait=False):
            return  # the previous one is still running; the next check starts another
        fds = []
        for seg in self.segments:
            if seg.unsynced:
                fds.append(os.dup(seg.fd) if seg.fd is not None else os.open(seg.log_path, os.O_RDONLY))
                seg.unsynced = False
        self._unflushed = 0
        self._first_unflushed_ms = None
        if fds:
            self._pending_flush = (_flusher().submit(_fsync_and_close, fds), self.log_end_offset)

    def _finish_background_flush(self, wait: bool) -> bool:
        """Collect a finished background fsync; False when one is still running and not waited for."""
        if self._pending_flush is None:
            return True
        future, target = self._pending_flush
        if not wait and not future.done():
            return False
        self._pending_flush = None
        try:
            future.result()
        except OSError as exc:
            for seg in self.segments:
                seg.unsynced = True
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"fsync failed in {self.directory}: {exc}") from exc
        self.recovery_point = max(self.recovery_point, target)
        return True

    def maybe_flush(self) -> bool:
        """Timer entry point: start a flush when the oldest unflushed append is flush.ms old."""
        self._finish_background_flush(wait=False)
        if self._first_unflushed_ms is not None and self._now() - self._first_unflushed_ms >= self.config.flush_ms:
            self.flush_in_background()
            return True
        return False

    # --- read -----------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one: bool = True) -> list[memoryview]:
        """Whole batches from the one containing ``offset``, as views of the segment files.

        The first batch is returned whole even when larger than ``max_bytes`` (KIP-74) unless
        ``min_one`` is False (Kafka gives that allowance only to the first partition of a fetch
        response that has data).  No batch reaching ``max_offset`` (the broker passes HW or LSO)
        is returned.  An empty list means nothing to read.  The views stay valid after retention
        or compaction removed the data.
        """
        self._check_open()
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside [{self.log_start_offset}, {leo}]")
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset >= limit:
            return []
        segments = self.segments
        newest = segments[-1].read_newest(offset, max_bytes, limit, min_one)
        if newest is not None:
            return [newest]
        out: list[memoryview] = []
        taken = 0
        i = max(bisect_right(self._bases, offset) - 1, 0)
        while i < len(segments):
            seg = segments[i]
            pos = seg.find(offset)
            if pos is not None:
                n, stopped = seg.collect(pos, max_bytes - taken, limit, out, first=min_one and not out)
                taken += n
                if stopped:
                    break
            i += 1
        return out

    def iter_batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch holding an offset >= max(start_offset, log start), as (header, view)."""
        start = max(start_offset, self.log_start_offset)
        i = max(bisect_right(self._bases, start) - 1, 0)
        for seg in list(self.segments[i:]):
            pos = seg.find(start)
            if pos is None:
                continue
            for _, header, view in seg.iter_views(pos):
                yield header, view

    # --- offsets by time ------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, or None."""
        start = self.log_start_offset
        for seg in list(self.segments):
            if seg.size == 0 or seg.max_timestamp < timestamp or seg.next_offset <= start:
                continue
            from_offset = seg.time_index.lookup_before(timestamp)
            pos = 0 if from_offset is None else seg.index.lookup(from_offset)[1]
            for _, h, view in seg.iter_views(pos):
                if h.last_offset < start or h.max_timestamp < timestamp:
                    continue
                found = _first_record_at(view, h, timestamp, start)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp, or None.

        Whole segments above the log start answer from their stats; the segment holding the log
        start is scanned from there, since its stats may come from records already deleted.
        """
        start = self.log_start_offset
        best_ts = -1
        best: tuple[Segment, int] | None = None  # (segment, base offset of the batch)
        exact: int | None = None  # an offset found by decoding the batch straddling the log start
        for seg in list(self.segments):
            if seg.size == 0 or seg.next_offset <= start or seg.max_timestamp <= best_ts:
                continue
            if seg.base_offset >= start:
                best_ts, best, exact = seg.max_timestamp, (seg, seg.offset_of_max_timestamp), None
                continue
            for _, h, view in seg.iter_views(seg.find(start) or 0):
                if h.max_timestamp <= best_ts:
                    continue
                if h.base_offset >= start:
                    best_ts, best, exact = h.max_timestamp, (seg, h.base_offset), None
                    continue
                for r in iter_records(view):
                    if r.offset >= start and r.timestamp > best_ts:
                        best_ts, best, exact = r.timestamp, None, r.offset
        if exact is not None:
            return exact, best_ts
        if best is None:
            return None
        seg, base = best
        pos = seg.find(base)
        if pos is not None:
            buf = seg.buffer()
            h = read_header(buf, pos)
            found = _first_record_at(buf[pos:pos + h.size], h, best_ts, start)
            if found is not None:
                return found
        return max(base, start), best_ts

    # --- deletion -------------------------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (-1 = HW); returns the new log start."""
        self.changes += 1
        self._check_open()
        hw = self.high_watermark
        if offset == -1:
            offset = hw
        if offset < 0 or offset > hw:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"cannot delete records up to {offset}: high watermark is {hw}")
        if offset > self.log_start_offset:
            # The new start is on disk before anything changes: on a storage error nothing did.
            previous = self.log_start_offset
            self.log_start_offset = offset
            try:
                self._write_checkpoint(clean=False)
            except OSError as exc:
                self.log_start_offset = previous
                raise self._storage_error("cannot record the new log start", exc) from exc
            self._delete_prefix(self._segments_below(offset))
        return self.log_start_offset

    def apply_retention(self) -> int:
        """Delete the oldest whole segments beyond retention.ms / retention.bytes; returns how many."""
        self.changes += 1
        self._check_open()
        config = self.config
        if not config.delete:
            return 0
        now = self._now()
        doomed: list[Segment] = []
        if config.retention_ms >= 0:
            for seg in self.segments:
                if seg.size == 0:
                    if seg is self.active:
                        break
                elif now - seg.largest_timestamp <= config.retention_ms:
                    break
                doomed.append(seg)
        if config.retention_bytes >= 0:
            excess = self.size_bytes - config.retention_bytes
            by_size = []
            for seg in self.segments:
                if (seg.size == 0 and seg is self.active) or excess - seg.size < 0:
                    break
                excess -= seg.size
                by_size.append(seg)
            if len(by_size) > len(doomed):
                doomed = by_size
        if not doomed:
            return 0
        self._delete_prefix(doomed)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self._write_checkpoint(clean=False)
        return len(doomed)

    def _segments_below(self, offset: int) -> list[Segment]:
        """The segments holding only offsets below ``offset`` (bounded by the next segment's base,
        so an empty segment at ``offset`` stays)."""
        doomed = []
        segments = self.segments
        for i, seg in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else seg.next_offset
            if upper > offset or (seg is self.active and seg.size == 0):
                break
            doomed.append(seg)
        return doomed

    def _delete_prefix(self, doomed: list[Segment]) -> None:
        self.changes += 1
        if not doomed:
            return
        if self._clean_on_disk:
            self._mark_unclean()
        if doomed[-1] is self.active:
            self.roll()  # never leave the log without an active segment
        for seg in doomed:
            seg.delete_files()
        if self._txn is not None:
            self._txn.drop_segments(seg.base_offset for seg in doomed)
        n = len(doomed)
        del self.segments[:n]
        del self._bases[:n]

    # --- compaction -----------------------------------------------------------------------------

    def compact(self) -> int:
        """Compact the closed segments now (cleanup.policy=compact); returns bytes reclaimed."""
        self.changes += 1
        from .cleaner import compact_log

        self._check_open()
        if self._clean_on_disk:
            self._mark_unclean()
        return compact_log(self)

    def needs_compaction(self) -> bool:
        from .cleaner import needs_compaction

        return self.config.compact and needs_compaction(self)

    # The cleaner's seam (storage/cleaner.py works through these and the public offsets only).

    def now_ms(self) -> int:
        """The log's clock (compaction lag and delete horizons are measured on it)."""
        return self._now()

    @property
    def tombstone_deadline_ms(self) -> int | None:
        """When the next compaction pass may drop a tombstone or marker past its horizon."""
        return self._tombstone_deadline_ms

    def finish_compaction(self, cleaned_offset: int, tombstone_deadline_ms: int | None) -> None:
        """Record a compaction pass: everything below ``cleaned_offset`` has been rewritten, and the
        next deadline; both reach the checkpoint."""
        self.changes += 1
        self.cleaned_offset = max(self.cleaned_offset, cleaned_offset)
        self._tombstone_deadline_ms = tombstone_deadline_ms
        self._write_checkpoint(clean=False)

    def replace_segment(self, old: Segment, new: Segment | None) -> None:
        """Swap in a rewritten segment (or drop it when nothing survived)."""
        self.changes += 1
        if self._clean_on_disk:
            self._mark_unclean()
        i = self.segments.index(old)
        if self._txn is not None:
            self._txn.replace_segment(old.base_offset, None if new is None else new.base_offset)
        if new is None:
            del self.segments[i]
            del self._bases[i]
        else:
            self.segments[i] = new

    # --- lifecycle ------------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def close(self) -> None:
        """Flush everything, write the indexes and mark the shutdown clean."""
        if self._closed:
            return
        self._finish_background_flush(wait=True)
        for seg in self.segments:
            seg.sync()
        self.recovery_point = self.log_end_offset
        if not self._clean_on_disk:  # else unchanged since a clean open: the checkpoint still holds
            self._write_checkpoint(clean=True)
        for seg in self.segments:
            seg.release()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition and all its files."""
        try:
            self._finish_background_flush(wait=True)
        except KafkaError:
            pass  # the files are going anyway
        for seg in self.segments:
            seg.release()
        self._closed = True
        fs.remove_tree(self.directory)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.directory} is closed")

    def _write_checkpoint(self, clean: bool) -> None:
        write_checkpoint(self.directory, Checkpoint(self.log_start_offset, self.recovery_point,
                                                    self.cleaned_offset, clean))
        self._clean_on_disk = clean

    def _mark_unclean(self) -> None:
        """Clear the clean-shutdown flag before the first change to the files after a clean open.

        Kafka removes its clean-shutdown marker when it starts; doing it here instead, once per
        partition on its first write, keeps two fsyncs per partition out of start-up, and a
        partition only read since the start needs no recovery after a crash: its files are
        still exactly what the clean shutdown described."""
        try:
            self._write_checkpoint(clean=False)
        except OSError as exc:
            raise self._storage_error("cannot clear the clean-shutdown flag", exc) from exc

    # --- opening --------------------------------------------------------------------------------

    def _load(self) -> None:
        directory = self.directory
        bases = set()
        segment_files = []
        for name in os.listdir(directory):
            if name.endswith((CLEANED_SUFFIX, ".tmp", ".swap", ".deleted")):
                # leftovers of an interrupted compaction or checkpoint write
                os.unlink(os.path.join(directory, name))
                continue
            m = _SEGMENT_FILE.match(name)
            if m:
                segment_files.append((name, int(m.group(1))))
                if m.group(2) == "log":
                    bases.add(int(m.group(1)))
        for name, base in segment_files:
            if base not in bases:
                os.unlink(os.path.join(directory, name))  # an index without its log
        cp = read_checkpoint(directory)
        interval = self.config.index_interval_bytes
        ordered = sorted(bases)
        segments: list[Segment] = []
        for i, base in enumerate(ordered):
            seg = Segment(directory, base)
            next_base = ordered[i + 1] if i + 1 < len(ordered) else None
            if segments and base < segments[-1].next_offset:
                # Offsets overlapping the previous segment: nothing from here on is in order.
                cut, later_from = True, i
            else:
                if cp is not None and (cp.clean_shutdown or (next_base is not None and next_base <= cp.recovery_point)):
                    cut = seg.load_trusted(next_base, interval)
                else:
                    # Without a checkpoint we cannot tell which closed segments the cleaner
                    # rewrote (they may have offset gaps), so only the last must be gap-free.
                    cut = seg.recover(interval, strict=cp is not None or next_base is None)
                self.recovered_bytes_cut += seg.found_size - seg.size
                segments.append(seg)
                later_from = i + 1
            if cut:
                for later in ordered[later_from:]:
                    doomed = Segment(directory, later)
                    self.recovered_bytes_cut += os.path.getsize(doomed.log_path)
                    doomed.delete_files()
                break
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        log_start = cp.log_start if cp is not None else 0
        if segments:
            log_start = max(log_start, segments[0].base_offset)
        self.cleaned_offset = cp.cleaned_offset if cp is not None else 0
        if not segments or log_start > segments[-1].next_offset:
            # Nothing left at or above the log start (e.g. a crash lost the tail after
            # DeleteRecords moved the start): start empty there, offsets never go back.
            for seg in segments:
                seg.delete_files()
            self.segments = [Segment.create(directory, log_start, self._now())]
            self._bases = [log_start]
        self.log_start_offset = log_start
        self.segments[-1].open_for_append()
        self.segments[-1].created_ms = _roll_base_for_loaded(self.segments[-1], self._now())
        self._delete_prefix(self._segments_below(log_start))
        for seg in self.segments:
            seg.write_indexes()
            seg.sync()
            if seg is not self.active:
                seg.release()
            else:
                seg.unmap()
        self.recovery_point = self.log_end_offset
        # Rewrite the checkpoint only when it no longer describes the files (a rewrite costs two
        # fsyncs per partition).  A clean one that still does stays until the first change
        # (_mark_unclean): a start-up then writes nothing for partitions that are only read.
        if (cp is None or cp.log_start != self.log_start_offset
                or not self.active.base_offset <= cp.recovery_point <= self.log_end_offset
                or cp.cleaned_offset != self.cleaned_offset):
            self._write_checkpoint(clean=False)
        elif cp.clean_shutdown:
            # Exactly what the files hold now, so the next clean open trusts them again.
            self._clean_on_disk = (cp.recovery_point == self.log_end_offset)
            if not self._clean_on_disk:
                self._write_checkpoint(clean=False)


_FLUSHER: ThreadPoolExecutor | None = None


def _flusher() -> ThreadPoolExecutor:
    """One thread for every log's background fsyncs (created on first use)."""
    global _FLUSHER
    if _FLUSHER is None:
        _FLUSHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage-flush")
    return _FLUSHER


def _fsync_and_close(fds: list[int]) -> None:
    try:
        for fd in fds:
            started = time.perf_counter()
            fs.fsync(fd)
            if _FSYNC_OBSERVERS:
                _observe_fsync(started)
    finally:
        for fd in fds:
            os.close(fd)


def _roll_base_for_loaded(seg: Segment, now: int) -> int:
    if seg.size == 0:
        return now
    if seg.first_batch_timestamp is not None and seg.first_batch_timestamp >= 0:
        return min(seg.first_batch_timestamp, seg.created_ms)
    return seg.created_ms


def _require_keys(batch) -> None:
    """Kafka refuses keyless records on compacted topics: compaction could never remove them."""
    for record in iter_records(batch):
        if record.key is None:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Compacted topic cannot accept message without key.")


def _writable(batch):
    if isinstance(batch, bytearray):
        return batch
    if isinstance(batch, memoryview) and not batch.readonly and batch.contiguous:
        return batch.cast("B") if batch.format != "B" else batch
    return bytearray(batch)


def _first_record_at(batch, header: BatchHeader, timestamp: int, min_offset: int) -> tuple[int, int] | None:
    if header.timestamp_type == 1:
        # LogAppendTime: every record of the batch carries the batch's max timestamp.
        if header.max_timestamp >= timestamp:
            return max(header.base_offset, min_offset), header.max_timestamp
        return None
    for record in iter_records(batch):
        if record.offset >= min_offset and record.timestamp >= timestamp:
            return record.offset, record.timestamp
    return None
