"""The per-partition checkpoint file: where recovery starts, and whether the last close was clean.

``partition.checkpoint`` (34 bytes, big-endian)::

    magic           4 bytes  b"MKPC"
    version         u8       1
    flags           u8       bit 0: clean shutdown (everything up to the log end is on disk and the
                             index files match the logs)
    log_start       i64      log start offset (DeleteRecords and retention move it)
    recovery_point  i64      every batch below this offset is fsynced; recovery validates from here
    cleaned_offset  i64      the compactor has rewritten everything below this offset
    crc             u32      CRC-32C of the 30 bytes before it

It is replaced atomically (write a temporary file, fsync, rename, fsync the directory), so a crash
leaves either the old or the new checkpoint.  A missing or damaged checkpoint means "recover
everything", never "lose data".
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from minikafka.protocol.primitives import crc32c

from . import fs

FILE_NAME = "partition.checkpoint"
_MAGIC = b"MKPC"
_VERSION = 1
_BODY = struct.Struct(">4sBBqqq")
_CRC = struct.Struct(">I")
FLAG_CLEAN_SHUTDOWN = 0x01


class Checkpoint(NamedTuple):
    log_start: int
    recovery_point: int
    cleaned_offset: int
    clean_shutdown: bool


def read_checkpoint(directory: str) -> Checkpoint | None:
    try:
        with open(os.path.join(directory, FILE_NAME), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) != _BODY.size + _CRC.size:
        return None
    if crc32c(data[: _BODY.size]) != _CRC.unpack_from(data, _BODY.size)[0]:
        return None
    magic, version, flags, log_start, recovery_point, cleaned = _BODY.unpack_from(data)
    if magic != _MAGIC or version != _VERSION or min(log_start, recovery_point, cleaned) < 0:
        return None
    return Checkpoint(log_start, recovery_point, cleaned, bool(flags & FLAG_CLEAN_SHUTDOWN))


def write_checkpoint(directory: str, cp: Checkpoint) -> None:
    body = _BODY.pack(_MAGIC, _VERSION, FLAG_CLEAN_SHUTDOWN if cp.clean_shutdown else 0,
                      cp.log_start, cp.recovery_point, cp.cleaned_offset)
    data = body + _CRC.pack(crc32c(body))
    path = os.path.join(directory, FILE_NAME)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        fs.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fs.fsync_dir(directory)
