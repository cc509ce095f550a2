"""The produce validator against batches built by a client's own record builder.

Clients, not our builder, decide what reaches the broker, so these batches come from
kafka-python's ``DefaultRecordBatchBuilder`` (librdkafka's are sampled through a real broker in
tests/integration/test_empty_records.py).  Two properties, each checked with the C record walk and
the Python one:

* every batch a client builds is accepted by both walks, and reads back record for record;
* for any batch, valid or damaged, both walks give the same verdict.

Plus an exhaustive sweep of record body sizes from 6 bytes (the smallest record: null or empty
key and value, no headers) to 300, where the walks once refused everything under seven bytes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from minikafka.protocol import validation
from minikafka.protocol.primitives import write_varint, write_varlong
from minikafka.protocol.records import iter_records, set_crc
from minikafka.protocol.validation import BatchRejected, ValidationRules, validate_batch

RULES = ValidationRules(max_message_bytes=16 * 1024 * 1024)
NEEDS_C = pytest.mark.skipif(validation._validate is None, reason="the C extension was not built")
LONG_MAX = 2**63 - 1

# Keys, values and header values: null, empty, one byte, and large.
blobs = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=1),
                  st.binary(min_size=2, max_size=300), st.binary(min_size=5_000, max_size=70_000))
header_values = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=40))
headers = st.lists(st.tuples(st.text(max_size=12), header_values), max_size=6)
# Timestamps at the bounds: the epoch, now-ish, and the largest deltas a varlong carries.
timestamps = st.one_of(st.just(0), st.integers(0, 2**41), st.just(LONG_MAX // 2),
                       st.integers(0, LONG_MAX // 2))


def verdict(buf) -> tuple:
    """(accepted?, error code, error message prefix) with the current walk."""
    try:
        header = validate_batch(buf, RULES)
    except BatchRejected as exc:
        return False, exc.code, exc.message.split(":")[0]
    return True, header.record_count, header.max_timestamp


def both_walks(buf) -> tuple:
    """The verdicts of the C walk and of the Python walk on the same bytes."""
    c = verdict(buf)
    saved = validation._validate
    try:
        validation._validate = None
        python = verdict(buf)
    finally:
        validation._validate = saved
    return c, python


def client_batch(records, codec: int, transactional: bool) -> bytearray:
    producer_id, epoch, sequence = (4242, 3, 17) if transactional else (-1, -1, -1)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 30)
    for offset, (ts, key, value, hdrs) in enumerate(records):
        assert builder.append(offset, ts, key, value, hdrs) is not None
    return builder.build()


@NEEDS_C
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(records=st.lists(st.tuples(timestamps, blobs, blobs, headers), min_size=1, max_size=8),
       codec=st.sampled_from([0, 1, 2, 3, 4]), transactional=st.booleans())
def test_every_client_built_batch_is_accepted_by_both_walks_and_reads_back(records, codec, transactional):
    buf = client_batch(records, codec, transactional)
    c, python = both_walks(buf)
    assert c == python
    assert c[0] is True, c
    decoded = list(iter_records(buf))
    assert [r.offset for r in decoded] == list(range(len(records)))
    for r, (ts, key, value, hdrs) in zip(decoded, records):
        assert (r.timestamp, r.key, r.value) == (ts, key, value)
        assert [(k, v) for k, v in r.headers] == [(k, v) for k, v in hdrs]
    assert c[2] == max(ts for ts, *_ in records)  # the batch's max timestamp, from its records


@NEEDS_C
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(st.tuples(st.integers(0, 2**41), st.one_of(st.none(), st.binary(max_size=3)),
                                  st.one_of(st.none(), st.binary(max_size=3)), headers), min_size=1, max_size=4),
       position=st.integers(0, 1 << 16), value=st.integers(0, 255))
def test_both_walks_agree_on_damaged_client_batches(records, position, value):
    """One byte of a small uncompressed batch changed anywhere after the CRC (the CRC recomputed,
    as a buggy client would): both walks accept, or both refuse with the same code."""
    buf = client_batch(records, 0, False)
    buf[21 + position % (len(buf) - 21)] = value
    set_crc(buf)
    c, python = both_walks(buf)
    assert c[:2] == python[:2]


# --- record body sizes 6..300, exhaustively --------------------------------------------------


def record_of_body_size(size: int, offset_delta: int, ts_delta: int, key: bytes | None) -> bytes:
    """A record whose body is exactly ``size`` bytes, the value filling what the rest leaves."""
    head = b"\x00" + write_varlong(ts_delta) + write_varint(offset_delta) + \
        (write_varint(-1) if key is None else write_varint(len(key)) + key)
    tail = write_varint(0)  # no headers
    for n in range(-1, size):
        value = write_varint(-1) if n < 0 else write_varint(n) + b"v" * n
        body = head + value + tail
        if len(body) == size:
            return write_varint(size) + body
    raise ValueError(f"no record of {size} bytes with these fields")


def records_of_body_size(size: int, count: int) -> bytes:
    out = b""
    for i in range(count):
        for ts_delta, key in ((0, None), (0, b""), (64, None), (64, b"k")):  # 64: a two-byte varlong
            try:
                out += record_of_body_size(size, i, ts_delta, key)
                break
            except ValueError:
                continue
        else:
            raise AssertionError(f"cannot build a record of {size} bytes")
    return out


def batch_of(records: bytes, count: int) -> bytearray:
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(records), -1, 2, 0, 0, count - 1,
                         1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, count)
    buf = bytearray(header + records)
    set_crc(buf)
    return buf


@NEEDS_C
@pytest.mark.parametrize("count", [1, 3])
def test_every_record_size_from_6_to_300_bytes_is_accepted_by_both_walks(count):
    for size in range(6, 301):
        buf = batch_of(records_of_body_size(size, count), count)
        c, python = both_walks(buf)
        assert c == python, size
        assert c[:2] == (True, count), (size, c)
        decoded = list(iter_records(buf))
        assert [r.offset for r in decoded] == list(range(count)), size
        assert c[2] == max(r.timestamp for r in decoded), size


@NEEDS_C
def test_a_length_prefix_that_disagrees_with_the_fields_is_refused_by_both_walks():
    for size in range(6, 301):
        good = records_of_body_size(size, 1)
        prefix = len(write_varint(size))
        for wrong in (size - 1, size + 1):
            if wrong < 0:
                continue
            buf = batch_of(write_varint(wrong) + good[prefix:], 1)
            c, python = both_walks(buf)
            assert c[0] is False and python[0] is False, (size, wrong)
            assert c[1] == python[1], (size, wrong)


@NEEDS_C
def test_record_lengths_under_six_bytes_are_refused_by_both_walks():
    for size in range(0, 6):
        body = b"\x00" * size
        buf = batch_of(write_varint(size) + body, 1)
        c, python = both_walks(buf)
        assert c[0] is False and python[0] is False and c[1] == python[1], size
