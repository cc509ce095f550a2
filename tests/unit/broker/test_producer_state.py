from minikafka.protocol.records import build_batch, read_header

from minikafka.broker.producer_state import (
    INT32_MAX, PartitionProducerState, ProducerIdManager, in_sequence, last_sequence)
from minikafka.protocol.errors import ErrorCode

NONE, INVALID_PRODUCER_EPOCH = ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH
OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def append(state, pid, epoch, seq, count, offset, ts=1000):
    check = state.check(pid, epoch, seq, count - 1)
    if check.error == NONE and check.duplicate is None:
        state.record(pid, epoch, seq, count - 1, offset, ts)
    return check


def test_sequence_wraps_at_int32_max():
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert last_sequence(5, 3) == 8
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)


def test_in_order_batches_are_accepted_and_gaps_rejected():
    state = PartitionProducerState()
    assert append(state, 7, 0, 0, 3, offset=0) == (NONE, None)
    assert append(state, 7, 0, 3, 2, offset=3) == (NONE, None)
    check = append(state, 7, 0, 6, 1, offset=5)  # sequence 5 is missing
    assert check.error == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_duplicate_of_last_five_batches_returns_original_offsets():
    state = PartitionProducerState()
    for i in range(6):
        assert append(state, 9, 0, i * 2, 2, offset=100 + i * 2).error == NONE
    # batch 1 (seq 2..3) is among the last five: a duplicate with its first offset
    dup = state.check(9, 0, 2, 1)
    assert dup.error == NONE and dup.duplicate is not None
    assert dup.duplicate.first_offset == 102 and dup.duplicate.last_offset == 103
    # batch 0 (seq 0..1) fell out of the five retained: not a duplicate but out of order
    old = state.check(9, 0, 0, 1)
    assert old.duplicate is None and old.error == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_stale_epoch_and_new_epoch_rules():
    state = PartitionProducerState()
    append(state, 3, 2, 0, 1, offset=0)
    assert state.check(3, 1, 1, 0).error == INVALID_PRODUCER_EPOCH
    assert state.check(3, 3, 5, 0).error == OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch must start at 0
    assert state.check(3, 3, 0, 0).error == NONE


def test_unknown_producer_accepts_any_sequence():
    state = PartitionProducerState()
    assert state.check(11, 0, 42, 0) == (NONE, None)


def test_rebuild_from_log_headers_restores_duplicates():
    batches = [build_batch([(b"k", b"v", [], 1000)] * 2, base_offset=o, producer_id=5, producer_epoch=0,
                           base_sequence=s) for o, s in ((0, 0), (2, 2))]
    plain = build_batch([(None, b"x", [], 1000)], base_offset=4)
    state = PartitionProducerState()
    state.rebuild([read_header(b) for b in batches + [plain]])
    dup = state.check(5, 0, 2, 1)
    assert dup.duplicate is not None and dup.duplicate.first_offset == 2
    assert state.check(5, 0, 4, 0).error == NONE
    assert state.check(5, 0, 5, 0).error == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_forget_before_drops_producers_whose_batches_were_deleted():
    state = PartitionProducerState()
    append(state, 1, 0, 0, 1, offset=0)
    append(state, 2, 0, 0, 1, offset=10)
    state.forget_before(5)
    assert 1 not in state.producers and 2 in state.producers


def test_producer_ids_never_reused_across_restarts():
    saved = []
    mgr = ProducerIdManager(lambda: 0, saved.append)
    ids = [mgr.next_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    assert saved == [ProducerIdManager.BLOCK_SIZE]
    # A new run starts after the reserved block even though only 3 ids were used.
    mgr2 = ProducerIdManager(lambda: saved[-1], saved.append)
    assert mgr2.next_id() == ProducerIdManager.BLOCK_SIZE
    assert saved[-1] == 2 * ProducerIdManager.BLOCK_SIZE


def test_manager_expires_idle_and_deleted_producers():
    from minikafka.broker.producer_state import ProducerStateManager

    mgr = ProducerStateManager()
    a = mgr.for_partition("t", 0)
    a.record(1, 0, 0, 0, first_offset=0, max_timestamp=1_000)  # idle since t=1000
    a.record(2, 0, 0, 0, first_offset=1, max_timestamp=90_000)
    a.record(3, 0, 0, 0, first_offset=2, max_timestamp=90_000)
    mgr.for_partition("gone", 0).record(4, 0, 0, 0, first_offset=0, max_timestamp=90_000)
    starts = {("t", 0): 2, ("gone", 0): None}
    removed = mgr.expire(lambda t, p: starts[(t, p)], now_ms=100_000, expiration_ms=50_000)
    # 1: idle too long (and below the log start); 2: its only batch (offset 1) is below the log start.
    assert set(mgr.for_partition("t", 0).producers) == {3}
    assert removed == 2
    assert mgr.for_partition("gone", 0).producers == {}
