"""Validate a producer's record batch before anything of it is stored (Kafka's LogValidator).

A batch that is stored is served to every consumer of its partition, so one bad batch poisons the
partition for everyone: a CRC only proves the bytes arrived as the client computed them, not that
they make sense.  ``validate_batch`` checks, in Kafka's order, everything a consumer will rely on:

1. exactly one magic-2 batch, base offset 0, the whole buffer                -> INVALID_RECORD
2. batch size within ``max.message.bytes``                                  -> MESSAGE_TOO_LARGE
3. CRC-32C                                                                  -> CORRUPT_MESSAGE
4. attributes: no control bit and no delete-horizon bit from a client      -> INVALID_RECORD;
   a known codec (0-4)                                                      -> CORRUPT_MESSAGE;
   zstd only from Produce v7 on                                             -> UNSUPPORTED_COMPRESSION_TYPE
5. a producer id with a negative base sequence                             -> INVALID_RECORD;
   record count > 0 and equal to last offset delta + 1                      -> INVALID_RECORD
6. the records themselves, in one pass over the (decompressed) bytes without building record
   objects: every length prefix and varint well formed and inside its record, offset deltas
   0, 1, 2, ..., exactly ``record_count`` records and nothing after them    -> INVALID_RECORD
   (compressed data that does not inflate                                   -> CORRUPT_MESSAGE;
    data that inflates past the bound                                       -> RECORD_LIST_TOO_LARGE)
7. per record: a key on compacted topics                                    -> INVALID_RECORD,
   CreateTime (unless -1, no timestamp) within ``message.timestamp.before/after.max.ms``
                                                                            -> INVALID_TIMESTAMP,
   both with the indexes of the offending records (Produce v8+ ``record_errors``).

Where this is stricter than Kafka, on purpose: record offset deltas must be 0..n-1.  Kafka stores
an uncompressed batch whatever its deltas say (consumers then see repeated or missing offsets inside
it) and rewrites a compressed one with fresh offsets (a workaround kept for old magic-1 clients);
we refuse both with INVALID_RECORD.  Every client library numbers its records 0..n-1, so no client
meets this; storing such a batch would break the one-offset-per-record rule that fetch sessions,
the cleaner and ListOffsets rely on.
Where this follows Kafka's reading code (``DefaultRecord.readFrom``) to the letter: the smallest
record body is six one-byte fields (a record with null or empty key and value and no headers); a
negative key, value or header-value length other than -1 reads as null; a header key is bytes
(Kafka decodes it on use, replacing malformed UTF-8), so it is stored whatever it holds.

The record walk runs for every record of every produce: ``_validate.c`` does it in C when the
extension was built (pyproject.toml, optional), ``_scan_records`` below in Python otherwise, with
the same results (tests run both).  Python alone costs 2-4 us per record, which at 1 KiB
records would take a third off produce throughput.

Sans-IO: bytes in, a header or a ``BatchRejected`` out.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import CorruptRecordError, ErrorCode
from .primitives import crc32c
from .records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_ZSTD,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    BatchHeader,
    DecompressionLimitError,
    _HEADER,
    decompress_bounded,
)

try:
    from . import _validate
except ImportError:  # built without a C compiler: the Python walk below does the same, slower
    _validate = None

LONG_MAX = 9223372036854775807
MAX_RECORD_ERRORS = 32  # enough to show the pattern; a million-record batch must not build a million


class RecordError(NamedTuple):
    batch_index: int
    message: str


class BatchRejected(Exception):
    """The batch must not be stored: ``code`` for the partition, and per-record errors."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[RecordError] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


class ValidationRules(NamedTuple):
    """What a topic asks of its batches (from its configs)."""

    max_message_bytes: int
    compact: bool = False
    create_time: bool = True  # message.timestamp.type=CreateTime: timestamps come from producers
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = LONG_MAX
    decompressed_max_bytes: int = 64 * 1024 * 1024


