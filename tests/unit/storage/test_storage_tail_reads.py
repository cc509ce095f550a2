"""Reads of the active segment's newest bytes through pread pieces (issue 24) give exactly what a
fresh mapping of the file gives, for any mix of appends and reads."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.storage import PartitionLog, segment
from storagetest import batch


def _joined(views) -> bytes:
    return b"".join(bytes(v) for v in views)


def _mapped_read(log, offset, max_bytes, max_offset):
    """The same read with every byte served from a (re)mapping, as before pieces existed."""
    saved = segment.TAIL_MAX_BYTES
    segment.TAIL_MAX_BYTES = -1
    try:
        return log.read(offset, max_bytes, max_offset)
    finally:
        segment.TAIL_MAX_BYTES = saved


ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 30_000)),
    st.tuples(st.just("read"), st.floats(0, 1), st.integers(1, 200_000), st.floats(0, 1)),
), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, interval=st.sampled_from([0, 4096, 1 << 20]))
def test_reads_through_pieces_equal_reads_through_the_mapping(tmp_path_factory, ops, interval):
    log = PartitionLog(str(tmp_path_factory.mktemp("tail")), {"index.interval.bytes": interval})
    try:
        for op in ops:
            if op[0] == "append":
                log.append(batch(op[1], value=b"v" * op[2]))
                continue
            leo = log.log_end_offset
            if leo == 0:
                continue
            offset = int(op[1] * (leo - 1))
            max_offset = offset + 1 + int(op[3] * (leo - offset - 1))
            got = log.read(offset, op[2], max_offset)
            assert _joined(got) == _joined(_mapped_read(log, offset, op[2], max_offset))
            # and a consumer that keeps up: the newest batch alone
            assert _joined(log.read(leo - 1, 1 << 20)) == _joined(_mapped_read(log, leo - 1, 1 << 20, leo))
    finally:
        log.close()


def test_a_consumer_that_keeps_up_is_served_without_remapping(tmp_path, monkeypatch):
    log = PartitionLog(str(tmp_path), {})
    log.append(batch(1))
    log.read(0, 1 << 20)
    seg = log.active
    mapped = seg._mapped
    for i in range(1, 20):
        log.append(batch(1))
        (view,) = log.read(i, 1 << 20)
        assert bytes(view)[:8] == i.to_bytes(8, "big")
    assert seg._mapped == mapped == 0  # every batch came from a pread piece, nothing mapped
    assert len(seg._tail) == 20
    # past the piece limit the next read remaps once and starts over
    for i in range(20, 20 + segment.TAIL_MAX_PIECES + 1):
        log.append(batch(1))
        log.read(i, 1 << 20)
    assert seg._mapped > mapped and len(seg._tail) <= segment.TAIL_MAX_PIECES
    log.close()


def test_find_starts_from_the_last_read_or_append_not_the_index(tmp_path, monkeypatch):
    log = PartitionLog(str(tmp_path), {"index.interval.bytes": 1 << 30})  # one index entry only
    for _ in range(50):
        log.append(batch(1))
    seg = log.active
    scanned = []
    real = segment._BASE_LEN_DELTA

    class Counting:
        def unpack_from(self, buf, pos):
            scanned.append(pos)
            return real.unpack_from(buf, pos)

    monkeypatch.setattr(segment, "_BASE_LEN_DELTA", Counting())
    assert seg.find(49) is not None and len(scanned) == 1  # the newest batch: found at once
    scanned.clear()
    log.read(30, 1 << 20, 40)
    scanned.clear()
    assert seg.find(40) is not None and len(scanned) == 1  # where the last read stopped
    scanned.clear()
    assert seg.find(10) is not None and len(scanned) == 11  # earlier: from the index, as before


@pytest.mark.parametrize("reopen", [False, True])
def test_pieces_survive_a_roll_and_a_reopen(tmp_path, reopen):
    log = PartitionLog(str(tmp_path), {"segment.bytes": 2000})
    for _ in range(30):
        log.append(batch(1, value=b"x" * 100))
        log.read(log.log_end_offset - 1, 1 << 20)
    if reopen:
        log.close()
        log = PartitionLog(str(tmp_path), {"segment.bytes": 2000})
    assert _joined(log.read(0, 1 << 30)) == _joined(_mapped_read(log, 0, 1 << 30, log.log_end_offset))
    log.close()


def test_an_append_after_a_read_to_the_end_is_read_without_a_system_call(tmp_path, monkeypatch):
    log = PartitionLog(str(tmp_path), {})
    log.append(batch(1))
    log.read(0, 1 << 20)  # a consumer at the end
    preads = []
    real = segment.os.pread
    monkeypatch.setattr(segment.os, "pread", lambda *a: preads.append(a) or real(*a))
    for i in range(1, 10):
        written = batch(2, value=b"w" * (i * 10))
        log.append(written)
        (view,) = log.read(2 * i - 1, 1 << 20)
        assert bytes(view)[12:] == bytes(written)[12:]  # the same batch (its base offset set on append)
        assert bytes(view)[:8] == (2 * i - 1).to_bytes(8, "big")
    assert preads == []
    log.close()


def test_a_segment_without_readers_keeps_no_copies_of_its_writes(tmp_path):
    log = PartitionLog(str(tmp_path), {})
    log.append(batch(1))
    log.read(0, 1 << 20)
    for _ in range(50):
        log.append(batch(1, value=b"x" * 500))
    seg = log.active
    assert len(seg._tail) <= 2  # the first read's piece and the one write right after it
    assert sum(len(p) for p in seg._tail) < 2000
    log.close()


@pytest.mark.parametrize("records", [1, 3])
@pytest.mark.parametrize("min_one", [True, False])
def test_the_newest_batch_shortcut_reads_what_the_general_read_does(tmp_path, monkeypatch, records, min_one):
    log = PartitionLog(str(tmp_path), {})
    for _ in range(3):
        log.append(batch(records, value=b"y" * 50))
    leo = log.log_end_offset
    size = log.active.size - log.active._appended_at[1]
    cases = [(offset, max_bytes, max_offset)
             for offset in range(leo - records - 1, leo)
             for max_bytes in (1, size - 1, size, size + 1, 1 << 20)
             for max_offset in (leo - 1, leo)]
    for offset, max_bytes, max_offset in cases:
        if offset >= max_offset:
            continue
        got = log.read(offset, max_bytes, max_offset, min_one=min_one)
        with monkeypatch.context() as m:
            m.setattr(segment.Segment, "read_newest", lambda *a: None)
            want = log.read(offset, max_bytes, max_offset, min_one=min_one)
        assert _joined(got) == _joined(want), (offset, max_bytes, max_offset)
    log.close()
