"""What a share partition needs from the share coordinator: its durable state, read and written whole.

The shape follows Kafka's share-group state RPCs (Initialize/Read/Write/Delete/ReadSummary
ShareGroupState) and the ``ShareSnapshot``/``ShareUpdate`` records behind them: per
(group, topic id, partition) a state epoch, a leader epoch, the share-partition start offset and
the state batches of the in-flight records after it.  Only AVAILABLE, ACKNOWLEDGED and ARCHIVED
are ever persisted (an acquisition lock is not durable: after a restart an acquired record is
available again, with the delivery count it had).

The calls are synchronous: the share coordinator appends to its local ``__share_group_state``
partition before it returns, so a write that returned NONE survives a crash.  Errors are Kafka's
codes, as the RPCs would carry them (``UNKNOWN_TOPIC_OR_PARTITION`` for a partition never
initialized, ``FENCED_STATE_EPOCH`` for a write with an older state epoch, ...).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from minikafka.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's share-partition record states, with the ids the share-state records carry."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True)
class StateBatch:
    """Records first_offset..last_offset (inclusive) in one state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass
class ShareState:
    """The durable state of one share partition.  ``start_offset`` -1: initialized, not started."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch] = field(default_factory=list)


@dataclass
class ReadResult:
    error: ErrorCode
    state: ShareState | None = None


class SharePersister(Protocol):
    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   state_epoch: int, start_offset: int) -> ErrorCode:
        """Create (or reset, with a newer state epoch) the state of one share partition."""

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> ReadResult:
        """The whole state, for a share partition that is being loaded."""

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ReadResult:
        """State epoch, leader epoch and start offset only (``state_batches`` empty): for the admin APIs."""

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: ShareState) -> ErrorCode:
        """Replace the state after a change (acknowledgement, release, archive, start-offset move)."""

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        """Forget the state (DeleteGroups, DeleteShareGroupOffsets)."""


class MemoryPersister:
    """A persister that keeps states in a dict: for unit tests of share partitions (a "restart" is a
    new share partition over the same ``MemoryPersister``)."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], ShareState] = {}

    def initialize(self, group_id, topic_id, partition, state_epoch, start_offset) -> ErrorCode:
        key = (group_id, topic_id, partition)
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        self.states[key] = ShareState(state_epoch, -1, start_offset, [])
        return ErrorCode.NONE

    def read(self, group_id, topic_id, partition, leader_epoch) -> ReadResult:
        state = self.states.get((group_id, topic_id, partition))
        if state is None:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return ReadResult(ErrorCode.NONE, ShareState(state.state_epoch, state.leader_epoch,
                                                     state.start_offset, list(state.state_batches)))

    def read_summary(self, group_id, topic_id, partition) -> ReadResult:
        result = self.read(group_id, topic_id, partition, -1)
        if result.state is not None:
            result.state.state_batches = []
        return result

    def write(self, group_id, topic_id, partition, state) -> ErrorCode:
        key = (group_id, topic_id, partition)
        old = self.states.get(key)
        if old is not None and state.state_epoch < old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        self.states[key] = ShareState(state.state_epoch, state.leader_epoch, state.start_offset,
                                      list(state.state_batches))
        return ErrorCode.NONE

    def delete(self, group_id, topic_id, partition) -> ErrorCode:
        self.states.pop((group_id, topic_id, partition), None)
        return ErrorCode.NONE
