"""One segment: an append-only ``.log`` file of record batches plus its two sparse indexes.

Reads are served from a read-only ``mmap`` of the log file.  The active segment grows, so the
mapping is replaced by a larger one when a read reaches past it; the old mapping stays alive as
long as some memoryview handed to a caller still points into it.

A consumer that keeps up reads each new batch right after its append.  Remapping for every such
read (open, mmap, close, a page fault, and the old mapping's munmap when its last view goes) was
the largest single cost between a produce and the parked fetch it wakes (issue 24), so the bytes
written since the mapping was made are read with ``pread`` instead, one piece per read that
needed them, kept until the next remap: up to ``TAIL_MAX_BYTES`` in at most ``TAIL_MAX_PIECES``
pieces, beyond which the next read remaps as before.  When the last read took everything
written, the next write keeps a copy of its own bytes as such a piece, so the read of a fresh
append by a caught-up consumer costs no system call at all (at most one piece per write that
follows a read to the end, so a segment without readers keeps none).  Every piece, like the mapping, starts and
ends on a batch boundary (a write is always whole batches), so no batch spans two buffers.  A mapped file is never shortened
while the broker runs (only recovery, before anything is mapped, truncates), so a view can never
fault.  Retention and compaction unlink or replace files; existing mappings keep the old inode.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from bisect import bisect_right
from collections import OrderedDict

from minikafka.protocol.errors import CorruptRecordError
from minikafka.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, compute_crc, read_header

from . import fs
from .index import OffsetIndex, TimeIndex

# Fields the read path needs, without building a BatchHeader: base offset, batch length, and the
# last offset delta at byte 23.
_BASE_LEN_DELTA = struct.Struct(">qi11xi")  # base offset, batch length, last offset delta (byte 23)
_INT32 = struct.Struct(">i")
_log = logging.getLogger("minikafka.storage")
_TAIL_READ_MAX = 1 << 20  # load_trusted reads at most this much of a segment's unindexed tail
# Bytes past the mapping read with pread rather than remapping (see the module docstring).
TAIL_MAX_BYTES = 64 * 1024
TAIL_MAX_PIECES = 256

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"


# Each mapping holds a file descriptor (mmap duplicates it), so mappings of closed segments are
# kept for the most recently mapped ones only; an evicted mapping lives on while views of it do.
MAX_MAPPED_CLOSED_SEGMENTS = 256
_MAPPED: "OrderedDict[int, Segment]" = OrderedDict()


def _remember_mapping(seg: "Segment") -> None:
    _MAPPED[id(seg)] = seg
    _MAPPED.move_to_end(id(seg))
    while len(_MAPPED) > MAX_MAPPED_CLOSED_SEGMENTS:
        _, oldest = _MAPPED.popitem(last=False)
        oldest.unmap()


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    def __init__(self, directory: str, base_offset: int):
        self.directory = directory
        self.base_offset = base_offset
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + LOG_SUFFIX
        self.index = OffsetIndex(stem + INDEX_SUFFIX, base_offset)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX, base_offset)
        self.size = 0
        self.found_size = 0  # the log file's size when opened (recovery may cut it)
        self.next_offset = base_offset  # one past the last offset stored here
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # base offset of the batch holding max_timestamp
        self.first_batch_timestamp: int | None = None  # what segment.ms measures from
        self.created_ms = 0
        self.bytes_since_index = 0
        self._interval = 4096  # index.interval.bytes the indexes were built with (for a rebuild)
        self.fd: int | None = None
        self.unsynced = False
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._mapped = 0
        # Bytes written after the mapping was made, read with pread: pieces covering
        # [_mapped, _tail_end), each starting at the matching entry of _tail_starts.
        self._tail: list[bytes] = []
        self._tail_starts: list[int] = []
        self._tail_end = 0
        # The last read took everything written (a consumer that keeps up): the next write
        # keeps its own bytes as a tail piece, so the read that follows it needs no pread.
        self._caught_up = False
        # Where a read may start scanning for an offset: (o, p) with every batch before position
        # p ending below offset o.  The newest batch, and the end of the last read (a consumer
        # that keeps up asks for exactly that next), so find() does not scan from the last
        # sparse index entry each time.
        self._appended_at = (base_offset, 0)
        self._read_up_to = (base_offset, 0)

    def __repr__(self) -> str:
        return f"Segment({self.base_offset}, size={self.size}, next={self.next_offset})"

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, now_ms: int) -> "Segment":
        seg = cls(directory, base_offset)
        seg.created_ms = now_ms
        seg.fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        for path in (seg.index.path, seg.time_index.path):
            if os.path.exists(path):
                os.unlink(path)
        return seg

    def open_for_append(self) -> None:
        if self.fd is None:
            self.fd = os.open(self.log_path, os.O_RDWR)

    def close(self) -> None:
        """Release the write descriptor (the segment is no longer active, or the log closes)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def release(self) -> None:
        """Forget our mapping and descriptor; views already handed out keep theirs alive."""
        self.close()
        self.unmap()

    def unmap(self) -> None:
        self._map = None
        self._view = None
        self._mapped = 0
        self._drop_tail()
        _MAPPED.pop(id(self), None)

    def delete_files(self) -> None:
        self.release()
        for path in (self.log_path, self.index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def largest_timestamp(self) -> int:
        """What time-based retention compares with: newest record time, else file mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return self.created_ms

    # --- writing --------------------------------------------------------------------------------

    def write(self, data) -> None:
        """Write ``data`` at the end of the file; on failure cut back so no torn batch remains."""
        if not (self.index.loaded and self.time_index.loaded):
            # Before the file grows: a rebuild from the log (a corrupt index found now) must
            # not see the batch that note_batch is about to index.
            self.load_indexes()
        start = self.size
        view = memoryview(data)
        pos = start
        try:
            while view:
                n = os.pwrite(self.fd, view, pos)
                pos += n
                view = view[n:]
        except OSError:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            raise
        self.size = pos
        self.unsynced = True
        if self._caught_up:
            # A reader is at the end and will want these bytes next (the parked fetch this
            # append wakes): keep a copy as the tail piece _cover would pread.
            self._caught_up = False
            if (self._tail_end == start and self.fd is not None and pos - self._mapped <= TAIL_MAX_BYTES
                    and len(self._tail) < TAIL_MAX_PIECES):
                self._tail.append(bytes(data))
                self._tail_starts.append(start)
                self._tail_end = pos

    def note_batch(self, position: int, base_offset: int, next_offset: int, max_timestamp: int,
                   size: int, interval: int) -> None:
        """Account a batch written at ``position``: stats and sparse index entries."""
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        self.next_offset = next_offset
        self._appended_at = (base_offset, position)
        self.bytes_since_index += size
        if position == 0 or self.bytes_since_index >= interval:
            self.index.append(base_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index = 0

    def sync(self, indexes: bool = True) -> None:
        """fsync the log and, unless told otherwise, persist the indexes (a stale one is rebuilt)."""
        if self.unsynced:
            if self.fd is not None:
                fs.fsync(self.fd)
            else:
                fs.fsync_path(self.log_path)
            self.unsynced = False
        if indexes:
            self.index.write_pending(sync=True)
            self.time_index.write_pending(sync=True)

    def load_indexes(self) -> None:
        """Read the entries of lazily opened indexes now (rebuilding them if they fail the check)."""
        self.index.load()
        self.time_index.load()

    def write_indexes(self) -> None:
        self.index.write_pending(sync=False)
        self.time_index.write_pending(sync=False)

    # --- reading --------------------------------------------------------------------------------

    def buffer(self) -> memoryview:
        """A view of the whole log file as it is now (remapped if the file grew)."""
        if self._mapped < self.size:
            fd = os.open(self.log_path, os.O_RDONLY)
            try:
                self._map = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
            self._view = memoryview(self._map)
            self._mapped = self.size
            self._drop_tail()
            if self.fd is None:
                _remember_mapping(self)
        if self._view is None:
            return memoryview(b"")
        return self._view

    def _drop_tail(self) -> None:
        self._tail = []
        self._tail_starts = []
        self._tail_end = self._mapped

    def _cover(self) -> None:
        """Make every byte written so far readable through ``_region``: pread what was written
        since the mapping (or the last pread) when that is small, else remap."""
        size = self.size
        end = self._tail_end
        if end >= size:
            return
        if (self.fd is None or size - self._mapped > TAIL_MAX_BYTES
                or len(self._tail) >= TAIL_MAX_PIECES):
            self.buffer()
            return
        piece = os.pread(self.fd, size - end, end)
        if len(piece) != size - end:  # cannot happen to bytes we wrote; the mapping is the truth
            self.buffer()
            return
        self._tail.append(piece)
        self._tail_starts.append(end)
        self._tail_end = size

    def _region(self, pos: int):
        """(buffer, position of its first byte, position after its last) holding ``pos``, which
        must be below the size ``_cover`` made readable."""
        if pos < self._mapped:
            return self._view, 0, self._mapped
        i = bisect_right(self._tail_starts, pos) - 1
        start = self._tail_starts[i]
        piece = self._tail[i]
        return piece, start, start + len(piece)

    def find(self, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= ``offset``; None when there is none."""
        if offset >= self.next_offset or self.size == 0:
            return None
        _, pos = self.index.lookup(offset)
        for hint_offset, hint_pos in (self._appended_at, self._read_up_to):
            if hint_offset <= offset and hint_pos > pos:
                pos = hint_pos
        self._cover()
        size = self.size
        unpack = _BASE_LEN_DELTA.unpack_from
        while pos < size:
            buf, first, end = self._region(pos)
            while pos < end:
                base, length, delta = unpack(buf, pos - first)
                if base + delta >= offset:
                    return pos
                pos += length + LOG_OVERHEAD
        return None

    def read_newest(self, offset: int, budget: int, max_offset: int, first: bool) -> memoryview | None:
        """A view of the newest batch when it holds ``offset`` and the read takes it whole and
        stops after it, else None (then ``find`` and ``collect``).  What ``collect`` would give
        for that read, with the least work: this is the read of a consumer that keeps up."""
        base, pos = self._appended_at
        size = self.size
        next_offset = self.next_offset
        if not base <= offset < next_offset or max_offset < next_offset or pos >= size:
            return None
        n = size - pos
        if n > budget and not first:
            return None
        self._cover()
        buf, at, end = self._region(pos)
        if end < size or _BASE_LEN_DELTA.unpack_from(buf, pos - at)[1] + LOG_OVERHEAD != n:
            return None  # not exactly one batch up to the end: the general read decides
        self._read_up_to = (next_offset, size)
        self._caught_up = True
        return memoryview(buf)[pos - at:n + pos - at]

    def collect(self, pos: int, budget: int, max_offset: int, out: list, first: bool) -> tuple[int, bool]:
        """Append views of whole batches from ``pos`` to ``out``.

        Stops before a batch that reaches ``max_offset`` or would exceed ``budget`` bytes (the very
        first batch of a read is taken whatever its size, KIP-74).  Contiguous batches go out as
        one view per buffer they lie in (the mapping, or a piece read after it).  Returns (bytes
        taken, True when stopped by budget or max_offset).
        """
        self._cover()
        size = self.size
        start = pos
        taken = 0
        stopped = False
        # Skip ahead through the sparse index: every batch before an indexed batch at position p
        # (with base offset o) ends by p and has offsets below o, so when p is within the budget
        # and o <= max_offset they are all taken without reading their headers.
        index = self.index
        i = min(bisect_right(index.positions, pos + budget), bisect_right(index.offsets, max_offset)) - 1
        if i >= 0 and index.positions[i] > pos:
            pos = index.positions[i]
            taken = pos - start
        unpack = _BASE_LEN_DELTA.unpack_from
        next_offset = -1
        while pos < size and not stopped:
            buf, at, end = self._region(pos)
            while pos < end:
                base, length, delta = unpack(buf, pos - at)
                if base + delta >= max_offset:
                    stopped = True
                    break
                n = length + LOG_OVERHEAD
                if taken + n > budget and not (first and taken == 0):
                    stopped = True
                    break
                taken += n
                pos += n
                next_offset = base + delta + 1
        if next_offset >= 0:
            self._read_up_to = (next_offset, pos)
        self._caught_up = pos >= size
        while start < pos:
            buf, at, end = self._region(start)
            stop = end if end < pos else pos
            out.append(memoryview(buf)[start - at:stop - at])
            start = stop
        return taken, stopped

    def iter_positions(self, start_pos: int = 0):
        """Yield (position, BatchHeader) of every batch from ``start_pos`` (as far as the file
        reached when the iteration started)."""
        for pos, header, _ in self.iter_views(start_pos):
            yield pos, header

    def iter_views(self, start_pos: int = 0):
        """Yield (position, BatchHeader, view of the batch) from ``start_pos``."""
        buf = self.buffer()
        pos = start_pos
        size = min(self.size, len(buf))
        while pos < size:
            header = read_header(buf, pos)
            end = pos + header.size
            yield pos, header, buf[pos:end]
            pos = end

    # --- opening existing files -----------------------------------------------------------------

    def load_trusted(self, next_segment_base: int | None, interval: int) -> bool:
        """Open a segment known to be flushed: trust the log, reuse the indexes when sane.

        Nothing is mapped and the indexes are opened lazily (their last entries only): what is
        read here is the first batch header, the last indexed one and the few batches after it,
        so opening costs the same for a segment of 1 MB or 1 GB.  Returns True when an
        unreadable tail had to be cut (it should not happen to a flushed segment, but an
        unparseable header must never be served).
        """
        st = os.stat(self.log_path)
        self.size = self.found_size = st.st_size
        self.created_ms = int(st.st_mtime * 1000)
        self._interval = interval
        self.index.on_corrupt = self.time_index.on_corrupt = self._rebuild_indexes
        if not (self.index.open_lazily(self.size, next_segment_base)
                and self.time_index.open_lazily(next_segment_base)):
            return self._rescan(interval)
        last_off, last_pos = self.index.last()
        last_time = self.time_index.last()
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        if self.size == 0:
            return False
        with open(self.log_path, "rb", buffering=0) as f:
            first = f.read(BATCH_HEADER_SIZE)
            f.seek(last_pos)
            # The last indexed batch and those after it: about index.interval.bytes, unless the
            # index is sparser than that; then the tail is scanned through the mapping.
            tail = f.read(_TAIL_READ_MAX if self.size - last_pos > _TAIL_READ_MAX else -1)
        try:
            self.first_batch_timestamp = read_header(first, 0).max_timestamp
            header = read_header(tail, 0)
        except CorruptRecordError:
            header = None
        if header is None or header.base_offset != last_off or last_pos + header.size > self.size:
            return self._rescan(interval)
        # Batches after the last index entry are not indexed yet (or the entry is the last batch).
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset
        self.next_offset = header.next_offset
        if self.offset_of_max_timestamp >= self.next_offset:
            return self._rescan(interval)  # the time index points past the log
        self.bytes_since_index = 0
        if last_pos + len(tail) < self.size:
            tail = None
        return self._cut(self._scan(last_pos + header.size, interval, validate=False, expected=None,
                                    buf=tail, buf_start=last_pos))

    def _rescan(self, interval: int) -> bool:
        """Rebuild both indexes and the stats from the whole log (unvalidated: it is trusted)."""
        self.index.clear()
        self.time_index.clear()
        self._reset_stats()
        return self._cut(self._scan(0, interval, validate=False, expected=None))

    def _rebuild_indexes(self) -> None:
        """A lazily opened index failed its check on first use: rebuild it from the log.

        The log may be mapped and read by now, so an unreadable batch cannot be cut here; that
        is reported, and what comes before it stays indexed."""
        size = self.size
        self.index.clear()
        self.time_index.clear()
        self._reset_stats()
        end = self._scan(0, self._interval, validate=False, expected=None)
        if end < size:
            _log.error("segment %s has an unreadable batch at position %d of %d", self.log_path, end, size)

    def _cut(self, end: int) -> bool:
        if end < self.size:
            self.truncate(end)
            return True
        return False

    def recover(self, interval: int, strict: bool) -> bool:
        """Validate every batch (CRC, offsets), rebuild the indexes, cut at the first bad batch.

        ``strict`` demands contiguous offsets starting at the segment's base offset, which holds
        for every segment the cleaner has not rewritten.  Returns True when bytes were cut.
        """
        st = os.stat(self.log_path)
        self.size = self.found_size = st.st_size
        self.created_ms = int(st.st_mtime * 1000)
        self._interval = interval
        self.index.clear()
        self.time_index.clear()
        self._reset_stats()
        end = self._scan(0, interval, validate=True, expected=self.base_offset if strict else None,
                         strict=strict)
        # Whatever survived a process crash sits in the page cache, maybe not on disk yet.
        self.unsynced = True
        return self._cut(end)

    def truncate(self, position: int) -> None:
        """Cut the log at ``position`` (only before anything is mapped for readers)."""
        self.unmap()
        fd = os.open(self.log_path, os.O_RDWR)
        try:
            os.ftruncate(fd, position)
            fs.fsync(fd)
        finally:
            os.close(fd)
        self.size = position
        self._appended_at = self._read_up_to = (self.base_offset, 0)
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(self.next_offset)

    def _reset_stats(self) -> None:
        self.next_offset = self.base_offset
        self._appended_at = self._read_up_to = (self.base_offset, 0)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self.bytes_since_index = 0

    def _scan(self, pos: int, interval: int, validate: bool, expected: int | None,
              strict: bool = False, buf=None, buf_start: int = 0) -> int:
        """Index batches from ``pos``; return the end of the last acceptable batch.

        ``buf`` holds the file from ``buf_start`` to its end (default: the whole mapped file)."""
        if self.size == 0:
            return 0
        if buf is None:
            buf, buf_start = self.buffer(), 0
        size = self.size
        floor = self.next_offset if expected is None else expected
        while pos < size:
            if size - pos < BATCH_HEADER_SIZE:
                break
            at = pos - buf_start
            batch_length = _INT32.unpack_from(buf, at + 8)[0]
            if batch_length < MIN_BATCH_LENGTH or pos + batch_length + LOG_OVERHEAD > size:
                break
            try:
                header = read_header(buf, at)
            except CorruptRecordError:
                break
            if validate:
                if compute_crc(buf, at, header.size) != header.crc:
                    break
                if header.record_count != header.last_offset_delta + 1 and strict:
                    break
                if header.base_offset < floor or (strict and header.base_offset != floor):
                    break
                if header.last_offset_delta > 2147483647 - 1:
                    break
            elif header.base_offset < floor:
                break
            self.note_batch(pos, header.base_offset, header.next_offset, header.max_timestamp,
                            header.size, interval)
            floor = header.next_offset
            pos += header.size
        del buf
        return pos
