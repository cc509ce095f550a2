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
