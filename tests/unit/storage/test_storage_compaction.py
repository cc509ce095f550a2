"""Compaction: latest value per key, offsets untouched, tombstones, producer state, crash safety."""

from __future__ import annotations

import os
import random

from minikafka.protocol.records import COMPRESSION_GZIP, COMPRESSION_ZSTD, crc_ok, iter_batches
from minikafka.storage import PartitionLog
from storagetest import batch, read_all

T0 = 1_700_000_000_000
DAY = 86_400_000


def open_log(path, clock, **extra):
    config = {"cleanup.policy": "compact", "segment.bytes": 1500, "index.interval.bytes": 100}
    config.update(extra)
    return PartitionLog(str(path), config, now_ms=clock)


def fill(log, clock, n_batches=120, n_keys=15, seed=7, compression=0):
    """Random keyed writes; returns {offset: (key, value)} of everything written."""
    rng = random.Random(seed)
    written = {}
    for i in range(n_batches):
        keys = [b"key-%d" % rng.randrange(n_keys) for _ in range(rng.randint(1, 4))]
        values = [b"val-%d-%d" % (i, j) for j in range(len(keys))]
        info = log.append(batch(len(keys), ts=clock.now, keys=keys, values=values, compression=compression))
        for j, (k, v) in enumerate(zip(keys, values)):
            written[info.base_offset + j] = (k, v)
        clock.advance(10)
    return written


def test_compaction_keeps_the_latest_value_per_key_and_every_surviving_offset(tmp_path, clock):
    log = open_log(tmp_path / "p", clock)
    written = fill(log, clock)
    before = {(r.offset, r.key, r.value) for r in read_all(log)}
    leo = log.log_end_offset
    active_base = log.active.base_offset
    reclaimed = log.compact()
    assert reclaimed > 0
    after = read_all(log)
    # every surviving record is exactly what was written at that offset
    assert {(r.offset, r.key, r.value) for r in after} <= before
    latest = {}
    for offset in sorted(written):
        latest[written[offset][0]] = offset
    kept = {r.offset for r in after}
    # the latest record of every key survives
    assert set(latest.values()) <= kept
    # nothing older than the latest survives in the cleaned part; the active segment is untouched
    for r in after:
        if r.offset < active_base:
            assert latest[r.key] == r.offset
    assert {o for o in written if o >= active_base} <= kept
    assert log.log_end_offset == leo and log.log_start_offset == 0
    assert [r.offset for r in after] == sorted(kept)
    # batches still carry valid CRCs and their last offsets
    for view in log.read(0, 1 << 30):
        for pos, h in iter_batches(view):
            assert crc_ok(view, pos)


def test_rebuilt_batches_keep_base_and_last_offset(tmp_path, clock):
    log = open_log(tmp_path / "p", clock)
    log.append(batch(4, keys=[b"a", b"b", b"a", b"c"], values=[b"1", b"2", b"3", b"4"],
                     producer_id=9, producer_epoch=2, base_sequence=100))
    log.append(batch(1, keys=[b"c"], values=[b"5"]))
    log.roll()
    log.append(batch(1, keys=[b"z"], values=[b"z"]))
    log.compact()
    headers = [h for h, _ in log.iter_batches()]
    first = headers[0]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 3, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (9, 2, 100)
    assert [(r.offset, r.key, r.value) for r in read_all(log)] == [(1, b"b", b"2"), (2, b"a", b"3"),
                                                                    (4, b"c", b"5"), (5, b"z", b"z")]


def test_compressed_batches_are_recompressed_with_the_same_codec(tmp_path, clock):
    log = open_log(tmp_path / "p", clock)
    fill(log, clock, compression=COMPRESSION_GZIP, n_batches=40)
    log.append(batch(3, compression=COMPRESSION_ZSTD, keys=[b"key-1", b"q", b"q"], values=[b"a", b"b", b"c"]))
    log.roll()
    log.compact()
    codecs = {h.compression for h, _ in log.iter_batches()}
    assert codecs <= {COMPRESSION_GZIP, COMPRESSION_ZSTD}
    recs = read_all(log)
    assert [r.key for r in recs].count(b"key-1") == 1 and [r.key for r in recs].count(b"q") == 1


