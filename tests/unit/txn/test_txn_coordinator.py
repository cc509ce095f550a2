"""The transaction coordinator's state machine, driven with a FakeClock/MockTimer and in-memory logs."""

from __future__ import annotations

import pytest

from minikafka.broker.clock import MockTimer
from minikafka.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from minikafka.broker.txn.records import (
    TransactionLogKey,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from minikafka.broker.txn.shard import MemoryTxnLog
from minikafka.broker.txn.state import VALID_PREVIOUS, IllegalTransition, TxnState, check_transition
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import iter_records

TP = ("orders", 0)
TP2 = ("orders", 1)


class Harness:
    def __init__(self, logs=None, timer=None, **config):
        self.timer = timer or MockTimer()
        self.logs = logs if logs is not None else {}
        self.markers: list[tuple] = []
        self.next_pid = 1000
        self.coordinator = self.build(**config)

    def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def _markers(self, pid, epoch, commit, partitions, coordinator_epoch):
        self.markers.append((pid, epoch, commit, tuple(partitions)))

    def build(self, **config) -> TransactionCoordinator:
        c = TransactionCoordinator(4, lambda p: self.logs.setdefault(p, MemoryTxnLog()), self.timer,
                                   self.timer.clock, self._pid, self._markers, TxnConfig(**config))
        c.load()
        return c

    def restart(self, **config) -> TransactionCoordinator:
        self.coordinator.unload()
        self.coordinator = self.build(**config)
        return self.coordinator

    def init(self, tid="t", timeout=60000, pid=-1, epoch=-1):
        return self.coordinator.init_producer_id(tid, timeout, pid, epoch)

    def state(self, tid="t"):
        return self.coordinator.shard_for(tid).txns[tid]


def test_transition_table_matches_kafka():
    assert VALID_PREVIOUS[TxnState.PREPARE_COMMIT] == {TxnState.ONGOING}
    # Transactions V2 adds abort from Empty and from a completed transaction (an epoch bump).
    assert VALID_PREVIOUS[TxnState.PREPARE_ABORT] == {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY,
                                                      TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    assert VALID_PREVIOUS[TxnState.COMPLETE_COMMIT] == {TxnState.PREPARE_COMMIT}
    check_transition(TxnState.COMPLETE_ABORT, TxnState.ONGOING)
    with pytest.raises(IllegalTransition):
        check_transition(TxnState.EMPTY, TxnState.PREPARE_COMMIT)
    with pytest.raises(IllegalTransition):
        check_transition(TxnState.PREPARE_COMMIT, TxnState.COMPLETE_ABORT)
    assert [s.code for s in TxnState] == [0, 1, 2, 3, 4, 5, 6, 7]


def test_records_round_trip_in_kafkas_v0_layout():
    key = encode_key(TransactionLogKey("my-id"))
    assert key == b"\x00\x00\x00\x05my-id"
    value = TransactionLogValue(7, 3, 60000, 1, {"a": [2, 0]}, 111, 100)
    raw = encode_value(value)
    assert raw[:2] == b"\x00\x00" and len(raw) == 2 + 8 + 2 + 4 + 1 + 4 + (2 + 1 + 4 + 8) + 16
    back = decode_value(raw)
    assert back.partitions == {"a": [0, 2]} and back.producer_epoch == 3 and back.start_timestamp_ms == 100
    assert decode_key(key).transactional_id == "my-id"
    assert decode_value(None) is None


def test_init_commit_abort_and_markers():
    h = Harness()
    error, pid, epoch = h.init()
    assert (error, epoch) == (ErrorCode.NONE, 0)
    assert h.coordinator.add_partitions("t", pid, epoch, [TP, TP2]) == ErrorCode.NONE
    assert h.state().state is TxnState.ONGOING
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.NONE
    assert h.markers == [(pid, 0, True, (TP, TP2))]
    assert h.state().state is TxnState.COMPLETE_COMMIT and not h.state().partitions
    # an EndTxn retry after a lost response is answered NONE, a contradicting one INVALID_TXN_STATE
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.NONE
    assert h.coordinator.end_txn("t", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    assert h.coordinator.add_partitions("t", pid, epoch, [TP]) == ErrorCode.NONE
    assert h.coordinator.end_txn("t", pid, epoch, False) == ErrorCode.NONE
    assert h.markers[-1] == (pid, 0, False, (TP,))
    assert h.coordinator.end_txn("t", pid, epoch, False) == ErrorCode.NONE
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.INVALID_TXN_STATE
    assert h.coordinator.end_txn("t", pid + 1, epoch, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.coordinator.end_txn("nobody", pid, epoch, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_end_txn_in_empty_state_is_invalid():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.INVALID_TXN_STATE


def test_a_new_instance_fences_the_old_and_aborts_its_transaction():
    h = Harness()
    _, pid, epoch = h.init()
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    assert h.init() == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    assert h.markers == [(pid, 1, False, (TP,))]  # aborted under the bumped epoch
    assert h.state().state is TxnState.COMPLETE_ABORT
    assert h.init() == (ErrorCode.NONE, pid, 2)
    # the zombie is fenced everywhere
    assert h.coordinator.add_partitions("t", pid, epoch, [TP]) == ErrorCode.PRODUCER_FENCED
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert h.coordinator.validate_produce("t", pid, epoch, *TP) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_kip_360_bump_with_the_current_id_and_epoch_and_its_retry():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.init(pid=pid, epoch=epoch) == (ErrorCode.NONE, pid, 1)
    # the answer was lost: the same request again gets the same answer, no second bump
    assert h.init(pid=pid, epoch=epoch) == (ErrorCode.NONE, pid, 1)
    assert h.init(pid=pid + 5, epoch=0) == (ErrorCode.PRODUCER_FENCED, -1, -1)
    assert h.init(pid=pid, epoch=7) == (ErrorCode.PRODUCER_FENCED, -1, -1)


def test_an_exhausted_epoch_gets_a_new_producer_id():
    h = Harness()
    _, pid, _ = h.init()
    shard = h.coordinator.shard_for("t")
    shard.txns["t"] = h.state().copy(producer_epoch=32766)
    error, new_pid, epoch = h.init()
    assert error == ErrorCode.NONE and new_pid != pid and epoch == 0


def test_timeout_bounds_and_invalid_ids():
    h = Harness(max_timeout_ms=1000)
    assert h.init(timeout=1001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.coordinator.init_producer_id("", 100)[0] == ErrorCode.INVALID_REQUEST


def test_produce_verification():
    h = Harness()
    _, pid, epoch = h.init()
    assert h.coordinator.validate_produce("t", pid, epoch, *TP) == ErrorCode.INVALID_TXN_STATE
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    assert h.coordinator.validate_produce("t", pid, epoch, *TP) == ErrorCode.NONE
    assert h.coordinator.validate_produce("t", pid, epoch, *TP2) == ErrorCode.INVALID_TXN_STATE
    assert h.coordinator.validate_produce(None, pid, epoch, *TP) == ErrorCode.INVALID_TXN_STATE


def test_a_timed_out_transaction_is_aborted_with_an_epoch_bump_at_exactly_its_timeout():
    h = Harness()
    _, pid, epoch = h.init(timeout=5000)
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    h.timer.advance(4999)
    assert h.state().state is TxnState.ONGOING and not h.markers
    h.timer.advance(1)
    assert h.markers == [(pid, epoch + 1, False, (TP,))]
    assert h.state().state is TxnState.COMPLETE_ABORT and h.state().producer_epoch == epoch + 1
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert h.coordinator.add_partitions("t", pid, epoch, [TP]) == ErrorCode.PRODUCER_FENCED


def test_adding_partitions_does_not_extend_the_timeout():
    h = Harness()
    _, pid, epoch = h.init(timeout=5000)
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    h.timer.advance(3000)
    h.coordinator.add_partitions("t", pid, epoch, [TP2])
    h.timer.advance(2000)
    assert h.state().state is TxnState.COMPLETE_ABORT


def test_idle_transactional_ids_expire():
    h = Harness(id_expiration_ms=10000, remove_expired_interval_ms=1000)
    _, pid, epoch = h.init()
    h.init("busy")
    _, bpid, bepoch = h.init("busy")
    h.coordinator.add_partitions("busy", bpid, bepoch, [TP])  # Ongoing ids never expire
    h.timer.advance(9000)
    assert "t" in h.coordinator.shard_for("t").txns
    h.timer.advance(1000)
    assert "t" not in h.coordinator.shard_for("t").txns
    assert "busy" in h.coordinator.shard_for("busy").txns
    # the tombstone is in the log: a restart does not bring the id back
    h.restart(id_expiration_ms=10000, remove_expired_interval_ms=1000)
    assert "t" not in h.coordinator.shard_for("t").txns


def test_restart_replays_state_and_finishes_a_prepared_commit():
    h = Harness()
    _, pid, epoch = h.init()
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    # simulate a crash after the PrepareCommit record: make marker writing die once
    def crash(phase):
        if phase == "prepare":
            raise SystemExit("crash")
    h.coordinator.crash_hook = crash
    with pytest.raises(SystemExit):
        h.coordinator.end_txn("t", pid, epoch, True)
    assert h.markers == []
    c = h.restart()
    assert h.markers == [(pid, epoch, True, (TP,))]
    assert h.state().state is TxnState.COMPLETE_COMMIT
    assert c.end_txn("t", pid, epoch, True) == ErrorCode.NONE  # the client's retry


def test_restart_keeps_an_open_transaction_open_with_its_original_deadline():
    h = Harness()
    _, pid, epoch = h.init(timeout=5000)
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    h.timer.advance(3000)
    h.restart()
    assert h.state().state is TxnState.ONGOING and h.state().partitions == {TP}
    h.timer.advance(1999)
    assert not h.markers
    h.timer.advance(1)
    assert h.markers == [(pid, epoch + 1, False, (TP,))]


def test_state_records_are_in_the_log():
    h = Harness()
    _, pid, epoch = h.init()
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    h.coordinator.end_txn("t", pid, epoch, True)
    log = h.logs[h.coordinator.partition_for("t")]
    states = [decode_value(r.value).transaction_status for b in log.batches for r in iter_records(b)]
    assert states == [0, 1, 2, 4]


def test_loading_shard_answers_load_in_progress():
    h = Harness()
    shard = h.coordinator.shard_for("t")
    shard.loaded = False
    assert h.init()[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.add_partitions("t", 1, 0, [TP]) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_describe_and_list_with_filters():
    h = Harness()
    _, pid, epoch = h.init("a")
    h.init("b")
    h.coordinator.add_partitions("a", pid, epoch, [TP])
    d = h.coordinator.describe("a")
    assert d["transaction_state"] == "Ongoing" and d["topics"] == [{"topic": "orders", "partitions": [0]}]
    assert h.coordinator.describe("zz")["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed = h.coordinator.list(["Ongoing"])
    assert [t["transactional_id"] for t in listed["transaction_states"]] == ["a"]
    assert h.coordinator.list(["Bogus"])["unknown_state_filters"] == ["Bogus"]
    assert {t["transactional_id"] for t in h.coordinator.list([], [pid])["transaction_states"]} == {"a"}
    # duration filter: "a" started now; "b" has no transaction (start -1), which Kafka lets through
    assert [t["transactional_id"] for t in h.coordinator.list(["Ongoing"], [], 1000)["transaction_states"]] == []
    assert [t["transactional_id"] for t in h.coordinator.list([], [], 1000)["transaction_states"]] == ["b"]
    h.timer.advance(1001)
    assert [t["transactional_id"] for t in h.coordinator.list(["Ongoing"], [], 1000)["transaction_states"]] == ["a"]


def test_a_failed_marker_write_is_retried_by_the_clients_end_txn_retry():
    h = Harness()
    _, pid, epoch = h.init()
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    calls = []

    def flaky(*args):
        calls.append(args)
        if len(calls) == 1:
            raise OSError("disk full")
        h.markers.append(args[:3] + (tuple(args[3]),))

    h.coordinator.write_markers = flaky
    with pytest.raises(OSError):
        h.coordinator.end_txn("t", pid, epoch, True)
    assert h.state().state is TxnState.PREPARE_COMMIT
    assert h.coordinator.end_txn("t", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.state().state is TxnState.COMPLETE_COMMIT
    assert h.coordinator.end_txn("t", pid, epoch, True) == ErrorCode.NONE


def test_a_producer_fenced_by_its_timeout_cannot_recover_with_kip_360():
    h = Harness()
    _, pid, _ = h.init(timeout=1000)
    _, pid, epoch = h.init(timeout=1000, pid=pid, epoch=0)  # a KIP-360 bump: epoch 1, last epoch 0
    h.coordinator.add_partitions("t", pid, epoch, [TP])
    h.timer.advance(1000)
    assert h.state().producer_epoch == epoch + 1
    assert h.init(pid=pid, epoch=epoch) == (ErrorCode.PRODUCER_FENCED, -1, -1)
    assert h.init(pid=pid, epoch=epoch - 1) == (ErrorCode.PRODUCER_FENCED, -1, -1)