def validate_batch(buf, rules: ValidationRules, *, api_version: int = 11, now_ms: int = 0) -> BatchHeader:
    """Check one producer batch completely; returns its header or raises ``BatchRejected``."""
    size = len(buf)
    if size < BATCH_HEADER_SIZE:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "record batch shorter than its 61-byte header")
    header = BatchHeader._make(_HEADER.unpack_from(buf, 0))
    if header.magic != 2:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"Produce requests with version {api_version} are only allowed to contain "
                            f"record batches with magic version 2 (got {header.magic})")
    if header.batch_length + 12 != size:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            "Produce requests with version 3+ must contain exactly one record batch "
                            "of magic 2 per partition")
    # A client's batch starts at offset 0 (Kafka 4.2 refuses any other, checked against it).
    if header.base_offset != 0:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"The base offset of a client's record batch must be 0, not {header.base_offset}")
    if size > rules.max_message_bytes:
        raise BatchRejected(ErrorCode.MESSAGE_TOO_LARGE,
                            f"The record batch of {size} bytes is larger than max.message.bytes "
                            f"({rules.max_message_bytes})")
    if crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]) != header.crc:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, "Record batch is corrupt (CRC-32C mismatch)")
    attributes = header.attributes
    if attributes & CONTROL_BIT:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if attributes & DELETE_HORIZON_BIT:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to set a delete horizon")
    codec = attributes & 0x07
    if codec > COMPRESSION_ZSTD:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"Unknown compression codec id {codec}")
    if codec == COMPRESSION_ZSTD and api_version < 7:
        raise BatchRejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                            "Produce requests with zstd compression need version 7 or later")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"Invalid sequence number {header.base_sequence} in record batch with "
                            f"producerId {header.producer_id}")
    count = header.record_count
    if count <= 0 or header.last_offset_delta < 0:
        raise BatchRejected(ErrorCode.INVALID_RECORD, f"Invalid reported record count {count}")
    if count != header.last_offset_delta + 1:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"Inconsistent batch offset range (last offset delta "
                            f"{header.last_offset_delta}) and record count {count}")
    body = memoryview(buf)[BATCH_HEADER_SIZE:]
    if codec:
        try:
            body = memoryview(decompress_bounded(codec, body, rules.decompressed_max_bytes))
        except DecompressionLimitError as exc:
            raise BatchRejected(ErrorCode.RECORD_LIST_TOO_LARGE, str(exc)) from None
        except CorruptRecordError as exc:
            raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    check_time = rules.create_time and header.timestamp_type == 0 and (
        rules.timestamp_before_max_ms < LONG_MAX or rules.timestamp_after_max_ms < LONG_MAX)
    lowest = now_ms - rules.timestamp_before_max_ms if check_time else 0
    highest = now_ms + rules.timestamp_after_max_ms if check_time else 0
    scan = _scan_records_c if _validate is not None else _scan_records
    errors, max_delta = scan(body, count, rules.compact, check_time, header.base_timestamp, lowest, highest)
    if errors:
        code, first = errors[0]
        raise BatchRejected(code, first.message, [e for _, e in errors])
    max_timestamp = header.base_timestamp + max_delta
    if header.timestamp_type == 0 and max_timestamp != header.max_timestamp:
        # Kafka sets a CreateTime batch's max timestamp from its records; the time index and
        # ListOffsets trust the header, so a client's wrong value is corrected, not stored.
        header = header._replace(max_timestamp=max_timestamp)
    return header