def test_tombstones_survive_delete_retention_then_go(tmp_path, clock):
    log = open_log(tmp_path / "p", clock, **{"delete.retention.ms": DAY})
    log.append(batch(2, ts=clock.now, keys=[b"a", b"b"], values=[b"1", b"2"]))
    log.append(batch(1, ts=clock.now, keys=[b"a"], values=[None]))  # tombstone for a
    log.roll()
    log.append(batch(1, ts=clock.now, keys=[b"c"], values=[b"3"]))
    log.compact()
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"2"), (b"a", None), (b"c", b"3")]
    assert not log.needs_compaction()
    clock.advance(DAY)  # the batch's records are stamped now and now + 1
    assert not log.needs_compaction()
    clock.advance(2)
    assert log.needs_compaction()  # the tombstone's time is up
    log.compact()
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"2"), (b"c", b"3")]
    assert log.log_end_offset == 4


def test_min_compaction_lag_protects_recent_segments(tmp_path, clock):
    log = open_log(tmp_path / "p", clock, **{"min.compaction.lag.ms": 60_000})
    log.append(batch(1, ts=clock.now, keys=[b"a"], values=[b"old"]))
    log.roll()
    log.append(batch(1, ts=clock.now, keys=[b"a"], values=[b"new"]))
    log.roll()
    assert log.compact() == 0
    assert len(read_all(log)) == 2
    clock.advance(60_000)
    assert log.compact() > 0
    assert [(r.offset, r.value) for r in read_all(log)] == [(1, b"new")]


def test_last_batch_of_a_producer_stays_as_an_empty_batch(tmp_path, clock):
    log = open_log(tmp_path / "p", clock)
    log.append(batch(2, keys=[b"a", b"b"], values=[b"1", b"2"], producer_id=5, producer_epoch=0, base_sequence=0))
    log.append(batch(2, keys=[b"a", b"b"], values=[b"3", b"4"], producer_id=5, producer_epoch=0, base_sequence=2))
    log.append(batch(2, keys=[b"a", b"b"], values=[b"5", b"6"], producer_id=6, producer_epoch=0, base_sequence=0))
    log.roll()
    log.append(batch(1, keys=[b"x"], values=[b"x"]))
    log.compact()
    headers = [h for h, _ in log.iter_batches()]
    pid5 = [h for h in headers if h.producer_id == 5]
    assert len(pid5) == 1 and pid5[0].record_count == 0
    assert (pid5[0].base_offset, pid5[0].last_offset, pid5[0].base_sequence) == (2, 3, 2)
    assert [r.offset for r in read_all(log)] == [4, 5, 6]


def test_compacted_log_reopens_after_clean_and_unclean_shutdown(tmp_path, clock):
    log = open_log(tmp_path / "p", clock)
    fill(log, clock)
    log.compact()
    expected = [(r.offset, r.key, r.value) for r in read_all(log)]
    bases = [s.base_offset for s in log.segments]
    log.close()
    log2 = open_log(tmp_path / "p", clock)
    assert [(r.offset, r.key, r.value) for r in read_all(log2)] == expected
    for seg in log2.segments:
        seg.release()
    # unclean and without a checkpoint: gaps in compacted segments must not look like damage
    os.unlink(tmp_path / "p" / "partition.checkpoint")
    log3 = open_log(tmp_path / "p", clock)
    assert [(r.offset, r.key, r.value) for r in read_all(log3)] == expected
    assert [s.base_offset for s in log3.segments] == bases
    assert log3.recovered_bytes_cut == 0
    # offsets by time and reads in the gaps still work
    for offset in range(0, log3.log_end_offset, 5):
        views = log3.read(offset, 1)
        assert views


def test_segments_emptied_by_compaction_are_removed_except_the_first(tmp_path, clock):
    log = open_log(tmp_path / "p", clock)
    for seg_no in range(3):
        log.append(batch(2, keys=[b"a", b"b"], values=[b"%d" % seg_no] * 2))
        log.roll()
    log.append(batch(2, keys=[b"a", b"b"], values=[b"last"] * 2))
    log.compact()
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert log.segments[0].size == 0
    assert log.log_start_offset == 0 and log.read(0, 100)
    assert [(r.offset, r.value) for r in read_all(log)] == [(6, b"last"), (7, b"last")]


def _crash(log):
    for seg in log.segments:
        seg.release()


