"""PartitionLog: append/read, offsets, indexes, time lookups, roll, retention, DeleteRecords."""

from __future__ import annotations

import os

import pytest

from minikafka.protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from minikafka.protocol.records import COMPRESSION_GZIP, COMPRESSION_LZ4, iter_batches, read_header
from minikafka.storage import LogConfig, PartitionLog
from storagetest import batch, read_all, records_from

T0 = 1_700_000_000_000


def open_log(tmp_path, clock, **configs) -> PartitionLog:
    return PartitionLog(str(tmp_path / "topic-0"), {k.replace("_", "."): v for k, v in configs.items()},
                        now_ms=clock)


def test_append_assigns_consecutive_offsets_and_read_round_trips(tmp_path, clock):
    log = open_log(tmp_path, clock)
    infos = [log.append(batch(3, ts=T0 + i, key=b"a%d-" % i)) for i in range(5)]
    assert [(i.base_offset, i.last_offset) for i in infos] == [(3 * n, 3 * n + 2) for n in range(5)]
    assert infos[-1].log_append_time == -1 and infos[-1].max_timestamp == T0 + 4 + 2
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 15
    recs = read_all(log)
    assert [r.offset for r in recs] == list(range(15))
    assert recs[4].key == b"a1-1" and recs[4].timestamp == T0 + 1 + 1


