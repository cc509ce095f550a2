"""Transactions V2 (KIP-890 part 2) in the coordinator: implicit adds, the epoch bump on every
end (markers carry the new epoch), retries of a lost EndTxn answer, abort outside a transaction,
producer id rotation at the last epoch, and V1 unchanged beside it."""

from __future__ import annotations

from minikafka.broker.txn.coordinator import SHORT_MAX
from minikafka.broker.txn.state import TxnState
from minikafka.protocol.errors import ErrorCode

from test_txn_coordinator import TP, TP2, Harness


def test_v2_commit_bumps_the_epoch_and_marks_with_it():
    h = Harness()
    _, pid, epoch = h.init()
    c = h.coordinator
    assert c.add_partitions("t", pid, epoch, [TP], client_tv=2) == ErrorCode.NONE  # Produce v12
    assert c.add_partitions("t", pid, epoch, [TP2], client_tv=2) == ErrorCode.NONE
    assert c.end_txn_v2("t", pid, epoch, True) == (ErrorCode.NONE, pid, epoch + 1)
    assert h.markers == [(pid, epoch + 1, True, (TP, TP2))]
    assert h.state().state is TxnState.COMPLETE_COMMIT and h.state().producer_epoch == epoch + 1
    # The old epoch is fenced for new work ...
    assert c.add_partitions("t", pid, epoch, [TP], client_tv=2) == ErrorCode.PRODUCER_FENCED
    # ... but a retry of the lost EndTxn answer gets it again; a contradicting retry does not.
    assert c.end_txn_v2("t", pid, epoch, True) == (ErrorCode.NONE, pid, epoch + 1)
    assert c.end_txn_v2("t", pid, epoch, False)[0] is ErrorCode.INVALID_TXN_STATE
    # The next transaction runs at the new epoch and ends with another bump.
    assert c.add_partitions("t", pid, epoch + 1, [TP], client_tv=2) == ErrorCode.NONE
    assert c.end_txn_v2("t", pid, epoch + 1, False) == (ErrorCode.NONE, pid, epoch + 2)
    assert h.markers[-1] == (pid, epoch + 2, False, (TP,))


def test_v2_abort_without_a_transaction_bumps_the_epoch_and_writes_no_marker():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.coordinator.end_txn_v2("t", pid, epoch, False) == (ErrorCode.NONE, pid, epoch + 1)
    assert h.markers == [] and h.state().state is TxnState.COMPLETE_ABORT
    # A commit with nothing open is still invalid.
    assert h.coordinator.end_txn_v2("t", pid, epoch + 1, True)[0] is ErrorCode.INVALID_TXN_STATE


