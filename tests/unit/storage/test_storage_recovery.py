"""Crash recovery: torn tails, flipped bytes, lost indexes and checkpoints, kill -9."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from minikafka.protocol.records import read_header
from minikafka.storage import PartitionLog
from minikafka.storage.checkpoint import FILE_NAME as CHECKPOINT
from storagetest import batch, read_all

T0 = 1_700_000_000_000
CONFIG = {"segment.bytes": 1200, "index.interval.bytes": 200}


def build_crashed_log(path, clock, n_batches=40):
    """Append batches and 'crash' (drop the log without close). Returns batch boundaries of the
    active segment as [(position, base_offset, next_offset)]."""
    log = PartitionLog(str(path), CONFIG, now_ms=clock)
    for i in range(n_batches):
        log.append(batch(1 + i % 3, ts=T0 + i, key=b"c%d-" % i, value=b"v" * (10 + i)))
    active = log.active
    bounds = [(pos, h.base_offset, h.next_offset) for pos, h in active.iter_positions()]
    records = [(r.offset, r.key, r.value) for r in read_all(log)]
    for seg in log.segments:
        seg.release()
    return active.log_path, active.base_offset, bounds, records, len(log.segments)


def check_indexes(log: PartitionLog) -> None:
    """Every index entry points at a batch that starts with the indexed offset; the time index
    holds the running max timestamp at the batch that reached it."""
    for seg in log.segments:
        buf = seg.buffer()
        headers = dict(seg.iter_positions())
        starts = {h.base_offset: pos for pos, h in headers.items()}
        if seg.size:
            assert seg.index.offsets[0] == seg.base_offset and seg.index.positions[0] == 0
        for off, pos in zip(seg.index.offsets, seg.index.positions):
            assert read_header(buf, pos).base_offset == off
        running, prev = -1, None
        maxima = {}
        for pos, h in sorted(headers.items()):
            if h.max_timestamp > running:
                running = h.max_timestamp
                maxima[running] = h.base_offset
        for ts, off in zip(seg.time_index.timestamps, seg.time_index.offsets):
            assert maxima[ts] == off and off in starts
            assert prev is None or ts > prev
            prev = ts
        assert seg.max_timestamp == running


def test_truncation_at_every_byte_of_the_last_batch(tmp_path, clock, no_fsync):
    pristine = tmp_path / "pristine"
    log_path, _, bounds, records, n_segments = build_crashed_log(pristine, clock)
    assert n_segments > 3
    last_pos, last_base, _ = bounds[-1]
    full_size = os.path.getsize(log_path)
    name = os.path.basename(log_path)
    for cut in range(last_pos, full_size + 1):
        work = tmp_path / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        os.truncate(work / name, cut)
        log = PartitionLog(str(work), CONFIG, now_ms=clock)
        expected_end = records[-1][0] + 1 if cut == full_size else last_base
        assert log.log_end_offset == expected_end, cut
        assert [(r.offset, r.key, r.value) for r in read_all(log)] == [r for r in records if r[0] < expected_end]
        assert os.path.getsize(work / name) == (full_size if cut == full_size else last_pos)
        check_indexes(log)
        # the log keeps working at the right offset
        assert log.append(batch(1)).base_offset == expected_end
        for seg in log.segments:
            seg.release()


def test_flipped_bytes_cut_the_log_at_the_damaged_batch(tmp_path, clock, no_fsync):
    pristine = tmp_path / "pristine"
    log_path, _, bounds, records, _ = build_crashed_log(pristine, clock)
    name = os.path.basename(log_path)
    rng = random.Random(1234)
    size = os.path.getsize(log_path)
    trials = 0
    while trials < 150:
        pos = rng.randrange(size)
        batch_pos, base, _ = max(b for b in bounds if b[0] <= pos)
        if 12 <= pos - batch_pos < 16:
            continue  # the partition leader epoch: outside the CRC, not data
        trials += 1
        work = tmp_path / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        with open(work / name, "r+b") as f:
            f.seek(pos)
            old = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([old ^ (1 << rng.randrange(8))]))
        log = PartitionLog(str(work), CONFIG, now_ms=clock)
        assert log.log_end_offset == base, pos
        assert [(r.offset, r.key, r.value) for r in read_all(log)] == [r for r in records if r[0] < base]
        check_indexes(log)
        for seg in log.segments:
            seg.release()


def test_corruption_in_a_closed_segment_without_checkpoint_drops_everything_after(tmp_path, clock):
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(40):
        log.append(batch(2, ts=T0 + i))
    victim = log.segments[1]
    positions = [(pos, h) for pos, h in victim.iter_positions()]
    pos, h = positions[2]
    path = victim.log_path
    for seg in log.segments:
        seg.release()
    with open(path, "r+b") as f:
        f.seek(pos + 70)
        f.write(b"\xff")
    os.unlink(tmp_path / "p" / CHECKPOINT)
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert log.log_end_offset == h.base_offset
    assert log.active.base_offset == victim.base_offset
    assert [r.offset for r in read_all(log)] == list(range(h.base_offset))
    check_indexes(log)


def test_missing_and_corrupt_index_files_are_rebuilt(tmp_path, clock):
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(60):
        log.append(batch(2, ts=T0 + i))
    expected = [(list(s.index.offsets), list(s.time_index.timestamps)) for s in log.segments]
    records = [(r.offset, r.value) for r in read_all(log)]
    log.close()
    segs = log.segments
    os.unlink(segs[0].index.path)
    with open(segs[1].index.path, "r+b") as f:
        f.seek(9)
        f.write(b"\x7f\x7f")  # an entry pointing far away
    with open(segs[2].time_index.path, "ab") as f:
        f.write(b"\x00" * 5)  # not a whole entry
    with open(segs[3].index.path, "wb"):
        pass  # empty: the first batch must be indexed, so it is rebuilt too
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert [(list(s.index.offsets), list(s.time_index.timestamps)) for s in log2.segments] == expected
    assert [(r.offset, r.value) for r in read_all(log2)] == records
    check_indexes(log2)
    assert log2.offset_for_timestamp(T0 + 30) == (59, T0 + 30)  # batch 29 holds T0+29, T0+30


def test_stale_index_after_crash_is_not_trusted(tmp_path, clock):
    """A crash after truncation-and-regrowth must not reuse index entries for different bytes."""
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(5):
        log.append(batch(1, ts=T0 + i))
    log.flush()
    log.active.write_indexes()
    for seg in log.segments:
        seg.release()
    # the index mentions batches the log no longer has
    os.truncate(log.active.log_path, 0)
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert log2.log_end_offset == 0 and len(log2.active.index) == 0
    assert log2.append(batch(1)).base_offset == 0


def test_leftover_files_from_interrupted_work_are_removed(tmp_path, clock):
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    log.append(batch(3))
    log.close()
    d = tmp_path / "p"
    (d / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    (d / "partition.checkpoint.tmp").write_bytes(b"junk")
    (d / "00000000000000000099.index").write_bytes(b"")
    log2 = PartitionLog(str(d), CONFIG, now_ms=clock)
    assert log2.log_end_offset == 3
    assert sorted(os.listdir(d)) == ["00000000000000000000.index", "00000000000000000000.log",
                                     "00000000000000000000.timeindex", "partition.checkpoint"]


def test_unclean_reopen_keeps_log_start_and_everything_written(tmp_path, clock):
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(30):
        log.append(batch(2, ts=T0 + i))
    log.delete_records(21)
    for seg in log.segments:
        seg.release()
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert (log2.log_start_offset, log2.log_end_offset) == (21, 60)
    assert log2.recovered_bytes_cut == 0


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_kill_9_loses_no_acknowledged_append(tmp_path):
    """A child appends and reports each acknowledged offset; we SIGKILL it mid-stream."""
    directory = tmp_path / "p"
    child = textwrap.dedent(f"""
        import sys
        from minikafka.protocol.records import build_batch
        from minikafka.storage import PartitionLog
        log = PartitionLog({str(directory)!r}, {{"segment.bytes": 20000, "flush.ms": 10**9}})
        i = 0
        while True:
            info = log.append(build_batch([(b"k", b"x" * 300, [], 1_700_000_000_000 + i)] * 3))
            sys.stdout.write(f"{{info.last_offset}}\\n")
            sys.stdout.flush()
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    acked = -1
    try:
        for _ in range(400):
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert acked > 500
    log = PartitionLog(str(directory), {"segment.bytes": 20000})
    assert log.log_end_offset >= acked + 1
    assert [r.offset for r in read_all(log)] == list(range(log.log_end_offset))