def _scan_records(body, count: int, compact: bool, check_time: bool, base_ts: int,
                  lowest: int, highest: int) -> list[tuple[ErrorCode, RecordError]]:
    """Walk ``count`` records once; structural errors raise, per-record rule errors are listed.

    The reference for the C walk (``_validate.c``), used when the extension was not built."""
    end = len(body)
    pos = 0
    index = 0
    max_delta = None
    errors: list[tuple[ErrorCode, RecordError]] = []
    try:
        for index in range(count):
            length, pos = _varint(body, pos)
            record_end = pos + length
            # 6: attributes, timestamp delta, offset delta, key length, value length and header
            # count, one byte each (null or empty key and value, no headers) is the smallest record.
            if length < 6 or record_end > end:
                raise _Structure(index, f"invalid record size {length}")
            pos += 1  # record attributes (unused in v2)
            ts_delta, pos = _varint(body, pos, 10)
            if max_delta is None or ts_delta > max_delta:
                max_delta = ts_delta
            offset_delta, pos = _varint(body, pos)
            if offset_delta != index:
                raise _Structure(index, f"record offset delta {offset_delta} where {index} was expected")
            # Key and value: any negative length is null, as Kafka's DefaultRecord reads it.
            n, pos = _varint(body, pos)  # key
            if n >= 0:
                pos += n
            elif compact:
                errors.append((ErrorCode.INVALID_RECORD, RecordError(index, _KEYLESS)))
            n, pos = _varint(body, pos)  # value
            if n > 0:
                pos += n
            headers, pos = _varint(body, pos)
            if headers < 0 or headers > record_end - pos:
                raise _Structure(index, f"invalid header count {headers}")
            for _ in range(headers):
                # Kafka keeps a header key as bytes (decoded on use, malformed UTF-8 replaced):
                # only a negative key length is refused.
                n, pos = _varint(body, pos)
                if n < 0:
                    raise _Structure(index, "null header key")
                pos += n
                n, pos = _varint(body, pos)
                if n > 0:
                    pos += n
            if pos != record_end:
                raise _Structure(index, f"record size {length} does not match its fields")
            # A record without a timestamp (-1) is not checked, as Kafka's validateTimestamp.
            if check_time and not lowest <= base_ts + ts_delta <= highest and base_ts + ts_delta != -1:
                errors.append((ErrorCode.INVALID_TIMESTAMP, RecordError(index, _BAD_TIME)))
            if len(errors) >= MAX_RECORD_ERRORS:
                break
    except _Structure as exc:
        where = exc.index if exc.index >= 0 else index
        raise BatchRejected(ErrorCode.INVALID_RECORD, f"Found invalid record structure: {exc.message}",
                            [RecordError(where, exc.message)]) from None
    except IndexError:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            "Found invalid record structure: a record runs past the end of the batch") from None
    if not errors and pos != end:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"Found invalid record structure: {end - pos} bytes after the last of "
                            f"{count} records")
    return errors, max_delta


_KEYLESS = "Compacted topic cannot accept message without key"
_BAD_TIME = ("Timestamp of message is out of range: it must be within message.timestamp.before.max.ms / "
             "message.timestamp.after.max.ms of the broker's time")


def _scan_records_c(body, count: int, compact: bool, check_time: bool, base_ts: int,
                    lowest: int, highest: int) -> list[tuple[ErrorCode, RecordError]]:
    error, where, keyless, bad_time, max_delta = _validate.scan(
        body, count, compact, check_time, base_ts, lowest, highest, MAX_RECORD_ERRORS)
    if error is not None:
        if where >= count:
            raise BatchRejected(ErrorCode.INVALID_RECORD,
                                f"Found invalid record structure: {error} of {count} records")
        raise BatchRejected(ErrorCode.INVALID_RECORD, f"Found invalid record structure: {error}",
                            [RecordError(where, error)])
    if not keyless and not bad_time:
        return (), max_delta  # the common case, without building and sorting empty lists
    errors = [(ErrorCode.INVALID_RECORD, RecordError(i, _KEYLESS)) for i in keyless]
    errors += [(ErrorCode.INVALID_TIMESTAMP, RecordError(i, _BAD_TIME)) for i in bad_time]
    errors.sort(key=lambda e: e[1].batch_index)
    return errors, max_delta


class _Structure(Exception):
    def __init__(self, index: int, message: str):
        self.index = index
        self.message = message


def _varint(body, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """A zigzag varint of at most ``max_bytes`` bytes (IndexError when the body ends first)."""
    raw = shift = 0
    for _ in range(max_bytes):
        b = body[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise _Structure(-1, "varint is too long")
