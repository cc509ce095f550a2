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
