"""protocol.validation: what a producer may store, checked byte by byte before anything is written."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.protocol.errors import CorruptRecordError, ErrorCode
from minikafka.protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    DecompressionLimitError,
    build_batch,
    decompress_bounded,
    iter_records,
    set_crc,
)
from minikafka.protocol import validation
from minikafka.protocol.validation import BatchRejected, ValidationRules, validate_batch

RULES = ValidationRules(max_message_bytes=1_048_588)
T0 = 1_700_000_000_000
CODECS = [0, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


@pytest.fixture(autouse=True, params=["c", "python"])
def walker(request, monkeypatch):
    """Every test runs with the C record walk and with the Python one."""
    if request.param == "c":
        if validation._validate is None:
            pytest.skip("the C extension was not built (no compiler)")
    else:
        monkeypatch.setattr(validation, "_validate", None)
    return request.param


def batch(n=3, *, key=b"k", value=b"v" * 20, headers=(("h", b"x"),), compression=0, ts=T0, **kw):
    return build_batch([(key, value, list(headers), ts + i) for i in range(n)], compression=compression, **kw)


def rejected(buf, rules=RULES, **kw) -> BatchRejected:
    with pytest.raises(BatchRejected) as info:
        validate_batch(buf, rules, **kw)
    return info.value


def patch(buf, offset, fmt, value):
    """Change header bytes and recompute the CRC, as a buggy or hostile client would."""
    buf = bytearray(buf)
    struct.pack_into(fmt, buf, offset, value)
    set_crc(buf)
    return buf


@pytest.mark.parametrize("codec", CODECS)
def test_good_batches_of_every_codec_pass(codec):
    header = validate_batch(batch(5, compression=codec), RULES)
    assert header.record_count == 5 and header.compression == codec


def test_unknown_codec_with_a_valid_crc_is_corrupt():
    error = rejected(patch(batch(), 21, ">h", 7))
    assert error.code == ErrorCode.CORRUPT_MESSAGE and "compression" in error.message


def test_zstd_needs_produce_v7():
    assert rejected(batch(compression=COMPRESSION_ZSTD), api_version=6).code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    validate_batch(batch(compression=COMPRESSION_ZSTD), RULES, api_version=7)


def test_garbage_records_with_a_valid_crc_are_invalid():
    buf = bytearray(batch())
    buf[61:] = b"\xff" * (len(buf) - 61)
    set_crc(buf)
    error = rejected(buf)
    assert error.code == ErrorCode.INVALID_RECORD and error.message.startswith("Found invalid record structure")


def test_record_count_must_match_offsets_and_the_records_present():
    assert rejected(patch(batch(3), 57, ">i", 2)).code == ErrorCode.INVALID_RECORD   # count != delta + 1
    fewer = patch(patch(batch(3), 57, ">i", 2), 23, ">i", 1)                        # consistent header, 3 records
    assert "bytes after the last" in rejected(fewer).message
    more = patch(patch(batch(3), 57, ">i", 4), 23, ">i", 3)
    assert rejected(more).code == ErrorCode.INVALID_RECORD
    assert rejected(patch(batch(1), 57, ">i", 0)).code == ErrorCode.INVALID_RECORD   # no records


def test_control_and_delete_horizon_bits_are_the_brokers_own():
    assert "control" in rejected(batch(control=True, transactional=True)).message
    assert rejected(patch(batch(), 21, ">h", 0x40)).code == ErrorCode.INVALID_RECORD


def test_crc_size_base_offset_and_magic():
    buf = bytearray(batch())
    buf[-1] ^= 1
    assert rejected(buf).code == ErrorCode.CORRUPT_MESSAGE
    assert rejected(batch(), ValidationRules(max_message_bytes=50)).code == ErrorCode.MESSAGE_TOO_LARGE
    assert rejected(batch(base_offset=5)).code == ErrorCode.INVALID_RECORD  # as Kafka 4.2 answers
    assert rejected(bytes(batch()) + bytes(batch())).code == ErrorCode.INVALID_RECORD
    assert rejected(patch(batch(), 16, ">b", 1)).code == ErrorCode.INVALID_RECORD
    assert rejected(b"\x00" * 30).code == ErrorCode.INVALID_RECORD


def _records_body(buf):
    return bytes(buf[61:])


def _with_body(buf, body):
    out = bytearray(buf[:61]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    set_crc(out)
    return out


def test_bad_varints_and_lengths_inside_a_record():
    good = batch(1, key=b"key", value=b"value", headers=())
    body = bytearray(_records_body(good))
    too_long = _with_body(good, bytes(body[:1]) + b"\x00" + b"\xff" * 11)
    assert rejected(too_long).code == ErrorCode.INVALID_RECORD
    # A key length that runs past its record.
    body2 = bytearray(body)
    body2[4] = 0x7E  # zigzag 63
    assert rejected(_with_body(good, body2)).code == ErrorCode.INVALID_RECORD
    # A record length that runs past the batch.
    body3 = bytearray(body)
    body3[0] = 0x7E
    assert rejected(_with_body(good, body3)).code == ErrorCode.INVALID_RECORD
    # An offset delta that is not the record's index.
    body4 = bytearray(body)
    body4[3] = 2  # zigzag 1 for record 0
    assert "offset delta" in rejected(_with_body(good, body4)).message


def test_keys_on_compacted_topics_are_reported_per_record():
    buf = build_batch([(b"a", b"1", [], T0), (None, b"2", [], T0), (b"c", b"3", [], T0), (None, b"4", [], T0)])
    validate_batch(buf, RULES)
    error = rejected(buf, RULES._replace(compact=True))
    assert error.code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in error.record_errors] == [1, 3]
    assert "without key" in error.record_errors[0].message


@pytest.mark.parametrize("codec", CODECS)
def test_create_time_bounds_are_checked_per_record(codec):
    buf = build_batch([(b"k", b"v", [], T0), (b"k", b"v", [], T0 - 10_000), (b"k", b"v", [], T0 + 1)],
                      compression=codec)
    rules = RULES._replace(timestamp_before_max_ms=5_000, timestamp_after_max_ms=5_000)
    error = rejected(buf, rules, now_ms=T0)
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in error.record_errors] == [1]
    validate_batch(buf, rules._replace(create_time=False), now_ms=T0)  # LogAppendTime topic


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_decompression_bombs_are_refused_without_inflating_them(codec):
    bomb = build_batch([(b"k", b"\0" * (16 << 20), [], T0)], compression=codec)
    assert len(bomb) < 1 << 20
    error = rejected(bomb, RULES._replace(decompressed_max_bytes=4 << 20))
    assert error.code == ErrorCode.RECORD_LIST_TOO_LARGE
    with pytest.raises(DecompressionLimitError):
        decompress_bounded(codec, bytes(bomb[61:]), 1 << 20)
    with pytest.raises(DecompressionLimitError):
        list(iter_records(bomb, decompressed_limit=1 << 20))


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_undecodable_compressed_data_is_corrupt(codec):
    good = batch(3, compression=codec)
    body = bytearray(_records_body(good))
    body[len(body) // 2:] = b"\x13" * (len(body) - len(body) // 2)
    assert rejected(_with_body(good, body)).code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
    with pytest.raises(CorruptRecordError):
        decompress_bounded(codec, bytes(body[: len(body) // 2]), 1 << 20)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(codec=st.sampled_from([0, 0, 0, COMPRESSION_GZIP]), position=st.integers(0, 10_000),
       value=st.integers(0, 255), count=st.integers(1, 5))
def test_whatever_the_validator_accepts_decodes_whole(codec, position, value, count):
    """Flip one byte anywhere after the CRC, recompute the CRC: the validator either refuses the
    batch, or every record in it decodes and the count is the header's."""
    buf = bytearray(batch(count, headers=(("h1", b"x"), ("h2", None)), compression=codec))
    position = 21 + position % (len(buf) - 21)
    buf[position] = value
    set_crc(buf)
    try:
        header = validate_batch(buf, RULES)
    except BatchRejected:
        return
    records = list(iter_records(buf))
    assert len(records) == header.record_count
    assert [r.offset for r in records] == list(range(header.record_count))


