"""Sparse indexes of one segment: offset -> file position, and timestamp -> offset.

The in-memory arrays are the truth while the broker runs; the files are a cache that lets a clean
restart skip scanning the log.  Entries reach the file on flush, roll and close (``write_pending``),
and a file that fails its sanity check on load is simply rebuilt from the log, so an index can never
make valid data unreachable.

File formats (big-endian, like Kafka's):

* ``.index``: 8-byte entries ``(offset - segment base) u32, position u32``; one entry for the first
  batch of the segment and then one per ``index.interval.bytes`` of batches.  The offset is the
  batch's *base* offset and the position its first byte.
* ``.timeindex``: 12-byte entries ``max timestamp so far i64, (offset - segment base) u32``; the
  offset is the base offset of the batch that first reached that timestamp.  Timestamps strictly
  increase from entry to entry.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right

from . import fs

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


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


class OffsetIndex:
    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.offsets = array("q")
        self.positions = array("q")
        self._persisted = 0  # entries already in the file
        self._dirty = False  # file content diverges from the arrays (not just a missing tail)
        self._unsynced = False

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, offset: int, position: int) -> None:
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(base offset, position) of the last indexed batch starting at or before ``offset``."""
        i = bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]

    def last(self) -> tuple[int, int]:
        if not self.offsets:
            return self.base_offset, 0
        return self.offsets[-1], self.positions[-1]

    def clear(self) -> None:
        self.offsets = array("q")
        self.positions = array("q")
        self._dirty = True

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at or beyond ``position`` (the log was cut there)."""
        n = bisect_right(self.positions, position - 1)
        if n < len(self.offsets):
            del self.offsets[n:]
            del self.positions[n:]
            self._dirty = True

    def load(self, log_size: int, next_segment_base: int | None) -> bool:
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
        self.offsets, self.positions = offsets, positions
        self._persisted = len(offsets)
        self._dirty = False
        return True

    def _pack(self, start: int) -> bytes:
        base = self.base_offset
        return b"".join(
            _OFFSET_ENTRY.pack(self.offsets[i] - base, self.positions[i]) for i in range(start, len(self.offsets))
        )

    def write_pending(self, sync: bool) -> None:
        _write_pending(self, sync)


class TimeIndex:
    entry_size = _TIME_ENTRY.size

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")
        self._persisted = 0
        self._dirty = False
        self._unsynced = False

    def __len__(self) -> int:
        return len(self.timestamps)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if not self.timestamps or timestamp > self.timestamps[-1]:
            self.timestamps.append(timestamp)
            self.offsets.append(offset)

    def last(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.offsets[-1]

    def lookup_before(self, timestamp: int) -> int | None:
        """Base offset of a batch at or before the first record with timestamp >= ``timestamp``.

        Everything up to and including the batch of an entry with ``ts < timestamp`` is older than
        ``timestamp``, so the scan may start at the last such entry; None means start at the top.
        """
        i = bisect_right(self.timestamps, timestamp - 1) - 1
        if i < 0:
            return None
        return self.offsets[i]

    def clear(self) -> None:
        self.timestamps = array("q")
        self.offsets = array("q")
        self._dirty = True

    def truncate_to_offset(self, next_offset: int) -> None:
        n = bisect_right(self.offsets, next_offset - 1)
        # offsets are non-decreasing but bisect still needs them sorted, which they are
        if n < len(self.offsets):
            del self.timestamps[n:]
            del self.offsets[n:]
            self._dirty = True

    def load(self, next_segment_base: int | None) -> bool:
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
        self.timestamps, self.offsets = timestamps, offsets
        self._persisted = len(offsets)
        self._dirty = False
        return True

    def _pack(self, start: int) -> bytes:
        base = self.base_offset
        return b"".join(
            _TIME_ENTRY.pack(self.timestamps[i], self.offsets[i] - base) for i in range(start, len(self.offsets))
        )

    def write_pending(self, sync: bool) -> None:
        _write_pending(self, sync)


def _write_pending(index, sync: bool) -> None:
    """Bring the file up to date with the arrays; fsync only when something changed since the last one."""
    if index._dirty:
        _write_all(index.path, index._pack(0), append=False, sync=sync)
        index._unsynced = not sync
    elif index._persisted < len(index.offsets):
        _write_all(index.path, index._pack(index._persisted), append=True, sync=sync)
        index._unsynced = not sync
    elif not os.path.exists(index.path):
        _write_all(index.path, b"", append=True, sync=sync)
        index._unsynced = not sync
    elif sync and index._unsynced:
        fs.fsync_path(index.path)
        index._unsynced = False
    index._persisted = len(index.offsets)
    index._dirty = False
