"""Transactions in the partition log: LSO, aborted-transaction index, recovery, retention, compaction."""

from __future__ import annotations

from minikafka.protocol.records import build_batch, build_control_batch, iter_records
from minikafka.storage import PartitionLog

T0 = 1_700_000_000_000


def txn_batch(pid: int, n: int = 2, key: bytes = b"k", epoch: int = 0, seq: int = 0) -> bytearray:
    return build_batch([(key + b"%d" % i, b"v", [], T0) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=True)


def plain(n: int = 1, key: bytes = b"p") -> bytearray:
    return build_batch([(key + b"%d" % i, b"v", [], T0) for i in range(n)])


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 3) -> bytearray:
    return build_control_batch(commit, pid, epoch, coordinator_epoch, T0)


def open_log(tmp_path, clock, **configs) -> PartitionLog:
    return PartitionLog(str(tmp_path / "t-0"), {k.replace("_", "."): v for k, v in configs.items()}, now_ms=clock)


def test_lso_stops_at_the_oldest_open_transaction_and_moves_when_it_ends(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(plain(2))                        # 0-1
    log.append(txn_batch(7))                    # 2-3, txn of 7 opens at 2
    log.append(txn_batch(8))                    # 4-5, txn of 8 opens at 4
    log.append(plain(1))                        # 6
    assert log.high_watermark == 7 and log.last_stable_offset == 2
    log.append(marker(8, commit=True))          # 7
    assert log.last_stable_offset == 2          # 7 is still open
    log.append(marker(7, commit=False))         # 8
    assert log.last_stable_offset == log.high_watermark == 9
    assert log.aborted_transactions(0, 9) == [(7, 2)]
    assert log.aborted_transactions(9, 20) == []   # the range lies wholly after the abort marker
    assert log.aborted_transactions(0, 2) == []    # ... or wholly before the aborted data
    assert log.txn.coordinator_epochs[7] == 3


def test_index_is_rebuilt_after_a_restart_and_after_a_crash(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(txn_batch(1))
    log.append(marker(1, commit=False))
    log.append(txn_batch(2))
    log.close()
    again = open_log(tmp_path, clock)
    assert again.last_stable_offset == 3
    assert again.aborted_transactions(0, 10) == [(1, 0)]
    again.append(marker(2, commit=False))
    assert again.aborted_transactions(0, 10) == [(1, 0), (2, 3)]
    # no close(): a crash; recovery validates the files and the index is built from them
    crashed = open_log(tmp_path, clock)
    assert crashed.aborted_transactions(0, 10) == [(1, 0), (2, 3)]
    assert crashed.last_stable_offset == crashed.high_watermark == 6


def test_retention_and_delete_records_drop_the_index_of_removed_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200)
    log.append(txn_batch(1))
    log.append(marker(1, commit=False))
    log.roll()
    log.append(txn_batch(2))
    log.append(marker(2, commit=False))
    log.roll()
    assert log.aborted_transactions(0, 100) == [(1, 0), (2, 3)]
    log.delete_records(3)
    assert log.aborted_transactions(0, 100) == [(2, 3)]
    assert 0 not in log.txn.aborted


def test_an_open_transaction_below_the_log_start_does_not_pull_the_lso_under_it(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(txn_batch(1))
    log.append(plain(3))
    log.delete_records(2)
    assert log.last_stable_offset == 2


def test_compaction_drops_aborted_records_and_keeps_committed_ones(tmp_path, clock):
    log = open_log(tmp_path, clock, cleanup_policy="compact", segment_bytes=100000)
    log.append(build_batch([(b"a", b"committed", [], T0)], producer_id=1, producer_epoch=0,
                           base_sequence=0, transactional=True))            # 0
    log.append(marker(1, commit=True))                                       # 1
    log.append(build_batch([(b"a", b"aborted", [], T0)], producer_id=2, producer_epoch=0,
                           base_sequence=0, transactional=True))            # 2
    log.append(build_batch([(b"b", b"aborted-only", [], T0)], producer_id=2, producer_epoch=0,
                           base_sequence=1, transactional=True))            # 3
    log.append(marker(2, commit=False))                                      # 4
    log.roll()
    log.append(plain(1, key=b"z"))
    log.compact()
    values = {}
    for header, view in log.iter_batches(0):
        if header.is_control:
            continue
        for r in iter_records(view):
            values.setdefault(r.key, []).append(r.value)
    assert values[b"a"] == [b"committed"]
    assert b"b" not in values


def test_compaction_leaves_segments_of_an_open_transaction_alone(tmp_path, clock):
    log = open_log(tmp_path, clock, cleanup_policy="compact")
    log.append(build_batch([(b"a", b"1", [], T0)], producer_id=1, producer_epoch=0, base_sequence=0,
                           transactional=True))
    log.append(build_batch([(b"a", b"2", [], T0)]))
    log.roll()
    log.append(build_batch([(b"a", b"3", [], T0)]))
    assert log.compact() == 0


def test_interleaved_aborted_transactions_overlap_the_ranges_they_span(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append(txn_batch(1))                    # 0-1
    log.append(txn_batch(2))                    # 2-3
    log.append(marker(1, commit=False))         # 4: LSO stays at 2 (txn of 2 is open)
    log.append(plain(1))                        # 5
    log.append(marker(2, commit=False))         # 6
    log.append(txn_batch(3))                    # 7-8
    log.append(marker(3, commit=False))         # 9
    assert log.aborted_transactions(0, 10) == [(1, 0), (2, 2), (3, 7)]
    assert log.aborted_transactions(0, 1) == [(1, 0)]
    assert log.aborted_transactions(3, 5) == [(1, 0), (2, 2)]
    assert log.aborted_transactions(5, 7) == [(2, 2)]
    assert log.aborted_transactions(7, 10) == [(3, 7)]


def test_append_batches_with_several_transactional_batches_indexes_each_once(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_batches(bytes(txn_batch(2)) + bytes(txn_batch(1)) + bytes(marker(1, commit=False)))
    assert log.aborted_transactions(0, 10) == [(1, 2)]
    assert log.last_stable_offset == 0  # producer 2 is still open
    log.append_batches(bytes(marker(2, commit=True)) + bytes(txn_batch(3)) + bytes(marker(3, commit=False)))
    assert log.aborted_transactions(0, 20) == [(1, 2), (3, 6)]
    assert log.last_stable_offset == log.high_watermark


# == compaction removes transaction markers when safe (Kafka's cleaner, KIP-534 horizon) ==========

def compacted_log(tmp_path, clock):
    return open_log(tmp_path, clock, cleanup_policy="compact", delete_retention_ms=1000,
                    min_cleanable_dirty_ratio=0.01)


def kv(key: bytes, value: bytes, pid: int, seq: int, epoch: int = 0) -> bytearray:
    return build_batch([(key, value, [], T0)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)


def batches(log) -> dict[int, tuple]:
    """base offset -> (header, [(key, value)]) of every batch left in the log."""
    return {h.base_offset: (h, [(r.key, r.value) for r in iter_records(v)]) for h, v in log.iter_batches(0)}


def committed_view(log) -> list[tuple[bytes, bytes]]:
    """What a read_committed consumer gets: Kafka's client algorithm over the fetched batches."""
    aborted = sorted(log.aborted_transactions(0, log.last_stable_offset), key=lambda a: a[1])
    skipping: set[int] = set()
    out = []
    for h, view in log.iter_batches(0):
        if h.base_offset >= log.last_stable_offset:
            break
        while aborted and aborted[0][1] <= h.last_offset:
            skipping.add(aborted.pop(0)[0])
        if h.is_control:
            records = list(iter_records(view))
            if records and records[0].key[3] == 0:  # abort marker
                skipping.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in skipping:
            continue
        out += [(r.key, r.value) for r in iter_records(view)]
    return out


def test_an_abort_marker_goes_delete_retention_ms_after_its_data(tmp_path, clock):
    from minikafka.protocol.records import DELETE_HORIZON_BIT

    log = compacted_log(tmp_path, clock)
    log.append(kv(b"a", b"aborted", pid=2, seq=0))       # 0
    log.append(marker(2, commit=False))                  # 1
    log.append(kv(b"b", b"committed", pid=2, seq=1))     # 2
    log.append(marker(2, commit=True))                   # 3
    log.append(plain(1, key=b"z"))                       # 4
    log.roll()
    assert log.aborted_transactions(0, 5) == [(2, 0)]
    before = committed_view(log)
    t_clean = clock.now
    log.compact()
    left = batches(log)
    assert 0 not in left                                  # aborted data: dropped
    h, records = left[1]                                  # its marker: stamped with a horizon
    assert h.attributes & DELETE_HORIZON_BIT and h.base_timestamp == t_clean + 1000
    assert records[0][0] == b"\x00\x00\x00\x00" and h.max_timestamp == T0  # same record, same time
    assert not left[3][0].attributes & DELETE_HORIZON_BIT  # commit with data left: untouched
    assert log.aborted_transactions(0, 5) == []           # the index entry went with the data
    assert committed_view(log) == before == [(b"b", b"committed"), (b"z0", b"v")]
    assert log._tombstone_deadline_ms == t_clean + 1000
    clock.advance(999)
    assert not log.needs_compaction()
    log.compact()
    assert 1 in batches(log)
    clock.advance(1)
    assert log.needs_compaction()                         # the horizon asks for the pass
    log.compact()
    left = batches(log)
    assert sorted(left) == [2, 3, 4]
    assert committed_view(log) == before
    log.close()
    again = compacted_log(tmp_path, clock)                # the rebuilt index agrees
    assert again.aborted_transactions(0, 10) == [] and again.last_stable_offset == again.high_watermark
    assert committed_view(again) == before


def test_a_commit_marker_goes_once_its_transaction_is_compacted_away(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    log.append(kv(b"a", b"1", pid=1, seq=0))             # 0
    log.append(marker(1, commit=True))                   # 1
    log.append(kv(b"a", b"2", pid=1, seq=1))             # 2
    log.append(marker(1, commit=True))                   # 3
    log.roll()
    log.append(plain(1, key=b"z"))
    log.compact()
    assert sorted(batches(log)) == [1, 2, 3, 4]           # 0 superseded; its marker waits
    clock.advance(1000)
    log.compact()
    assert sorted(batches(log)) == [2, 3, 4]
    assert committed_view(log) == [(b"a", b"2"), (b"z0", b"v")]
    log.close()
    again = compacted_log(tmp_path, clock)
    assert again.last_stable_offset == again.high_watermark == 5
    assert committed_view(again) == [(b"a", b"2"), (b"z0", b"v")]


def test_a_marker_stays_while_its_transaction_has_a_batch_left(tmp_path, clock):
    from minikafka.protocol.records import DELETE_HORIZON_BIT

    log = compacted_log(tmp_path, clock)
    log.append(kv(b"a", b"aborted", pid=2, seq=0))       # 0: the producer's last data batch
    log.append(marker(2, commit=False))                  # 1
    log.append(plain(1, key=b"a"))                       # 2
    log.roll()
    for _ in range(3):
        log.compact()
        clock.advance(5000)
    left = batches(log)
    assert left[0][1] == []                               # kept empty for the producer's sequence
    assert 1 in left and not left[1][0].attributes & DELETE_HORIZON_BIT  # the marker closing it: never stamped
    assert log.aborted_transactions(0, 3) == [(2, 0)]
    log.close()
    again = compacted_log(tmp_path, clock)
    assert again.last_stable_offset == again.high_watermark == 3  # the empty batch's txn is closed
    assert committed_view(again) == [(b"a0", b"v")]


def test_a_marker_that_bumped_the_epoch_is_kept(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    log.append(marker(4, commit=False, epoch=1))         # 0: a timeout abort, no data here
    log.append(kv(b"a", b"1", pid=5, seq=0))             # 1
    log.append(marker(5, commit=True))                   # 2
    log.append(kv(b"a", b"2", pid=5, seq=1))             # 3
    log.append(marker(5, commit=True))                   # 4
    log.roll()
    log.compact()
    clock.advance(1000)
    log.compact()
    assert sorted(batches(log)) == [0, 3, 4]              # 5's first marker went; 4's epoch stays
    log.close()
    from minikafka.broker.producer_state import PartitionProducerState

    state = PartitionProducerState()
    state.rebuild(h for h, _ in compacted_log(tmp_path, clock).iter_batches(0))
    assert state.producers[4].epoch == 1
