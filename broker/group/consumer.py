"""KIP-848 consumer groups: ConsumerGroupHeartbeat, reconciliation and ConsumerGroupDescribe.

``ConsumerGroupManager`` is the shard's manager of the "consumer" group type (see shard.py for what a
group-type manager provides).  A consumer group lives in the same shard as classic groups with the same
id hash and is kept in ``__consumer_offsets`` as Kafka keeps it: six record types
(``records.CONSUMER_KEY_VERSIONS``).  Every change is computed as records first; the shard appends them
and applies them through ``replay`` here, the same path that loads the shard at start-up.  Timers
(session, revocation) are not state and are re-armed after loading.

The group (Kafka's ``ConsumerGroup``):

* the **group epoch** is bumped when membership or a subscription changes, or the subscribed topics'
  partitions change (topic created/deleted, partitions added);
* the **target assignment** is computed by a server-side assignor for the group epoch and tagged with it
  (the assignment epoch);
* each member **reconciles** toward its target (Kafka's ``CurrentAssignmentBuilder``).  A partition that
  moves is first revoked from its owner (state UNREVOKED_PARTITIONS, the member keeps its epoch); the new
  owner gets it only after it is released (UNRELEASED_PARTITIONS until then), so no partition is ever
  owned by two members.  Members that keep their partitions simply move to the new epoch: there is no
  stop-the-world barrier.

Group states, Kafka's names: Empty (no members), Assigning (target older than the group epoch),
Reconciling (a member is not yet at the target epoch), Stable.

Classic members of a consumer group (online migration) and the conversions: ``migration``, which this
manager asks explicitly (``self.migration``) when a heartbeat names a classic group's id or when the
last member that speaks the consumer protocol leaves.

Errors: FENCED_MEMBER_EPOCH (epoch ahead of the coordinator's, or behind it and not the previous epoch
with a subset of the assignment), UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID (a static instance id held
by a member that did not leave with -2), FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED,
INVALID_REQUEST, INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND (the id belongs to a classic group that
cannot be converted).
"""

from __future__ import annotations

import enum
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from minikafka.protocol.errors import ErrorCode

from .assignors import ASSIGNORS, Assignment
from .records import ConsumerGroupKey, ConsumerGroupValue, decode_consumer_value
from .result import CoordinatorResult, Record, Runtime

