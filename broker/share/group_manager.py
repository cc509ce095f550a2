"""The share groups of one coordinator shard: ShareGroupHeartbeat, ShareGroupDescribe, the admin views,
session expiry and share-state initialization, over the shard's ``__consumer_offsets`` partition.

The manager is held by the ``CoordinatorShard`` of the partition the group id hashes to.  It is
sans-IO like the shard: every change is computed as records (``CoordinatorResult``) and handed to the
shard's ``execute``, which appends them and applies them through ``replay`` here, the same path that
rebuilds the groups when the shard loads.  Time comes from the injected clock, session timeouts from
the injected timer; the share coordinator is reached through ``hooks.persister()``.

ShareGroupHeartbeat follows Kafka 4.2's ``GroupMetadataManager.shareGroupHeartbeat`` in three steps:

1. the member is created or updated (ShareGroupMemberMetadata); the group epoch is bumped
   (ShareGroupMetadata) when a subscription changed, the subscribed topics' metadata changed, or newly
   initialized share partitions are not yet in the target assignment;
2. a new target assignment is computed for a bumped epoch, over initialized partitions only
   (ShareGroupTargetAssignmentMember/Metadata);
3. the member takes its target (ShareGroupCurrentMemberAssignment).

Then, after the answer, share partitions of subscribed topics that have no share state yet are
initialized: recorded as "initializing" in ShareGroupStatePartitionMetadata with the heartbeat, then
(a timer task, so asynchronously to the heartbeat as in Kafka) created through the persister with the
group epoch as state epoch and start offset -1 (the share partition applies ``share.auto.offset.reset``
on first use), and recorded as "initialized".  The members get those partitions on their next
heartbeat.  Initializing entries older than ``group.share.initialize.retry.interval.ms`` are retried.
"""

from __future__ import annotations

import logging
import uuid
from typing import Callable, Iterable, Optional, Protocol

from minikafka.protocol.errors import ErrorCode

from ..group.result import CoordinatorResult
from . import records as rec
from .settings import ShareConfig, ShareConfigError, validate_broker_settings  # noqa: F401 (re-exported)
from .group import (
    ASSIGNOR_NAME,
    LEAVE_EPOCH,
    Assignment,
    InitInfo,
    MemberState,
    ShareGroup,
    ShareMember,
    StatePartitions,
    count,
    from_wire,
    metadata_hash,
    simple_assign,
    to_wire,
)

log = logging.getLogger("minikafka.share")

PROTOCOL_TYPE = "share"
TopicImage = Callable[[], dict]  # name -> (topic id, partition count), non-internal topics


class ShareHooks(Protocol):
    """What the manager needs from the rest of the broker (``apis.BrokerHooks`` in the broker)."""

    def persister(self): ...

    def on_member_leave(self, group_id: str, member_id: str) -> None: ...

    def on_group_deleted(self, group_id: str) -> None: ...

    def session_timeout_ms(self, group_id: str, default: int) -> int: ...

    def heartbeat_interval_ms(self, group_id: str, default: int) -> int: ...


class DefaultHooks:
    """For unit tests and a shard without a broker: an in-memory persister, no listeners."""

    def __init__(self, persister=None) -> None:
        from .persister import MemoryPersister

        self._persister = persister if persister is not None else MemoryPersister()
        self.left: list[tuple[str, str]] = []
        self.deleted: list[str] = []

    def persister(self):
        return self._persister

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        self.left.append((group_id, member_id))

    def on_group_deleted(self, group_id: str) -> None:
        self.deleted.append(group_id)

    def session_timeout_ms(self, group_id: str, default: int) -> int:
        return default

    def heartbeat_interval_ms(self, group_id: str, default: int) -> int:
        return default


