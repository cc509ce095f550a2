"""Streams groups as one group type of the coordinator shard (broker/group/shard.py, "How a group type
plugs in").

``StreamsGroupManager`` keeps the groups and answers the streams APIs; this class is what the shard and
its offsets manager ask of a group type: its records, its ids, deletion, retention and the offset
checks.  OffsetCommit and TxnOffsetCommit into a streams group are checked per partition (an older
member epoch is accepted for the partitions the member still owned at that epoch, as Kafka 4.2 does),
so the shard routes those two requests to ``StreamsGroupManager.commit``/``txn_commit_error`` first; the
group-wide checks here are the ones the offsets manager makes for every type.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from minikafka.protocol.errors import ErrorCode

from .manager import StreamsGroupManager
from .records import StreamsGroupKey, decode_value


class StreamsGroupType:
    group_type = "streams"
    record_keys = (StreamsGroupKey,)

    def __init__(self, runtime, config=None) -> None:
        self.runtime = runtime
        self.manager = StreamsGroupManager(runtime, config)

    # -- records --------------------------------------------------------------------------------
    def decode_value(self, key: StreamsGroupKey, raw) -> Any:
        return decode_value(key.kind, raw)

    def replay(self, key: StreamsGroupKey, value) -> None:
        self.manager.replay(key, value)

    def on_loaded(self) -> None:
        self.manager.on_loaded()

    def unload(self) -> None:
        self.manager.unload()

    # -- the group-id namespace, admin and retention --------------------------------------------
    def group(self, group_id: str):
        return self.manager.groups.get(group_id)

    def list_groups(self, states: set[str], types: set[str]) -> list[dict]:
        return self.manager.list_groups(states, types)

    def validate_delete_group(self, group_id: str) -> Optional[ErrorCode]:
        return ErrorCode.NON_EMPTY_GROUP if self.manager.groups[group_id].members else None

    def group_tombstones(self, group_id: str) -> list:
        return self.manager.records_for_delete(group_id)

    def retention_candidates(self) -> Iterable[tuple[str, Any]]:
        return list(self.manager.groups.items())

    def deletable_without_offsets(self, group) -> bool:
        return not group.members

    # -- offsets.OffsetOwner --------------------------------------------------------------------
    def validate_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                               generation: int, api_version: int) -> Optional[ErrorCode]:
        error, _ = self.manager.validate_offset_commit(self.manager.groups[group_id], member_id, instance_id,
                                                       generation, False, api_version)
        return error

    def validate_txn_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                                   generation: int) -> Optional[ErrorCode]:
        error, _ = self.manager.validate_offset_commit(self.manager.groups[group_id], member_id, instance_id,
                                                       generation, True, 5)
        return error

    def validate_offset_fetch(self, group_id: str, member_id: Optional[str], member_epoch: int) -> Optional[ErrorCode]:
        return self.manager.validate_offset_fetch(self.manager.groups[group_id], member_id, member_epoch)

    def validate_offset_delete(self, group_id: str) -> tuple[Optional[ErrorCode], Any]:
        # Any state, as Kafka: the topics the topology reads keep their offsets (is_subscribed_to_topic).
        return None, self.manager.groups[group_id]
