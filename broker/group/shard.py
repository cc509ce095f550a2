"""A coordinator shard: the group state machine over one ``__consumer_offsets`` partition.

Every group whose id hashes to partition P lives in shard P, which owns that partition's log.  The shard is
a replicated-state-machine in Kafka's sense (``CoordinatorShard``): an operation computes a
``CoordinatorResult(records, response)``; ``execute`` appends the records as one batch to the partition and
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

Composition (Kafka's ``GroupCoordinatorShard`` over ``GroupMetadataManager``/``OffsetMetadataManager``):

* the shard itself is the **runtime** (``result.Runtime``): ``now``, ``execute``, ``schedule`` (a keyed
  timeout whose operation's result is executed), ``replay``/``load``/``unload``, retention, the broker's
  topic image (``topic_metadata``), and the **group-id namespace**: ``group_type(group_id)`` is the one
  place that says which group type holds an id (one id, one group type);
* ``offsets``   - ``offsets.OffsetManager``: committed and transactional offsets;
* ``classic``   - ``classic_manager.ClassicGroupManager``: classic groups;
* ``consumer``  - ``consumer.ConsumerGroupManager``: KIP-848 consumer groups;
* ``migration`` - ``migration.GroupMigration``: the only part that touches both the classic and the
  consumer manager (conversions, classic members of consumer groups), by calling their methods.

The public methods below are the request entry points ``apis`` calls; each routes to one manager and
executes what it returns.

How a group type plugs in (share groups, streams groups)
--------------------------------------------------------
A group type is one manager object, built in ``__init__`` with the shard as its ``Runtime`` and added to
``group_managers``; the shard then routes its records and asks it about its groups.  The manager provides
(``GroupManager`` below; ``ClassicGroupManager`` and ``ConsumerGroupManager`` are the models):

* ``group_type`` - its name ("share", "streams"): ListGroups' ``group_type`` and ``group_type(id)``'s answer;
* ``record_keys`` - the key classes of its records (``records.decode_key`` must return them for their key
  versions); ``decode_value(key, raw)`` decodes a value (None for a tombstone), ``replay(key, value)``
  applies one record, live and while loading alike.  Records it appends go through ``execute``;
* ``on_loaded()`` after ``load()`` (arm the timers of loaded groups: timers are not state) and
  ``unload()`` (answer parked requests with NOT_COORDINATOR, cancel its timers).  Timers are
  ``runtime.schedule(key, delay_ms, operation)`` with tuple keys whose first item is unique to the manager
  (classic: "heartbeat"/"join"/"sync", consumer: "cg-..."; the shard's own: ("cleanup", partition));
* ``group(group_id)`` - the lookup by id that makes the namespace (``group_type``), DeleteGroups and
  retention work; ``list_groups(states, types)`` (lower-case filters; skip itself when ``types`` is set
  and lacks its name), ``validate_delete_group(id)`` (an ErrorCode, or None when DeleteGroups may delete
  it; asked for an id it holds, the classic manager also for an id nobody holds) and
  ``group_tombstones(id)`` (the records that delete it);
  ``retention_candidates()`` and ``deletable_without_offsets(group)`` (a group whose offsets have all
  expired is deleted when this says so).  A group object answers ``offset_expiration_base()`` and
  ``is_subscribed_to_topic(topic)`` for the offsets manager (return None/False when not applicable);
* the four ``offsets.OffsetOwner`` methods (``validate_offset_commit``, ``validate_txn_offset_commit``,
  ``validate_offset_fetch``, ``validate_offset_delete``): the offsets manager asks the type that holds the
  id.  A type without committed offsets answers them with its error (Kafka: GROUP_ID_NOT_FOUND);
* its own request entry points (e.g. ``heartbeat(request, ...) -> CoordinatorResult``,
  ``describe(group_id)``) and one routing line per API in this class: ``self.execute(self.share.heartbeat(...))``.
  Before creating a group it asks ``runtime.group_type(id)``: an id another type holds gets that API's
  error (consumer groups: GROUP_ID_NOT_FOUND, "Group X is not a consumer group.").

DescribeGroups describes classic groups only; ``apis`` names another type's id with ``group_type``.

The routing lines of a new type, all in this class (its config comes through ``GroupCoordinator``)::

    self.share = ShareGroupManager(self, share_config)                  # __init__
    self.group_managers = (self.classic, self.consumer, self.share)     # __init__: records, ListGroups,
                                                                         # DeleteGroups, retention, load
    def share_group_heartbeat(self, request, **kw) -> dict:             # one per API
        return self.execute(self.share.heartbeat(request, **kw))
"""