def test_read_from_the_middle_of_a_batch_returns_the_whole_containing_batch(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(4):
        log.append(batch(10))
    views = log.read(25, 1 << 20)
    headers = [h for v in views for _, h in iter_batches(v)]
    assert headers[0].base_offset == 20
    assert [h.base_offset for h in headers] == [20, 30]


def test_first_batch_is_whole_even_above_max_bytes_then_budget_applies(tmp_path, clock):
    log = open_log(tmp_path, clock)
    big = log.append(batch(5, value=b"x" * 1000))
    log.append(batch(1))
    views = log.read(0, 10)
    assert sum(len(v) for v in views) == read_header(views[0]).size > 10
    assert [h.base_offset for v in views for _, h in iter_batches(v)] == [big.base_offset]
    # a budget that fits both returns both, as one contiguous view
    views = log.read(0, 1 << 20)
    assert len(views) == 1 and len(records_from(views)) == 6


def test_max_offset_stops_before_the_batch_reaching_it(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append(batch(2))
    assert [r.offset for r in records_from(log.read(0, 1 << 20, max_offset=4))] == [0, 1, 2, 3]
    assert log.read(4, 1 << 20, max_offset=4) == []


def test_read_out_of_range_and_at_end(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(batch(2))
    assert log.read(2, 100) == []
    with pytest.raises(KafkaError) as exc:
        log.read(3, 100)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.delete_records(1)
    with pytest.raises(KafkaError):
        log.read(0, 100)
    assert records_from(log.read(1, 100))[0].offset == 0  # whole batch: the client skips offset 0


def test_corrupt_and_oversized_batches_are_rejected_without_changing_the_log(tmp_path, clock):
    log = open_log(tmp_path, clock, max_message_bytes=500)
    good = batch(1)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(bad)
    with pytest.raises(CorruptRecordError):
        log.append(good[:-1])
    with pytest.raises(CorruptRecordError):
        log.append(good + good)  # append() takes exactly one batch
    with pytest.raises(KafkaError) as exc:
        log.append(batch(1, value=b"x" * 600))
    assert exc.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0 and log.active.size == 0
    assert log.append(good).base_offset == 0


def test_append_accepts_read_only_buffers_and_batches_concatenated(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(bytes(batch(2)))
    info = log.append_batches(bytes(batch(2) + batch(3)))
    assert (info.base_offset, info.last_offset) == (2, 6)
    assert [r.offset for r in read_all(log)] == list(range(7))
    with pytest.raises(CorruptRecordError):
        log.append_batches(batch(2) + batch(3)[:-4])


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    clock.now = T0 + 5000
    info = log.append(batch(3, ts=T0))
    assert info.log_append_time == T0 + 5000 == info.max_timestamp
    (view,) = log.read(0, 1 << 20)
    h = read_header(view)
    assert h.timestamp_type == 1 and h.max_timestamp == T0 + 5000
    from minikafka.protocol.records import crc_ok

    assert crc_ok(view)
    assert {r.timestamp for r in records_from([view])} == {T0 + 5000}


def test_compressed_batches_are_stored_untouched(tmp_path, clock):
    log = open_log(tmp_path, clock)
    original = batch(50, compression=COMPRESSION_GZIP)
    log.append(batch(1))
    log.append(original)
    stored = log.read(1, 1 << 20)[0]
    assert bytes(stored[8:]) == bytes(original[8:])  # only the base offset differs
    assert [r.offset for r in records_from([stored])] == list(range(1, 51))


def test_index_lookups_across_many_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=4000, index_interval_bytes=300)
    for i in range(300):
        log.append(batch(1 + i % 4, ts=T0 + i, key=b"m%d-" % i))
    assert len(log.segments) > 10
    leo = log.log_end_offset
    for seg in log.segments[:-1]:
        assert len(seg.index) > 1
        assert seg.index.offsets[0] == seg.base_offset and seg.index.positions[0] == 0
    for offset in range(0, leo, 7):
        recs = records_from(log.read(offset, 1))
        assert recs[0].offset <= offset <= recs[-1].offset
    # the sparse index bounds the scan: positions found through it never go backwards
    seg = log.segments[3]
    for offset in range(seg.base_offset, seg.next_offset):
        pos = seg.find(offset)
        _, indexed = seg.index.lookup(offset)
        assert indexed <= pos


def test_offset_for_timestamp_and_max_timestamp(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=2000, index_interval_bytes=200)
    # timestamps: batch i has records at T0 + 10*i .. T0 + 10*i + 2, except a late outlier
    for i in range(60):
        log.append(batch(3, ts=T0 + 10 * i))
    log.append(batch(1, ts=T0 + 5))  # an old timestamp after newer ones
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(T0) == (0, T0)
    assert log.offset_for_timestamp(T0 + 1) == (1, T0 + 1)
    assert log.offset_for_timestamp(T0 + 3) == (3, T0 + 10)
    assert log.offset_for_timestamp(T0 + 254) == (78, T0 + 260)
    assert log.offset_for_timestamp(T0 + 592) == (179, T0 + 592)
    assert log.offset_for_timestamp(T0 + 593) is None
    assert log.max_timestamp_offset() == (179, T0 + 592)
    assert log.earliest() == 0 and log.latest() == 181
    log.delete_records(100)
    assert log.offset_for_timestamp(T0) == (100, T0 + 330 + 1)


def test_offset_for_timestamp_in_compressed_batches(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(batch(100, ts=T0, compression=COMPRESSION_LZ4))
    assert log.offset_for_timestamp(T0 + 42) == (42, T0 + 42)
    assert log.max_timestamp_offset() == (99, T0 + 99)


def test_latest_is_the_true_end_even_with_a_large_last_batch(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(batch(500))
    assert log.latest() == 500
    log.close()
    assert PartitionLog(log.directory, now_ms=clock).latest() == 500


def test_roll_by_size_and_by_time(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=1000, segment_ms=60_000)
    b = batch(1, value=b"x" * 300)
    size = len(b)
    for _ in range(3):
        log.append(batch(1, value=b"x" * 300))
    assert [s.size for s in log.segments] == [2 * size, size]
    assert log.segments[1].base_offset == 2
    assert log.maybe_roll() is False
    clock.advance(60_001)
    assert log.maybe_roll() is True
    assert log.active.base_offset == 3 and log.active.size == 0
    clock.advance(120_000)
    assert log.maybe_roll() is False  # an empty segment is never rolled
    log.append(batch(1))
    clock.advance(60_001)
    log.append(batch(1))  # the append itself rolls an old segment
    assert [s.base_offset for s in log.segments] == [0, 2, 3, 4]


def test_retention_by_time_deletes_whole_old_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=500, retention_ms=10_000)
    for i in range(10):
        log.append(batch(2, ts=clock.now, value=b"x" * 150))
        clock.advance(1000)
    n_before = len(log.segments)
    assert log.apply_retention() == 0
    clock.advance(5_000)  # now - 15 s: batches stamped in the first 5 s are expired
    deleted = log.apply_retention()
    assert 0 < deleted < n_before
    assert log.log_start_offset == log.segments[0].base_offset > 0
    for seg in log.segments:
        assert clock.now - seg.max_timestamp <= 10_000
    assert read_all(log)[0].offset == log.log_start_offset
    clock.advance(100_000)
    log.apply_retention()  # everything expired: the log is empty at its old end
    assert log.log_start_offset == log.log_end_offset == 20
    assert log.read(20, 100) == []
    assert log.append(batch(1)).base_offset == 20
    log.close()
    files = sorted(os.listdir(log.directory))
    assert files == ["00000000000000000020.index", "00000000000000000020.log",
                     "00000000000000000020.timeindex", "partition.checkpoint"]


def test_retention_by_size(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    for i in range(30):
        log.append(batch(1, value=b"x" * 200))
    assert log.size_bytes > 2500
    log.apply_retention()
    # Kafka's rule: drop the oldest segments while the rest still holds retention.bytes
    assert log.size_bytes >= 2500 > log.size_bytes - log.segments[0].size
    assert log.segments[0].base_offset > 0
    assert [r.offset for r in read_all(log)] == list(range(log.log_start_offset, 30))


def test_no_retention_for_compact_only_topics(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=1, cleanup_policy="compact")
    for _ in range(5):
        log.append(batch(2))
    clock.advance(10_000)
    assert log.apply_retention() == 0 and log.log_start_offset == 0


def test_an_empty_cleanup_policy_keeps_everything_but_what_delete_records_drops(tmp_path, clock):
    """cleanup.policy "" (Kafka 4.2): neither time/size retention nor compaction; only segments
    below the log start offset go."""
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=1, retention_bytes=1, cleanup_policy="")
    assert not log.config.delete and not log.config.compact
    for _ in range(6):
        log.append(batch(2, key=b"same"))
    clock.advance(10_000)
    assert log.apply_retention() == 0 and log.log_start_offset == 0
    assert not log.needs_compaction()
    bases = [s.base_offset for s in log.segments]
    log.delete_records(bases[1])
    assert log.segments[0].base_offset == bases[1] and log.log_start_offset == bases[1]


def test_delete_records_moves_log_start_and_drops_whole_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400)
    for _ in range(20):
        log.append(batch(2))
    bases = [s.base_offset for s in log.segments]
    assert log.delete_records(bases[2] + 1) == bases[2] + 1
    assert log.segments[0].base_offset == bases[2]
    assert log.earliest() == bases[2] + 1
    assert log.delete_records(3) == bases[2] + 1  # never backwards
    with pytest.raises(KafkaError):
        log.delete_records(41)
    assert log.delete_records(-1) == 40
    assert log.read(40, 100) == []
    log.close()
    reopened = PartitionLog(log.directory, {"segment.bytes": 400}, now_ms=clock)
    assert reopened.log_start_offset == reopened.log_end_offset == 40


def test_clean_reopen_keeps_everything_and_reuses_indexes(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=3000, index_interval_bytes=100)
    for i in range(100):
        log.append(batch(3, ts=T0 + i))
    log.delete_records(17)
    before = [(s.base_offset, list(s.index.offsets), list(s.time_index.timestamps)) for s in log.segments]
    log.close()
    log2 = PartitionLog(log.directory, {"segment.bytes": 3000, "index.interval.bytes": 100}, now_ms=clock)
    assert [(s.base_offset, list(s.index.offsets), list(s.time_index.timestamps)) for s in log2.segments] == before
    assert log2.log_start_offset == 17 and log2.log_end_offset == 300
    assert [r.offset for r in read_all(log2)] == list(range(17, 300))
    assert records_from(log2.read(17, 1))[0].offset == 15
    assert log2.max_timestamp_offset() == (299, T0 + 99 + 2)
    assert log2.append(batch(1)).base_offset == 300


def test_iter_batches_from_an_offset(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=500)
    for _ in range(10):
        log.append(batch(3, producer_id=7, producer_epoch=0, base_sequence=0))
    got = [(h.base_offset, bytes(v[:8])) for h, v in log.iter_batches(13)]
    assert [b for b, _ in got] == list(range(12, 30, 3))
    assert all(int.from_bytes(raw, "big") == b for b, raw in got)
    assert [h.producer_id for h, _ in log.iter_batches()] == [7] * 10


def test_flush_policy(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_ms=1000)
    log.append(batch(1))
    assert log.active.unsynced and log.maybe_flush() is False
    clock.advance(1000)
    assert log.maybe_flush() is True and not log.active.unsynced
    per_message = open_log(tmp_path / "b", clock, flush_messages=1)
    per_message.append(batch(1))
    assert not per_message.active.unsynced and per_message.recovery_point == 1


def test_config_from_kafka_names():
    config = LogConfig.from_kafka({"segment.bytes": "1000", "cleanup.policy": "delete,compact",
                                   "retention.ms": -1, "message.timestamp.type": "LogAppendTime",
                                   "unknown.thing": "x", "min.cleanable.dirty.ratio": "0.1"})
    assert config.segment_bytes == 1000 and config.cleanup_policy == "compact,delete"
    assert config.compact and config.delete and config.log_append_time
    assert config.retention_ms == -1 and config.min_cleanable_dirty_ratio == 0.1
    assert LogConfig.from_kafka({"cleanup.policy": ["compact"]}).cleanup_policy == "compact"
    for bad in ({"segment.bytes": "abc"}, {"cleanup.policy": "shred"}, {"retention.ms": -5},
                {"message.timestamp.type": "Now"}):
        with pytest.raises(ValueError):
            LogConfig.from_kafka(bad)
    assert LogConfig.from_kafka(config.to_kafka()) == config


def test_min_one_false_returns_nothing_when_the_first_batch_does_not_fit(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(batch(5, value=b"x" * 1000))
    assert log.read(0, 100, min_one=False) == []
    assert len(records_from(log.read(0, 100_000, min_one=False))) == 5


def test_tailing_reads_see_every_append_and_old_views_stay_valid(tmp_path, clock):
    log = open_log(tmp_path, clock)
    held = []
    for i in range(50):
        log.append(batch(1, value=b"%d" % i))
        views = log.read(i, 1 << 20)
        held.append(views[0])
        assert records_from(views)[0].value == b"%d" % i
    assert [records_from([v])[0].value for v in held] == [b"%d" % i for i in range(50)]


def test_iter_batches_survives_appends_while_suspended(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=600)
    for _ in range(5):
        log.append(batch(2))
    it = log.iter_batches()
    first = next(it)
    for _ in range(20):
        log.append(batch(2, value=b"y" * 200))  # grows and rolls segments under the iterator
    rest = list(it)
    offsets = [first[0].base_offset] + [h.base_offset for h, _ in rest]
    assert offsets == sorted(set(offsets)) and offsets[0] == 0
    assert all(int.from_bytes(v[:8], "big") == h.base_offset for h, v in rest)


def test_read_matches_a_naive_walk_for_any_offset_budget_and_limit(tmp_path, clock):
    """The index shortcut in read() must pick exactly the batches a header-by-header walk picks."""
    import random

    log = open_log(tmp_path, clock, segment_bytes=5000, index_interval_bytes=250)
    rng = random.Random(5)
    for i in range(400):
        log.append(batch(rng.randint(1, 4), value=b"z" * rng.randint(0, 120)))
    headers = [h for h, _ in log.iter_batches()]
    leo = log.log_end_offset
    for _ in range(400):
        offset = rng.randrange(leo)
        budget = rng.choice([0, 1, 100, 700, 3000, 20000])
        limit = rng.choice([None, rng.randrange(offset, leo + 1)])
        cap = leo if limit is None else limit
        expected, total = [], 0
        for h in headers:
            if h.last_offset < offset:
                continue
            if h.last_offset >= cap or (expected and total + h.size > budget):
                break
            expected.append(h.base_offset)
            total += h.size
        got = [h.base_offset for v in log.read(offset, budget, limit) for _, h in iter_batches(v)]
        assert got == expected, (offset, budget, limit)


def test_background_flush_moves_the_recovery_point_once_done(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_ms=1000, segment_bytes=10_000)
    log.append(batch(2))
    clock.advance(1000)
    log.append(batch(2))  # starts the fsync in the flusher thread
    assert log._pending_flush is not None and not log.active.unsynced
    future, target = log._pending_flush
    future.result(timeout=10)
    log.maybe_flush()  # collects it
    assert log._pending_flush is None and log.recovery_point == target == 4
    log.append(batch(2))
    clock.advance(1000)
    log.maybe_flush()
    log.roll()  # waits for the background fsync before calling the old segment durable
    assert log._pending_flush is None and log.recovery_point == 6


def test_mappings_of_closed_segments_are_bounded(tmp_path, clock, monkeypatch):
    from minikafka.storage import segment

    monkeypatch.setattr(segment, "MAX_MAPPED_CLOSED_SEGMENTS", 3)
    log = open_log(tmp_path, clock, segment_bytes=300)
    for _ in range(30):
        log.append(batch(2, value=b"x" * 100))
    held = [log.read(s.base_offset, 1)[0] for s in log.segments]
    mapped = [s for s in log.segments[:-1] if s._map is not None]
    assert len(mapped) <= 3
    # evicted mappings stay valid for the views handed out
    assert [records_from([v])[0].offset for v in held] == [s.base_offset for s in log.segments]
