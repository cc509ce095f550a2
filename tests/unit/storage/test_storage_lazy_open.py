"""Opening a partition is cheap: indexes are read on first use, a clean restart rescans nothing
below the recovery point and writes no checkpoint until the first change."""

from __future__ import annotations

import os

from minikafka.storage import PartitionLog
from minikafka.storage import log as log_module
from minikafka.storage.checkpoint import read_checkpoint
from minikafka.storage.index import OffsetIndex, TimeIndex
from minikafka.storage.segment import Segment
from storagetest import batch, read_all

T0 = 1_700_000_000_000
CONFIG = {"segment.bytes": 1200, "index.interval.bytes": 200}


def filled(path, clock, n=60) -> PartitionLog:
    log = PartitionLog(str(path), CONFIG, now_ms=clock)
    for i in range(n):
        log.append(batch(2, ts=T0 + i))
    return log


def stats(log: PartitionLog) -> list:
    """What each segment knows of itself without reading its index entries."""
    return [(s.base_offset, s.size, s.next_offset, s.max_timestamp, s.offset_of_max_timestamp,
             s.first_batch_timestamp) for s in log.segments]


def snapshot(log: PartitionLog) -> list:
    return [row + (list(s.index.offsets), list(s.index.positions), list(s.time_index.timestamps),
                   list(s.time_index.offsets)) for row, s in zip(stats(log), log.segments)]


class Reads:
    """Counts the index files' entries being read (the deferred part of opening)."""

    def __init__(self, monkeypatch):
        self.paths: list[str] = []
        for cls in (OffsetIndex, TimeIndex):
            original = cls._read

            def counting(index, *args, _original=original):
                self.paths.append(index.path)
                return _original(index, *args)

            monkeypatch.setattr(cls, "_read", counting)


def test_indexes_are_not_read_at_open_but_on_first_lookup(tmp_path, clock, monkeypatch):
    log = filled(tmp_path / "p", clock)
    expected = snapshot(log)
    records = [(r.offset, r.value) for r in read_all(log)]
    log.close()
    reads = Reads(monkeypatch)
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert len(log2.segments) > 3
    assert reads.paths == []
    assert not any(s.index.loaded or s.time_index.loaded for s in log2.segments)
    # What the segments know without their entries matches a full load.
    assert stats(log2) == [row[:6] for row in expected]
    assert reads.paths == []

    seg = log2.segments[2]
    assert log2.read(seg.base_offset + 3, 100)  # a lookup in that segment only
    assert reads.paths == [seg.index.path]
    assert seg.index.loaded and not seg.time_index.loaded
    assert not log2.segments[1].index.loaded

    assert log2.offset_for_timestamp(T0 + 30) == (59, T0 + 30)
    assert [(r.offset, r.value) for r in read_all(log2)] == records
    assert snapshot(log2) == expected


def test_appending_after_a_lazy_open_loads_the_active_segments_indexes(tmp_path, clock):
    log = filled(tmp_path / "p", clock, n=5)
    log.close()
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert not log2.active.index.loaded
    for i in range(5, 60):
        log2.append(batch(2, ts=T0 + i))
    fresh = filled(tmp_path / "q", clock)
    assert snapshot(log2) == snapshot(fresh)
    log2.close()
    log3 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert snapshot(log3) == snapshot(fresh)


def test_an_index_corrupt_in_the_middle_is_rebuilt_on_first_use(tmp_path, clock, monkeypatch):
    """Open only checks the last entry; the others are checked when read, and a failure rebuilds
    the index from the log, so no record becomes unreachable."""
    log = filled(tmp_path / "p", clock)
    expected = snapshot(log)
    records = [(r.offset, r.value) for r in read_all(log)]
    log.close()
    seg = log.segments[1]
    with open(seg.index.path, "r+b") as f:
        f.seek(8)
        f.write(b"\x7f\x7f\x7f\x7f")  # the second entry's offset: far beyond the segment
    with open(log.segments[2].time_index.path, "r+b") as f:
        f.write(b"\x7f" * 8)  # the first timestamp above the later ones: not increasing
    rebuilt = []
    original = Segment._rebuild_indexes
    monkeypatch.setattr(Segment, "_rebuild_indexes", lambda s: (rebuilt.append(s.base_offset), original(s)))
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert rebuilt == []  # the last entries are fine, so open trusted both
    assert [(r.offset, r.value) for r in read_all(log2)] == records
    assert log2.offset_for_timestamp(T0 + 30) == (59, T0 + 30)
    assert sorted(rebuilt) == [log.segments[1].base_offset, log.segments[2].base_offset]
    assert snapshot(log2) == expected
    log2.close()  # writes the rebuilt indexes
    rebuilt.clear()
    log3 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert snapshot(log3) == expected and rebuilt == []


