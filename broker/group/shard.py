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

from .classic_manager import ClassicGroupManager
from .consumer import ConsumerConfig, ConsumerGroupsMixin
from .migration import MigrationMixin
from .offsets import OffsetAndMetadata, OffsetManager
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
from .result import CoordinatorResult, Record, join_error, sync_error
from .result import empty as _empty
from ..clock import Clock, Timer

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


class CoordinatorShard(ConsumerGroupsMixin, MigrationMixin):
    """The runtime (append, replay, load), offsets, transactional offsets, admin and retention here; classic
    membership and rebalances in ``classic_rebalance.ClassicRebalanceMixin``; KIP-848 consumer groups in
    ``consumer.ConsumerGroupsMixin``; classic members inside consumer groups and conversions between the
    two in ``migration.MigrationMixin``."""

    def __init__(self, partition: int, log_: OffsetsLog, timer: Timer, clock: Clock,
                 config: GroupConfig | None = None, consumer_config: ConsumerConfig | None = None) -> None:
        self.partition = partition
        self.log = log_
        self.timer = timer
        self.clock = clock
        self.config = config or GroupConfig()
        self.classic = ClassicGroupManager(self, self.config)
        self.offsets = OffsetManager(self, self.config, self)
        self.consumer_groups = {}
        self.consumer_config = consumer_config or ConsumerConfig()
        self.topic_metadata = dict  # replaced by the coordinator with the broker's topic image
        self.loaded = False

    # == runtime: append, replay, load ===========================================================

    def now(self) -> int:
        return self.clock.now_ms()

    _now = now

    def group_type(self, group_id: str) -> Optional[str]:
        if group_id in self.consumer_groups:
            return "consumer"
        return "classic" if group_id in self.groups else None

    def execute(self, result: CoordinatorResult) -> Any:
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

    _execute = execute

    def replay(self, offset: int, producer_id: int, key, value) -> None:
        """Apply one record: the single path for both loading and live offset/tombstone records."""
        if isinstance(key, OffsetCommitKey):
            self.offsets.replay(offset, producer_id, key, value)
        elif isinstance(key, GroupMetadataKey):
            self.classic.replay(key, value)
        elif isinstance(key, ConsumerGroupKey):
            self.replay_consumer(key, value)

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
                self.offsets.replay_end_transaction(header.producer_id,
                                                    control_record_type(record) == CONTROL_COMMIT)
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
            else:
                value = decode_group_metadata_value(record.value)
            decoded.append((record.offset, key, value))
        for offset, key, value in decoded:
            self.replay(offset, header.producer_id, key, value)

    def _on_loaded(self) -> None:
        self.classic.on_loaded()
        self._rearm_consumer_timers()
        self.loaded = True
        self._schedule_cleanup()

    def unload(self) -> None:
        """Stop serving: answer parked requests with NOT_COORDINATOR and cancel every timer."""
        self.loaded = False
        self.timer.cancel(("cleanup", self.partition))
        self.classic.unload()
        self._cancel_consumer_timers()

    # == transitional: what the consumer and migration mixins still ask of the shard ===========

    @property
    def groups(self):
        return self.classic.groups

    def _remove_group(self, group_id: str) -> None:
        self.classic.remove_group(group_id)

    def _group_metadata_record(self, group, assignment):
        return self.classic.group_metadata_record(group, assignment)

    def _reschedule_heartbeat(self, group, member) -> None:
        self.classic._reschedule_heartbeat(group, member)

    def _prepare_rebalance(self, group):
        return self.classic.prepare_rebalance(group)

    # == timers ==================================================================================

    def schedule(self, key, delay_ms: int, operation: Callable[[], CoordinatorResult]) -> None:
        self.timer.schedule(key, delay_ms, lambda: self.execute(operation()))

    _schedule = schedule

    def _schedule_cleanup(self) -> None:
        def run() -> CoordinatorResult:
            result = self._cleanup_group_metadata()
            self._schedule_cleanup()
            return result
        self._schedule(("cleanup", self.partition), self.config.offsets_retention_check_interval_ms, run)

    # == offsets (OffsetManager), and what it asks of the group types =======================

    def commit_offsets(self, request: dict, api_version: int) -> dict:
        return self._execute(self.offsets.commit(request, api_version))

    def txn_commit_offsets(self, request: dict, api_version: int) -> dict:
        """TxnOffsetCommit: the offsets stay pending until the producer's transaction ends."""
        return self._execute(self.offsets.txn_commit(request, api_version))

    def fetch_offsets(self, group_id: str, topics: Optional[list[dict]], require_stable: bool = False,
                      member_id: Optional[str] = None, member_epoch: int = -1) -> dict:
        return self.offsets.fetch(group_id, topics, require_stable, member_id, member_epoch)

    def delete_offsets(self, request: dict) -> dict:
        return self._execute(self.offsets.delete(request))

    def has_pending_transaction(self, producer_id: int) -> bool:
        return self.offsets.has_pending_transaction(producer_id)

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int = 0) -> None:
        """Write the producer's COMMIT/ABORT marker to this partition and apply it (the transaction
        coordinator calls this, as Kafka's WriteTxnMarkers does for __consumer_offsets partitions)."""
        batch = build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch, self._now())
        set_partition_leader_epoch(batch, 0, 0)  # the leader's epoch, as every appended batch (Kafka 4.2)
        self.log.append(batch)
        self.offsets.replay_end_transaction(producer_id, commit)

    def offset_owner(self, group_id: str):
        return self if group_id in self.consumer_groups else self.classic

    def ensure_group(self, group_id: str) -> None:
        if self.group_type(group_id) is None:
            # Offsets committed without group membership: a "simple" group, Empty, no protocol type.
            self.classic.create_group(group_id)

    def ensure_classic_group(self, group_id: str) -> None:
        if self.classic.group(group_id) is None:
            self.classic.create_group(group_id)

    def validate_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                               generation: int, api_version: int) -> Optional[ErrorCode]:
        consumer = self.consumer_groups[group_id]
        code = self.validate_consumer_offset_commit(consumer, member_id, generation, api_version=api_version)
        if code is not None:
            return code
        if member_id in consumer.members:
            self._schedule_session(group_id, member_id)  # a commit keeps the session alive, as in Kafka
        return None

    def validate_txn_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                                   generation: int) -> Optional[ErrorCode]:
        # A KIP-848 group: the generation field carries the member epoch.
        return self.validate_consumer_offset_commit(self.consumer_groups[group_id], member_id, generation,
                                                    transactional=True)

    def validate_offset_fetch(self, group_id: str, member_id: Optional[str], member_epoch: int) -> Optional[ErrorCode]:
        return self.validate_consumer_offset_fetch(self.consumer_groups[group_id], member_id, member_epoch)

    def validate_offset_delete(self, group_id: str):
        return ErrorCode.GROUP_ID_NOT_FOUND, None

    # == admin: describe, list, delete ===========================================================

    def describe_group(self, group_id: str) -> dict:
        return self.classic.describe_group(group_id)

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[dict]:
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = self.classic.list_groups(states, types)
        for consumer in self.consumer_groups.values():
            if states and str(consumer.state).lower() not in states:
                continue
            if types and "consumer" not in types:
                continue
            out.append({"group_id": consumer.group_id, "protocol_type": "consumer",
                        "group_state": str(consumer.state), "group_type": "consumer"})
        return out

    def delete_group(self, group_id: str) -> ErrorCode:
        return self._execute(self._delete_group(group_id))

    def _delete_group(self, group_id: str) -> CoordinatorResult:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                return _empty(ErrorCode.NON_EMPTY_GROUP)
            records: list[Record] = self.offsets.tombstones(group_id)
            records.extend(self.consumer_group_records_for_delete(group_id))
            return CoordinatorResult(records, ErrorCode.NONE, on_appended=lambda error: error)
        error = self.classic.validate_delete_group(group_id)
        if error is not None:
            return _empty(error)
        records = self.offsets.tombstones(group_id) + self.classic.group_tombstones(group_id)
        return CoordinatorResult(records, ErrorCode.NONE, on_appended=lambda error: error)

    # == retention ===============================================================================

    def cleanup_group_metadata(self) -> None:
        """Expire offsets past retention and delete groups left empty with no offsets."""
        self._execute(self._cleanup_group_metadata())

    def _cleanup_group_metadata(self) -> CoordinatorResult:
        records: list[Record] = []
        for group_id, group in self.classic.retention_candidates():
            if self.offsets.expire(group_id, group, records) and self.classic.deletable_without_offsets(group):
                records.extend(self.classic.group_tombstones(group_id))
        for group_id, consumer in list(self.consumer_groups.items()):
            # As Kafka: an empty consumer group whose offsets have all expired is deleted.
            if self.offsets.expire(group_id, consumer, records) and not consumer.members:
                records.extend(self.consumer_group_records_for_delete(group_id))
        return CoordinatorResult(records)

    # == classic-protocol requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ==================

    def join_group(self, request: dict, *, api_version: int, client_id: str, client_host: str,
                   respond) -> None:
        consumer = self.consumer_groups.get(request["group_id"])
        if consumer is not None:
            if consumer.members:
                # Online migration: classic members live in a non-empty consumer group (``migration``).
                session_timeout = request["session_timeout_ms"]
                if not (self.config.min_session_timeout_ms <= session_timeout <= self.config.max_session_timeout_ms):
                    respond(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request["member_id"]))
                    return
                self._execute(self._classic_join_to_consumer_group(consumer, request, api_version, client_id or "",
                                                                   client_host, respond))
                return
            # An empty consumer group becomes a classic group whatever the migration policy (its offsets stay).
            log.info("group %s: empty consumer group converted to a classic group", request["group_id"])
            self._execute(CoordinatorResult(self.consumer_group_records_for_delete(request["group_id"])))
        self.execute(self.classic.join(request, api_version, client_id or "", client_host, respond))

    def sync_group(self, request: dict, respond) -> None:
        consumer = self.consumer_groups.get(request["group_id"])
        if consumer is not None:
            self.execute(self._classic_sync_to_consumer_group(consumer, request, respond))
            return
        self.execute(self.classic.sync(request, respond))

    def heartbeat(self, request: dict) -> dict:
        consumer = self.consumer_groups.get(request["group_id"])
        if consumer is not None:
            return self.execute(self._classic_heartbeat_to_consumer_group(consumer, request))
        return self.execute(self.classic.heartbeat(request))

    def leave_group(self, group_id: str, members: list[dict]) -> dict:
        """``members``: [{member_id, group_instance_id}]; the response has one entry per member."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            return self.execute(self._classic_leave_to_consumer_group(consumer, members))
        return self.execute(self.classic.leave(group_id, members))

    # == test control (broker/control.py) ========================================================

    def expire_member_now(self, group_id: str, member_id: str | None = None) -> list[str]:
        return self.classic.expire_member_now(group_id, member_id)

    def force_rebalance(self, group_id: str) -> bool:
        return self.classic.force_rebalance(group_id)


__all__ = ["CoordinatorShard", "CoordinatorResult", "GroupConfig", "MemoryOffsetsLog", "OffsetsLog",
           "OffsetAndMetadata", "join_error", "sync_error"]
