"""Key and value formats of the records in ``__transaction_state`` (Kafka's TransactionLogKey/Value).

Both start with an int16 version.  Written as Kafka 3.9 writes them without transaction version 2:

* TransactionLogKey v0: transactional_id (string).
* TransactionLogValue v0: producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
  transaction_status int8 (state code), transaction_partitions nullable array of
  {topic string, partition_ids array of int32}, transaction_last_update_timestamp_ms int64,
  transaction_start_timestamp_ms int64.

A null value is a tombstone: the transactional id expired.  Value v1 (flexible, adds tagged
previous/next producer id and client transaction version) is read too, tags skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from minikafka.protocol.errors import CorruptRecordError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">qhib")

KEY_VERSION = 0
VALUE_VERSION = 0


@dataclass(frozen=True)
class TransactionLogKey:
    transactional_id: str


@dataclass
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1


def encode_key(key: TransactionLogKey) -> bytes:
    raw = key.transactional_id.encode("utf-8")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(buf) -> TransactionLogKey:
    try:
        version, n = struct.unpack_from(">hh", buf, 0)
        if version != 0 or n < 0 or 4 + n > len(buf):
            raise CorruptRecordError(f"transaction log key version {version}")
        return TransactionLogKey(bytes(buf[4:4 + n]).decode("utf-8"))
    except struct.error as exc:
        raise CorruptRecordError("truncated transaction log key") from exc


def encode_value(value: TransactionLogValue | None) -> bytes | None:
    if value is None:
        return None
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _VALUE_HEAD.pack(value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                            value.transaction_status)
    out += _I32.pack(len(value.partitions))
    for topic in sorted(value.partitions):
        raw = topic.encode("utf-8")
        out += _I16.pack(len(raw)) + raw
        ids = sorted(value.partitions[topic])
        out += _I32.pack(len(ids))
        for i in ids:
            out += _I32.pack(i)
    out += _I64.pack(value.last_update_timestamp_ms)
    out += _I64.pack(value.start_timestamp_ms)
    return bytes(out)


def _uvarint(buf, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def decode_value(buf) -> TransactionLogValue | None:
    if buf is None:
        return None
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version not in (0, 1):
            raise CorruptRecordError(f"transaction log value version {version}")
        flexible = version >= 1
        pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, 2)
        pos = 2 + _VALUE_HEAD.size
        partitions: dict[str, list[int]] = {}
        if flexible:
            count, pos = _uvarint(buf, pos)
            count -= 1
        else:
            (count,) = _I32.unpack_from(buf, pos)
            pos += 4
        for _ in range(max(count, 0)):
            if flexible:
                n, pos = _uvarint(buf, pos)
                n -= 1
            else:
                (n,) = _I16.unpack_from(buf, pos)
                pos += 2
            topic = bytes(buf[pos:pos + n]).decode("utf-8")
            pos += n
            if flexible:
                m, pos = _uvarint(buf, pos)
                m -= 1
            else:
                (m,) = _I32.unpack_from(buf, pos)
                pos += 4
            ids = [_I32.unpack_from(buf, pos + 4 * i)[0] for i in range(m)]
            pos += 4 * m
            if flexible:
                tags, pos = _uvarint(buf, pos)
                for _ in range(tags):
                    _, pos = _uvarint(buf, pos)
                    size, pos = _uvarint(buf, pos)
                    pos += size
            partitions[topic] = ids
        (last_update,) = _I64.unpack_from(buf, pos)
        (start,) = _I64.unpack_from(buf, pos + 8)
        return TransactionLogValue(pid, epoch, timeout, status, partitions, last_update, start)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError("malformed transaction log value") from exc