def test_an_index_whose_last_entry_is_implausible_is_rebuilt_at_open(tmp_path, clock):
    log = filled(tmp_path / "p", clock)
    expected = snapshot(log)
    log.close()
    seg = log.segments[1]
    with open(seg.index.path, "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"\x7f\x7f\x7f\x7f")  # the last entry's position: beyond the log
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert log2.segments[1].index.loaded  # rebuilt at open
    assert snapshot(log2) == expected


def test_a_clean_restart_rescans_nothing_and_writes_no_checkpoint(tmp_path, clock, monkeypatch):
    log = filled(tmp_path / "p", clock)
    log.close()
    scans, recovered, checkpoints = [], [], []
    original_scan = Segment._scan
    monkeypatch.setattr(Segment, "_scan", lambda s, pos, *a, **kw: (scans.append((s.base_offset, pos)),
                                                                     original_scan(s, pos, *a, **kw))[1])
    monkeypatch.setattr(Segment, "recover", lambda s, *a, **kw: recovered.append(s.base_offset))
    original_write = log_module.write_checkpoint
    monkeypatch.setattr(log_module, "write_checkpoint", lambda d, cp: (checkpoints.append(cp), original_write(d, cp)))
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert recovered == [] and checkpoints == []
    # Only the batches after each segment's last index entry are looked at, never a whole segment.
    assert all(pos > 0 for _, pos in scans)
    assert read_checkpoint(str(tmp_path / "p")).clean_shutdown
    assert read_all(log2)  # reading changes nothing on disk
    assert checkpoints == []
    log2.close()  # nor does closing a partition that did not change
    assert checkpoints == [] and read_checkpoint(str(tmp_path / "p")).clean_shutdown
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    segments = len(log2.segments)
    for i in range(5):
        log2.append(batch(1, ts=T0 + 99 + i))
    assert not read_checkpoint(str(tmp_path / "p")).clean_shutdown
    assert not any(cp.clean_shutdown for cp in checkpoints)
    rolls = len(log2.segments) - segments  # a roll writes one too
    assert len(checkpoints) == 1 + rolls  # once per open, not per append


def test_a_crash_before_any_write_leaves_a_clean_checkpoint_that_still_holds(tmp_path, clock):
    log = filled(tmp_path / "p", clock)
    log.close()
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    records = [(r.offset, r.value) for r in read_all(log2)]
    for seg in log2.segments:
        seg.release()  # crash: no close
    log3 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert [(r.offset, r.value) for r in read_all(log3)] == records


def test_a_crash_after_the_first_write_recovers_the_tail(tmp_path, clock, no_fsync, monkeypatch):
    """The first append after a clean open clears the clean flag, so a torn tail is validated
    and cut, and only the segments beyond the recovery point are recovered."""
    log = filled(tmp_path / "p", clock)
    log.close()
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(3):
        log2.append(batch(2, ts=T0 + 200 + i))
    good_end = log2.log_end_offset
    log2.append(batch(2, ts=T0 + 300))
    path = log2.active.log_path
    closed = [s.base_offset for s in log2.segments[:-1]]
    for seg in log2.segments:
        seg.release()  # crash: no close
    with open(path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\xff\xff\xff")  # the last batch fails its CRC
    recovered = []
    original = Segment.recover
    monkeypatch.setattr(Segment, "recover", lambda s, *a, **kw: (recovered.append(s.base_offset),
                                                                 original(s, *a, **kw))[1])
    log3 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert log3.log_end_offset == good_end
    assert recovered and not set(recovered) & set(closed[:-1])
    assert all(not s.index.loaded for s in log3.segments if s.base_offset in closed[:-1])
    assert [r.offset for r in read_all(log3)] == list(range(good_end))


def test_a_corrupt_index_of_the_active_segment_is_rebuilt_before_the_next_append(tmp_path, clock):
    """The rebuild must index the log as it was, then the append indexes its own batch once."""
    config = {"segment.bytes": 1 << 20, "index.interval.bytes": 200}
    log = PartitionLog(str(tmp_path / "p"), config, now_ms=clock)
    for i in range(30):
        log.append(batch(2, ts=T0 + i))
    log.close()
    assert len(log.active.index) > 3
    with open(log.active.index.path, "r+b") as f:
        f.seek(8)
        f.write(b"\x7f\x7f\x7f\x7f")
    log2 = PartitionLog(str(tmp_path / "p"), config, now_ms=clock)
    assert not log2.active.index.loaded
    fresh = PartitionLog(str(tmp_path / "q"), config, now_ms=clock)
    for i in range(30):
        fresh.append(batch(2, ts=T0 + i))
    for i in range(30, 40):
        log2.append(batch(2, ts=T0 + i))
        fresh.append(batch(2, ts=T0 + i))
    assert snapshot(log2) == snapshot(fresh)
    log2.close()
    assert snapshot(PartitionLog(str(tmp_path / "p"), config, now_ms=clock)) == snapshot(fresh)


def test_a_long_unindexed_tail_is_scanned_through_the_mapping(tmp_path, clock, monkeypatch):
    from minikafka.storage import segment as segment_module

    monkeypatch.setattr(segment_module, "_TAIL_READ_MAX", 300)  # a few batches
    config = {"segment.bytes": 1 << 20, "index.interval.bytes": 1 << 20}  # one entry per segment
    log = PartitionLog(str(tmp_path / "p"), config, now_ms=clock)
    for i in range(20):
        log.append(batch(2, ts=T0 + i))
    expected = snapshot(log)
    log.close()
    assert len(log.active.index) == 1 and log.active.size > 300
    log2 = PartitionLog(str(tmp_path / "p"), config, now_ms=clock)
    assert stats(log2) == [row[:6] for row in expected]
    assert log2.append(batch(1, ts=T0 + 50)).base_offset == 40
