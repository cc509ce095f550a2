"""The ``SharePersister`` of broker/share/persister.py over the share coordinator.

Each call is one share-group-state operation on the coordinator, synchronous: its record is appended to
the local ``__share_group_state`` partition (and so reaches the OS, as every append does) before the
call returns, so what a share partition was told is written survives a kill -9.

Errors are Kafka's, as the RPCs carry them, with one translation the contract asks for: a partition
that was never initialized reads as UNKNOWN_TOPIC_OR_PARTITION (the RPC says INVALID_REQUEST, "Read
operation on uninitialized share partition not allowed.").

A write combines with the state so far as Kafka's share coordinator combines it (see ``batches``): per
offset the higher (delivery count, delivery state) wins and batches before the start offset go, so a
share partition may write only the batches that changed or all of them.  The number of offsets at or
after the start offset whose delivery is complete (ACKNOWLEDGED or ARCHIVED), which Kafka 4.2 keeps for
the lag of DescribeShareGroupOffsets, is computed here from the state written.
"""

from __future__ import annotations

import uuid

from minikafka.protocol.errors import ErrorCode

from ..persister import ReadResult, RecordState, ShareState, StateBatch
from .coordinator import ShareCoordinator
from .records import Batch, StateKey

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _to_record_state(value: int):
    try:
        return RecordState(value)
    except ValueError:
        return value


def delivery_complete_count(start_offset: int, batches) -> int:
    if start_offset < 0:
        return -1
    return sum(b.last_offset - max(b.first_offset, start_offset) + 1 for b in batches
               if b.delivery_state in _DONE and b.last_offset >= start_offset)


class CoordinatorPersister:
    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator

    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                   start_offset: int) -> ErrorCode:
        return self.coordinator.initialize(StateKey(group_id, topic_id, partition), state_epoch, start_offset).error

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> ReadResult:
        key = StateKey(group_id, topic_id, partition)
        result = self.coordinator.read(key, leader_epoch)
        if result.error is ErrorCode.INVALID_REQUEST and key not in self.coordinator.shard_for(key).states:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if result.error is not ErrorCode.NONE:
            return ReadResult(result.error)
        s = result.state
        leader = self.coordinator.shard_for(key).leader_epochs.get(key, s.leader_epoch)
        return ReadResult(ErrorCode.NONE, ShareState(
            s.state_epoch, leader, s.start_offset,
            [StateBatch(b.first_offset, b.last_offset, _to_record_state(b.delivery_state), b.delivery_count)
             for b in s.batches]))

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ReadResult:
        key = StateKey(group_id, topic_id, partition)
        result = self.coordinator.read_summary(key)
        if result.error is not ErrorCode.NONE:
            return ReadResult(result.error)
        s = result.state
        if s.start_offset == -1 and key not in self.coordinator.shard_for(key).states:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return ReadResult(ErrorCode.NONE, ShareState(s.state_epoch, s.leader_epoch, s.start_offset, []))

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: ShareState) -> ErrorCode:
        batches = [Batch(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count)
                   for b in state.state_batches]
        return self.coordinator.write(StateKey(group_id, topic_id, partition), state.state_epoch,
                                      state.leader_epoch, state.start_offset,
                                      delivery_complete_count(state.start_offset, state.state_batches),
                                      batches).error

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        return self.coordinator.delete(StateKey(group_id, topic_id, partition)).error
