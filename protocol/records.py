"""Record batch v2 (magic 2), the unit the broker stores and serves.

The produce/fetch path only ever touches the 61-byte batch header: it checks the CRC, patches the
base offset (and partition leader epoch) in place and stores the batch exactly as the client sent it.
Compressed record data is never decompressed there.  Records are decoded only where the broker
itself needs their contents (``__consumer_offsets``, compaction keys, tests).

Layout (all big-endian)::

    0  base_offset            int64
    8  batch_length           int32   bytes after this field
    12 partition_leader_epoch int32
    16 magic                  int8    = 2
    17 crc                    uint32  CRC-32C of bytes [21, end)
    21 attributes             int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    23 last_offset_delta      int32
    27 base_timestamp         int64
    35 max_timestamp          int64
    43 producer_id            int64
    51 producer_epoch         int16
    53 base_sequence          int32
    57 record_count           int32
    61 records...

Because the CRC starts at ``attributes``, rewriting base offset and leader epoch keeps it valid.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator, NamedTuple, Sequence

from .errors import CorruptRecordError, ProtocolError
from .primitives import crc32c, read_varint, read_varlong, write_varint, write_varlong

BATCH_HEADER_SIZE = 61
# Everything before batch_length's end is outside batch_length.
LOG_OVERHEAD = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT64_S = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

assert _HEADER.size == BATCH_HEADER_SIZE


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at int32 max as Kafka's producers do."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Parse and sanity-check the header of the batch at ``pos`` without touching its records."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch shorter than its 61-byte header")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {header.batch_length} is below the header size")
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError("negative record count or offset delta")
    return header


def compute_crc(buf, pos: int = 0, size: int | None = None) -> int:
    if size is None:
        size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    view = memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]
    return crc32c(view)


def crc_ok(buf, pos: int = 0) -> bool:
    """True when the stored CRC-32C matches the batch bytes (and the batch is whole)."""
    try:
        header = read_header(buf, pos)
    except CorruptRecordError:
        return False
    if len(buf) - pos < header.size:
        return False
    return compute_crc(buf, pos, header.size) == header.crc


def iter_batches(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch in a concatenation of batches.

    An incomplete trailing batch ends the iteration quietly: Fetch responses may cut the last
    batch short and a crashed writer may leave a torn tail; callers decide what that means.
    """
    if end is None:
        end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        batch_length = _INT32.unpack_from(buf, pos + 8)[0]
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {batch_length} is below the header size")
        if end - pos < batch_length + LOG_OVERHEAD:
            return
        yield pos, read_header(buf, pos)
        pos += batch_length + LOG_OVERHEAD


def set_base_offset(buf, pos: int, offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_max_timestamp(buf, pos: int, timestamp: int) -> None:
    """Write the batch's max timestamp when it differs (the CRC covers it: recomputed then)."""
    if _INT64_S.unpack_from(buf, pos + 35)[0] != timestamp:
        _INT64_S.pack_into(buf, pos + 35, timestamp)
        set_crc(buf, pos)


def set_crc(buf, pos: int = 0) -> None:
    """Recompute the CRC after a change to bytes it covers (e.g. LogAppendTime)."""
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos))


# --- compression -----------------------------------------------------------------------------
# The codec libraries are imported lazily: the produce/fetch path never needs them.
#
# Every inflation is bounded: 400 MB of zeros is 12.8 KB of zstd, so a batch far below
# message.max.bytes could otherwise take gigabytes of memory wherever it is opened (produce
# validation, time lookups, compaction, the coordinators).  The produce path passes a limit from
# the broker's settings; everything else gets at most DECOMPRESSED_CAP_BYTES.

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
DECOMPRESSED_CAP_BYTES = 256 * 1024 * 1024


class DecompressionLimitError(CorruptRecordError):
    """Compressed records that would inflate past the allowed size."""


def decompress(codec: int, data, limit: int = DECOMPRESSED_CAP_BYTES) -> bytes:
    """Inflate a batch's records; same as ``decompress_bounded`` (kept for callers by this name)."""
    return decompress_bounded(codec, data, limit)