from __future__ import annotations

import logging
import struct
import uuid
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
from .consumer import ConsumerConfig, ConsumerGroupManager
from .member import Respond
from .migration import GroupMigration
from .offsets import OffsetAndMetadata, OffsetManager, OffsetOwner
from .records import OffsetCommitKey, decode_key, decode_offset_commit_value, encode_key, encode_value
from .result import CoordinatorResult, Record, every_partition, join_error, sync_error
from .result import empty as _empty
from ..clock import Clock, Timer
from ..share.group_manager import ShareConfig, ShareGroupManager
from ..streams.manager import StreamsConfig
from ..streams.plug import StreamsGroupType
from ..share.records import ShareGroupKey, decode_value as decode_share_value

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


class GroupManager(Protocol):
    """One group type in a shard (see the module docstring); ``offsets.OffsetOwner`` besides."""

    group_type: str
    record_keys: tuple[type, ...]

    def decode_value(self, key: Any, raw: Any) -> Any: ...

    def replay(self, key: Any, value: Any) -> None: ...

    def on_loaded(self) -> None: ...

    def unload(self) -> None: ...

    def group(self, group_id: str) -> Any: ...

    def list_groups(self, states: set[str], types: set[str]) -> list[dict]: ...

    def validate_delete_group(self, group_id: str) -> Optional[ErrorCode]: ...

    def group_tombstones(self, group_id: str) -> list[Record]: ...

    def retention_candidates(self) -> Iterable[tuple[str, Any]]: ...

    def deletable_without_offsets(self, group: Any) -> bool: ...