class _Error(Exception):
    def __init__(self, code: ErrorCode, message: Optional[str] = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def _session_key(group_id: str, member_id: str) -> tuple:
    return ("sg-session", group_id, member_id)


def _init_key(group_id: str) -> tuple:
    return ("sg-init", group_id)


def error_response(code: ErrorCode, message: Optional[str] = None) -> dict:
    """Kafka 4.2 leaves every other field at its default in an error answer."""
    return {"error_code": code, "error_message": message, "member_id": None, "member_epoch": 0,
            "heartbeat_interval_ms": 0, "assignment": None}


class ShareGroupManager:
    def __init__(self, execute: Callable[[CoordinatorResult], object], timer, clock, topics: TopicImage,
                 config: ShareConfig | None = None, hooks: ShareHooks | None = None,
                 other_group_exists: Callable[[str], bool] = lambda group_id: False) -> None:
        self._execute = execute
        self.timer = timer
        self.clock = clock
        self.topics = topics
        self.config = config or ShareConfig()
        self.hooks = hooks or DefaultHooks()
        self.other_group_exists = other_group_exists
        self.groups: dict[str, ShareGroup] = {}
        self.state_partitions: dict[str, StatePartitions] = {}

    def _now(self) -> int:
        return self.clock.now_ms()

    # == lookups ===================================================================================

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def state_name(self, group_id: str) -> Optional[str]:
        group = self.groups.get(group_id)
        return None if group is None else str(group.state)

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, set[int]]:
        info = self.state_partitions.get(group_id)
        if info is None:
            return {}
        return {t: set(i.partitions) for t, i in info.initialized.items() if i.partitions}

    def _session_timeout(self, group_id: str) -> int:
        return self.hooks.session_timeout_ms(group_id, self.config.session_timeout_ms)

    def _heartbeat_interval(self, group_id: str) -> int:
        return self.hooks.heartbeat_interval_ms(group_id, self.config.heartbeat_interval_ms)

    # == replay ====================================================================================

    def replay(self, key: rec.ShareGroupKey, value: Optional[rec.ShareGroupValue]) -> None:
        """Apply one share-group record (loading and live records alike)."""
        kind, gid = key.kind, key.group
        data = None if value is None else value.data
        if kind == "ShareGroupStatePartitionMetadata":
            if data is None:
                self.state_partitions.pop(gid, None)
                return
            self._group_for_replay(gid)
            now = self._now()
            self.state_partitions[gid] = StatePartitions(
                {t["topic_id"]: InitInfo(t["topic_name"], set(t["partitions"]), now) for t in data["initializing_topics"]},
                {t["topic_id"]: InitInfo(t["topic_name"], set(t["partitions"]), now) for t in data["initialized_topics"]},
                {t["topic_id"]: t["topic_name"] for t in data["deleting_topics"]})
            return
        group = self.groups.get(gid)
        if group is None:
            if data is None:
                return  # a tombstone for a group that is gone already
            group = self._group_for_replay(gid)
        group.changed()
        if kind == "ShareGroupMetadata":
            if data is None:
                self._remove_group(gid)
            else:
                group.group_epoch, group.metadata_hash = data["epoch"], data["metadata_hash"]
                group.persisted = True
        elif kind == "ShareGroupTargetAssignmentMetadata":
            group.assignment_epoch = -1 if data is None else data["assignment_epoch"]
        elif kind == "ShareGroupTargetAssignmentMember":
            if data is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = from_wire(data["topic_partitions"])
        elif kind == "ShareGroupMemberMetadata":
            if data is None:
                if group.members.pop(key.member_id, None) is not None:
                    self.timer.cancel(_session_key(gid, key.member_id))
            else:
                member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
                member.rack_id = data["rack_id"]
                member.client_id = data["client_id"]
                member.client_host = data["client_host"]
                member.subscribed_topic_names = tuple(sorted(set(data["subscribed_topic_names"])))
        elif kind == "ShareGroupCurrentMemberAssignment":
            member = group.members.get(key.member_id)
            if member is None:
                if data is None:
                    return
                member = group.members[key.member_id] = ShareMember(key.member_id)
            if data is None:
                member.member_epoch = member.previous_member_epoch = LEAVE_EPOCH
                member.assigned = {}
            else:
                member.member_epoch = data["member_epoch"]
                member.previous_member_epoch = data["previous_member_epoch"]
                member.state = data["state"] if data["state"] in (MemberState.STABLE,) else MemberState.UNKNOWN
                member.assigned = from_wire(data["assigned_partitions"])

    def _group_for_replay(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def _remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self.timer.cancel(_session_key(group_id, member_id))
        self.timer.cancel(_init_key(group_id))

    def on_loaded(self) -> None:
        """After loading: every member gets a fresh session (Kafka re-arms them the same way)."""
        for group in self.groups.values():
            for member_id in group.members:
                self._schedule_session(group.group_id, member_id)

    def unload(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self.timer.cancel(_session_key(group.group_id, member_id))
            self.timer.cancel(_init_key(group.group_id))

    # == timers ====================================================================================

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(_session_key(group_id, member_id), self._session_timeout(group_id),
                            lambda: self._fence_now(group_id, member_id, "the member session expired"))

    def _fence_now(self, group_id: str, member_id: str, why: str) -> bool:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return False
        log.info("share group %s: member %s fenced from the group because %s", group_id, member_id, why)
        self._execute(self._fence(group, member_id, None))
        self.hooks.on_member_leave(group_id, member_id)
        return True

    def expire_member(self, group_id: str, member_id: str) -> bool:
        """Remove a member now, as its session timeout would (the control API's "expire a member")."""
        return self._fence_now(group_id, member_id, "it was expired on request")

    def _fence(self, group: ShareGroup, member_id: str, response) -> CoordinatorResult:
        """Tombstones for the member and a bumped group epoch, so the others get its partitions."""
        gid = group.group_id
        records = [(rec.key("ShareGroupCurrentMemberAssignment", gid, member_id), None),
                   (rec.key("ShareGroupTargetAssignmentMember", gid, member_id), None),
                   (rec.key("ShareGroupMemberMetadata", gid, member_id), None)]
        rest = {m: v for m, v in group.members.items() if m != member_id}
        records.append(self._epoch_record(gid, group.group_epoch + 1, self._hash(group.subscribed_topic_names(rest))))
        self.timer.cancel(_session_key(gid, member_id))
        return CoordinatorResult(records, response)

    def _epoch_record(self, group_id: str, epoch: int, hash_: int):
        return (rec.key("ShareGroupMetadata", group_id), rec.value("ShareGroupMetadata", epoch=epoch, metadata_hash=hash_))

    def _hash(self, names: Iterable[str]) -> int:
        image = self.topics()
        return metadata_hash((n, image[n][0], image[n][1]) for n in names if n in image)

    # == ShareGroupHeartbeat =======================================================================

    def heartbeat(self, request: dict, *, client_id: str = "", client_host: str = "") -> dict:
        try:
            self._validate(request)
            if request["member_epoch"] == LEAVE_EPOCH:
                response = self._execute(self._leave(request["group_id"], request["member_id"]))
                self.hooks.on_member_leave(request["group_id"], request["member_id"])
                return response
            result, to_initialize = self._heartbeat(request, client_id, client_host)
        except _Error as exc:
            log.info("share group %s: heartbeat of member %r at epoch %s answered %s: %s", request.get("group_id"),
                     request.get("member_id"), request.get("member_epoch"), exc.code.name, exc.message)
            return error_response(exc.code, exc.message)
        response = self._execute(result)
        if to_initialize and response.get("error_code", 0) == ErrorCode.NONE:
            group_id, epoch = request["group_id"], to_initialize[0]
            # After the answer, as Kafka's coordinator does (a timer task of 0 ms).
            self.timer.schedule(_init_key(group_id), 0,
                                lambda: self.initialize_state(group_id, epoch, to_initialize[1]))
        return response

    @staticmethod
    def _validate(request: dict) -> None:
        """Kafka 4.2's ``throwIfShareGroupHeartbeatRequestIsInvalid``, in its order."""
        if not request.get("member_id"):
            raise _Error(ErrorCode.INVALID_REQUEST, None)  # Kafka 4.2 answers this one without a message
        if not request.get("group_id"):
            raise _Error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if request.get("rack_id") == "":
            raise _Error(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        epoch = request["member_epoch"]
        if epoch == 0:
            if not request.get("subscribed_topic_names"):
                raise _Error(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_EPOCH:
            raise _Error(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")

    def _group_for_heartbeat(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.other_group_exists(group_id):
            raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        return ShareGroup(group_id)

    def _existing_group(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            if self.other_group_exists(group_id):
                raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def _leave(self, group_id: str, member_id: str) -> CoordinatorResult:
        group = self._existing_group(group_id)
        if member_id not in group.members:
            raise _Error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        log.info("share group %s: member %s left the share group", group_id, member_id)
        response = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                    "member_epoch": LEAVE_EPOCH, "heartbeat_interval_ms": 0, "assignment": None}
        return self._fence(group, member_id, response)

    def _heartbeat(self, request: dict, client_id: str, client_host: str):
        group_id, member_id, epoch = request["group_id"], request["member_id"], request["member_epoch"]
        names = request.get("subscribed_topic_names")
        now = self._now()
        records: list = []
        group = self._group_for_heartbeat(group_id, create=epoch == 0)
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise _Error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The share group has reached its maximum capacity of {self.config.max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise _Error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            member = ShareMember(member_id)
            log.info("share group %s: member %s joins the share group", group_id, member_id)
        self._check_epoch(member, epoch)

        # 1. The member, and the group epoch.
        updated = member.copy()
        if request.get("rack_id") is not None:
            updated.rack_id = request["rack_id"]
        if names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(names)))
        updated.client_id, updated.client_host = client_id, client_host
        bump = False
        if updated != member:
            records.append((rec.key("ShareGroupMemberMetadata", group_id, member_id),
                            rec.value("ShareGroupMemberMetadata", **updated.metadata_data())))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        bump = bump or self._initialized_assignment_pending(group)
        members = dict(group.members)
        members[member_id] = updated
        if member_id in group.members and updated.subscribed_topic_names == member.subscribed_topic_names:
            subscribed = group.subscribed_topic_names()  # unchanged: the group's (cached)
        else:
            subscribed = group.subscribed_topic_names(members)
        hash_ = self._hash(subscribed)
        if hash_ != group.metadata_hash or not group.persisted:
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(self._epoch_record(group_id, group_epoch, hash_))
            log.info("share group %s: group epoch bumped to %d", group_id, group_epoch)

        # 2. The target assignment.
        if group_epoch > group.assignment_epoch:
            target = self._update_target(group, members, group_epoch, records).get(member_id, {})
            target_epoch = group_epoch
        else:
            target = group.target.get(member_id, {})
            target_epoch = group.assignment_epoch

        # 3. The member takes its target.
        reconciled = updated
        if bump or updated.member_epoch != target_epoch:
            reconciled = updated.copy()
            image = self.topics()
            subscribed_ids = {image[n][0] for n in updated.subscribed_topic_names if n in image}
            reconciled.assigned = {t: set(p) for t, p in target.items() if t in subscribed_ids and p}
            if target_epoch != updated.member_epoch:
                reconciled.state = MemberState.STABLE
                reconciled.previous_member_epoch = updated.member_epoch
                reconciled.member_epoch = target_epoch
        if reconciled.assignment_data() != updated.assignment_data() or member_id not in group.members:
            records.append((rec.key("ShareGroupCurrentMemberAssignment", group_id, member_id),
                            rec.value("ShareGroupCurrentMemberAssignment", **reconciled.assignment_data())))
        self._schedule_session(group_id, member_id)

        response = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                    "member_epoch": reconciled.member_epoch,
                    "heartbeat_interval_ms": self._heartbeat_interval(group_id), "assignment": None}
        if epoch == 0 or names is not None or reconciled.assigned != member.assigned:
            response["assignment"] = {"topic_partitions": to_wire(reconciled.assigned)}

        to_initialize = self._initializing_records(group_id, subscribed, now, records)

        def on_appended(error):
            if error is None:
                return None
            self.timer.cancel(_session_key(group_id, member_id))
            return error_response(error)

        result = CoordinatorResult(records, response, on_appended=on_appended)
        return result, ((group_epoch, to_initialize) if to_initialize else None)

    @staticmethod
    def _check_epoch(member: ShareMember, epoch: int) -> None:
        if epoch > member.member_epoch:
            raise _Error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a greater member epoch ({epoch}) than the one known by the "
                         f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                         "and rejoin.")
        if epoch < member.member_epoch and epoch != member.previous_member_epoch:
            raise _Error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({epoch}) than the one known by the "
                         f"group coordinator ({member.member_epoch}), and it does not match the previous member "
                         f"epoch ({member.previous_member_epoch}). The member must abandon all its partitions and "
                         "rejoin.")

    def _assignable(self, group_id: str, subscribed: set[str]) -> dict[uuid.UUID, set[int]]:
        """Initialized share partitions of subscribed topics that exist now."""
        image = self.topics()
        ids = {image[n][0]: image[n][1] for n in subscribed if n in image}
        return {t: {p for p in parts if p < ids[t]} for t, parts in self.initialized_partitions(group_id).items()
                if t in ids}

    def _update_target(self, group: ShareGroup, members: dict[str, ShareMember], epoch: int,
                       records: list) -> dict[str, Assignment]:
        image = self.topics()
        subscriptions = {m: {image[n][0] for n in member.subscribed_topic_names if n in image}
                         for m, member in members.items()}
        assignable = self._assignable(group.group_id, group.subscribed_topic_names(members))
        previous = {m: group.target.get(m, {}) for m in members}
        target = simple_assign(subscriptions, assignable, previous)
        for m, assignment in sorted(target.items()):
            if m not in group.target or group.target[m] != assignment:
                records.append((rec.key("ShareGroupTargetAssignmentMember", group.group_id, m),
                                rec.value("ShareGroupTargetAssignmentMember", topic_partitions=to_wire(assignment))))
        records.append((rec.key("ShareGroupTargetAssignmentMetadata", group.group_id),
                        rec.value("ShareGroupTargetAssignmentMetadata", assignment_epoch=epoch)))
        log.info("share group %s: target assignment for epoch %d with the %s assignor: %s", group.group_id, epoch,
                 ASSIGNOR_NAME, {m: count(a) for m, a in target.items()})
        return target

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """Kafka's ``initializedAssignmentPending``: initialized partitions of a subscribed topic that the
        target assignment does not cover (exactly) yet."""
        if not group.members:
            return False
        info = self.state_partitions.get(group.group_id)
        if info is None or not info.initialized:
            return False
        subscribed = group.subscribed_topic_names()
        if not subscribed:
            return False
        assigned = group.targeted_partitions()
        for topic_id, init in info.initialized.items():
            if init.name in subscribed and assigned.get(topic_id) != init.partitions:
                return True
        return False

    # == share-state initialization ================================================================

    def _initializing_records(self, group_id: str, subscribed: set[str], now: int,
                              records: list) -> dict[uuid.UUID, InitInfo]:
        """Kafka's ``maybeCreateInitializeShareGroupStateRequest``: the subscribed partitions without
        share state, recorded as initializing; returns them (empty: nothing to initialize)."""
        if not subscribed:
            return {}
        image = self.topics()
        info = self.state_partitions.get(group_id)
        known: dict[uuid.UUID, set[int]] = {}
        if info is not None:
            for t, i in info.initialized.items():
                known.setdefault(t, set()).update(i.partitions)
            for t, i in info.initializing.items():
                if now - i.timestamp < self.config.initialize_retry_interval_ms:
                    known.setdefault(t, set()).update(i.partitions)
        change: dict[uuid.UUID, InitInfo] = {}
        for name in sorted(subscribed):
            if name not in image:
                continue
            topic_id, partitions = image[name]
            done = known.get(topic_id, set())
            if not done or len(done) < partitions:
                missing = set(range(partitions)) - done
                if missing:
                    change[topic_id] = InitInfo(name, missing, now)
        if not change:
            return {}
        current = (info or StatePartitions()).copy()
        for t, i in change.items():
            entry = current.initializing.get(t)
            if entry is None:
                current.initializing[t] = InitInfo(i.name, set(i.partitions), now)
            else:
                entry.partitions |= i.partitions
                entry.name, entry.timestamp = i.name, now
            current.deleting.pop(t, None)
        records.append((rec.key("ShareGroupStatePartitionMetadata", group_id),
                        rec.value("ShareGroupStatePartitionMetadata", **current.record_data())))
        return change

    def initialize_state(self, group_id: str, state_epoch: int, partitions: dict[uuid.UUID, InitInfo]) -> ErrorCode:
        """Create the share state of ``partitions`` through the persister, then record them initialized
        (or, on an error, no longer initializing, so a later heartbeat retries)."""
        persister = self.hooks.persister()
        done: dict[uuid.UUID, set[int]] = {}
        error = ErrorCode.NONE
        for topic_id, init in sorted(partitions.items(), key=lambda e: str(e[0])):
            for p in sorted(init.partitions):
                code = ErrorCode(persister.initialize(group_id, topic_id, p, state_epoch, -1))
                if code != ErrorCode.NONE and error == ErrorCode.NONE:
                    error = code
                done.setdefault(topic_id, set()).add(p)
        if group_id not in self.state_partitions:
            return ErrorCode.NONE  # the group was deleted meanwhile
        if error != ErrorCode.NONE:
            log.error("share group %s: initializing share state failed: %s", group_id, error.name)
            self._execute(self._uninitialize(group_id, done))
            return error
        self._execute(self._mark_initialized(group_id, done))
        return ErrorCode.NONE

    def _mark_initialized(self, group_id: str, partitions: dict[uuid.UUID, set[int]]) -> CoordinatorResult:
        image = self.topics()
        names = {tid: name for name, (tid, _) in image.items()}
        now = self._now()
        current = self.state_partitions.get(group_id, StatePartitions()).copy()
        for t, parts in partitions.items():
            entry = current.initialized.get(t)
            if entry is None:
                current.initialized[t] = InitInfo(names.get(t, "<UNKNOWN>"), set(parts), now)
            else:
                entry.partitions |= parts
                entry.timestamp = now
            initializing = current.initializing.get(t)
            if initializing is not None:
                initializing.partitions -= parts
                if not initializing.partitions:
                    del current.initializing[t]
        return CoordinatorResult([(rec.key("ShareGroupStatePartitionMetadata", group_id),
                                   rec.value("ShareGroupStatePartitionMetadata", **current.record_data()))])

    def _uninitialize(self, group_id: str, partitions: dict[uuid.UUID, set[int]]) -> CoordinatorResult:
        info = self.state_partitions.get(group_id)
        if info is None or not info.initializing:
            return CoordinatorResult()
        current = info.copy()
        for t, parts in partitions.items():
            entry = current.initializing.get(t)
            if entry is not None:
                entry.partitions -= parts
                if not entry.partitions:
                    del current.initializing[t]
        return CoordinatorResult([(rec.key("ShareGroupStatePartitionMetadata", group_id),
                                   rec.value("ShareGroupStatePartitionMetadata", **current.record_data()))])

    def mark_initialized(self, group_id: str, topic_id: uuid.UUID, partitions: set[int]) -> None:
        """Record share state created by someone else (AlterShareGroupOffsets on an empty group): the
        group is created when it does not exist yet, as Kafka does."""
        records = []
        if group_id not in self.groups:
            records.append(self._epoch_record(group_id, 0, 0))
        result = self._mark_initialized(group_id, {topic_id: set(partitions)})
        self._execute(CoordinatorResult(records + result.records))

    # == admin =====================================================================================

    def describe(self, group_id: str, names_by_id: Callable[[uuid.UUID], Optional[str]]) -> dict:
        group = self.groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if self.other_group_exists(group_id)
                       else f"Group {group_id} not found.")
            return {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "error_message": message, "group_id": group_id,
                    "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}

        def wire(a: Assignment) -> dict:
            out = []
            for t, parts in sorted(a.items(), key=lambda i: str(i[0])):
                name = names_by_id(t)
                if name is not None and parts:  # Kafka leaves out topics it no longer knows
                    out.append({"topic_id": t, "topic_name": name, "partitions": sorted(parts)})
            return {"topic_partitions": out}

        members = [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names), "assignment": wire(m.assigned)}
                   for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": str(group.state), "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": self.config.assignors[0],
                "members": members}

    def list_groups(self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()) -> list[dict]:
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        if types and PROTOCOL_TYPE not in types:
            return []
        return [{"group_id": g.group_id, "protocol_type": PROTOCOL_TYPE, "group_state": str(g.state),
                 "group_type": PROTOCOL_TYPE}
                for g in self.groups.values() if not states or str(g.state).lower() in states]

    def delete_group(self, group_id: str) -> Optional[ErrorCode]:
        """DeleteGroups for a share group; None when ``group_id`` is not a share group (the shard then
        answers as for its other group types).  The share state of every initialized (or initializing)
        partition is deleted through the persister first; the group is deleted only when that worked."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        info = self.state_partitions.get(group_id)
        if info is not None:
            candidates: dict[uuid.UUID, InitInfo] = {}
            for source in (info.initialized, info.initializing):
                for t, i in source.items():
                    entry = candidates.setdefault(t, InitInfo(i.name, set(), -1))
                    entry.partitions |= i.partitions
            image = self.topics()
            by_id = {tid: (name, n) for name, (tid, n) in image.items()}
            # Topics deleted since were cleaned up with them (Kafka: on partition deletion): no state to delete.
            candidates = {t: i for t, i in candidates.items() if t in by_id}
            for t in info.deleting:
                if t in by_id:  # an earlier delete that did not finish: again, for every partition
                    entry = candidates.setdefault(t, InitInfo(by_id[t][0], set(), -1))
                    entry.partitions |= set(range(by_id[t][1]))
            moving = StatePartitions({}, {}, {t: i.name for t, i in candidates.items()})
            error = self._execute(CoordinatorResult(
                [(rec.key("ShareGroupStatePartitionMetadata", group_id),
                  rec.value("ShareGroupStatePartitionMetadata", **moving.record_data()))],
                ErrorCode.NONE, on_appended=lambda e: e))
            if error:
                return error
            persister = self.hooks.persister()
            for t, i in sorted(candidates.items(), key=lambda e: str(e[0])):
                for p in sorted(i.partitions):
                    code = ErrorCode(persister.delete(group_id, t, p))
                    if code != ErrorCode.NONE:
                        log.error("share group %s: deleting the share state of %s-%d failed: %s",
                                  group_id, i.name, p, code.name)
                        return code
        error = self._execute(CoordinatorResult(self.group_tombstones(group_id), ErrorCode.NONE,
                                                on_appended=lambda e: e))
        if error:
            return error
        self.hooks.on_group_deleted(group_id)
        log.info("share group %s deleted", group_id)
        return ErrorCode.NONE

    # == the shard's plug-in protocol for group types (GroupManager + OffsetOwner) =================
    # What a coordinator shard composed of one manager per group type asks of each: the records it
    # owns, its groups by id, deletion and retention, and the offsets questions (a share group has no
    # committed offsets: Kafka answers GROUP_ID_NOT_FOUND for commits and deletes, nothing for fetches).

    group_type = PROTOCOL_TYPE
    record_keys = (rec.ShareGroupKey,)

    @staticmethod
    def decode_value(key: rec.ShareGroupKey, raw) -> Optional[rec.ShareGroupValue]:
        return rec.decode_value(key.kind, raw)

    def group(self, group_id: str) -> Optional[ShareGroup]:
        return self.groups.get(group_id)

    def validate_delete_group(self, group_id: str) -> Optional[ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if group.members else None

    def group_tombstones(self, group_id: str) -> list:
        """The records that delete an empty share group (Kafka's ShareGroup.createGroupTombstoneRecords)."""
        group = self.groups.get(group_id)
        members = list(group.members) if group is not None else []
        return ([(rec.key("ShareGroupCurrentMemberAssignment", group_id, m), None) for m in members]
                + [(rec.key("ShareGroupTargetAssignmentMember", group_id, m), None) for m in members]
                + [(rec.key("ShareGroupTargetAssignmentMetadata", group_id), None)]
                + [(rec.key("ShareGroupMemberMetadata", group_id, m), None) for m in members]
                + [(rec.key("ShareGroupStatePartitionMetadata", group_id), None),
                   (rec.key("ShareGroupMetadata", group_id), None)])

    @staticmethod
    def retention_candidates() -> list:
        return []  # share groups never expire (Kafka: shouldExpire is false)

    @staticmethod
    def deletable_without_offsets(group) -> bool:
        return False

    def _not_consumer(self, group_id: str) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND  # "Group ... is not a consumer group."

    def validate_offset_commit(self, group_id, member_id, instance_id, generation, api_version):
        return self._not_consumer(group_id)

    def validate_txn_offset_commit(self, group_id, member_id, instance_id, generation):
        return self._not_consumer(group_id)

    @staticmethod
    def validate_offset_fetch(group_id, member_id, member_epoch):
        return None  # Kafka 4.2 answers a fetch for a share group's id with no offsets and no error

    def validate_offset_delete(self, group_id):
        return self._not_consumer(group_id), None

    def summary(self) -> list[dict]:
        """Every share group of this shard, for the operator surface (CLI, metrics, console)."""
        out = []
        for g in self.groups.values():
            out.append({"group_id": g.group_id, "state": str(g.state), "group_epoch": g.group_epoch,
                        "assignment_epoch": g.assignment_epoch, "members": len(g.members)})
        return out