def decompress_bounded(codec: int, data, limit: int) -> bytes:
    """Inflate ``data`` to at most ``min(limit, DECOMPRESSED_CAP_BYTES)`` bytes.

    Raises DecompressionLimitError past the bound (without inflating the rest) and
    CorruptRecordError for data the codec cannot read.
    """
    limit = min(limit, DECOMPRESSED_CAP_BYTES)
    name = COMPRESSION_NAMES.get(codec, codec)
    try:
        if codec == COMPRESSION_GZIP:
            out = _gzip(data, limit)
        elif codec == COMPRESSION_SNAPPY:
            out = _snappy(bytes(data), limit)
        elif codec == COMPRESSION_LZ4:
            out = _lz4(data, limit)
        elif codec == COMPRESSION_ZSTD:
            out = _zstd(data, limit)
        else:
            raise CorruptRecordError(f"unknown compression codec {codec}")
    except CorruptRecordError:
        raise
    except ImportError as exc:
        raise CorruptRecordError(f"no library for {name} is installed") from exc
    except Exception as exc:  # each library has its own error type for bad input
        raise CorruptRecordError(f"cannot decompress {name} data: {exc}") from exc
    if len(out) > limit:
        raise DecompressionLimitError(f"{name} records inflate to more than {limit} bytes")
    return out


def _gzip(data, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(data, limit + 1)
    if len(out) <= limit and not d.eof:
        raise CorruptRecordError("truncated gzip data")
    return out


def _lz4(data, limit: int) -> bytes:
    import lz4.frame

    # In pieces of 1 MiB: the library reserves max_length up front, so one call with the whole
    # limit would allocate (and zero) up to 256 MiB for every batch.
    d = lz4.frame.LZ4FrameDecompressor()
    out = bytearray(d.decompress(bytes(data), max_length=1 << 20))
    while not d.eof and len(out) <= limit:
        piece = d.decompress(b"", max_length=1 << 20)
        if not piece:
            break  # the input ended inside the frame
        out += piece
    if len(out) <= limit and not d.eof:
        raise CorruptRecordError("truncated lz4 frame")
    return bytes(out)


def _zstd(data, limit: int) -> bytes:
    import io

    import zstandard

    data = bytes(data)
    declared = zstandard.frame_content_size(data)
    if declared > limit:
        raise DecompressionLimitError(f"zstd records declare {declared} bytes, more than {limit}")
    if declared < 0:
        # No size in the frame header: read at most limit + 1 bytes to see whether it is larger.
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
        seen = 0
        while seen <= limit:
            chunk = reader.read(min(1 << 20, limit + 1 - seen))
            if not chunk:
                break
            seen += len(chunk)
        if seen > limit:
            raise DecompressionLimitError(f"zstd records inflate to more than {limit} bytes")
    # Within the bound: decompress whole, which also fails on a truncated frame.
    return zstandard.ZstdDecompressor().decompress(data, max_output_size=limit)


def _snappy_block(block: bytes, budget: int) -> bytes:
    import snappy

    # A raw snappy block starts with its uncompressed length (little-endian base-128): check it
    # before inflating, so a block cannot allocate more than the budget.
    length = shift = pos = 0
    while True:
        if pos >= len(block) or pos > 4:
            raise CorruptRecordError("bad snappy block length")
        b = block[pos]
        pos += 1
        length |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    if length > budget:
        raise DecompressionLimitError(f"snappy records inflate to more than the {budget} bytes left")
    return snappy.decompress(block)


def _snappy(data: bytes, limit: int) -> bytes:
    # Java's snappy-java writes "xerial" framing: a magic header, then (length, block) chunks.
    # librdkafka may send a raw snappy block instead; Kafka accepts both, so do we.
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, limit)
    out = bytearray()
    pos = 16  # magic (8) + version (4) + compatible version (4)
    while pos + 4 <= len(data):
        n = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError("xerial snappy chunk runs past the data")
        out += _snappy_block(data[pos : pos + n], limit - len(out))
        pos += n
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        c = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == COMPRESSION_SNAPPY:
        import snappy

        block = snappy.compress(data)
        return _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01" + _INT32.pack(len(block)) + block
    if codec == COMPRESSION_LZ4:
        import lz4.frame

        return lz4.frame.compress(data)
    if codec == COMPRESSION_ZSTD:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown compression codec {codec}")


# --- records ---------------------------------------------------------------------------------


