"""The metadata log: the controller's state as one append-only file of records.

KRaft keeps cluster metadata in the ``__cluster_metadata`` log and rebuilds its state by replaying
it; this is the same idea for one node.  The controller owns the meaning of the records (plain
JSON-compatible dicts with a ``"type"`` key: cluster id, topic created, topic deleted, partitions
added, configs changed); this module only makes them durable and gives them back in order.

Frame format (version 1), big-endian, repeated to the end of the file::

    length     u32   bytes after the crc field (version + timestamp + payload)
    crc        u32   CRC-32C of those bytes
    version    u8    1
    timestamp  i64   append time (ms, injected clock)
    payload    UTF-8 JSON object; a uuid.UUID value is written as {"__uuid__": "<hex>"} and read
                     back as uuid.UUID

``append`` returns only after ``fsync``: the controller applies a change after the record is on
disk, so a crash never shows clients a topic that would be gone after restart.  On open, a torn or
corrupt frame (short, bad CRC, unknown version, invalid JSON) and everything after it is cut off:
the only way to get there is a crash during an append, whose caller never got an answer.  A new
record shape needs no new frame version; a new frame layout gets version 2 and a reader for both.
"""

from __future__ import annotations

import json
import os
import struct
import time
import uuid
from typing import Callable

from minikafka.protocol.primitives import crc32c

from . import fs

FRAME_VERSION = 1
_FRAME_HEAD = struct.Struct(">II")
_BODY_HEAD = struct.Struct(">Bq")
_MAX_FRAME = 64 * 1024 * 1024


def _default(value):
    if isinstance(value, uuid.UUID):
        return {"__uuid__": value.hex}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} in the metadata log")


def _object_hook(obj: dict):
    if len(obj) == 1 and "__uuid__" in obj:
        return uuid.UUID(obj["__uuid__"])
    return obj


def encode_frame(record: dict, timestamp_ms: int) -> bytes:
    payload = json.dumps(record, default=_default, separators=(",", ":"), sort_keys=True).encode()
    body = _BODY_HEAD.pack(FRAME_VERSION, timestamp_ms) + payload
    return _FRAME_HEAD.pack(len(body), crc32c(body)) + body


def decode_frames(data) -> tuple[list[dict], int]:
    """(records, length of the valid prefix) of a metadata log's bytes."""
    records = []
    pos = 0
    end = len(data)
    while end - pos >= _FRAME_HEAD.size:
        length, crc = _FRAME_HEAD.unpack_from(data, pos)
        start = pos + _FRAME_HEAD.size
        if length < _BODY_HEAD.size or length > _MAX_FRAME or start + length > end:
            break
        body = bytes(data[start:start + length])
        if crc32c(body) != crc:
            break
        version, _ = _BODY_HEAD.unpack_from(body)
        if version != FRAME_VERSION:
            break
        try:
            record = json.loads(body[_BODY_HEAD.size:], object_hook=_object_hook)
        except ValueError:
            break
        if not isinstance(record, dict):
            break
        records.append(record)
        pos = start + length
    return records, pos


class MetadataLog:
    def __init__(self, path: str, now_ms: Callable[[], int] | None = None):
        self.path = path
        self._now = now_ms or (lambda: time.time_ns() // 1_000_000)
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        created = not os.path.exists(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if created:
            fs.fsync_dir(directory)
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0) if size else b""
        self._records, valid = decode_frames(data)
        self.truncated_bytes = size - valid
        if valid < size:
            os.ftruncate(self._fd, valid)
            fs.fsync(self._fd)
        self._size = valid

    def replay(self) -> list[dict]:
        """Every record in append order (read once at open; later appends included)."""
        return list(self._records)

    records = replay

    def append(self, record: dict) -> None:
        """Make ``record`` durable (written and fsynced) before returning."""
        if self._fd is None:
            raise ValueError("metadata log is closed")
        frame = encode_frame(record, self._now())
        view = memoryview(frame)
        pos = self._size
        try:
            while view:
                n = os.pwrite(self._fd, view, pos)
                pos += n
                view = view[n:]
            fs.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self._size)
            raise
        self._size = pos
        # Store what a replay would return, so callers cannot alias the stored dict.
        self._records.append(json.loads(frame[_FRAME_HEAD.size + _BODY_HEAD.size:], object_hook=_object_hook))

    def close(self) -> None:
        if self._fd is not None:
            fs.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