def _verdict(buf, rules):
    try:
        validate_batch(buf, rules)
    except BatchRejected as exc:
        return exc.code, [e.batch_index for e in exc.record_errors if exc.code != ErrorCode.INVALID_RECORD
                          or "structure" not in exc.message]
    return 0, []


@pytest.mark.skipif(validation._validate is None, reason="the C extension was not built")
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(position=st.integers(0, 10_000), value=st.integers(0, 255), keys=st.lists(st.booleans(), min_size=1,
       max_size=5), compact=st.booleans())
def test_the_c_and_python_walks_agree(walker, position, value, keys, compact):
    buf = build_batch([(b"k" if k else None, b"v" * 130, [("h", b"x")], T0 - 10_000 * (i % 2))
                       for i, k in enumerate(keys)])
    position = 21 + position % (len(buf) - 21)
    buf[position] = value
    set_crc(buf)
    rules = RULES._replace(compact=compact, timestamp_before_max_ms=5_000)
    c = _verdict(buf, rules)
    saved = validation._validate
    try:
        validation._validate = None
        python = _verdict(buf, rules)
    finally:
        validation._validate = saved
    assert c == python


def test_a_wrong_max_timestamp_is_corrected_as_kafka_does():
    buf = build_batch([(b"k", b"v", [], T0), (b"k", b"v", [], T0 + 50), (b"k", b"v", [], T0 + 10)])
    assert validate_batch(buf, RULES).max_timestamp == T0 + 50
    lying = patch(buf, 35, ">q", T0 + 9_999)
    assert validate_batch(lying, RULES).max_timestamp == T0 + 50
    assert validate_batch(patch(buf, 35, ">q", T0), RULES).max_timestamp == T0 + 50


def test_a_producer_id_needs_a_sequence():
    error = rejected(batch(producer_id=7, producer_epoch=0, base_sequence=-1))
    assert error.code == ErrorCode.INVALID_RECORD and "sequence" in error.message
    validate_batch(batch(producer_id=7, producer_epoch=0, base_sequence=0), RULES)


@pytest.mark.parametrize("codec", CODECS)
def test_records_without_a_timestamp_are_not_checked_against_the_bounds(codec):
    """-1 is "no timestamp" (Kafka's validateTimestamp skips it); -2 is an out-of-range CreateTime."""
    rules = RULES._replace(timestamp_before_max_ms=5_000, timestamp_after_max_ms=5_000)
    validate_batch(build_batch([(b"k", b"v", [], -1), (b"k", b"v", [], -1)], compression=codec), rules, now_ms=T0)
    error = rejected(build_batch([(b"k", b"v", [], -1), (b"k", b"v", [], -2)], compression=codec), rules, now_ms=T0)
    assert error.code == ErrorCode.INVALID_TIMESTAMP and [e.batch_index for e in error.record_errors] == [1]
