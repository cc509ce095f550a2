"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit and their retention.

The shard's offsets manager (Kafka's ``OffsetMetadataManager``).  It owns every committed offset of
the shard's groups and the offsets of open transactions, and replays ``OffsetCommitKey`` records and
transaction markers.  It knows no group type: whether a member may commit or fetch is asked of the
group's manager through ``OffsetOwner`` (``GroupDirectory.offset_owner(group_id)`` picks it: the
manager that holds the group id, or the classic manager for an id no group type holds, as Kafka
stores offsets of "simple" classic groups).

Operations return a ``CoordinatorResult``; the shard executes it (append, replay, response).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional, Protocol

from minikafka.protocol.errors import ErrorCode

from .records import OffsetCommitKey, OffsetCommitValue
from .result import CoordinatorResult, Record, Runtime, every_partition
from .result import empty as _empty


@dataclass
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: none (retention applies)
    record_offset: int = -1


class OffsetOwner(Protocol):
    """What a group type answers about offsets of its groups (Kafka's ``Group.validateOffset*``).

    Each returns the error the request gets, or None when it may go on; a commit by a live member
    also keeps its session alive, as in Kafka."""

    def validate_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                               generation: int, api_version: int) -> Optional[ErrorCode]: ...

    def validate_txn_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                                   generation: int) -> Optional[ErrorCode]: ...

    def validate_offset_fetch(self, group_id: str, member_id: Optional[str],
                              member_epoch: int) -> Optional[ErrorCode]: ...

    def validate_offset_delete(self, group_id: str) -> tuple[Optional[ErrorCode], Any]:
        """(error, None) or (None, the group): the group says which topics it is subscribed to."""


class GroupDirectory(Protocol):
    """The shard's group-id namespace, as the offsets manager sees it."""

    def offset_owner(self, group_id: str) -> OffsetOwner: ...

    def ensure_group(self, group_id: str) -> None:
        """Offsets of an id no group type holds make a "simple" (Empty, protocol-less) classic group."""


