"""Transaction states, with Apache Kafka's names and status codes (``TransactionState``).

Each state says how the coordinator answers requests while a transactional id is in it ("action")
and what moves it on ("transition").  ``VALID_PREVIOUS`` is the one table of allowed moves;
``check_transition`` refuses any other, so an impossible move fails loudly instead of being written
to ``__transaction_state``.
"""

from __future__ import annotations

from enum import Enum


class TxnState(Enum):
    EMPTY = ("Empty", 0)
    """No transaction open (new id, or after InitProducerId).

    action: InitProducerId bumps the epoch; AddPartitions/AddOffsets open a transaction;
            EndTxn answers INVALID_TXN_STATE.
    transition: a partition is added -> Ongoing; idle for transactional.id.expiration.ms -> Dead.
    """

    ONGOING = ("Ongoing", 1)
    """A transaction is open; its partitions may hold data of the producer.

    action: AddPartitions/AddOffsets add more; EndTxn prepares commit or abort; InitProducerId fences the
            producer (epoch bump) and aborts the transaction, answering CONCURRENT_TRANSACTIONS.
    transition: EndTxn -> PrepareCommit/PrepareAbort; transaction.timeout.ms passed -> PrepareEpochFence
                -> PrepareAbort.
    """

    PREPARE_COMMIT = ("PrepareCommit", 2)
    """The commit is decided and durable; markers are being written.

    action: EndTxn(commit) retries and InitProducerId answer CONCURRENT_TRANSACTIONS; EndTxn(abort)
            INVALID_TXN_STATE.  After a restart the coordinator writes the markers again.
    transition: every marker written -> CompleteCommit.
    """

    PREPARE_ABORT = ("PrepareAbort", 3)
    """The abort is decided and durable; markers are being written (as PrepareCommit, for abort)."""

    COMPLETE_COMMIT = ("CompleteCommit", 4)
    """The last transaction committed.  action: EndTxn(commit) retry answers NONE; else as Empty."""

    COMPLETE_ABORT = ("CompleteAbort", 5)
    """The last transaction aborted.  action: EndTxn(abort) retry answers NONE; else as Empty."""

    DEAD = ("Dead", 6)
    """The transactional id expired and is being removed (a tombstone follows)."""

    PREPARE_EPOCH_FENCE = ("PrepareEpochFence", 7)
    """In memory only: the producer epoch is being bumped to fence the current producer before its
    open transaction is aborted (timeout, or InitProducerId from a new instance)."""

    def __init__(self, label: str, code: int) -> None:
        self.label = label
        self.code = code

    @classmethod
    def from_code(cls, code: int) -> "TxnState":
        for state in cls:
            if state.code == code:
                return state
        raise ValueError(f"unknown transaction status {code}")

    @classmethod
    def from_label(cls, label: str) -> "TxnState | None":
        for state in cls:
            if state.label == label:
                return state
        return None


VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # Transactions V2: an abort from Empty or a completed transaction bumps the epoch (KIP-890).
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY,
                                       TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransition(AssertionError):
    pass


def check_transition(current: TxnState, target: TxnState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalTransition(f"transaction state {current.label} -> {target.label} is not allowed")