def test_crash_before_the_swap_keeps_the_old_segment(tmp_path, clock, monkeypatch):
    import pytest

    import minikafka.storage.cleaner as cleaner

    log = open_log(tmp_path / "p", clock)
    fill(log, clock, n_batches=60)
    before = [(r.offset, r.key, r.value) for r in read_all(log)]

    def crash(*args):
        raise RuntimeError("power cut")

    monkeypatch.setattr(cleaner.os, "replace", crash)
    with pytest.raises(RuntimeError):
        log.compact()
    _crash(log)
    monkeypatch.undo()
    log2 = open_log(tmp_path / "p", clock)
    assert [(r.offset, r.key, r.value) for r in read_all(log2)] == before
    assert not [n for n in os.listdir(tmp_path / "p") if n.endswith(".cleaned")]


def test_crash_after_the_swap_rebuilds_the_missing_indexes(tmp_path, clock, monkeypatch):
    import pytest

    import minikafka.storage.cleaner as cleaner

    log = open_log(tmp_path / "p", clock)
    fill(log, clock, n_batches=60)
    real_segment = cleaner.Segment

    def crash(*args):
        raise RuntimeError("power cut")

    monkeypatch.setattr(cleaner, "Segment", crash)  # right after the rename, before new indexes
    with pytest.raises(RuntimeError):
        log.compact()
    _crash(log)
    monkeypatch.setattr(cleaner, "Segment", real_segment)
    log2 = open_log(tmp_path / "p", clock)
    for seg in log2.segments:
        if seg.size:
            assert seg.index.offsets[0] == seg.base_offset and seg.index.positions[0] == 0
    got = read_all(log2)
    # the first segment is compacted, the rest untouched; every key's latest value is there
    latest = {}
    for r in got:
        latest[r.key] = r.value
    log2.compact()
    assert {r.key: r.value for r in read_all(log2)} == latest


def test_compacted_topics_refuse_records_without_key(tmp_path, clock):
    import pytest

    from minikafka.protocol.errors import ErrorCode, KafkaError

    log = open_log(tmp_path / "p", clock)
    with pytest.raises(KafkaError) as exc:
        log.append(batch(2, keys=[b"a", None], values=[b"1", b"2"]))
    assert exc.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(KafkaError):
        log.append_batches(batch(1, keys=[b"a"], values=[b"1"]) + batch(1, keys=[None], values=[b"2"]))
    assert log.log_end_offset == 0
    log.append(batch(1, keys=[b"a"], values=[None]))  # a tombstone has a key
    assert log.log_end_offset == 1


def test_max_compaction_lag_compacts_below_the_dirty_ratio_once_a_record_is_that_old(tmp_path, clock):
    """KIP-354: with min.cleanable.dirty.ratio out of reach, a dirty record older than
    max.compaction.lag.ms still gets the log compacted; the active segment rolls by that lag too."""
    log = open_log(tmp_path / "p", clock, **{"min.cleanable.dirty.ratio": "1.0",
                                            "max.compaction.lag.ms": "60000", "segment.ms": str(DAY)})
    assert log.config.max_segment_ms == 60_000
    fill(log, clock, n_batches=60)
    log.compact()
    fill(log, clock, n_batches=10, seed=8)  # a little dirt after the cleaned part: ratio < 1.0
    log.roll()
    assert not log.needs_compaction()
    clock.advance(59_000)
    assert not log.needs_compaction()  # the oldest dirty record is not yet a minute old
    clock.advance(2_000)
    assert log.needs_compaction()
    log.compact()
    assert not log.needs_compaction()
    # The active segment: written now, rolled once it is older than the lag (not segment.ms).
    log.append(batch(1, ts=clock.now, keys=[b"k"], values=[b"v"]))
    log.roll()
    log.append(batch(1, ts=clock.now, keys=[b"k"], values=[b"v"]))
    clock.advance(59_000)
    assert not log.maybe_roll()
    clock.advance(1_001)
    assert log.maybe_roll()


def test_max_compaction_lag_does_not_shorten_segments_of_delete_only_topics(tmp_path, clock):
    log = PartitionLog(str(tmp_path / "d"), {"max.compaction.lag.ms": "1000", "segment.ms": "600000"}, now_ms=clock)
    assert log.config.max_segment_ms == 600_000