def iter_records(batch, decompressed_limit: int = DECOMPRESSED_CAP_BYTES) -> Iterator[Record]:
    """Decode every record of one batch (decompressing, within the bound, when needed)."""
    header = read_header(batch, 0)
    if len(batch) < header.size:
        raise CorruptRecordError("record batch is truncated")
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    if header.compression:
        body = memoryview(decompress_bounded(header.compression, body, decompressed_limit))
    try:
        yield from _decode_records(body, header)
    except ProtocolError as exc:
        raise CorruptRecordError(f"malformed record: {exc}") from exc


def _decode_records(body, header: BatchHeader) -> Iterator[Record]:
    pos = 0
    end = len(body)
    for _ in range(header.record_count):
        length, pos = read_varint(body, pos)
        if length < 0 or pos + length > end:
            raise CorruptRecordError("record length runs past the batch")
        record_end = pos + length
        attributes = body[pos]
        pos += 1
        ts_delta, pos = read_varlong(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _read_bytes(body, pos, record_end)
        value, pos = _read_bytes(body, pos, record_end)
        count, pos = read_varint(body, pos)
        if count < 0 or count > record_end - pos:
            raise CorruptRecordError("bad record header count")
        headers = []
        for _ in range(count):
            hkey, pos = _read_bytes(body, pos, record_end)
            if hkey is None:
                raise CorruptRecordError("null record header key")
            hval, pos = _read_bytes(body, pos, record_end)
            # As Java's String(bytes, UTF_8): a malformed key is read with replacement characters.
            headers.append((hkey.decode("utf-8", "replace"), hval))
        if pos != record_end:
            raise CorruptRecordError("record length does not match its fields")
        if header.timestamp_type == 1:
            timestamp = header.max_timestamp
        else:
            timestamp = header.base_timestamp + ts_delta
        yield Record(header.base_offset + offset_delta, timestamp, key, value, headers, attributes)


def _read_bytes(body, pos: int, limit: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(body, pos)
    if n < 0:
        return None, pos
    if pos + n > limit:
        raise CorruptRecordError("record field runs past the record")
    return bytes(body[pos : pos + n]), pos + n


def _encode_bytes(out: bytearray, data) -> None:
    if data is None:
        out += write_varint(-1)
    else:
        out += write_varint(len(data))
        out += data


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers) -> bytes:
    body = bytearray(b"\x00")  # attributes: unused in v2
    body += write_varlong(timestamp_delta)
    body += write_varint(offset_delta)
    _encode_bytes(body, key)
    _encode_bytes(body, value)
    headers = headers or ()
    body += write_varint(len(headers))
    for hkey, hval in headers:
        _encode_bytes(body, hkey.encode("utf-8") if isinstance(hkey, str) else hkey)
        _encode_bytes(body, hval)
    return write_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[tuple],
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    compression: int = COMPRESSION_NONE,
    timestamp_type: int = 0,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytearray:
    """Build one v2 batch from ``(key, value, headers, timestamp_ms[, offset_delta])`` tuples.

    An explicit offset delta per record (and ``last_offset_delta``) lets compaction rebuild a
    batch with gaps while keeping every surviving record's offset and the batch's last offset.
    ``delete_horizon_ms`` (the cleaner only, KIP-534) goes into the base timestamp with attribute
    bit 6; record timestamps stay what they were, their deltas count from the horizon.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = records[0][3] if delete_horizon_ms is None else delete_horizon_ms
    max_ts = max(r[3] for r in records)
    encoded = bytearray()
    for i, r in enumerate(records):
        delta = r[4] if len(r) > 4 else i
        encoded += encode_record(delta, r[3] - base_ts, r[0], r[1], r[2])
    if last_offset_delta is None:
        last_offset_delta = records[-1][4] if len(records[-1]) > 4 else len(records) - 1
    payload = compress(compression, bytes(encoded)) if compression else encoded
    attributes = compression
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
    batch = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    batch += payload
    set_crc(batch, 0)
    return batch


def build_control_batch(
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
) -> bytearray:
    """A transaction marker: one control record whose key names COMMIT or ABORT."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value, (), timestamp_ms)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        transactional=True,
        control=True,
    )


def control_record_type(record: Record) -> int:
    """CONTROL_ABORT or CONTROL_COMMIT for a record of a control batch."""
    if record.key is None or len(record.key) < 4:
        raise CorruptRecordError("control record key is too short")
    return _CONTROL_KEY.unpack_from(record.key, 0)[1]
