"""Record batch v2: header parsing, CRC, in-place patches, record iteration and building.

kafka-python's own DefaultRecordBatch(Builder) serves as an independent oracle.
"""

import random

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol import records as R
from minikafka.protocol.errors import CorruptRecordError


def sample(n=3, ts=1_700_000_000_000):
    return [
        (b"k%d" % i if i % 2 else None, b"v" * i, [("h", b"x"), ("n", None)] if i == 1 else [], ts + i * 7)
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_build_then_iterate(codec):
    batch = R.build_batch(sample(5), base_offset=100, compression=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    h = R.read_header(batch)
    assert (h.base_offset, h.record_count, h.last_offset_delta, h.compression) == (100, 5, 4, codec)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 40, 44)
    assert h.size == len(batch)
    assert R.crc_ok(batch)
    got = list(R.iter_records(batch))
    assert [r.offset for r in got] == [100, 101, 102, 103, 104]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (k, v, list(hs), t) for k, v, hs, t in sample(5)
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_our_batches_read_by_kafka_python(codec):
    batch = R.build_batch(sample(4), base_offset=9, compression=codec)
    theirs = DefaultRecordBatch(bytes(batch))
    assert theirs.validate_crc()
    recs = list(theirs)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in recs] == [
        (9 + i, k, v, t) for i, (k, v, _, t) in enumerate(sample(4))
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_kafka_python_batches_read_by_us(codec):
    # Compressible values: kafka-python keeps a batch uncompressed when compression would not help.
    recs = [(k, (v or b"") + b"payload " * 50, hs, t) for k, v, hs, t in sample(4)]
    builder = DefaultRecordBatchBuilder(2, codec, False, 5, 1, 10, 1 << 20)
    for i, (k, v, hs, t) in enumerate(recs):
        builder.append(i, t, k, v, hs)
    data = bytearray(builder.build())
    h = R.read_header(data)
    assert (h.producer_id, h.base_sequence, h.record_count, h.compression) == (5, 10, 4, codec)
    assert R.crc_ok(data)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in R.iter_records(data)] == [
        (k, v, list(hs), t) for k, v, hs, t in recs
    ]


def test_patching_base_offset_and_epoch_keeps_crc():
    batch = R.build_batch(sample(3))
    R.set_base_offset(batch, 0, 123456789)
    R.set_partition_leader_epoch(batch, 0, 5)
    h = R.read_header(batch)
    assert (h.base_offset, h.partition_leader_epoch) == (123456789, 5)
    assert R.crc_ok(batch)
    assert [r.offset for r in R.iter_records(batch)] == [123456789, 123456790, 123456791]


def test_crc_detects_any_flipped_byte_after_the_crc_field():
    batch = R.build_batch(sample(3))
    rng = random.Random(7)
    for _ in range(200):
        damaged = bytearray(batch)
        i = rng.randrange(R.ATTRIBUTES_OFFSET, len(batch))
        damaged[i] ^= 1 << rng.randrange(8)
        assert not R.crc_ok(damaged)


def test_iter_batches_stops_at_a_torn_tail():
    a = R.build_batch(sample(2), base_offset=0)
    b = R.build_batch(sample(3), base_offset=2)
    buf = a + b
    assert [(p, h.base_offset) for p, h in R.iter_batches(buf)] == [(0, 0), (len(a), 2)]
    for cut in range(len(a), len(buf)):
        assert [h.base_offset for _, h in R.iter_batches(buf[:cut])] == [0]


def test_invalid_headers_raise_corrupt_record():
    batch = R.build_batch(sample(1))
    bad_magic = bytearray(batch)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError):
        R.read_header(bad_magic)
    with pytest.raises(CorruptRecordError):
        R.read_header(batch[:60])
    short_len = bytearray(batch)
    short_len[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        list(R.iter_batches(short_len))


def test_log_append_time_batches_report_max_timestamp():
    batch = R.build_batch(sample(3), timestamp_type=1)
    h = R.read_header(batch)
    assert h.timestamp_type == 1
    assert {r.timestamp for r in R.iter_records(batch)} == {h.max_timestamp}


def test_control_batch():
    batch = R.build_control_batch(True, producer_id=42, producer_epoch=3, coordinator_epoch=9, timestamp_ms=5, base_offset=77)
    h = R.read_header(batch)
    assert h.is_control and h.is_transactional and h.attributes == 0x30
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (42, 3, -1, 1)
    (rec,) = R.iter_records(batch)
    assert R.control_record_type(rec) == R.CONTROL_COMMIT
    assert rec.value == b"\x00\x00\x00\x00\x00\x09"
    assert DefaultRecordBatch(bytes(batch)).is_control_batch


def test_compaction_style_gaps_keep_offsets():
    recs = [(b"a", b"1", [], 10, 0), (b"c", b"3", [], 12, 4)]
    batch = R.build_batch(recs, base_offset=50, last_offset_delta=6)
    h = R.read_header(batch)
    assert (h.last_offset, h.next_offset, h.record_count) == (56, 57, 2)
    assert [r.offset for r in R.iter_records(batch)] == [50, 54]


record_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3),
    st.integers(0, 2**41),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=12), st.sampled_from([0, 1, 3]), st.integers(0, 2**40))
def test_batch_round_trip_property(recs, codec, base):
    batch = R.build_batch(recs, base_offset=base, compression=codec)
    assert R.crc_ok(batch)
    got = list(R.iter_records(batch))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [(k, v, list(h), t) for k, v, h, t in recs]
    assert [r.offset for r in got] == list(range(base, base + len(recs)))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=200), st.integers(0, 10_000))
def test_mutated_batches_raise_only_corrupt_record(noise, seed):
    batch = bytearray(R.build_batch(sample(3)))
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 4)):
        batch[rng.randrange(len(batch))] = rng.randrange(256)
    if seed % 3 == 0:
        batch = batch[: rng.randrange(len(batch))] + noise
    try:
        list(R.iter_batches(batch))
        list(R.iter_records(batch))
    except CorruptRecordError:
        pass