class OffsetManager:
    def __init__(self, runtime: Runtime, config, groups: GroupDirectory) -> None:
        self.runtime = runtime
        self.config = config  # GroupConfig: offset_metadata_max_bytes, offsets_retention_ms
        self.groups = groups
        # group -> topic -> partition -> offset
        self.committed: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Offsets of open transactions: producer id -> group -> topic -> partition -> offset.  They become
        # committed offsets when the producer's COMMIT marker is written to this partition.
        self.pending: dict[int, dict[str, dict[str, dict[int, OffsetAndMetadata]]]] = {}

    # == replay ==================================================================================

    def replay(self, offset: int, producer_id: int, key: OffsetCommitKey, value: Optional[OffsetCommitValue]) -> None:
        if value is not None:
            self.groups.ensure_group(key.group)
            om = OffsetAndMetadata(
                committed_offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                commit_timestamp=value.commit_timestamp, expire_timestamp=value.expire_timestamp,
                record_offset=offset)
            if producer_id >= 0:
                pending = self.pending.setdefault(producer_id, {}).setdefault(key.group, {})
                pending.setdefault(key.topic, {})[key.partition] = om
                return
            topics = self.committed.setdefault(key.group, {})
            topics.setdefault(key.topic, {})[key.partition] = om
        else:
            topics = self.committed.get(key.group)
            if topics is None:
                return
            partitions = topics.get(key.topic)
            if partitions is not None:
                partitions.pop(key.partition, None)
                if not partitions:
                    del topics[key.topic]
            if not topics:
                del self.committed[key.group]

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        pending = self.pending.pop(producer_id, None)
        if not pending or not commit:
            return
        for group_id, topics in pending.items():
            self.groups.ensure_group(group_id)
            for topic, partitions in topics.items():
                for index, om in partitions.items():
                    current = self.committed.get(group_id, {}).get(topic, {}).get(index)
                    # A plain commit written after the transactional one wins.
                    if current is None or current.record_offset < om.record_offset:
                        self.committed.setdefault(group_id, {}).setdefault(topic, {})[index] = om

    # == OffsetCommit ============================================================================

    def commit(self, request: dict, api_version: int, validated: bool = False) -> CoordinatorResult:
        """``validated``: the group type has already checked the request (streams groups check each partition)."""
        group_id = request["group_id"]
        topics = request.get("topics") or []
        code = None if validated else self.groups.offset_owner(group_id).validate_offset_commit(
            group_id, request.get("member_id", ""), request.get("group_instance_id"),
            request.get("generation_id_or_member_epoch", -1), api_version)
        if code is not None:
            return _empty(every_partition(topics, code))
        retention = request.get("retention_time_ms", -1)
        now = self.runtime.now()
        expire = now + retention if retention is not None and retention != -1 else -1
        return self._commit_records(group_id, topics, now, expire)

    def _commit_records(self, group_id: str, topics: list, now: int, expire: int, **txn) -> CoordinatorResult:
        records: list[Record] = []
        response_topics = []
        for t in topics:
            parts = []
            for p in t["partitions"]:
                metadata = p.get("committed_metadata")
                if metadata is not None and len(metadata) > self.config.offset_metadata_max_bytes:
                    parts.append({"partition_index": p["partition_index"],
                                  "error_code": ErrorCode.OFFSET_METADATA_TOO_LARGE})
                    continue
                parts.append({"partition_index": p["partition_index"], "error_code": ErrorCode.NONE})
                records.append((OffsetCommitKey(group_id, t["name"], p["partition_index"]), OffsetCommitValue(
                    offset=p["committed_offset"], leader_epoch=p.get("committed_leader_epoch", -1),
                    metadata=metadata or "", commit_timestamp=now, expire_timestamp=expire)))
            response_topics.append({"name": t["name"], "partitions": parts})
        response = {"topics": response_topics}

        def on_appended(error: Optional[ErrorCode]) -> Optional[dict]:
            if error is None:
                return None
            for t in response_topics:
                for p in t["partitions"]:
                    if p["error_code"] == ErrorCode.NONE:
                        p["error_code"] = error
            return response

        return CoordinatorResult(records, response, on_appended=on_appended, **txn)

    # == TxnOffsetCommit =========================================================================

    def txn_commit(self, request: dict, api_version: int) -> CoordinatorResult:
        """The offsets stay pending until the producer's transaction ends (``replay_end_transaction``)."""
        group_id = request["group_id"]
        topics = request.get("topics") or []
        code = self.groups.offset_owner(group_id).validate_txn_offset_commit(
            group_id, request.get("member_id", ""), request.get("group_instance_id"),
            request.get("generation_id", -1))
        if code is not None:
            return _empty(every_partition(topics, code))
        return self._commit_records(group_id, topics, self.runtime.now(), -1, producer_id=request["producer_id"],
                                    producer_epoch=request["producer_epoch"])

    def has_pending_transaction(self, producer_id: int) -> bool:
        return producer_id in self.pending

    def _has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        return any(partition in by_group.get(group_id, {}).get(topic, {}) for by_group in self.pending.values())

    def _has_open_transaction(self, group_id: str) -> bool:
        return any(group_id in by_group for by_group in self.pending.values())

    # == OffsetFetch =============================================================================

    def fetch(self, group_id: str, topics: Optional[list[dict]], require_stable: bool = False,
              member_id: Optional[str] = None, member_epoch: int = -1) -> dict:
        """``topics``: [{name, partition_indexes}] or None for every committed offset of the group.

        With ``require_stable`` a partition that has an offset in an open transaction answers
        UNSTABLE_OFFSET_COMMIT (retriable), so the consumer waits for the transaction to end.
        """
        code = self.groups.offset_owner(group_id).validate_offset_fetch(group_id, member_id, member_epoch)
        if code is not None:
            return {"group_id": group_id, "error_code": code, "topics": []}
        group_offsets = self.committed.get(group_id, {})

        def entry(topic: str, index: int, om: Optional[OffsetAndMetadata]) -> dict:
            if require_stable and self.pending and self._has_pending_offset(group_id, topic, index):
                return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                        "metadata": "", "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT}
            return _offset_partition(index, om)

        out = []
        if topics is None:
            for name, partitions in group_offsets.items():
                out.append({"name": name, "partitions": [
                    entry(name, index, om) for index, om in sorted(partitions.items())]})
        else:
            for t in topics:
                partitions = group_offsets.get(t["name"], {})
                out.append({"name": t["name"], "partitions": [
                    entry(t["name"], index, partitions.get(index)) for index in t["partition_indexes"]]})
        return {"group_id": group_id, "topics": out, "error_code": ErrorCode.NONE}

    # == OffsetDelete, DeleteGroups ==============================================================

    def delete(self, request: dict) -> CoordinatorResult:
        group_id = request["group_id"]
        code, group = self.groups.offset_owner(group_id).validate_offset_delete(group_id)
        if code is not None:
            return _empty({"error_code": code, "topics": []})
        group_offsets = self.committed.get(group_id, {})
        records: list[Record] = []
        topics = []
        for t in request.get("topics") or []:
            name = t["name"]
            parts = []
            subscribed = group.is_subscribed_to_topic(name)
            for p in t["partitions"]:
                index = p["partition_index"]
                if subscribed:
                    parts.append({"partition_index": index, "error_code": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC})
                    continue
                if index in group_offsets.get(name, {}):
                    records.append((OffsetCommitKey(group_id, name, index), None))
                parts.append({"partition_index": index, "error_code": ErrorCode.NONE})
            topics.append({"name": name, "partitions": parts})
        response = {"error_code": ErrorCode.NONE, "topics": topics}

        def on_appended(error: Optional[ErrorCode]) -> Optional[dict]:
            return None if error is None else {"error_code": error, "topics": []}

        return CoordinatorResult(records, response, on_appended=on_appended)

    def tombstones(self, group_id: str) -> list[Record]:
        """A tombstone for every committed offset of the group (DeleteGroups)."""
        return [(OffsetCommitKey(group_id, topic, index), None)
                for topic, partitions in self.committed.get(group_id, {}).items() for index in partitions]

    # == retention ===============================================================================

    def expire(self, group_id: str, group, records: list[Record]) -> bool:
        """Append tombstones for the group's expired offsets; True when the group has none left.

        ``group`` says from when retention counts (``offset_expiration_base``, None: not now) and
        which topics it is subscribed to (their offsets never expire)."""
        group_offsets = self.committed.get(group_id)
        if not group_offsets:
            return not self._has_open_transaction(group_id)
        base = group.offset_expiration_base()
        if base is None:
            return False
        now = self.runtime.now()
        retention = self.config.offsets_retention_ms
        all_expired = True
        for topic, partitions in group_offsets.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for index, om in partitions.items():
                expired = (now >= om.expire_timestamp if om.expire_timestamp >= 0
                           else now - base(om) >= retention)
                if expired and not self._has_pending_offset(group_id, topic, index):
                    records.append((OffsetCommitKey(group_id, topic, index), None))
                else:
                    all_expired = False
        return all_expired and not self._has_open_transaction(group_id)

    def group_ids(self) -> Iterable[str]:
        return self.committed.keys()


def _offset_partition(index: int, om: Optional[OffsetAndMetadata]) -> dict:
    if om is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": ErrorCode.NONE}
    return {"partition_index": index, "committed_offset": om.committed_offset,
            "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": ErrorCode.NONE}
