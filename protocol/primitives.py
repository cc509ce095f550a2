"""Variable-length integers and other small wire primitives shared by the codec and record batches.

Kafka uses two varint flavours: *unsigned* varints for lengths in flexible message versions
(compact strings, tagged fields) and *zigzag* varints inside records (DefaultRecord).  Mixing
them up is the classic bug, so each reader says which one it is in its name.
"""

from __future__ import annotations

from .errors import ProtocolError

__all__ = [
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "java_string_hash",
    "crc32c",
]


def read_uvarint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned LEB128 varint; returns (value, next position).

    ``max_bytes`` bounds how far we read: 5 bytes hold any uint32, 10 any uint64.  A longer
    run of continuation bits is malformed input, not a big number.
    """
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise ProtocolError("varint is too long")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed 32-bit varint (record fields)."""
    raw, pos = read_uvarint(buf, pos, 5)
    if raw > 0xFFFFFFFF:
        raise ProtocolError("varint out of int32 range")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed 64-bit varint (record timestamp and offset deltas)."""
    raw, pos = read_uvarint(buf, pos, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise ProtocolError("varlong out of int64 range")
    return (raw >> 1) ^ -(raw & 1), pos


# Small values dominate (lengths, counts, deltas); a table avoids the loop for them.
_SMALL = [bytes([i]) for i in range(128)]


def write_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError("unsigned varint cannot be negative")
    if value < 128:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """Zigzag-encode a signed 32-bit value."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError("varint out of int32 range")
    return write_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit value."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError("varlong out of int64 range")
    return write_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: 31*h + c over UTF-16 code units, wrapped to int32.

    Kafka places a group on ``abs(hash) % partitions``; matching Java exactly is what makes a
    group land on the same ``__consumer_offsets`` partition as it would on Apache Kafka.
    """
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


_crc32c_impl = None


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object, as record batches and our own files use."""
    global _crc32c_impl
    if _crc32c_impl is None:
        _crc32c_impl = _load_crc32c()
    return _crc32c_impl(data)


def _load_crc32c():
    """The crc32c package's C function, without running the package's ``__init__``.

    That ``__init__`` imports importlib.metadata just to set ``__version__``, which costs about
    60 ms: a fifth of the broker's start-up, paid by every start because the metadata log and
    checkpoints are checksummed.  The extension module itself needs nothing from its package,
    so it is loaded directly; the ordinary import remains the fallback.
    """
    import importlib.machinery
    import importlib.util
    import os
    import sys

    try:
        found = importlib.util.find_spec("crc32c")
        for folder in (found.submodule_search_locations or []) if found else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_crc32c" + suffix)
                if not os.path.exists(path):
                    continue
                spec = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules.setdefault("crc32c._crc32c", module)
                return module.crc32c
    except (ImportError, OSError):
        pass
    from crc32c import crc32c as impl

    return impl
