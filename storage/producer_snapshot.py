"""Producer-state snapshot files: ``<offset>.snapshot`` in a partition directory.

Kafka's ProducerStateManager writes the idempotent/transactional producer state of a partition
to ``<offset>.snapshot`` when a segment rolls and on clean shutdown; on start it reads the
latest snapshot and replays only the batches at or above its offset, so neither start-up nor
the first produce after a restart scans the whole log.  This module is the file side of that:
it knows nothing of what a producer entry means, only that it is a dict of JSON values.

File layout (versioned; our own, Kafka's binary schema is not needed by any client):

    b"MKPS"  u16 version  u32 crc32(payload)  payload = UTF-8 JSON
    payload: {"offset": N, "producers": [ {...one dict per producer...}, ... ]}

The snapshot at offset N holds the state after every batch below N.  Extension point: each
producer is a dict; a feature that needs more per-producer state (open transactions: first
offset of the ongoing transaction, coordinator epoch...) adds keys to that dict.  Readers
ignore keys they do not know and supply defaults for keys that are missing, so adding keys
keeps ``VERSION``; only an incompatible change of an existing key bumps it, and a file with
a newer version than this code knows is ignored (the log is replayed instead) rather than
misread.  A file that fails its CRC or does not parse is ignored the same way: a snapshot is
only ever an optimisation over replaying the log.

Files are written to ``<name>.tmp`` and renamed, so a crash leaves either the old set or the
new file (PartitionLog removes ``.tmp`` leftovers on open).  Only the newest ``KEEP`` snapshots
are kept.  Snapshots above the log end (the log lost its tail in a crash) are deleted on read.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import zlib

log = logging.getLogger("minikafka.storage.snapshot")

MAGIC = b"MKPS"
VERSION = 1
KEEP = 2
SUFFIX = ".snapshot"
_HEADER = struct.Struct(">4sHI")
_NAME = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SUFFIX}")


def list_snapshots(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m)


def encode(offset: int, producers: list[dict]) -> bytes:
    payload = json.dumps({"offset": offset, "producers": producers}, separators=(",", ":")).encode()
    return _HEADER.pack(MAGIC, VERSION, zlib.crc32(payload)) + payload


def decode(data: bytes) -> tuple[int, list[dict]]:
    """(offset, producers) of a snapshot file's bytes; ValueError if it cannot be trusted."""
    if len(data) < _HEADER.size:
        raise ValueError("truncated snapshot")
    magic, version, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not a producer snapshot")
    if version > VERSION:
        raise ValueError(f"snapshot version {version} is newer than {VERSION}")
    payload = data[_HEADER.size:]
    if zlib.crc32(payload) != crc:
        raise ValueError("snapshot CRC mismatch")
    body = json.loads(payload)
    producers = body.get("producers")
    if not isinstance(producers, list) or not all(isinstance(p, dict) for p in producers):
        raise ValueError("snapshot producers are not a list of objects")
    return int(body["offset"]), producers


def write_snapshot(directory: str, offset: int, producers: list[dict], *, sync: bool = True) -> str:
    """Write the state after every batch below ``offset``; keep only the newest ``KEEP`` files."""
    path = snapshot_path(directory, offset)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode(offset, producers))
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    for old in list_snapshots(directory)[:-KEEP]:
        _unlink(snapshot_path(directory, old))
    return path


def latest_snapshot(directory: str, log_end_offset: int) -> tuple[int, list[dict]] | None:
    """The newest readable snapshot at or below ``log_end_offset``, or None.

    Snapshots above the log end describe batches the log no longer has: they are deleted.
    Unreadable ones are skipped (and left for ``write_snapshot`` to prune)."""
    for offset in reversed(list_snapshots(directory)):
        path = snapshot_path(directory, offset)
        if offset > log_end_offset:
            _unlink(path)
            continue
        try:
            with open(path, "rb") as f:
                found, producers = decode(f.read())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring producer snapshot %s: %s", path, exc)
            continue
        if found != offset:
            log.warning("ignoring producer snapshot %s: it says offset %d", path, found)
            continue
        return offset, producers
    return None


def delete_above(directory: str, log_end_offset: int) -> int:
    """Delete the snapshots above ``log_end_offset``; how many went.

    Run when a log is opened: after a crash lost the log's tail, a snapshot above the new end
    describes batches that no longer exist, and once new batches pass its offset it would look
    valid.  (Kafka truncates its snapshots with the log for the same reason.)"""
    doomed = [o for o in list_snapshots(directory) if o > log_end_offset]
    for offset in doomed:
        _unlink(snapshot_path(directory, offset))
    return len(doomed)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