def test_v2_end_at_the_last_epoch_rotates_the_producer_id():
    h = Harness()
    _, pid, _ = h.init()
    c = h.coordinator
    last = SHORT_MAX - 1
    h.state().producer_epoch = last  # as if 32766 transactions had ended
    assert c.add_partitions("t", pid, last, [TP], client_tv=2) == ErrorCode.NONE
    error, new_pid, new_epoch = c.end_txn_v2("t", pid, last, True)
    assert (error, new_epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    assert h.markers == [(pid, SHORT_MAX, True, (TP,))]  # the old id at the very last epoch
    # The lost answer's retry (old id, last epoch) gets the new id again.
    assert c.end_txn_v2("t", pid, last, True) == (ErrorCode.NONE, new_pid, 0)
    assert c.add_partitions("t", new_pid, 0, [TP], client_tv=2) == ErrorCode.NONE
    assert c.end_txn_v2("t", new_pid, 0, True) == (ErrorCode.NONE, new_pid, 1)


def test_v2_errors():
    h = Harness()
    _, pid, epoch = h.init()
    c = h.coordinator
    assert c.end_txn_v2("t", pid + 1, epoch, True)[0] is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn_v2("t", pid, epoch + 3, True)[0] is ErrorCode.PRODUCER_FENCED
    assert c.end_txn_v2("nobody", pid, epoch, True)[0] is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn_v2("", pid, epoch, True)[0] is ErrorCode.INVALID_REQUEST


def test_v1_keeps_its_epoch_beside_v2():
    h = Harness()
    _, pid, epoch = h.init("v1")
    c = h.coordinator
    assert c.add_partitions("v1", pid, epoch, [TP]) == ErrorCode.NONE
    assert c.end_txn("v1", pid, epoch, True) == ErrorCode.NONE
    assert h.markers == [(pid, epoch, True, (TP,))]
    assert h.state("v1").producer_epoch == epoch
    assert c.add_partitions("v1", pid, epoch, [TP]) == ErrorCode.NONE  # same epoch goes on


def test_verify_only_checks_without_adding():
    h = Harness()
    _, pid, epoch = h.init()
    c = h.coordinator
    assert c.add_partitions("t", pid, epoch, [TP]) == ErrorCode.NONE
    assert c.verify_partitions("t", pid, epoch, [TP, TP2]) == {TP: ErrorCode.NONE, TP2: ErrorCode.TRANSACTION_ABORTABLE}
    assert h.state().partitions == {TP}
    assert c.verify_partitions("t", pid, epoch + 1, [TP]) == {TP: ErrorCode.PRODUCER_FENCED}


def test_a_prepared_v2_end_is_finished_after_a_restart_with_the_bumped_epoch():
    h = Harness()
    _, pid, epoch = h.init()
    c = h.coordinator
    c.add_partitions("t", pid, epoch, [TP], client_tv=2)
    h.markers.clear()
    c.write_markers = lambda *a: (_ for _ in ()).throw(RuntimeError("crash before markers"))
    try:
        c.end_txn_v2("t", pid, epoch, True)
    except RuntimeError:
        pass
    assert h.state().state is TxnState.PREPARE_COMMIT and h.state().producer_epoch == epoch + 1
    h.restart()
    assert h.markers == [(pid, epoch + 1, True, (TP,))]
    assert h.state().state is TxnState.COMPLETE_COMMIT and h.state().producer_epoch == epoch + 1


def test_a_timed_out_v2_transaction_is_aborted_with_a_bump_the_producer_can_follow():
    """As Kafka 4.2 answers (seen on the wire): after the timeout's abort, the producer's commit with
    the old epoch gets INVALID_TXN_STATE and its abort the new epoch; it is not fenced."""
    h = Harness()
    _, pid, epoch = h.init(timeout=5000)
    c = h.coordinator
    assert c.add_partitions("t", pid, epoch, [TP], client_tv=2) == ErrorCode.NONE
    h.timer.advance(5000)
    assert h.state().state is TxnState.COMPLETE_ABORT and h.state().producer_epoch == epoch + 1
    assert h.markers == [(pid, epoch + 1, False, (TP,))]
    assert c.end_txn_v2("t", pid, epoch, True)[0] is ErrorCode.INVALID_TXN_STATE
    assert c.end_txn_v2("t", pid, epoch, False) == (ErrorCode.NONE, pid, epoch + 1)
    assert c.add_partitions("t", pid, epoch + 1, [TP], client_tv=2) == ErrorCode.NONE


def test_v2_state_survives_a_restart_in_value_v1():
    h = Harness()
    _, pid, epoch = h.init()
    c = h.coordinator
    c.add_partitions("t", pid, epoch, [TP], client_tv=2)
    assert c.end_txn_v2("t", pid, epoch, True) == (ErrorCode.NONE, pid, epoch + 1)
    h.restart()
    # The lost answer's retry is still recognised after the restart (value v1 holds what it needs).
    assert h.coordinator.end_txn_v2("t", pid, epoch, True) == (ErrorCode.NONE, pid, epoch + 1)


def test_value_v1_round_trip():
    from minikafka.broker.txn.records import TransactionLogValue, decode_value, encode_value

    value = TransactionLogValue(7, 3, 60000, 2, {"a": [2, 0], "b": [1]}, 111, 100, previous_producer_id=7,
                                next_producer_id=9, client_transaction_version=2, next_producer_epoch=0)
    raw = encode_value(value)
    assert raw[:2] == b"\x00\x01"
    back = decode_value(raw)
    assert back.partitions == {"a": [0, 2], "b": [1]}
    assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version,
            back.next_producer_epoch) == (7, 9, 2, 0)
    assert (back.last_update_timestamp_ms, back.start_timestamp_ms) == (111, 100)
    v1_defaults = decode_value(encode_value(TransactionLogValue(1, 0, 1000, 0, {}, 5, -1,
                                                                client_transaction_version=2)))
    assert (v1_defaults.previous_producer_id, v1_defaults.next_producer_id) == (-1, -1)
