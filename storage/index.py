"""Sparse indexes of one segment: offset -> file position, and timestamp -> offset.

The in-memory arrays are the truth while the broker runs; the files are a cache that lets a clean
restart skip scanning the log.  Entries reach the file on flush, roll and close (``write_pending``),
and a file that fails its sanity check on load is simply rebuilt from the log, so an index can never
make valid data unreachable.

Opening is lazy, like Kafka's memory-mapped indexes: ``open_lazily`` reads only the file's size and
its last entry (what the segment needs to know where it ends), and the entries are read and checked
on first use (a lookup, an append, a truncation).  A start-up over hundreds of partitions then costs
two small reads per segment instead of decoding every entry.  When the deferred check fails, the
index calls its segment's ``on_corrupt`` to rebuild it from the log, as a failed check at open would.

File formats (big-endian, like Kafka's):

* ``.index``: 8-byte entries ``(offset - segment base) u32, position u32``; one entry for the first
  batch of the segment and then one per ``index.interval.bytes`` of batches.  The offset is the
  batch's *base* offset and the position its first byte.
* ``.timeindex``: 12-byte entries ``max timestamp so far i64, (offset - segment base) u32``; the
  offset is the base offset of the batch that first reached that timestamp.  Timestamps strictly
  increase from entry to entry.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from bisect import bisect_right

from . import fs

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_log = logging.getLogger("minikafka.storage")


def _peek_last(path: str, entry_size: int) -> tuple[int, bytes] | None:
    """(number of entries, last entry's bytes) of an index file; None when missing or torn."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size % entry_size:
            return None
        count = size // entry_size
        if not count:
            return 0, b""
        last = os.pread(fd, entry_size, size - entry_size)
        return (count, last) if len(last) == entry_size else None
    finally:
        os.close(fd)


class _LazyIndex:
    """What both indexes share: the entries stay in the file until first use."""

    entry_size = 0

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        # Set by the segment: rebuilds both indexes from the log when a deferred read fails.
        self.on_corrupt = None
        self._unread: tuple | None = None  # (entries in the file, arguments of _read) until read
        self._persisted = 0  # entries already in the file
        self._dirty = False  # file content diverges from the arrays (not just a missing tail)
        self._unsynced = False
        self._on_disk = False  # the file is known to exist (saves a stat per write_pending)

    @property
    def loaded(self) -> bool:
        """False while the entries are still only in the file (opened lazily, not used yet)."""
        return self._unread is None

    def load(self) -> None:
        """Read the entries now if the file was opened lazily; a failed check rebuilds the index."""
        if self._unread is None:
            return
        _, args = self._unread
        self._unread = None
        if not self._read(*args):
            _log.warning("index %s is corrupt; rebuilding it from the log", self.path)
            self._set_empty()
            self._dirty = True
            if self.on_corrupt is not None:
                self.on_corrupt()

    def __len__(self) -> int:
        if self._unread is not None:
            return self._unread[0]
        return len(self._offsets)

    def write_pending(self, sync: bool) -> None:
        if self._unread is not None:
            return  # the file is exactly what was found at open, and was synced then
        _write_pending(self, sync)


def _write_all(path: str, data: bytes, append: bool, sync: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            fs.fsync(fd)
    finally:
        os.close(fd)


class OffsetIndex(_LazyIndex):
    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: str, base_offset: int):
        super().__init__(path, base_offset)
        self._offsets = array("q")
        self._positions = array("q")
        self._last: tuple[int, int] | None = None  # the last entry, known without reading the rest

    @property
    def offsets(self) -> array:
        if self._unread is not None:
            self.load()
        return self._offsets

    @property
    def positions(self) -> array:
        if self._unread is not None:
            self.load()
        return self._positions

    def _set_empty(self) -> None:
        self._offsets = array("q")
        self._positions = array("q")

    def open_lazily(self, log_size: int, next_segment_base: int | None) -> bool:
        """Take the file as this segment's index without reading its entries: only the last one,
        checked against the log.  False when it is missing or not plausible (rebuild it now)."""
        peeked = _peek_last(self.path, self.entry_size)
        if peeked is None:
            return False
        self._on_disk = True
        count, last = peeked
        if not count:
            if log_size > 0:
                return False  # the first batch of a segment is always indexed
            self._set_empty()
            self._persisted = 0
            self._dirty = False
            return True
        rel, pos = _OFFSET_ENTRY.unpack(last)
        off = self.base_offset + rel
        if pos >= log_size or (next_segment_base is not None and off >= next_segment_base):
            return False
        self._set_empty()
        self._unread = (count, (log_size, next_segment_base))
        self._last = (off, pos)
        return True

    def append(self, offset: int, position: int) -> None:
        if self._unread is not None:
            self.load()
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(base offset, position) of the last indexed batch starting at or before ``offset``."""
        offsets = self.offsets
        i = bisect_right(offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return offsets[i], self._positions[i]

    def last(self) -> tuple[int, int]:
        if self._unread is not None:
            return self._last
        if not self._offsets:
            return self.base_offset, 0
        return self._offsets[-1], self._positions[-1]

    def clear(self) -> None:
        self._unread = None
        self._set_empty()
        self._dirty = True

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at or beyond ``position`` (the log was cut there)."""
        n = bisect_right(self.positions, position - 1)
        if n < len(self._offsets):
            del self._offsets[n:]
            del self._positions[n:]
            self._dirty = True

    def _read(self, log_size: int, next_segment_base: int | None) -> bool:
        """Read the file; False (and empty arrays) when missing or not plausible for this log."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return False
        if len(data) % self.entry_size:
            return False
        offsets, positions = array("q"), array("q")
        prev_off = prev_pos = -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if off <= prev_off or pos <= prev_pos or pos >= log_size:
                return False
            if next_segment_base is not None and off >= next_segment_base:
                return False
            offsets.append(off)
            positions.append(pos)
            prev_off, prev_pos = off, pos
        # The first batch of a segment is always indexed.
        if (offsets and positions[0] != 0) or (log_size > 0 and not offsets):
            return False
        self._offsets, self._positions = offsets, positions
        self._persisted = len(offsets)
        self._dirty = False
        return True

    def _pack(self, start: int) -> bytes:
        base = self.base_offset
        offsets, positions = self._offsets, self._positions
        return b"".join(_OFFSET_ENTRY.pack(offsets[i] - base, positions[i]) for i in range(start, len(offsets)))


class TimeIndex(_LazyIndex):
    entry_size = _TIME_ENTRY.size

    def __init__(self, path: str, base_offset: int):
        super().__init__(path, base_offset)
        self._timestamps = array("q")
        self._offsets = array("q")
        self._last: tuple[int, int] | None = None

    @property
    def timestamps(self) -> array:
        if self._unread is not None:
            self.load()
        return self._timestamps

    @property
    def offsets(self) -> array:
        if self._unread is not None:
            self.load()
        return self._offsets

    def _set_empty(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("q")

    def open_lazily(self, next_segment_base: int | None) -> bool:
        """As OffsetIndex.open_lazily: only the last entry is read and checked now."""
        peeked = _peek_last(self.path, self.entry_size)
        if peeked is None:
            return False
        self._on_disk = True
        count, last = peeked
        self._set_empty()
        if not count:
            self._persisted = 0
            self._dirty = False
            return True
        ts, rel = _TIME_ENTRY.unpack(last)
        off = self.base_offset + rel
        if next_segment_base is not None and off >= next_segment_base:
            return False
        self._unread = (count, (next_segment_base,))
        self._last = (ts, off)
        return True

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._unread is not None:
            self.load()
        timestamps = self._timestamps
        if not timestamps or timestamp > timestamps[-1]:
            timestamps.append(timestamp)
            self._offsets.append(offset)

    def last(self) -> tuple[int, int] | None:
        if self._unread is not None:
            return self._last
        if not self._timestamps:
            return None
        return self._timestamps[-1], self._offsets[-1]

    def lookup_before(self, timestamp: int) -> int | None:
        """Base offset of a batch at or before the first record with timestamp >= ``timestamp``.

        Everything up to and including the batch of an entry with ``ts < timestamp`` is older than
        ``timestamp``, so the scan may start at the last such entry; None means start at the top.
        """
        i = bisect_right(self.timestamps, timestamp - 1) - 1
        if i < 0:
            return None
        return self._offsets[i]

    def clear(self) -> None:
        self._unread = None
        self._set_empty()
        self._dirty = True

    def truncate_to_offset(self, next_offset: int) -> None:
        # offsets are non-decreasing, which is all bisect needs
        n = bisect_right(self.offsets, next_offset - 1)
        if n < len(self._offsets):
            del self._timestamps[n:]
            del self._offsets[n:]
            self._dirty = True

    def _read(self, next_segment_base: int | None) -> bool:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return False
        if len(data) % self.entry_size:
            return False
        timestamps, offsets = array("q"), array("q")
        prev_ts = None
        prev_off = -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if (prev_ts is not None and ts <= prev_ts) or off < prev_off:
                return False
            if next_segment_base is not None and off >= next_segment_base:
                return False
            timestamps.append(ts)
            offsets.append(off)
            prev_ts, prev_off = ts, off
        self._timestamps, self._offsets = timestamps, offsets
        self._persisted = len(offsets)
        self._dirty = False
        return True

    def _pack(self, start: int) -> bytes:
        base = self.base_offset
        timestamps, offsets = self._timestamps, self._offsets
        return b"".join(_TIME_ENTRY.pack(timestamps[i], offsets[i] - base) for i in range(start, len(offsets)))


def _write_pending(index, sync: bool) -> None:
    """Bring the file up to date with the arrays; fsync only when something changed since the last one."""
    if index._dirty:
        _write_all(index.path, index._pack(0), append=False, sync=sync)
        index._unsynced = not sync
    elif index._persisted < len(index._offsets):
        _write_all(index.path, index._pack(index._persisted), append=True, sync=sync)
        index._unsynced = not sync
    elif not index._on_disk and not os.path.exists(index.path):
        _write_all(index.path, b"", append=True, sync=sync)
        index._unsynced = not sync
    elif sync and index._unsynced:
        fs.fsync_path(index.path)
        index._unsynced = False
    index._persisted = len(index._offsets)
    index._dirty = False
    index._on_disk = True
