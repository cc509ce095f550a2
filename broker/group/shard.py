"""A coordinator shard: the group state machine over one ``__consumer_offsets`` partition.

Every group whose id hashes to partition P lives in shard P, which owns that partition's log.  The shard is
a replicated-state-machine in Kafka's sense (``CoordinatorShard``): an operation computes a
``CoordinatorResult(records, response)``; ``_execute`` appends the records as one batch to the partition and
applies them through ``replay()``, the same function that rebuilds the shard from its log on start
(``load()``).  A response is released only after its records are in the log, so a committed offset is
acknowledged only once it is durable there.

Classic group metadata records are the exception to "replay what you append", as in Kafka
(``CoordinatorResult(..., replayRecords=false)``): the live ``ClassicGroup`` already is what the record
describes, and rebuilding it from the record would drop its parked requests and timers.  Those records
are replayed only when loading.

The shard is sans-IO and synchronous.  Time comes from ``clock.now_ms()``, timeouts from ``timer``, and a
parked JoinGroup/SyncGroup request is a ``respond(response_dict)`` callback completed later by another
request or a timeout.  Response dicts are version-agnostic; ``apis`` fits them to each version.

The logic follows Kafka's ``GroupMetadataManager``/``OffsetMetadataManager``; method names echo Kafka's so
the two can be compared.  By concern: this module holds the runtime, offsets, transactional offsets,
admin and retention; ``classic_rebalance`` the classic protocol's membership and rebalances; ``consumer``
KIP-848 consumer groups; ``migration`` the conversions between the two and classic members of consumer
groups; ``result`` what an operation returns.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional, Protocol

from minikafka.protocol.errors import ErrorCode, KafkaError, ProtocolError
from minikafka.protocol.records import (
    CONTROL_COMMIT,
    build_batch,
    build_control_batch,
    control_record_type,
    iter_records,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
)

from .classic import ClassicGroup, GroupError
from .classic_rebalance import ClassicRebalanceMixin, _hb_key, _join_key, _sync_key
from .consumer import ConsumerConfig, ConsumerGroupsMixin
from .member import Member
from .migration import MigrationMixin
from .records import (
    ConsumerGroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_consumer_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_key,
    encode_value,
)
from .result import CoordinatorResult, Record, every_partition, join_error, sync_error
from .result import empty as _empty
from .state import GroupState
from ..clock import Clock, Timer
from ..streams.manager import StreamsConfig, StreamsGroupManager
from ..streams.records import StreamsGroupKey, decode_value as decode_streams_value

log = logging.getLogger("minikafka.group")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 0
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    max_size: int = 2147483647
    offsets_retention_ms: int = 10080 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_broker_config(cls, config) -> "GroupConfig":
        def get(name: str, default: int) -> int:
            try:
                value = config.get(name)
            except Exception:  # a setting this broker does not know (e.g. offset.metadata.max.bytes)
                return default
            return default if value is None else int(value)

        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=get("group.max.session.timeout.ms", 1800000),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", 0),
            max_size=get("group.max.size", 2147483647),
            offsets_retention_ms=get("offsets.retention.minutes", 10080) * 60 * 1000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms", 600000),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", 4096),
        )


class OffsetsLog(Protocol):
    """What a shard needs from its ``__consumer_offsets`` partition."""

    def append(self, batch: bytearray) -> int:
        """Append one record batch; returns the offset assigned to its first record."""

    def iter_batches(self) -> Iterator[bytes]:
        """Every batch in the partition, oldest first (base offsets already assigned)."""


class MemoryOffsetsLog:
    """An in-memory partition, for unit tests (and to simulate a restart: keep it, build a new shard)."""

    def __init__(self) -> None:
        self.batches: list[bytearray] = []
        self.next_offset = 0
        self.fail_with: Optional[Exception] = None

    def append(self, batch: bytearray) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        header = read_header(batch)
        base = self.next_offset
        set_base_offset(batch, 0, base)
        self.batches.append(batch)
        self.next_offset = base + header.last_offset_delta + 1
        return base

    def iter_batches(self) -> Iterator[bytes]:
        return iter(list(self.batches))


@dataclass
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: none (retention applies)
    record_offset: int = -1


def _append_error(exc: BaseException) -> ErrorCode:
    """Kafka's appendGroupMetadataErrorToResponseError, for our storage's failures."""
    if isinstance(exc, KafkaError):
        code = ErrorCode(exc.code)
        if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if code is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return ErrorCode.NOT_COORDINATOR
        if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                    ErrorCode.INVALID_FETCH_SIZE):
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return code
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


class CoordinatorShard(ClassicRebalanceMixin, ConsumerGroupsMixin, MigrationMixin):
    """The runtime (append, replay, load), offsets, transactional offsets, admin and retention here; classic
    membership and rebalances in ``classic_rebalance.ClassicRebalanceMixin``; KIP-848 consumer groups in
    ``consumer.ConsumerGroupsMixin``; classic members inside consumer groups and conversions between the
    two in ``migration.MigrationMixin``."""

    def __init__(self, partition: int, log_: OffsetsLog, timer: Timer, clock: Clock,
                 config: GroupConfig | None = None, consumer_config: ConsumerConfig | None = None,
                 streams_config: StreamsConfig | None = None) -> None:
        self.partition = partition
        self.log = log_
        self.timer = timer
        self.clock = clock
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Offsets of open transactions: producer id -> group -> topic -> partition -> offset.  They become
        # committed offsets when the producer's COMMIT marker is written to this partition.
        self.pending_txn_offsets: dict[int, dict[str, dict[str, dict[int, OffsetAndMetadata]]]] = {}
        self.consumer_groups = {}
        self.consumer_config = consumer_config or ConsumerConfig()
        self.topic_metadata = dict  # replaced by the coordinator with the broker's topic image
        self.streams = StreamsGroupManager(self, streams_config)  # KIP-1071 streams groups (broker/streams)
        self.loaded = False

    # == runtime: append, replay, load ===========================================================

    def _now(self) -> int:
        return self.clock.now_ms()

    def _execute(self, result: CoordinatorResult) -> Any:
        response = result.response
        error: Optional[ErrorCode] = None
        if result.records:
            now = self._now()
            batch = build_batch([(encode_key(k), encode_value(v), [], now) for k, v in result.records],
                                producer_id=result.producer_id, producer_epoch=result.producer_epoch,
                                transactional=result.producer_id >= 0)
            try:
                base = self.log.append(batch)
            except Exception as exc:  # storage failure: the operation fails, state is untouched
                error = _append_error(exc)
                log.warning("__consumer_offsets-%d: append failed (%s): %r", self.partition, error.name, exc)
            else:
                if result.replay:
                    for i, (key, value) in enumerate(result.records):
                        self.replay(base + i, result.producer_id, key, value)
        if result.on_appended is not None:
            replaced = result.on_appended(error)
            if replaced is not None:
                response = replaced
        return response

    def replay(self, offset: int, producer_id: int, key, value) -> None:
        """Apply one record: the single path for both loading and live offset/tombstone records."""
        if isinstance(key, OffsetCommitKey):
            self._replay_offset(offset, producer_id, key, value)
        elif isinstance(key, GroupMetadataKey):
            self._replay_group(key, value)
        elif isinstance(key, ConsumerGroupKey):
            self.replay_consumer(key, value)
        elif isinstance(key, StreamsGroupKey):
            self.streams.replay(key, value)

    def load(self) -> None:
        """Rebuild the shard from its partition, then start serving (COORDINATOR_LOAD_IN_PROGRESS before).

        A batch that does not decode (a flipped bit on disk) is skipped with one error line: the
        shard's other groups must not stay unavailable because of it."""
        for batch in self.log.iter_batches():
            try:
                self._load_batch(batch)
            except (ProtocolError, struct.error, ValueError) as exc:
                log.error("__consumer_offsets-%d: skipping an undecodable batch while loading: %s",
                          self.partition, exc)
        self._on_loaded()

    def _load_batch(self, batch) -> None:
        header = read_header(batch)
        records = list(iter_records(batch))  # decode all first: a bad batch is skipped whole
        if header.is_control:
            for record in records:
                self.replay_end_transaction(header.producer_id, control_record_type(record) == CONTROL_COMMIT)
            return
        decoded = []
        for record in records:
            key = decode_key(record.key)
            if key is None:
                continue
            if isinstance(key, OffsetCommitKey):
                value = decode_offset_commit_value(record.value)
            elif isinstance(key, ConsumerGroupKey):
                value = decode_consumer_value(key.kind, record.value)
            elif isinstance(key, StreamsGroupKey):
                value = decode_streams_value(key.kind, record.value)
            else:
                value = decode_group_metadata_value(record.value)
            decoded.append((record.offset, key, value))
        for offset, key, value in decoded:
            self.replay(offset, header.producer_id, key, value)

    def _on_loaded(self) -> None:
        for group in self.groups.values():
            for member in group.all_members():
                self._reschedule_heartbeat(group, member)
        self._rearm_consumer_timers()
        self.streams.on_loaded()
        self.loaded = True
        self._schedule_cleanup()

    def unload(self) -> None:
        """Stop serving: answer parked requests with NOT_COORDINATOR and cancel every timer."""
        self.loaded = False
        self.timer.cancel(("cleanup", self.partition))
        for group in self.groups.values():
            for member in group.all_members():
                group.complete_join(member, join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                group.complete_sync(member, sync_error(ErrorCode.NOT_COORDINATOR))
                self.timer.cancel(_hb_key(group.group_id, member.member_id))
            for member_id in group.pending_join_members:
                self.timer.cancel(_hb_key(group.group_id, member_id))
            self.timer.cancel(_join_key(group.group_id))
            self.timer.cancel(_sync_key(group.group_id))
        self._cancel_consumer_timers()
        self.streams.unload()

    def _replay_offset(self, offset: int, producer_id: int, key: OffsetCommitKey,
                       value: Optional[OffsetCommitValue]) -> None:
        if value is not None:
            if key.group not in self.groups and key.group not in self.consumer_groups \
                    and key.group not in self.streams.groups:
                # Offsets committed without group membership: a "simple" group, Empty, no protocol type.
                self._create_group(key.group)
            om = OffsetAndMetadata(
                committed_offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                commit_timestamp=value.commit_timestamp, expire_timestamp=value.expire_timestamp,
                record_offset=offset)
            if producer_id >= 0:
                pending = self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(key.group, {})
                pending.setdefault(key.topic, {})[key.partition] = om
                return
            topics = self.offsets.setdefault(key.group, {})
            topics.setdefault(key.topic, {})[key.partition] = om
        else:
            topics = self.offsets.get(key.group)
            if topics is None:
                return
            partitions = topics.get(key.topic)
            if partitions is not None:
                partitions.pop(key.partition, None)
                if not partitions:
                    del topics[key.topic]
            if not topics:
                del self.offsets[key.group]

    def _replay_group(self, key: GroupMetadataKey, value: Optional[GroupMetadataValue]) -> None:
        group_id = key.group
        if value is None:
            self._remove_group(group_id)
            return
        previous = self.groups.get(group_id)
        if previous is not None:
            self._cancel_group_timers(previous)
        group = ClassicGroup(
            group_id, self._now,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            current_state_timestamp=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
        )
        for m in value.members:
            group.add(Member(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout, protocol_type=value.protocol_type,
                protocols=[(value.protocol, m.subscription)], assignment=m.assignment))
        # add() makes the first member leader when none is set; the record's leader wins.
        group.leader_id = value.leader if value.members else None
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group

    def _create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self._now)
        self.groups[group_id] = group
        return group

    def _remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            self._cancel_group_timers(group)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        self.timer.cancel(_join_key(group.group_id))
        self.timer.cancel(_sync_key(group.group_id))
        for member_id in list(group.members) + list(group.pending_join_members):
            self.timer.cancel(_hb_key(group.group_id, member_id))

    # == timers ==================================================================================

    def _schedule(self, key, delay_ms: int, operation: Callable[[], CoordinatorResult]) -> None:
        self.timer.schedule(key, delay_ms, lambda: self._execute(operation()))

    def _schedule_cleanup(self) -> None:
        def run() -> CoordinatorResult:
            result = self._cleanup_group_metadata()
            self._schedule_cleanup()
            return result
        self._schedule(("cleanup", self.partition), self.config.offsets_retention_check_interval_ms, run)

    # == offsets =================================================================================

    def commit_offsets(self, request: dict, api_version: int) -> dict:
        return self._execute(self._commit(request, api_version))

    def _commit(self, request: dict, api_version: int) -> CoordinatorResult:
        group_id = request["group_id"]
        generation = request.get("generation_id_or_member_epoch", -1)
        member_id = request.get("member_id", "")
        instance_id = request.get("group_instance_id")
        topics = request.get("topics") or []

        if group_id in self.streams.groups:
            return self.streams.commit(self.streams.groups[group_id], request, topics, api_version, self._commit_records)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            code = self.validate_consumer_offset_commit(consumer, member_id, generation, api_version=api_version)
            if code is not None:
                return _empty(every_partition(topics, code))
            if member_id in consumer.members:
                self._schedule_session(group_id, member_id)  # a commit keeps the session alive, as in Kafka
            return self._commit_records(group_id, request, topics)
        group = self.groups.get(group_id)
        try:
            if group is None:
                if generation >= 0:
                    # v9 says what happened; older versions keep their historical answer.
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9
                                     else ErrorCode.ILLEGAL_GENERATION)
                group = self._create_group(group_id)
            self._validate_offset_commit(group, member_id, instance_id, generation)
        except GroupError as exc:
            return _empty(every_partition(topics, exc.code))

        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE) and group.has_member(member_id):
            # A classic member's commits keep its session alive.
            self._reschedule_heartbeat(group, group.member(member_id))
        return self._commit_records(group_id, request, topics)

    def _commit_records(self, group_id: str, request: dict, topics: list) -> CoordinatorResult:
        now = self._now()
        retention = request.get("retention_time_ms", -1)
        expire = now + retention if retention is not None and retention != -1 else -1
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

        return CoordinatorResult(records, response, replay=True, on_appended=on_appended)

    def _validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: Optional[str],
                                generation: int) -> None:
        if group.is_in_state(GroupState.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and group.is_in_state(GroupState.EMPTY):
            return  # admin tools and standalone consumers commit into an Empty group
        if generation >= 0 or member_id != "" or instance_id is not None:
            group.validate_member(member_id, instance_id)
            if generation != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
        else:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in_state(GroupState.COMPLETING_REBALANCE):
            # The member knows the new generation from its JoinGroup response but has no assignment yet.
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS)

    def fetch_offsets(self, group_id: str, topics: Optional[list[dict]], require_stable: bool = False,
                      member_id: Optional[str] = None, member_epoch: int = -1) -> dict:
        """``topics``: [{name, partition_indexes}] or None for every committed offset of the group.

        With ``require_stable`` a partition that has an offset in an open transaction answers
        UNSTABLE_OFFSET_COMMIT (retriable), so the consumer waits for the transaction to end.
        """
        consumer = self.consumer_groups.get(group_id)
        code = None if consumer is None else self.validate_consumer_offset_fetch(consumer, member_id, member_epoch)
        if group_id in self.streams.groups:
            code = self.streams.validate_offset_fetch(self.streams.groups[group_id], member_id, member_epoch)
        if code is not None:
            return {"group_id": group_id, "error_code": code, "topics": []}
        group_offsets = self.offsets.get(group_id, {})

        def entry(topic: str, index: int, om: Optional[OffsetAndMetadata]) -> dict:
            if require_stable and self.pending_txn_offsets and self._has_pending_offset(group_id, topic, index):
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

    def delete_offsets(self, request: dict) -> dict:
        return self._execute(self._delete_offsets(request))

    def _delete_offsets(self, request: dict) -> CoordinatorResult:
        group_id = request["group_id"]
        group = self.groups.get(group_id) or self.streams.groups.get(group_id)  # streams: any state, as Kafka
        if group is None or (group_id in self.groups and group.is_in_state(GroupState.DEAD)):
            return _empty({"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "topics": []})
        if group_id in self.groups and group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                           GroupState.COMPLETING_REBALANCE) and not group.uses_consumer_protocol():
            return _empty({"error_code": ErrorCode.NON_EMPTY_GROUP, "topics": []})
        group_offsets = self.offsets.get(group_id, {})
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

    # == transactional offsets ==================================================================

    def txn_commit_offsets(self, request: dict, api_version: int) -> dict:
        """TxnOffsetCommit: the offsets stay pending until the producer's transaction ends."""
        return self._execute(self._txn_commit(request, api_version))

    def _txn_commit(self, request: dict, api_version: int) -> CoordinatorResult:
        group_id = request["group_id"]
        generation = request.get("generation_id", -1)
        member_id = request.get("member_id", "")
        instance_id = request.get("group_instance_id")
        topics = request.get("topics") or []

        consumer = self.consumer_groups.get(group_id)
        try:
            if group_id in self.streams.groups:  # a streams group: member epochs, as Kafka 4.2 checks them
                code = self.streams.txn_commit_error(self.streams.groups[group_id], request, topics)
                if code is not None:
                    raise GroupError(code)
            elif consumer is not None:
                # A KIP-848 group: the generation field carries the member epoch.
                code = self.validate_consumer_offset_commit(consumer, member_id, generation, transactional=True)
                if code is not None:
                    raise GroupError(code)
            else:
                self._validate_txn_commit(group_id, generation, member_id, instance_id)
        except GroupError as exc:
            return _empty(every_partition(topics, exc.code))

        now = self._now()
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
                    metadata=metadata or "", commit_timestamp=now)))
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

        return CoordinatorResult(records, response, on_appended=on_appended,
                                 producer_id=request["producer_id"], producer_epoch=request["producer_epoch"])

    def _validate_txn_commit(self, group_id: str, generation: int, member_id: str,
                             instance_id: Optional[str]) -> None:
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)
            group = self._create_group(group_id)
        if group.is_in_state(GroupState.DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not (generation < 0 and group.is_in_state(GroupState.EMPTY)) \
                and (generation >= 0 or member_id != "" or instance_id is not None):
            # Older TxnOffsetCommit versions carry no member: those are accepted in any state.
            group.validate_member(member_id, instance_id)
            if generation != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION)

    def has_pending_transaction(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offsets

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int = 0) -> None:
        """Write the producer's COMMIT/ABORT marker to this partition and apply it (the transaction
        coordinator calls this, as Kafka's WriteTxnMarkers does for __consumer_offsets partitions)."""
        batch = build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch, self._now())
        set_partition_leader_epoch(batch, 0, 0)  # the leader's epoch, as every appended batch (Kafka 4.2)
        self.log.append(batch)
        self.replay_end_transaction(producer_id, commit)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending or not commit:
            return
        for group_id, topics in pending.items():
            if group_id not in self.groups:
                self._create_group(group_id)
            for topic, partitions in topics.items():
                for index, om in partitions.items():
                    current = self.offsets.get(group_id, {}).get(topic, {}).get(index)
                    # A plain commit written after the transactional one wins.
                    if current is None or current.record_offset < om.record_offset:
                        self.offsets.setdefault(group_id, {}).setdefault(topic, {})[index] = om

    def _has_pending_offset(self, group_id: str, topic: str, partition: int) -> bool:
        return any(partition in by_group.get(group_id, {}).get(topic, {})
                   for by_group in self.pending_txn_offsets.values())

    def _has_open_transaction(self, group_id: str) -> bool:
        return any(group_id in by_group for by_group in self.pending_txn_offsets.values())

    # == admin: describe, list, delete ===========================================================

    def describe_group(self, group_id: str) -> dict:
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": str(GroupState.DEAD),
                    "protocol_type": "", "protocol_data": "", "members": []}
        stable = group.is_in_state(GroupState.STABLE)
        members = []
        for m in group.all_members():
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                # Metadata only once the generation is settled; the (last) assignment always, as
                # Kafka 4.2 describes members of a group that is rebalancing.
                "member_metadata": m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                "member_assignment": m.assignment,
            })
        return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": str(group.state),
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "",
                "members": members}

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[dict]:
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = []
        for group in self.groups.values():
            if states and str(group.state).lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": str(group.state), "group_type": "classic"})
        for consumer in self.consumer_groups.values():
            if states and str(consumer.state).lower() not in states:
                continue
            if types and "consumer" not in types:
                continue
            out.append({"group_id": consumer.group_id, "protocol_type": "consumer",
                        "group_state": str(consumer.state), "group_type": "consumer"})
        out.extend(self.streams.list_groups(states, types))
        return out

    def delete_group(self, group_id: str) -> ErrorCode:
        return self._execute(self._delete_group(group_id))

    def _delete_group(self, group_id: str) -> CoordinatorResult:
        streams = self.streams.groups.get(group_id)
        if streams is not None:
            if streams.members:
                return _empty(ErrorCode.NON_EMPTY_GROUP)
            records = [(OffsetCommitKey(group_id, topic, index), None)
                       for topic, partitions in self.offsets.get(group_id, {}).items() for index in partitions]
            return CoordinatorResult(records + self.streams.records_for_delete(group_id), ErrorCode.NONE,
                                     on_appended=lambda error: error)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                return _empty(ErrorCode.NON_EMPTY_GROUP)
            records: list[Record] = [(OffsetCommitKey(group_id, topic, index), None)
                                     for topic, partitions in self.offsets.get(group_id, {}).items()
                                     for index in partitions]
            records.extend(self.consumer_group_records_for_delete(group_id))
            return CoordinatorResult(records, ErrorCode.NONE, on_appended=lambda error: error)
        group = self.groups.get(group_id)
        if group is None or group.is_in_state(GroupState.DEAD):
            return _empty(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            return _empty(ErrorCode.NON_EMPTY_GROUP)
        records: list[Record] = [(OffsetCommitKey(group_id, topic, index), None)
                                 for topic, partitions in self.offsets.get(group_id, {}).items()
                                 for index in partitions]
        records.append((GroupMetadataKey(group_id), None))
        return CoordinatorResult(records, ErrorCode.NONE, on_appended=lambda error: error)

    # == retention ===============================================================================

    def cleanup_group_metadata(self) -> None:
        """Expire offsets past retention and delete groups left empty with no offsets."""
        self._execute(self._cleanup_group_metadata())

    def _cleanup_group_metadata(self) -> CoordinatorResult:
        records: list[Record] = []
        for group_id in list(self.groups):
            if self._cleanup_expired_offsets(group_id, records):
                group = self.groups[group_id]
                # Kafka deletes any Empty group here; we spare one with members between the two steps of
                # a KIP-394 join, which would otherwise get UNKNOWN_MEMBER_ID on its second JoinGroup.
                if group.is_in_state(GroupState.EMPTY) and not group.pending_join_members:
                    records.append((GroupMetadataKey(group_id), None))
        for group_id, consumer in list(self.consumer_groups.items()):
            # As Kafka: an empty consumer group whose offsets have all expired is deleted.
            if self._cleanup_expired_offsets(group_id, records) and not consumer.members:
                records.extend(self.consumer_group_records_for_delete(group_id))
        for group_id, streams in list(self.streams.groups.items()):
            if self._cleanup_expired_offsets(group_id, records) and not streams.members:
                records.extend(self.streams.records_for_delete(group_id))
        return CoordinatorResult(records)

    def _cleanup_expired_offsets(self, group_id: str, records: list[Record]) -> bool:
        """Append tombstones for expired offsets; True when the group has no offsets left."""
        group_offsets = self.offsets.get(group_id)
        if not group_offsets:
            return not self._has_open_transaction(group_id)
        group = self.groups.get(group_id) or self.consumer_groups.get(group_id) or self.streams.groups[group_id]
        base = group.offset_expiration_base()
        if base is None:
            return False
        now = self._now()
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

    # == records =================================================================================

    def _group_metadata_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> Record:
        members = []
        for m in group.all_members():
            if group.protocol_name is None:
                raise AssertionError("non-empty group metadata needs a protocol")
            members.append(MemberMetadata(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name), assignment=assignment[m.member_id],
                group_instance_id=m.group_instance_id))
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id,
            protocol=group.protocol_name, leader=group.leader_id,
            current_state_timestamp=-1 if group.current_state_timestamp is None else group.current_state_timestamp,
            members=members)
        return (GroupMetadataKey(group.group_id), value)


def _offset_partition(index: int, om: Optional[OffsetAndMetadata]) -> dict:
    if om is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": ErrorCode.NONE}
    return {"partition_index": index, "committed_offset": om.committed_offset,
            "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": ErrorCode.NONE}


__all__ = ["CoordinatorShard", "CoordinatorResult", "GroupConfig", "MemoryOffsetsLog", "OffsetsLog",
           "OffsetAndMetadata", "join_error", "sync_error"]