log = logging.getLogger("minikafka.group")

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with the values stored in ConsumerGroupCurrentMemberAssignmentValue."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(str, enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol inside a consumer group joined with (KIP-848
    online migration): its session timeout and its (assignor name, subscription) list."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    def to_record(self) -> dict:
        return {"session_timeout_ms": self.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": bytes(m)} for n, m in self.protocols]}

    @classmethod
    def from_record(cls, data: Optional[dict]) -> Optional["ClassicMemberMetadata"]:
        if data is None:
            return None
        return cls(data["session_timeout_ms"],
                   tuple((p["name"], bytes(p["metadata"])) for p in data["supported_protocols"]))


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: Optional[str] = None
    rack_id: Optional[str] = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: Optional[str] = None
    rebalance_timeout_ms: int = -1
    server_assignor: Optional[str] = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: Optional[ClassicMemberMetadata] = None  # set for a member that uses the classic protocol

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata_value(self) -> ConsumerGroupValue:
        return ConsumerGroupValue("ConsumerGroupMemberMetadata", {
            "instance_id": self.instance_id, "rack_id": self.rack_id, "client_id": self.client_id,
            "client_host": self.client_host, "subscribed_topic_names": list(self.subscribed_topic_names),
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "server_assignor": self.server_assignor,
            "classic_member_metadata": None if self.classic is None else self.classic.to_record()})

    def assignment_value(self) -> ConsumerGroupValue:
        return ConsumerGroupValue("ConsumerGroupCurrentMemberAssignment", {
            "member_epoch": self.member_epoch, "previous_member_epoch": self.previous_member_epoch,
            "state": int(self.state), "assigned_partitions": _to_wire(self.assigned),
            "partitions_pending_revocation": _to_wire(self.pending_revocation)})

    def same_assignment(self, other: "ConsumerMember") -> bool:
        return (self.member_epoch == other.member_epoch and self.previous_member_epoch == other.previous_member_epoch
                and self.state == other.state and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation)

    def copy(self) -> "ConsumerMember":
        return ConsumerMember(**{**self.__dict__, "subscribed_topic_names": list(self.subscribed_topic_names),
                                 "assigned": _copy(self.assigned),
                                 "pending_revocation": _copy(self.pending_revocation)})


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    # Subscribed topics as last recorded: name -> (topic id, partition count).
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch != self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def offset_expiration_base(self):
        """Retention counts from each offset's commit time (Kafka's ConsumerGroup)."""
        return lambda om: om.commit_timestamp

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether a current member subscribes to the topic (its offsets then never expire)."""
        return topic in self.subscribed_topics(self.members, (topic,))

    def static_member(self, instance_id: str) -> Optional[ConsumerMember]:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def owners(self, exclude: str) -> dict[tuple[uuid.UUID, int], str]:
        """Which member owns each partition (assigned or still being revoked), other than ``exclude``."""
        out = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for source in (m.assigned, m.pending_revocation):
                for t, parts in source.items():
                    for p in parts:
                        out[(t, p)] = m.member_id
        return out

    def subscribed_topics(self, members: dict[str, ConsumerMember], topic_names) -> set[str]:
        names: set[str] = set()
        for m in members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                pattern = _compile(m.subscribed_topic_regex)
                names.update(n for n in topic_names if pattern is not None and pattern.fullmatch(n))
        return names


def _compile(regex: str):
    try:
        return re.compile(regex)
    except re.error:
        return None


def _copy(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items()}


def _to_wire(a: Assignment) -> list[dict]:
    return [{"topic_id": t, "partitions": sorted(p)} for t, p in sorted(a.items(), key=lambda i: str(i[0])) if p]


def _from_wire(items) -> Assignment:
    return {tp["topic_id"]: set(tp["partitions"]) for tp in items or () if tp["partitions"]}


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, parts in a.items():
        rest = parts - b.get(t, set())
        if rest:
            out[t] = rest
    return out


def _intersect(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, parts in a.items():
        both = parts & b.get(t, set())
        if both:
            out[t] = both
    return out


def _subset(a: Assignment, b: Assignment) -> bool:
    return all(parts <= b.get(t, set()) for t, parts in a.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              owned: Optional[Assignment], owners: dict[tuple[uuid.UUID, int], str]) -> ConsumerMember:
    """The member's next current assignment (Kafka's CurrentAssignmentBuilder); ``member`` is not changed.

    ``owned``: the partitions the member reports in this heartbeat, None when it did not report them.
    """
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        # Wait until the member reports that it let go of every partition pending revocation.
        if owned is None or _intersect(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owners)
    if member.state == MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owners)
    return member


def _next_assignment(member: ConsumerMember, member_epoch: int, target_epoch: int, target: Assignment,
                     owners: dict[tuple[uuid.UUID, int], str]) -> ConsumerMember:
    kept = _intersect(member.assigned, target)
    revoke = _minus(member.assigned, target)
    added: Assignment = {}
    unreleased = False
    for t, parts in _minus(target, member.assigned).items():
        free = {p for p in parts if (t, p) not in owners}
        unreleased |= len(free) != len(parts)
        if free:
            added[t] = free
    nxt = member.copy()
    if revoke:
        # Revoke first, keep the epoch: new partitions come only once the revocation is acknowledged.
        nxt.state = MemberState.UNREVOKED_PARTITIONS
        nxt.member_epoch = member_epoch
        nxt.previous_member_epoch = member_epoch
        nxt.assigned = kept
        nxt.pending_revocation = revoke
        return nxt
    nxt.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    nxt.previous_member_epoch = member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch
    nxt.member_epoch = target_epoch
    for t, parts in added.items():
        kept.setdefault(t, set()).update(parts)
    nxt.assigned = kept
    nxt.pending_revocation = {}
    return nxt


def then(result, on_appended):
    """``result`` with ``on_appended`` run after its own callback (the later non-None answer wins)."""
    first = result.on_appended

    def both(error):
        answer = first(error) if first is not None else None
        later = on_appended(error)
        return later if later is not None else answer
    result.on_appended = both
    return result


class _HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass
class ConsumerConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2147483647
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"
    # group id -> that group's configs in force (broker/group_configs.py ``effective``); None:
    # the broker-wide values above for every group.
    group_configs: Optional[Callable[[str], Mapping[str, Any]]] = None

    def session_timeout_for(self, group_id: str | None) -> int:
        """consumer.session.timeout.ms of this group (its GROUP config, else the broker's)."""
        if self.group_configs is None or group_id is None:
            return self.session_timeout_ms
        return int(self.group_configs(group_id).get("consumer.session.timeout.ms", self.session_timeout_ms))

    def heartbeat_interval_for(self, group_id: str | None) -> int:
        """consumer.heartbeat.interval.ms of this group (its GROUP config, else the broker's)."""
        if self.group_configs is None or group_id is None:
            return self.heartbeat_interval_ms
        return int(self.group_configs(group_id).get("consumer.heartbeat.interval.ms", self.heartbeat_interval_ms))

    @classmethod
    def from_broker_config(cls, config) -> "ConsumerConfig":
        def get(name, default):
            try:
                value = config.get(name)
            except Exception:
                return default
            return default if value is None else value

        assignors = get("group.consumer.assignors", "uniform,range")
        if isinstance(assignors, str):
            assignors = [a.strip() for a in assignors.split(",") if a.strip()]
        return cls(session_timeout_ms=int(get("group.consumer.session.timeout.ms", 45000)),
                   heartbeat_interval_ms=int(get("group.consumer.heartbeat.interval.ms", 5000)),
                   max_size=int(get("group.consumer.max.size", 2147483647)),
                   assignors=tuple(a for a in assignors if a in ASSIGNORS) or ("uniform",),
                   migration_policy=str(get("group.consumer.migration.policy", "bidirectional")).lower())


def _member_tombstones(group_id: str, member_id: str) -> list:
    """A member's three records deleted, in Kafka's order (current assignment first)."""
    return [(_key("ConsumerGroupCurrentMemberAssignment", group_id, member_id), None),
            (_key("ConsumerGroupTargetAssignmentMember", group_id, member_id), None),
            (_key("ConsumerGroupMemberMetadata", group_id, member_id), None)]


def _validate_member_epoch(member: ConsumerMember, epoch: int) -> Optional[ErrorCode]:
    """A classic member's generation is its member epoch, and a mismatch gets the classic error."""
    if epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return None


def _session_key(group_id: str, member_id: str) -> tuple:
    return ("cg-session", group_id, member_id)


def _revocation_key(group_id: str, member_id: str) -> tuple:
    return ("cg-revocation", group_id, member_id)


def _join_key(group_id: str, member_id: str) -> tuple:
    """A classic member told to rejoin must do so within its rebalance timeout."""
    return ("cg-join", group_id, member_id)


def _sync_key(group_id: str, member_id: str) -> tuple:
    """A classic member that joined must send SyncGroup within its rebalance timeout."""
    return ("cg-sync", group_id, member_id)


def _key(kind: str, group_id: str, member_id: str | None = None) -> ConsumerGroupKey:
    return ConsumerGroupKey(kind, group_id, member_id)


class ConsumerGroupManager:
    group_type = "consumer"
    record_keys = (ConsumerGroupKey,)

    def __init__(self, runtime: Runtime, config: ConsumerConfig) -> None:
        self.runtime = runtime
        self.timer = runtime.timer
        self.config = config
        self.groups: dict[str, ConsumerGroup] = {}
        self.migration = None  # migration.GroupMigration, set by the shard

    # == the group-type manager protocol (shard.py) ==============================================

    def group(self, group_id: str) -> Optional[ConsumerGroup]:
        return self.groups.get(group_id)

    def decode_value(self, key: ConsumerGroupKey, raw) -> Optional[ConsumerGroupValue]:
        return decode_consumer_value(key.kind, raw)

    def on_loaded(self) -> None:
        """Timers are not state: arm them again for the loaded members."""
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_session(group.group_id, member.member_id)
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_revocation(group.group_id, member)

    def unload(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self._cancel_member_timers(group.group_id, member_id)

    def list_groups(self, states: set[str], types: set[str]) -> list[dict]:
        out = []
        for group in self.groups.values():
            if states and str(group.state).lower() not in states:
                continue
            if types and "consumer" not in types:
                continue
            out.append({"group_id": group.group_id, "protocol_type": "consumer",
                        "group_state": str(group.state), "group_type": "consumer"})
        return out

    def validate_delete_group(self, group_id: str) -> Optional[ErrorCode]:
        return ErrorCode.NON_EMPTY_GROUP if self.groups[group_id].members else None

    def group_tombstones(self, group_id: str) -> list[Record]:
        """Tombstones that delete an empty consumer group (DeleteGroups, retention, downgrade to classic)."""
        return [(_key("ConsumerGroupTargetAssignmentMetadata", group_id), None),
                (_key("ConsumerGroupPartitionMetadata", group_id), None),
                (_key("ConsumerGroupMetadata", group_id), None)]

    def retention_candidates(self):
        return list(self.groups.items())

    def deletable_without_offsets(self, group: ConsumerGroup) -> bool:
        # As Kafka: an empty consumer group whose offsets have all expired is deleted.
        return not group.members

    # == replay ==================================================================================

    def replay(self, key: ConsumerGroupKey, value: Optional[ConsumerGroupValue]) -> None:
        kind, gid = key.kind, key.group
        group = self.groups.get(gid)
        data = value.data if value is not None else None
        if group is None:
            if data is None:
                return
            group = self.groups[gid] = ConsumerGroup(gid)
            self.migration.consumer_group_created(gid)
        if kind == "ConsumerGroupMetadata":
            if data is None:
                self.remove_group(gid)
            else:
                group.group_epoch = data["epoch"]
        elif kind == "ConsumerGroupPartitionMetadata":
            group.subscription_metadata = {} if data is None else {
                t["topic_name"]: (t["topic_id"], t["num_partitions"]) for t in data["topics"]}
        elif kind == "ConsumerGroupTargetAssignmentMetadata":
            group.assignment_epoch = 0 if data is None else data["assignment_epoch"]
        elif kind == "ConsumerGroupTargetAssignmentMember":
            if data is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = _from_wire(data["topic_partitions"])
        elif kind == "ConsumerGroupMemberMetadata":
            if data is None:
                group.members.pop(key.member_id, None)
            else:
                member = group.members.setdefault(key.member_id, ConsumerMember(key.member_id))
                member.instance_id = data["instance_id"]
                member.rack_id = data["rack_id"]
                member.client_id = data["client_id"]
                member.client_host = data["client_host"]
                member.subscribed_topic_names = list(data["subscribed_topic_names"])
                member.subscribed_topic_regex = data["subscribed_topic_regex"]
                member.rebalance_timeout_ms = data["rebalance_timeout_ms"]
                member.server_assignor = data["server_assignor"]
                member.classic = ClassicMemberMetadata.from_record(data.get("classic_member_metadata"))
        elif kind == "ConsumerGroupCurrentMemberAssignment":
            member = group.members.get(key.member_id)
            if member is None:
                if data is None:
                    return
                member = group.members[key.member_id] = ConsumerMember(key.member_id)
            if data is None:
                member.member_epoch, member.previous_member_epoch = 0, -1
                member.state, member.assigned, member.pending_revocation = MemberState.STABLE, {}, {}
            else:
                member.member_epoch = data["member_epoch"]
                member.previous_member_epoch = data["previous_member_epoch"]
                member.state = MemberState(data["state"]) if data["state"] in MemberState._value2member_map_ \
                    else MemberState.UNKNOWN
                member.assigned = _from_wire(data["assigned_partitions"])
                member.pending_revocation = _from_wire(data["partitions_pending_revocation"])

    def remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in group.members:
                self._cancel_member_timers(group_id, member_id)

    # == timers ==================================================================================

    def schedule_session(self, group_id: str, member_id: str, timeout_ms: Optional[int] = None) -> None:
        if timeout_ms is None:
            group = self.groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            timeout_ms = self.session_timeout_of(member, group_id)
        self.runtime.schedule(_session_key(group_id, member_id), timeout_ms,
                       lambda: self.fence_by_timer(group_id, member_id, "session timeout"))

    def session_timeout_of(self, member: Optional[ConsumerMember], group_id: str | None = None) -> int:
        """A classic member keeps the session timeout it joined with; others get the group's
        (its consumer.session.timeout.ms group config, else the broker's)."""
        if member is not None and member.classic is not None:
            return member.classic.session_timeout_ms
        return self.config.session_timeout_for(group_id)

    def _schedule_revocation(self, group_id: str, member: ConsumerMember) -> None:
        member_id = member.member_id
        timeout = (member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0
                   else self.config.session_timeout_for(group_id))
        self.runtime.schedule(_revocation_key(group_id, member_id), timeout,
                       lambda: self.fence_by_timer(group_id, member_id, "revocation timeout"))

    def fence_by_timer(self, group_id: str, member_id: str, why: str):
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return CoordinatorResult()
        log.info("consumer group %s: member %s removed (%s)", group_id, member_id, why)
        return self.fence_members(group, {member_id}, None)

    def fence_members(self, group: ConsumerGroup, member_ids: set[str], response, records=None):
        """Remove members; the group becomes a classic group again when only classic members remain
        and the migration policy allows it (``migration.GroupMigration.maybe_downgrade``)."""
        records = [] if records is None else records
        downgrade = self.migration.maybe_downgrade(group, member_ids, response, records)
        if downgrade is not None:
            return downgrade
        for member_id in member_ids:
            records.extend(self.remove_member_records(group, member_id, bump=False))
        records.append((_key("ConsumerGroupMetadata", group.group_id), ConsumerGroupValue(
            "ConsumerGroupMetadata", {"epoch": group.group_epoch + 1})))
        return CoordinatorResult(records, response)

    def remove_member_records(self, group: ConsumerGroup, member_id: str, bump: bool = True) -> list:
        """Tombstones for a member and a bumped group epoch, so the others get its partitions."""
        gid = group.group_id
        self._cancel_member_timers(gid, member_id)
        return _member_tombstones(gid, member_id) + ([(_key("ConsumerGroupMetadata", gid), ConsumerGroupValue("ConsumerGroupMetadata",
                                                                      {"epoch": group.group_epoch + 1}))]
             if bump else [])

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        for key in (_session_key, _revocation_key, _join_key, _sync_key):
            self.timer.cancel(key(group_id, member_id))

    # == ConsumerGroupHeartbeat ==================================================================

    def heartbeat(self, request: dict, api_version: int, client_id: str, client_host: str) -> CoordinatorResult:
        try:
            return self._consumer_heartbeat_checked(request, api_version, client_id, client_host)
        except _HeartbeatError as exc:
            log.info("consumer group %s: heartbeat of member %r at epoch %s answered %s: %s",
                     request.get("group_id"), request.get("member_id"), request.get("member_epoch"),
                     exc.code.name, exc.message)
            return CoordinatorResult(response={
                "error_code": exc.code, "error_message": exc.message, "member_id": None,
                "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None})

    def _validate_heartbeat(self, request: dict, api_version: int) -> None:
        epoch = request["member_epoch"]
        member_id = request["member_id"]
        if not request["group_id"]:
            raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if request.get("instance_id") == "":
            raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if request.get("rack_id") == "":
            raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if epoch < STATIC_LEAVE_EPOCH:
            raise _HeartbeatError(ErrorCode.INVALID_REQUEST, f"MemberEpoch {epoch} is invalid.")
        if (api_version >= 1 or epoch != 0) and not member_id:
            raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch == 0:
            if request.get("rebalance_timeout_ms", -1) == -1:
                raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if request.get("topic_partitions"):
                raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if request.get("subscribed_topic_names") is None and request.get("subscribed_topic_regex") is None:
                raise _HeartbeatError(ErrorCode.INVALID_REQUEST,
                                      "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        if epoch == STATIC_LEAVE_EPOCH and request.get("instance_id") is None:
            raise _HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null for a static leave.")
        regex = request.get("subscribed_topic_regex")
        if regex and _compile(regex) is None:
            raise _HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {regex} is not valid.")
        assignor = request.get("server_assignor")
        if assignor is not None and assignor not in self.config.assignors:
            raise _HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported.")

    def _consumer_group_for_heartbeat(self, group_id: str, epoch: int, records: list) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.runtime.group_type(group_id) is not None:
            # Another group type holds the id: a classic group, which may become this consumer group.
            converted = self.migration.consumer_group_for_heartbeat(group_id, epoch, records)
            if converted is not None:
                return converted
        if epoch != 0:
            raise _HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def _consumer_heartbeat_checked(self, request: dict, api_version: int, client_id: str, client_host: str):
        self._validate_heartbeat(request, api_version)
        group_id, epoch = request["group_id"], request["member_epoch"]
        member_id = request["member_id"] or str(uuid.uuid4())
        instance_id = request.get("instance_id")
        records: list = []
        group = self._consumer_group_for_heartbeat(group_id, epoch, records)

        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._consumer_leave(group, member_id, instance_id, epoch, records)

        owned = None if request.get("topic_partitions") is None else _from_wire(request["topic_partitions"])
        member = group.members.get(member_id)
        replaced: Optional[ConsumerMember] = None
        if instance_id is not None:
            static = group.static_member(instance_id)
            if epoch == 0:
                if static is not None and static.member_id != member_id:
                    if static.member_epoch != STATIC_LEAVE_EPOCH:
                        raise _HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                              f"Static member {instance_id} has not left the group.")
                    replaced = static
            elif static is None or static.member_id != member_id:
                raise _HeartbeatError(ErrorCode.FENCED_INSTANCE_ID if static is not None else ErrorCode.UNKNOWN_MEMBER_ID,
                                      f"Instance {instance_id} is not member {member_id}.")
        if epoch == 0:
            if member is None and replaced is None and len(group.members) >= self.config.max_size:
                raise _HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                      f"Group {group_id} reached its maximum size.")
            if replaced is not None:
                # The restarted static member takes over its predecessor's assignment and epoch.
                updated = replaced.copy()
                updated.member_id = member_id
                records.extend(self.remove_member_records(group, replaced.member_id)[:3])
                if replaced.member_id in group.target:
                    records.append((_key("ConsumerGroupTargetAssignmentMember", group_id, member_id),
                                    ConsumerGroupValue("ConsumerGroupTargetAssignmentMember", {
                                        "topic_partitions": _to_wire(group.target[replaced.member_id])})))
                updated.member_epoch = replaced.previous_member_epoch if replaced.previous_member_epoch > 0 \
                    else group.assignment_epoch
            elif member is not None:
                # A known member (re)joining with epoch 0 starts over: it owns nothing now.
                updated = member.copy()
                updated.member_epoch, updated.previous_member_epoch = 0, -1
                updated.state, updated.assigned, updated.pending_revocation = MemberState.STABLE, {}, {}
            else:
                updated = ConsumerMember(member_id)
            base = None
        else:
            if member is None:
                raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {group_id}.")
            if epoch > member.member_epoch:
                raise _HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                      f"Epoch {epoch} is ahead of the member's epoch {member.member_epoch}.")
            if epoch < member.member_epoch and not (
                    epoch == member.previous_member_epoch and owned is not None and _subset(owned, member.assigned)):
                raise _HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                      f"Epoch {epoch} is behind the member's epoch {member.member_epoch}.")
            updated = member.copy()
            base = member

        # Subscription and identity.
        subscription_changed = base is None and replaced is None
        updated.client_id, updated.client_host = client_id, client_host
        if instance_id is not None:
            updated.instance_id = instance_id
        if request.get("rack_id") is not None:
            updated.rack_id = request["rack_id"]
        if request.get("rebalance_timeout_ms", -1) != -1:
            updated.rebalance_timeout_ms = request["rebalance_timeout_ms"]
        if request.get("server_assignor") is not None:
            updated.server_assignor = request["server_assignor"]
        names = request.get("subscribed_topic_names")
        if names is not None and sorted(names) != sorted(updated.subscribed_topic_names):
            updated.subscribed_topic_names = sorted(set(names))
            subscription_changed = True
        regex = request.get("subscribed_topic_regex")
        if regex is not None and (regex or None) != updated.subscribed_topic_regex:
            updated.subscribed_topic_regex = regex or None
            subscription_changed = True
        reconciled = self.update_and_reconcile(group, updated, base, replaced, owned, subscription_changed, records)
        current_before = base
        self.schedule_session(group_id, member_id)

        # A full request (Kafka: every optional field set, as a client sends after an error) or a
        # join gets the whole assignment; any other heartbeat only a changed one.
        full = epoch == 0 or (request.get("rebalance_timeout_ms", -1) != -1
                              and (names is not None or regex is not None)
                              and request.get("topic_partitions") is not None)
        changed = current_before is None or not current_before.same_assignment(reconciled)
        response = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                    "member_epoch": reconciled.member_epoch,
                    "heartbeat_interval_ms": self.config.heartbeat_interval_for(group_id),
                    "assignment": {"topic_partitions": _to_wire(reconciled.assigned)} if (changed or full) else None}
        if group_id not in self.groups and not group.members:
            # The records create it on replay; make sure an empty-but-new group exists even if none is written.
            # (A group converted from a classic one is created by its conversion records alone: if they fail
            # to append, the classic group stays.)
            self.groups[group_id] = group
        return CoordinatorResult(records, response, on_appended=self.heartbeat_appended(response))

    def update_and_reconcile(self, group: ConsumerGroup, updated: ConsumerMember, base: Optional[ConsumerMember],
                              replaced: Optional[ConsumerMember], owned: Optional[Assignment],
                              subscription_changed: bool, records: list) -> ConsumerMember:
        """Kafka's three heartbeat steps, shared by ConsumerGroupHeartbeat and a classic member's JoinGroup:
        record the member, bump the group epoch and compute a new target when needed, then reconcile the
        member toward its target.  ``base`` is the member as it was (None when it (re)joins with epoch 0).
        Returns the member's next current assignment; records go to ``records``."""
        group_id, member_id = group.group_id, updated.member_id
        old = base if base is not None else (group.members.get(member_id))
        if old is None or old.metadata_value() != updated.metadata_value():
            records.append((_key("ConsumerGroupMemberMetadata", group_id, member_id), updated.metadata_value()))

        # Group epoch: bumped by a subscription change or a change of the subscribed topics' partitions.
        members = dict(group.members)
        if replaced is not None:
            members.pop(replaced.member_id, None)
        members[member_id] = updated
        metadata = self.runtime.topic_metadata()
        subscribed = group.subscribed_topics(members, metadata)
        new_meta = {n: metadata[n] for n in subscribed if n in metadata}
        group_epoch = group.group_epoch
        bump = subscription_changed
        if new_meta != group.subscription_metadata:
            records.append((_key("ConsumerGroupPartitionMetadata", group_id), ConsumerGroupValue(
                "ConsumerGroupPartitionMetadata", {"topics": [
                    {"topic_id": tid, "topic_name": n, "num_partitions": count, "partition_metadata": []}
                    for n, (tid, count) in sorted(new_meta.items())]})))
            bump = True
        if bump:
            group_epoch += 1
            records.append((_key("ConsumerGroupMetadata", group_id),
                            ConsumerGroupValue("ConsumerGroupMetadata", {"epoch": group_epoch})))

        # Target assignment for the group epoch.
        target = dict(group.target)
        if replaced is not None and replaced.member_id in target:
            target[member_id] = target.pop(replaced.member_id)
        assignment_epoch = group.assignment_epoch
        if group_epoch > assignment_epoch:
            target = self._compute_target(members, new_meta, metadata, target)
            for mid, assignment in target.items():
                if group.target.get(mid) != assignment or mid == member_id:
                    records.append((_key("ConsumerGroupTargetAssignmentMember", group_id, mid),
                                    ConsumerGroupValue("ConsumerGroupTargetAssignmentMember",
                                                       {"topic_partitions": _to_wire(assignment)})))
            assignment_epoch = group_epoch
            records.append((_key("ConsumerGroupTargetAssignmentMetadata", group_id), ConsumerGroupValue(
                "ConsumerGroupTargetAssignmentMetadata", {"assignment_epoch": assignment_epoch})))

        # Reconciliation toward the member's target.
        owners = group.owners(exclude=member_id)
        if replaced is not None:
            owners = {tp: m for tp, m in owners.items() if m != replaced.member_id}
        reconciled = reconcile(updated, assignment_epoch, target.get(member_id, {}), owned, owners)
        current_before = base
        if current_before is None or not current_before.same_assignment(reconciled):
            records.append((_key("ConsumerGroupCurrentMemberAssignment", group_id, member_id),
                            reconciled.assignment_value()))

        if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
            if current_before is None or current_before.state != MemberState.UNREVOKED_PARTITIONS:
                self._schedule_revocation(group_id, reconciled)
        else:
            self.timer.cancel(_revocation_key(group_id, member_id))
        return reconciled

    @staticmethod
    def heartbeat_appended(response: dict):
        def on_appended(error):
            if error is None:
                return None
            return {"error_code": error, "error_message": None, "member_id": None, "member_epoch": 0,
                    "heartbeat_interval_ms": 0, "assignment": None}
        return on_appended

    def _compute_target(self, members: dict[str, ConsumerMember], subscribed: dict[str, tuple[uuid.UUID, int]],
                        metadata, previous: dict[str, Assignment]) -> dict[str, Assignment]:
        topic_ids = {tid: count for _, (tid, count) in subscribed.items()}
        by_member: dict[str, set[uuid.UUID]] = {}
        for mid, m in members.items():
            topics = {subscribed[n][0] for n in m.subscribed_topic_names if n in subscribed}
            if m.subscribed_topic_regex:
                pattern = _compile(m.subscribed_topic_regex)
                topics.update(tid for n, (tid, _) in subscribed.items() if pattern is not None and pattern.fullmatch(n))
            by_member[mid] = topics
        name = self._assignor_name(members)
        return ASSIGNORS[name](by_member, topic_ids, previous)

    def _assignor_name(self, members: dict[str, ConsumerMember]) -> str:
        """The assignor most members ask for, else the first configured one (Kafka's rule)."""
        votes: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda n: votes[n])
        return self.config.assignors[0]

    def _consumer_leave(self, group: ConsumerGroup, member_id: str, instance_id: Optional[str], epoch: int,
                        records: list):
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            member = group.static_member(instance_id)
        if member is None:
            raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {group.group_id}.")
        response = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member.member_id,
                    "member_epoch": epoch, "heartbeat_interval_ms": 0, "assignment": None}
        log.info("consumer group %s: member %s leaves (epoch %d)", group.group_id, member.member_id, epoch)
        if epoch == STATIC_LEAVE_EPOCH:
            # The static member keeps its assignment until it comes back or its session times out.
            left = member.copy()
            left.previous_member_epoch = member.member_epoch
            left.member_epoch = STATIC_LEAVE_EPOCH
            left.pending_revocation = {}  # as Kafka: revocations in flight end with the member's departure
            records.append((_key("ConsumerGroupCurrentMemberAssignment", group.group_id, member.member_id),
                            left.assignment_value()))
            self.timer.cancel(_revocation_key(group.group_id, member.member_id))
            return CoordinatorResult(records, response, on_appended=self.heartbeat_appended(response))
        return then(self.fence_members(group, {member.member_id}, response, records),
                    self.heartbeat_appended(response))

    # == offsets =================================================================================

    def validate_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                               generation: int, api_version: int) -> Optional[ErrorCode]:
        code = self._validate_offset_commit(self.groups[group_id], member_id, generation, api_version=api_version)
        if code is None and member_id in self.groups[group_id].members:
            self.schedule_session(group_id, member_id)  # a commit keeps the session alive, as in Kafka
        return code

    def validate_txn_offset_commit(self, group_id: str, member_id: str, instance_id: Optional[str],
                                   generation: int) -> Optional[ErrorCode]:
        # The generation field carries the member epoch.
        return self._validate_offset_commit(self.groups[group_id], member_id, generation, transactional=True)

    def validate_offset_fetch(self, group_id: str, member_id: Optional[str], member_epoch: int) -> Optional[ErrorCode]:
        if member_id is None and member_epoch < 0:
            return None  # admin clients and requests older than v9 name no member
        member = self.groups[group_id].members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _validate_member_epoch(member, member_epoch)

    def validate_offset_delete(self, group_id: str) -> tuple[Optional[ErrorCode], Optional[ConsumerGroup]]:
        # Kafka 4.2 deletes a consumer group's offsets, members or not, of topics no member subscribes
        # to (GROUP_SUBSCRIBED_TO_TOPIC for the others; tests/conformance corpus/tidy.py).
        return None, self.groups[group_id]

    def _validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int,
                                transactional: bool = False, api_version: int = 9) -> Optional[ErrorCode]:
        """Kafka's ConsumerGroup.validateOffsetCommit (member epochs instead of generations)."""
        if epoch < 0 and not group.members:
            return None  # admin tools and unmanaged consumers commit into an empty group
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9 and not member.uses_classic_protocol:
            return ErrorCode.UNSUPPORTED_VERSION  # KIP-848 members commit with OffsetCommit v9+
        return _validate_member_epoch(member, epoch)

    def expire_member(self, group_id: str, member_id: str) -> bool:
        """Remove a member now, as its session timeout would (test kits' "expire a member")."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return False
        self.runtime.execute(self.fence_by_timer(group_id, member_id, "expired on request"))
        return True

    # == admin ===================================================================================

    def describe(self, group_id: str, names_by_id: Callable[[uuid.UUID], Optional[str]]) -> dict:
        group = self.groups.get(group_id)
        if group is None:
            code = ErrorCode.GROUP_ID_NOT_FOUND
            message = (f"Group {group_id} is not a consumer group." if self.runtime.group_type(group_id) is not None
                       else f"Group {group_id} not found.")
            # Kafka 4.2 leaves every other field at its default ("" and 0).
            return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
                    "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}

        def wire(a: Assignment) -> dict:
            return {"topic_partitions": [
                {"topic_id": t, "topic_name": names_by_id(t) or "", "partitions": sorted(p)}
                for t, p in sorted(a.items(), key=lambda i: str(i[0])) if p]}

        members = [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka 4.2: "" without one
            "assignment": wire(m.assigned), "target_assignment": wire(group.target.get(m.member_id, {})),
            "member_type": 0 if m.uses_classic_protocol else 1,
        } for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": str(group.state), "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": self._assignor_name(group.members), "members": members}