class CoordinatorShard:
    """The runtime of one ``__consumer_offsets`` partition and the routing to its managers."""

    def __init__(self, partition: int, log_: OffsetsLog, timer: Timer, clock: Clock,
                 config: GroupConfig | None = None, consumer_config: ConsumerConfig | None = None,
                 share_config: ShareConfig | None = None, share_hooks=None,
                 streams_config: StreamsConfig | None = None) -> None:
        self.partition = partition
        self.log = log_
        self.timer = timer
        self.clock = clock
        self.config = config or GroupConfig()
        self.topic_metadata: Callable[[], dict] = dict  # replaced by the coordinator with the broker's topic image
        self.loaded = False
        self.offsets = OffsetManager(self, self.config, self)
        self.classic = ClassicGroupManager(self, self.config)
        self.consumer = ConsumerGroupManager(self, consumer_config or ConsumerConfig())
        self.migration = GroupMigration(self, self.classic, self.consumer)
        self.consumer.migration = self.migration
        # Every group type; ListGroups and retention go through them in this order.
        streams = StreamsGroupType(self, streams_config)  # KIP-1071 streams groups (broker/streams)
        self.streams = streams.manager
        self.group_managers: tuple[GroupManager, ...] = (self.classic, self.consumer, streams)
        self._record_owners: dict[type, Any] = {OffsetCommitKey: self.offsets}
        for manager in self.group_managers:
            for key_class in manager.record_keys:
                self._record_owners[key_class] = manager
        # Share groups (KIP-932, broker/share): their own manager, which runs its own appends through
        # ``execute`` (a delete first removes the share state through the persister) and is asked here
        # about its ids; the other types' ids are closed to it through ``_manager``.
        self.share = ShareGroupManager(self.execute, timer, clock, lambda: self.topic_metadata(), share_config,
                                       share_hooks, lambda g: self._manager(g) is not None)

    # == runtime =================================================================================

    def now(self) -> int:
        return self.clock.now_ms()

    def execute(self, result: CoordinatorResult) -> Any:
        response = result.response
        error: Optional[ErrorCode] = None
        if result.records:
            now = self.now()
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

    def schedule(self, key, delay_ms: int, operation: Callable[[], CoordinatorResult]) -> None:
        self.timer.schedule(key, delay_ms, lambda: self.execute(operation()))

    def group_type(self, group_id: str) -> Optional[str]:
        """Which group type holds ``group_id`` (None: none does).  One id is one group type: every
        manager decides with this before it creates a group."""
        # Newest type first: only a failed append can leave a second holder for a moment (a new, empty
        # consumer group is installed before its records), and the newer type answers for the id then.
        if self.share.has_group(group_id):
            return "share"
        for manager in reversed(self.group_managers):
            if manager.group(group_id) is not None:
                return manager.group_type
        return None

    def _manager(self, group_id: str) -> Optional[GroupManager]:
        for manager in reversed(self.group_managers):
            if manager.group(group_id) is not None:
                return manager
        return None

    # == replay, load, unload ====================================================================

    def replay(self, offset: int, producer_id: int, key, value) -> None:
        """Apply one record: the single path for both loading and live records, routed by key type."""
        if isinstance(key, OffsetCommitKey):
            self.offsets.replay(offset, producer_id, key, value)
            return
        if isinstance(key, ShareGroupKey):
            self.share.replay(key, value)
            return
        owner = self._record_owners.get(type(key))
        if owner is not None:
            owner.replay(key, value)

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
        for manager in self.group_managers:
            manager.on_loaded()
        self.share.on_loaded()
        self.loaded = True
        self._schedule_cleanup()

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
            elif isinstance(key, ShareGroupKey):
                value = decode_share_value(key.kind, record.value)
            else:
                owner = self._record_owners.get(type(key))
                if owner is None:
                    continue
                value = owner.decode_value(key, record.value)
            decoded.append((record.offset, key, value))
        for offset, key, value in decoded:
            self.replay(offset, header.producer_id, key, value)

    def unload(self) -> None:
        """Stop serving: answer parked requests with NOT_COORDINATOR and cancel every timer."""
        self.loaded = False
        self.timer.cancel(("cleanup", self.partition))
        for manager in self.group_managers:
            manager.unload()
        self.share.unload()

    # == offsets (OffsetManager), and the type that answers for a group's offsets ================

    def commit_offsets(self, request: dict, api_version: int) -> dict:
        streams = self.streams.groups.get(request["group_id"])
        if streams is not None:  # checked per partition against the member's assigned tasks
            return self.execute(self.streams.commit(streams, request, request.get("topics") or [], api_version,
                                                    lambda group_id, req, topics: self.offsets.commit(
                                                        {**req, "topics": topics}, api_version, validated=True)))
        return self.execute(self.offsets.commit(request, api_version))

    def txn_commit_offsets(self, request: dict, api_version: int) -> dict:
        """TxnOffsetCommit: the offsets stay pending until the producer's transaction ends."""
        streams = self.streams.groups.get(request["group_id"])
        if streams is not None:
            code = self.streams.txn_commit_error(streams, request, request.get("topics") or [])
            if code is not None:
                return every_partition(request.get("topics") or [], code)
        return self.execute(self.offsets.txn_commit(request, api_version))

    def fetch_offsets(self, group_id: str, topics: Optional[list[dict]], require_stable: bool = False,
                      member_id: Optional[str] = None, member_epoch: int = -1) -> dict:
        return self.offsets.fetch(group_id, topics, require_stable, member_id, member_epoch)

    def delete_offsets(self, request: dict) -> dict:
        return self.execute(self.offsets.delete(request))

    def has_pending_transaction(self, producer_id: int) -> bool:
        return self.offsets.has_pending_transaction(producer_id)

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int = 0) -> None:
        """Write the producer's COMMIT/ABORT marker to this partition and apply it (the transaction
        coordinator calls this, as Kafka's WriteTxnMarkers does for __consumer_offsets partitions)."""
        batch = build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch, self.now())
        set_partition_leader_epoch(batch, 0, 0)  # the leader's epoch, as every appended batch (Kafka 4.2)
        self.log.append(batch)
        self.offsets.replay_end_transaction(producer_id, commit)

    def offset_owner(self, group_id: str) -> OffsetOwner:
        """The group type that answers for the offsets of ``group_id``: the one holding it, else the
        classic manager (offsets without membership make a "simple" classic group, as in Kafka)."""
        manager = self._manager(group_id)
        return self.classic if manager is None else manager  # type: ignore[return-value]

    def ensure_group(self, group_id: str) -> None:
        if self.group_type(group_id) is None:
            # Offsets committed without group membership: a "simple" group, Empty, no protocol type.
            self.classic.create_group(group_id)

    # == classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup ===========================

    def _classic_protocol(self, group_id: str):
        """The classic manager, or ``migration`` for an id a consumer group holds (its classic members)."""
        return self.migration if self.group_type(group_id) == "consumer" else self.classic

    def join_group(self, request: dict, *, api_version: int, client_id: str, client_host: str,
                   respond: Respond) -> None:
        streams = self.streams.groups.get(request["group_id"])
        if streams is not None:  # a streams group becomes a classic group only when empty, as in Kafka
            if streams.members:
                respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
                return
            self.execute(CoordinatorResult(self.streams.records_for_delete(request["group_id"])))
        self.execute(self._classic_protocol(request["group_id"]).join(request, api_version, client_id or "",
                                                                      client_host, respond))

    def sync_group(self, request: dict, respond: Respond) -> None:
        self.execute(self._classic_protocol(request["group_id"]).sync(request, respond))

    def heartbeat(self, request: dict) -> dict:
        return self.execute(self._classic_protocol(request["group_id"]).heartbeat(request))

    def leave_group(self, group_id: str, members: list[dict]) -> dict:
        """``members``: [{member_id, group_instance_id}]; the response has one entry per member."""
        return self.execute(self._classic_protocol(group_id).leave(group_id, members))

    # == KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe ==================================

    def consumer_group_heartbeat(self, request: dict, *, api_version: int, client_id: str,
                                 client_host: str) -> dict:
        return self.execute(self.consumer.heartbeat(request, api_version, client_id or "", client_host))

    def consumer_group_describe(self, group_id: str, names_by_id: Callable[[uuid.UUID], Optional[str]]) -> dict:
        return self.consumer.describe(group_id, names_by_id)

    def expire_consumer_member(self, group_id: str, member_id: str) -> bool:
        """Remove a member now, as its session timeout would (test kits' "expire a member")."""
        return self.consumer.expire_member(group_id, member_id)

    # == admin: DescribeGroups, ListGroups, DeleteGroups =========================================

    def describe_group(self, group_id: str) -> dict:
        return self.classic.describe_group(group_id)

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[dict]:
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        return [g for manager in self.group_managers for g in manager.list_groups(states, types)] \
            + self.share.list_groups(states, types)

    def delete_group(self, group_id: str) -> ErrorCode:
        shared = self.share.delete_group(group_id)  # None: not a share group
        return shared if shared is not None else self.execute(self._delete_group(group_id))

    def _delete_group(self, group_id: str) -> CoordinatorResult:
        manager = self._manager(group_id) or self.classic
        error = manager.validate_delete_group(group_id)
        if error is not None:
            return _empty(error)
        records = self.offsets.tombstones(group_id) + manager.group_tombstones(group_id)
        return CoordinatorResult(records, ErrorCode.NONE, on_appended=lambda error: error)

    # == test control (broker/control.py) ========================================================

    def expire_member_now(self, group_id: str, member_id: str | None = None) -> list[str]:
        return self.classic.expire_member_now(group_id, member_id)

    def force_rebalance(self, group_id: str) -> bool:
        return self.classic.force_rebalance(group_id)

    # == retention ===============================================================================

    def _schedule_cleanup(self) -> None:
        def run() -> CoordinatorResult:
            result = self._cleanup_group_metadata()
            self._schedule_cleanup()
            return result
        self.schedule(("cleanup", self.partition), self.config.offsets_retention_check_interval_ms, run)

    def cleanup_group_metadata(self) -> None:
        """Expire offsets past retention and delete groups left empty with no offsets."""
        self.execute(self._cleanup_group_metadata())

    def _cleanup_group_metadata(self) -> CoordinatorResult:
        records: list[Record] = []
        for manager in self.group_managers:
            for group_id, group in manager.retention_candidates():
                if self.offsets.expire(group_id, group, records) and manager.deletable_without_offsets(group):
                    records.extend(manager.group_tombstones(group_id))
        return CoordinatorResult(records)


__all__ = ["CoordinatorShard", "CoordinatorResult", "GroupConfig", "GroupManager", "MemoryOffsetsLog",
           "OffsetsLog", "OffsetAndMetadata", "join_error", "sync_error"]