@pytest.mark.parametrize("cut_back", [1, 30, 61, 62])
def test_torn_tail_after_a_clean_shutdown_is_still_cut(tmp_path, clock, cut_back):
    """Even a 'clean' checkpoint never makes an incomplete batch servable."""
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(12):
        log.append(batch(2, ts=T0 + i))
    last = [h for h, _ in log.iter_batches()][-1]
    log.close()
    path = log.active.log_path
    os.truncate(path, os.path.getsize(path) - cut_back)
    log2 = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    assert log2.log_end_offset == last.base_offset
    assert [r.offset for r in read_all(log2)] == list(range(last.base_offset))
    check_indexes(log2)


def test_a_segment_overlapping_its_predecessor_is_dropped_with_everything_after(tmp_path, clock):
    log = PartitionLog(str(tmp_path / "p"), CONFIG, now_ms=clock)
    for i in range(30):
        log.append(batch(2, ts=T0 + i))
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = tmp_path / "p"
    # pretend segment 2 starts one offset early (a file renamed by hand, a bad copy ...)
    os.rename(d / f"{bases[2]:020d}.log", d / f"{bases[2] - 1:020d}.log")
    os.unlink(d / CHECKPOINT)
    log2 = PartitionLog(str(d), CONFIG, now_ms=clock)
    assert [s.base_offset for s in log2.segments] == bases[:2]
    assert log2.log_end_offset == bases[2]
    assert [r.offset for r in read_all(log2)] == list(range(bases[2]))
