"""Producer state from snapshots: a restart reads the latest snapshot and replays only the
batches after it, and gets the same state as replaying the whole log."""

from minikafka.broker.producer_state import ProducerStateManager
from minikafka.protocol.records import build_batch
from minikafka.storage import producer_snapshot
from minikafka.storage.log import PartitionLog


def append(plog, pid, epoch, seq, n=2):
    plog.append(bytearray(build_batch([(None, b"v", [], 1000 + seq + i) for i in range(n)], producer_id=pid,
                                      producer_epoch=epoch, base_sequence=seq)))


def states(manager, plog):
    st = manager.for_partition("t", 0, plog)
    return {pid: (e.epoch, list(e.batches), e.last_timestamp) for pid, e in st.producers.items()}


def test_snapshot_plus_replay_equals_full_replay_and_reads_only_the_tail(tmp_path, monkeypatch):
    d = str(tmp_path / "t-0")
    plog = PartitionLog(d, {"segment.bytes": 400})
    for seq in range(0, 20, 2):
        append(plog, 1, 0, seq)
    append(plog, 2, 3, 0)
    first = ProducerStateManager()
    expected = states(first, plog)
    assert first.snapshot_all(lambda t, p: plog) == 1
    snap_at = plog.log_end_offset
    assert producer_snapshot.list_snapshots(d) == [snap_at]
    for seq in range(20, 30, 2):  # written after the snapshot: must come from the replay
        append(plog, 1, 0, seq)
    append(plog, 3, 0, 0)
    full = states(ProducerStateManager(), _without_snapshots(plog, tmp_path))
    seen = []
    real = plog.iter_batches
    monkeypatch.setattr(plog, "iter_batches", lambda start=0: (seen.append(start), real(start))[1])
    restored = states(ProducerStateManager(), plog)
    assert seen == [snap_at]
    assert restored == full and restored != expected
    assert restored[1][1][-1].last_seq == 29 and 3 in restored
    plog.close()


def _without_snapshots(plog, tmp_path):
    import shutil

    copy = str(tmp_path / "copy-0")
    shutil.copytree(plog.directory, copy)
    for offset in producer_snapshot.list_snapshots(copy):
        import os
        os.unlink(producer_snapshot.snapshot_path(copy, offset))
    return PartitionLog(copy, {"segment.bytes": 400})


def test_roll_triggers_a_snapshot_once_per_segment(tmp_path):
    d = str(tmp_path / "t-0")
    plog = PartitionLog(d, {"segment.bytes": 300})
    manager = ProducerStateManager()
    append(plog, 1, 0, 0)
    manager.for_partition("t", 0, plog)
    assert manager.snapshot_rolled(lambda t, p: plog) == 1  # no snapshot yet
    assert manager.snapshot_rolled(lambda t, p: plog) == 0  # nothing rolled since
    state = manager.for_partition("t", 0, plog)
    seq = 2
    while plog.active.base_offset <= state.snapshot_offset:
        append(plog, 1, 0, seq)
        state.record(1, 0, seq, 1, plog.log_end_offset - 2, 1000)
        seq += 2
    assert manager.snapshot_rolled(lambda t, p: plog) == 1
    assert producer_snapshot.list_snapshots(d)[-1] == plog.log_end_offset
    plog.close()


def test_an_unusable_snapshot_falls_back_to_the_whole_log(tmp_path):
    d = str(tmp_path / "t-0")
    plog = PartitionLog(d)
    append(plog, 1, 0, 0)
    append(plog, 1, 0, 2)
    producer_snapshot.write_snapshot(d, plog.log_end_offset, [{"no_producer_id": 1}])
    got = states(ProducerStateManager(), plog)
    assert list(got) == [1] and got[1][1][-1].last_seq == 3
    plog.close()


def test_snapshots_beyond_a_log_that_lost_its_tail_are_dropped_at_start(tmp_path):
    d = str(tmp_path / "t-0")
    plog = PartitionLog(d)
    append(plog, 1, 0, 0)
    producer_snapshot.write_snapshot(d, 2, [{"producer_id": 1, "epoch": 0, "batches": [[0, 1, 0, 1, 1000]]}])
    producer_snapshot.write_snapshot(d, 40, [{"producer_id": 9, "epoch": 0}])  # the log lost offsets 2-39
    assert ProducerStateManager.discard_stale_snapshots([plog]) == 1
    assert producer_snapshot.list_snapshots(d) == [2]
    # Appends after the crash pass offset 40: the dropped snapshot cannot come back into use.
    for seq in range(2, 60, 2):
        append(plog, 1, 0, seq)
    got = states(ProducerStateManager(), plog)
    assert list(got) == [1]
    plog.close()
