"""Key and value formats of the records in ``__transaction_state`` (Kafka's TransactionLogKey/Value).

Both start with an int16 version.  Written as Kafka 3.9 writes them without transaction version 2:

* TransactionLogKey v0: transactional_id (string).
* TransactionLogValue v0: producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
  transaction_status int8 (state code), transaction_partitions nullable array of
  {topic string, partition_ids array of int32}, transaction_last_update_timestamp_ms int64,
  transaction_start_timestamp_ms int64.

A null value is a tombstone: the transactional id expired.  Value v1 (flexible: compact strings
and arrays, tagged fields) is written for transactions V2 (client transaction version 2), as Kafka
4.x writes it, with its tagged fields: 0 previous producer id, 1 next producer id, 2 client
transaction version, 3 next producer epoch (each left out at its default); v0 for V1.
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
    # Value v1's tagged fields (transactions V2).
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1


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


def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_value_v1(value: TransactionLogValue) -> bytes:
    out = bytearray(_I16.pack(1))
    out += _VALUE_HEAD.pack(value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                            value.transaction_status)
    _put_uvarint(out, len(value.partitions) + 1)
    for topic in sorted(value.partitions):
        raw = topic.encode("utf-8")
        _put_uvarint(out, len(raw) + 1)
        out += raw
        ids = sorted(value.partitions[topic])
        _put_uvarint(out, len(ids) + 1)
        for i in ids:
            out += _I32.pack(i)
        out.append(0)  # no tagged fields in the partitions entry
    out += _I64.pack(value.last_update_timestamp_ms)
    out += _I64.pack(value.start_timestamp_ms)
    tags = []
    if value.previous_producer_id != -1:
        tags.append((0, _I64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        tags.append((1, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((2, _I16.pack(value.client_transaction_version)))
    if value.next_producer_epoch != -1:
        tags.append((3, _I16.pack(value.next_producer_epoch)))
    _put_uvarint(out, len(tags))
    for tag, raw in tags:
        _put_uvarint(out, tag)
        _put_uvarint(out, len(raw))
        out += raw
    return bytes(out)


def encode_value(value: TransactionLogValue | None) -> bytes | None:
    if value is None:
        return None
    if value.client_transaction_version >= 2:
        return _encode_value_v1(value)
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
        value = TransactionLogValue(pid, epoch, timeout, status, partitions, last_update, start)
        if flexible:
            pos += 16
            tags, pos = _uvarint(buf, pos)
            for _ in range(tags):
                tag, pos = _uvarint(buf, pos)
                size, pos = _uvarint(buf, pos)
                if tag == 0:
                    (value.previous_producer_id,) = _I64.unpack_from(buf, pos)
                elif tag == 1:
                    (value.next_producer_id,) = _I64.unpack_from(buf, pos)
                elif tag == 2:
                    (value.client_transaction_version,) = _I16.unpack_from(buf, pos)
                elif tag == 3:
                    (value.next_producer_epoch,) = _I16.unpack_from(buf, pos)
                pos += size
        return value
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError("malformed transaction log value") from exc
