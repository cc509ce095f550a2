"""The streams groups of one coordinator shard (Kafka's ``GroupMetadataManager`` streams paths).

The shard holds one ``StreamsGroupManager``.  An operation returns a ``CoordinatorResult`` (records +
response) that the shard appends to its ``__consumer_offsets`` partition and applies through
``replay``, the same path that rebuilds the groups when the shard loads.  Timers (session, rebalance,
initial delay) are not state: they are armed by the operations and re-armed by ``on_loaded``.

A heartbeat (``heartbeat``), in Kafka 4.2's order:

1. epoch 0 joins (creating the group, or replacing an empty classic group); other epochs must name a
   member whose epoch they match (or its previous epoch, reporting only tasks it still has);
2. the member's metadata is recorded (a change bumps the group epoch); the first member's topology
   becomes the group's (a later member with another topology at the same epoch: INVALID_REQUEST);
3. when the topology is new, unconfigured, or the metadata of its topics changed (noticed through a
   hash of the topics' ids and partition counts), the topology is configured against the existing
   topics (``topology.configure_topics``); a configuration that becomes valid or invalid bumps the epoch;
4. a bumped epoch gets a new target assignment from the ``sticky`` assignor (``assignor``), unless the
   group was empty and ``group.streams.initial.rebalance.delay.ms`` is running (status ASSIGNMENT_DELAYED);
5. the member reconciles toward its target (``group.reconcile``).

The answer carries the tasks when they changed (or on join), the endpoint-to-partitions map for
interactive queries when the member's endpoint epoch is behind, and statuses: STALE_TOPOLOGY,
MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS (with the topics to
create, which the request handler creates), SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import uuid
from typing import Callable, Optional

from minikafka.protocol.errors import ErrorCode

from . import assignor as sticky
from .group import (EMPTY_TASKS, AssignedTasks, FencedMember, MemberState, StreamsGroup, StreamsGroupState,
                    StreamsMember, TasksTuple, reconcile, tasks_to_wire)
from .settings import INT_MAX, StreamsConfig  # noqa: F401 (re-exported)
from .records import StreamsGroupKey, StreamsGroupValue, key as record_key
from .topology import (ASSIGNMENT_DELAYED, SHUTDOWN_APPLICATION, STALE_TOPOLOGY, ConfiguredTopology,
                       InternalStateError, InvalidTopologyError, StreamsTopology, configure_topics,
                       record_from_request)

log = logging.getLogger("minikafka.streams")

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: Optional[str] = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def error_response(code: ErrorCode, message: Optional[str] = None) -> dict:
    """An error answer: Kafka 4.2 leaves every other field at its default."""
    return {"error_code": code, "error_message": message, "member_id": "", "member_epoch": 0,
            "heartbeat_interval_ms": 0, "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0,
            "status": [], "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
            "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}


def validate_request(request: dict) -> None:
    """Kafka's GroupCoordinatorService checks, before the group is looked at (INVALID_REQUEST,
    STREAMS_INVALID_TOPOLOGY)."""
    def empty(name, value, message):
        if value is not None and not value.strip():
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, message)

    # Features Kafka 4.2 does not support yet come first.
    if request.get("instance_id") is not None:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "Static membership is not yet supported.")
    if request.get("task_offsets") is not None:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "TaskOffsets are not supported yet.")
    if request.get("task_end_offsets") is not None:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "TaskEndOffsets are not supported yet.")
    if request.get("warmup_tasks"):
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "WarmupTasks are not supported yet.")
    topology = request.get("topology")
    if topology is not None:
        for s in topology.get("subtopologies") or []:
            if s.get("source_topic_regex"):
                raise HeartbeatError(ErrorCode.INVALID_REQUEST,
                                     "Regular expressions for source topics are not supported yet.")
    empty("member_id", request.get("member_id"), "MemberId can't be empty.")
    empty("group_id", request.get("group_id"), "GroupId can't be empty.")
    empty("instance_id", request.get("instance_id"), "InstanceId can't be empty.")
    empty("rack_id", request.get("rack_id"), "RackId can't be empty.")
    epoch = request["member_epoch"]
    if epoch == 0:
        if request.get("rebalance_timeout_ms", -1) == -1:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        for name, label in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"),
                            ("warmup_tasks", "WarmupTasks")):
            if request.get(name):
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, f"{label} must be empty when (re-)joining.")
        if topology is None:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
        for s in topology.get("subtopologies") or []:
            for t in s.get("state_changelog_topics") or []:
                if t.get("partitions", 0) != 0:
                    raise HeartbeatError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                         f"Changelog topic {t['name']} must have an undefined partition count, "
                                         f"but it is set to {t['partitions']}.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if request.get("instance_id") is None:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST,
                             f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    lists = [request.get(n) for n in ("active_tasks", "standby_tasks", "warmup_tasks")]
    if any(v is not None for v in lists) and any(v is None for v in lists):
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "If one task-type is non-null, all must be non-null.")
    if epoch != 0 and topology is not None:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "Topology can only be provided when (re-)joining.")


def _owned(items) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for t in items or ():
        out.setdefault(t["subtopology_id"], set()).update(t["partitions"])
    return out


def metadata_hash(topics: dict[str, tuple], names) -> int:
    """A 64-bit hash of the named topics' ids and partition counts (0 with none).  Kafka hashes the same
    facts with XXH3; the value only has to change when the topics do, so another hash serves."""
    present = sorted(n for n in names if n in topics)
    if not present:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name in present:
        topic_id, partitions = topics[name]
        h.update(name.encode("utf-8") + b"\0" + str(topic_id).encode() + struct.pack(">i", partitions))
    return struct.unpack(">q", h.digest())[0]


def _session_key(group_id: str, member_id: str) -> tuple:
    return ("sg-session", group_id, member_id)


def _rebalance_key(group_id: str, member_id: str) -> tuple:
    return ("sg-rebalance", group_id, member_id)


def _initial_key(group_id: str) -> tuple:
    return ("sg-initial-rebalance", group_id)


class StreamsGroupManager:
    """The streams groups of one shard.  ``shard`` provides ``timer``, ``now()``, ``execute(result)``,
    ``topic_metadata()`` (name -> (topic id, partition count)) and the other group types' managers
    (``classic``, ``consumer``: a group id names one group of one type)."""

    def __init__(self, shard, config: Optional[StreamsConfig] = None) -> None:
        self.shard = shard
        self.config = config or StreamsConfig()
        self.groups: dict[str, StreamsGroup] = {}

    # == heartbeat ===================================================================================

    def heartbeat(self, request: dict, client_id: str, client_host: str):
        """StreamsGroupHeartbeat -> CoordinatorResult whose response is a dict with ``topics_to_create``
        (internal topics the request handler must create) beside the response fields."""
        from minikafka.broker.group.result import CoordinatorResult

        try:
            validate_request(request)
            if request["member_epoch"] in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host)
        except HeartbeatError as exc:
            log.info("streams group %s: heartbeat of member %r at epoch %s answered %s: %s",
                     request.get("group_id"), request.get("member_id"), request.get("member_epoch"),
                     exc.code.name, exc.message)
            return CoordinatorResult(response={**error_response(exc.code, exc.message), "topics_to_create": {}})

    def _group_for_join(self, group_id: str, records: list) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.shard.classic.groups.get(group_id)
        if classic is not None:
            if classic.all_members() or classic.pending_join_members:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
            # An empty classic group becomes a streams group (its metadata record is deleted).
            from minikafka.broker.group.records import GroupMetadataKey
            records.append((GroupMetadataKey(group_id), None))
        elif group_id in self.shard.consumer.groups:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        return StreamsGroup(group_id)

    def _group_or_error(self, group_id: str) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.shard.classic.groups or group_id in self.shard.consumer.groups:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")

    def _heartbeat(self, request: dict, client_id: str, client_host: str):
        from minikafka.broker.group.result import CoordinatorResult

        now = self.shard.now()
        group_id, member_id, epoch = request["group_id"], request["member_id"], request["member_epoch"]
        records: list = []
        statuses: list[dict] = []
        joining = epoch == 0
        if joining:
            group = self._group_for_join(group_id, records)
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The streams group has reached its maximum capacity of {self.config.max_size} members.")
        else:
            group = self._group_or_error(group_id)

        owned_lists = (request.get("active_tasks"), request.get("standby_tasks"), request.get("warmup_tasks"))
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
            member = StreamsMember(member_id)
            log.info("streams group %s: member %s joins", group_id, member_id)
        elif epoch != 0:
            self._check_epoch(member, epoch, owned_lists)

        updated = member.copy()
        if request.get("rack_id") is not None:
            updated.rack_id = request["rack_id"]
        if request.get("rebalance_timeout_ms", -1) != -1:
            updated.rebalance_timeout_ms = request["rebalance_timeout_ms"]
        topology_request = request.get("topology")
        if topology_request is not None:
            updated.topology_epoch = topology_request["epoch"]
        updated.client_id, updated.client_host = client_id, client_host
        if request.get("process_id") is not None:
            updated.process_id = request["process_id"]
        if request.get("client_tags") is not None:
            updated.client_tags = {kv["key"]: kv["value"] for kv in request["client_tags"]}
        if request.get("user_endpoint") is not None:
            updated.user_endpoint = (request["user_endpoint"]["host"], request["user_endpoint"]["port"])

        bump = False
        if updated.metadata_fields() != member.metadata_fields() or member_id not in group.members:
            records.append((record_key("StreamsGroupMemberMetadata", group_id, member_id),
                            StreamsGroupValue("StreamsGroupMemberMetadata", updated.metadata_value())))
            bump = True

        topology = self._maybe_update_topology(group, member_id, topology_request, records)
        if group.topology is not None and updated.topology_epoch < group.topology.epoch:
            statuses.append({"status_code": STALE_TOPOLOGY, "status_detail":
                             f"The member's topology epoch {updated.topology_epoch} is behind the group's "
                             f"topology epoch {group.topology.epoch}."})

        reconfigure = group.topology is None
        hash_ = group.metadata_hash
        configured = group.configured
        # Kafka recomputes the hash when its metadata image reports a change to one of the group's topics;
        # here the (cheap) hash is recomputed on every heartbeat, which notices the same changes.
        topics = self.shard.topic_metadata()
        current_hash = metadata_hash(topics, topology.required_topics())
        if reconfigure or configured is None or group.metadata_expired(now) or current_hash != hash_:
            hash_ = current_hash
            if hash_ != group.metadata_hash:
                bump = reconfigure = True
            if reconfigure or configured is None:
                try:
                    configured = configure_topics(topology, hash_, lambda t: topics[t][1] if t in topics else None)
                except InvalidTopologyError as exc:
                    raise HeartbeatError(ErrorCode.STREAMS_INVALID_TOPOLOGY, str(exc)) from None
                except InternalStateError as exc:
                    raise HeartbeatError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from None
                group.configured = configured

        validated = -1
        if configured.ready:
            validated = topology.epoch
            for tasks in owned_lists:
                self._check_tasks(configured, tasks)
        if validated != group.validated_topology_epoch:
            bump = True
        assignment_configs = {"num.standby.replicas": str(self.config.for_group(group.group_id, "num.standby.replicas"))}
        if not bump and assignment_configs != group.last_assignment_configs:
            bump = True

        group_epoch = group.group_epoch
        if bump:
            group_epoch = 2 if group_epoch == 0 else group_epoch + 1
            records.append((record_key("StreamsGroupMetadata", group_id), StreamsGroupValue("StreamsGroupMetadata", {
                "epoch": group_epoch, "metadata_hash": hash_, "validated_topology_epoch": validated,
                "last_assignment_configs": [{"key": k, "value": v} for k, v in assignment_configs.items()]})))
            log.info("streams group %s: epoch %d (member %s)", group_id, group_epoch, member_id)
            group.metadata_refresh_deadline = (now + INT_MAX, group_epoch)

        delay = self.config.for_group(group_id, "initial.rebalance.delay.ms")
        if group.is_empty() and delay > 0 and not self.shard.timer.is_scheduled(_initial_key(group_id)):
            self._schedule(_initial_key(group_id), delay, lambda: self._delayed_target_assignment(group_id))

        if group_epoch > group.assignment_epoch:
            if self.shard.timer.is_scheduled(_initial_key(group_id)):
                target_epoch = max(1, group.assignment_epoch)
                target = EMPTY_TASKS
                statuses.append({"status_code": ASSIGNMENT_DELAYED, "status_detail":
                                 "Assignment delayed due to the configured initial rebalance delay."})
            else:
                members = dict(group.members)
                members[member_id] = updated
                targets = self._target_assignment(group, group_epoch, members, configured, assignment_configs,
                                                  records)
                target_epoch = group_epoch
                target = targets.get(member_id, EMPTY_TASKS)
        else:
            target_epoch = group.assignment_epoch
            target = group.target.get(member_id, EMPTY_TASKS)

        reconciled = self._reconcile(group, updated, member, target_epoch, target, owned_lists, records)
        self._schedule_session(group_id, member_id)
        if request.get("shutdown_application"):
            self._request_shutdown(group, member_id)

        response = {"error_code": ErrorCode.NONE, "error_message": None, "member_id": member_id,
                    "member_epoch": reconciled.member_epoch,
                    "heartbeat_interval_ms": self.config.for_group(group_id, "heartbeat.interval.ms"),
                    "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0,
                    "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
                    "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}
        if epoch == 0 or reconciled.assigned != member.assigned:
            response["active_tasks"] = tasks_to_wire(reconciled.assigned.active_sets())
            response["standby_tasks"] = tasks_to_wire(reconciled.assigned.standby)
            response["warmup_tasks"] = tasks_to_wire(reconciled.assigned.warmup)
            if reconciled.user_endpoint is not None:
                group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != request.get("endpoint_information_epoch", 0):
            response["partitions_by_user_endpoint"] = self._endpoints(group, reconciled, configured)
        if group_id in self.groups:
            response["endpoint_information_epoch"] = group.endpoint_information_epoch
        topics_to_create: dict = {}
        if configured.error is not None:
            topics_to_create = configured.topics_to_create
            statuses.append({"status_code": configured.error.status, "status_detail": configured.error.message})
        if group.shutdown_requested_by is not None:
            statuses.append({"status_code": SHUTDOWN_APPLICATION, "status_detail":
                             f"Streams group member {group.shutdown_requested_by} encountered a fatal error and "
                             "requested a shutdown for the entire application."})
        response["status"] = statuses
        response["topics_to_create"] = topics_to_create
        if group_id not in self.groups:
            self.groups[group_id] = group  # the records fill it when they are replayed
        return CoordinatorResult(records, response, on_appended=_appended(response))

    def _check_epoch(self, member: StreamsMember, epoch: int, owned_lists) -> None:
        if epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The streams group member has a greater member epoch ({epoch}) than the one known "
                                 f"by the group coordinator ({member.member_epoch}). The member must abandon all "
                                 "its partitions and rejoin.")
        if epoch < member.member_epoch:
            active, standby, warmup = owned_lists
            contained = (active is not None and standby is not None and warmup is not None
                         and _subset(_owned(active), member.assigned.active_sets())
                         and _subset(_owned(standby), member.assigned.standby)
                         and _subset(_owned(warmup), member.assigned.warmup))
            if epoch != member.previous_member_epoch or not contained:
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The streams group member has a smaller member epoch ({epoch}) than the one "
                                     f"known by the group coordinator ({member.member_epoch}). The member must "
                                     "abandon all its partitions and rejoin.")

    @staticmethod
    def _check_tasks(configured: ConfiguredTopology, tasks) -> None:
        for t in tasks or ():
            sid = t["subtopology_id"]
            sub = (configured.subtopologies or {}).get(sid)
            if sub is None:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, f"Subtopology {sid} does not exist in the topology.")
            for p in t["partitions"]:
                if not 0 <= p < sub.number_of_tasks:
                    raise HeartbeatError(ErrorCode.INVALID_REQUEST,
                                         f"Task {p} for subtopology {sid} is invalid. Number of tasks for this "
                                         f"subtopology: {sub.number_of_tasks}")

    def _maybe_update_topology(self, group: StreamsGroup, member_id: str, topology: Optional[dict],
                               records: list) -> StreamsTopology:
        if topology is not None:
            sent = StreamsTopology.from_request(topology)
            if group.topology is None:
                log.info("streams group %s: member %s initialised the topology with epoch %d",
                         group.group_id, member_id, topology["epoch"])
                records.append((record_key("StreamsGroupTopology", group.group_id),
                                StreamsGroupValue("StreamsGroupTopology", record_from_request(topology))))
                return sent
            if group.topology.epoch > topology["epoch"]:
                return group.topology
            if not group.topology.same_as(sent):
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
            return group.topology
        if group.topology is not None:
            return group.topology
        raise HeartbeatError(ErrorCode.UNKNOWN_SERVER_ERROR, "The topology is null and the group topology is also null.")

    def _target_assignment(self, group: StreamsGroup, group_epoch: int, members: dict[str, StreamsMember],
                           configured: ConfiguredTopology, assignment_configs: dict, records: list) -> dict:
        specs = {}
        for mid, m in members.items():
            previous = group.target.get(mid, EMPTY_TASKS)
            specs[mid] = sticky.MemberSpec(m.process_id, previous.active, previous.standby)
        if configured.ready:
            subs = {sid: sticky.SubtopologyInfo(s.number_of_tasks, bool(s.state_changelog_topics))
                    for sid, s in sorted((configured.subtopologies or {}).items())}
            try:
                result = sticky.assign(specs, subs, int(assignment_configs.get("num.standby.replicas", "0")))
            except sticky.AssignorError as exc:
                raise HeartbeatError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                     f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}") from None
            targets = {mid: TasksTuple(a, s, {}) for mid, (a, s) in result.items()}
        else:
            targets = {mid: EMPTY_TASKS for mid in specs}
        for mid, target in targets.items():
            old = group.target.get(mid)
            if old is None or _norm(old) != _norm(target):
                records.append((record_key("StreamsGroupTargetAssignmentMember", group.group_id, mid),
                                StreamsGroupValue("StreamsGroupTargetAssignmentMember", {
                                    "active_tasks": tasks_to_wire(target.active),
                                    "standby_tasks": tasks_to_wire(target.standby),
                                    "warmup_tasks": tasks_to_wire(target.warmup)})))
        records.append((record_key("StreamsGroupTargetAssignmentMetadata", group.group_id),
                        StreamsGroupValue("StreamsGroupTargetAssignmentMetadata", {"assignment_epoch": group_epoch})))
        log.info("streams group %s: target assignment for epoch %d computed", group.group_id, group_epoch)
        return targets

    def _delayed_target_assignment(self, group_id: str):
        from minikafka.broker.group.result import CoordinatorResult

        group = self.groups.get(group_id)
        if group is None or group.is_empty() or group.configured is None:
            return CoordinatorResult()
        if group.group_epoch <= group.assignment_epoch:
            return CoordinatorResult()
        records: list = []
        self._target_assignment(group, group.group_epoch, group.members, group.configured,
                                group.last_assignment_configs, records)
        return CoordinatorResult(records)

    def _reconcile(self, group: StreamsGroup, updated: StreamsMember, stored: StreamsMember, target_epoch: int,
                   target: TasksTuple, owned_lists, records: list) -> StreamsMember:
        if updated.reconciled_to(target_epoch):
            return updated
        owned = None
        if all(x is not None for x in owned_lists):
            owned = TasksTuple(_owned(owned_lists[0]), _owned(owned_lists[1]), _owned(owned_lists[2]))
        try:
            reconciled = reconcile(updated, target_epoch, target, owned, group.active_owner(""),
                                   group.owners_of("standby", ""), group.owners_of("warmup", ""))
        except FencedMember as exc:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None
        if reconciled.assignment_fields() != updated.assignment_fields():
            records.append((record_key("StreamsGroupCurrentMemberAssignment", group.group_id, updated.member_id),
                            StreamsGroupValue("StreamsGroupCurrentMemberAssignment", reconciled.assignment_value())))
            if reconciled.state == MemberState.UNREVOKED_TASKS:
                self._schedule_rebalance_timeout(group.group_id, reconciled)
            else:
                self.shard.timer.cancel(_rebalance_key(group.group_id, updated.member_id))
        return reconciled

    def _endpoints(self, group: StreamsGroup, updated: StreamsMember, configured: ConfiguredTopology) -> list:
        topics = self.shard.topic_metadata()
        out = []
        members = [m for mid, m in group.members.items() if mid != updated.member_id] + [updated]
        for m in members:
            if m.user_endpoint is None or not configured.subtopologies:
                continue
            def partitions(tasks: dict) -> list:
                items = []
                for sid, parts in tasks.items():
                    sub = configured.subtopologies.get(sid)
                    if sub is None:
                        continue
                    for topic in sorted(sub.source_topics | set(sub.repartition_source_topics)):
                        count = topics.get(topic, (None, 0))[1]
                        chosen = sorted(p for p in parts if p < count)
                        if chosen:
                            items.append({"topic": topic, "partitions": chosen})
                return items
            out.append({"user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                        "active_partitions": partitions(m.assigned.active_sets()),
                        "standby_partitions": partitions(m.assigned.standby)})
        return out

    def _request_shutdown(self, group: StreamsGroup, member_id: str) -> None:
        if group.shutdown_requested_by is None:
            log.info("streams group %s: member %s requested a shutdown of the application", group.group_id, member_id)
            group.shutdown_requested_by = member_id

    # == leave and fencing =============================================================================

    def _leave(self, request: dict):
        group_id, member_id = request["group_id"], request["member_id"]
        group = self.groups.get(group_id)
        if group is None:
            kind = "is not a streams group" if group_id in self.shard.classic.groups or group_id in self.shard.consumer.groups \
                else "not found"
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {kind}.")
        if request.get("shutdown_application"):
            self._request_shutdown(group, member_id)
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        log.info("streams group %s: member %s left", group_id, member_id)
        response = {**error_response(ErrorCode.NONE), "member_id": member_id,
                    "member_epoch": request["member_epoch"], "status": [], "topics_to_create": {}}
        result = self._fence(group, member_id, response)
        result.on_appended = _appended(response)
        return result

    def _fence(self, group: StreamsGroup, member_id: str, response):
        from minikafka.broker.group.result import CoordinatorResult

        gid = group.group_id
        records = [(record_key("StreamsGroupCurrentMemberAssignment", gid, member_id), None),
                   (record_key("StreamsGroupTargetAssignmentMember", gid, member_id), None),
                   (record_key("StreamsGroupMemberMetadata", gid, member_id), None),
                   (record_key("StreamsGroupMetadata", gid), StreamsGroupValue("StreamsGroupMetadata", {
                       "epoch": group.group_epoch + 1, "metadata_hash": group.metadata_hash,
                       "validated_topology_epoch": group.validated_topology_epoch,
                       "last_assignment_configs": [{"key": k, "value": v}
                                                   for k, v in group.last_assignment_configs.items()]}))]
        self._cancel_member_timers(gid, member_id)
        return CoordinatorResult(records, response)

    def _fence_by_timer(self, group_id: str, member_id: str, why: str, epoch: Optional[int] = None):
        from minikafka.broker.group.result import CoordinatorResult

        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return CoordinatorResult()
        log.info("streams group %s: member %s fenced (%s)", group_id, member_id, why)
        return self._fence(group, member_id, None)

    # == timers ========================================================================================

    def _schedule(self, key, delay_ms: int, operation: Callable) -> None:
        self.shard.timer.schedule(key, delay_ms, lambda: self.shard.execute(operation()))

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self._schedule(_session_key(group_id, member_id), self.config.for_group(group_id, "session.timeout.ms"),
                       lambda: self._fence_by_timer(group_id, member_id, "the member session expired"))

    def _schedule_rebalance_timeout(self, group_id: str, member: StreamsMember) -> None:
        epoch, member_id = member.member_epoch, member.member_id
        self._schedule(_rebalance_key(group_id, member_id), member.rebalance_timeout_ms,
                       lambda: self._fence_by_timer(group_id, member_id, "it did not revoke its tasks in time", epoch))

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        self.shard.timer.cancel(_session_key(group_id, member_id))
        self.shard.timer.cancel(_rebalance_key(group_id, member_id))

    def on_loaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id)
                if member.state == MemberState.UNREVOKED_TASKS:
                    self._schedule_rebalance_timeout(group.group_id, member)

    def unload(self) -> None:
        for group in self.groups.values():
            self.shard.timer.cancel(_initial_key(group.group_id))
            for member_id in group.members:
                self._cancel_member_timers(group.group_id, member_id)

    def expire_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return False
        self.shard.execute(self._fence_by_timer(group_id, member_id, "expired on request"))
        return True

    # == replay ========================================================================================

    def replay(self, key: StreamsGroupKey, value: Optional[StreamsGroupValue]) -> None:
        gid, kind = key.group, key.kind
        data = None if value is None else value.data
        group = self.groups.get(gid)
        if group is None:
            if data is None:
                return
            group = self.groups[gid] = StreamsGroup(gid)
            classic = self.shard.classic.groups.get(gid)
            if classic is not None and not classic.all_members():
                self.shard.classic.remove_group(gid)  # offsets loaded first made a "simple" group of it
        if kind == "StreamsGroupMetadata":
            if data is None:
                self.shard.timer.cancel(_initial_key(gid))
                del self.groups[gid]
                return
            group.group_epoch, group.metadata_hash = data["epoch"], data["metadata_hash"]
            group.validated_topology_epoch = data.get("validated_topology_epoch", -1)
            group.last_assignment_configs = {c["key"]: c["value"] for c in data.get("last_assignment_configs") or []}
        elif kind == "StreamsGroupTopology":
            group.topology = None if data is None else StreamsTopology.from_record(data)
        elif kind == "StreamsGroupTargetAssignmentMetadata":
            group.assignment_epoch = -1 if data is None else data["assignment_epoch"]
        elif kind == "StreamsGroupTargetAssignmentMember":
            if data is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = TasksTuple(
                    {t["subtopology_id"]: set(t["partitions"]) for t in data["active_tasks"]},
                    {t["subtopology_id"]: set(t["partitions"]) for t in data["standby_tasks"]},
                    {t["subtopology_id"]: set(t["partitions"]) for t in data["warmup_tasks"]})
        elif kind == "StreamsGroupMemberMetadata":
            if data is None:
                group.members.pop(key.member_id, None)
            else:
                member = group.members.get(key.member_id) or StreamsMember(key.member_id, member_epoch=-1,
                                                                             previous_member_epoch=-1)
                member = member.copy()
                member.apply_metadata(data)
                group.members[key.member_id] = member
        elif kind == "StreamsGroupCurrentMemberAssignment":
            member = group.members.get(key.member_id)
            if data is None:
                if member is not None:
                    member.member_epoch = LEAVE_EPOCH
                    member.assigned, member.pending_revocation = AssignedTasks(), AssignedTasks()
                return
            member = (member or StreamsMember(key.member_id)).copy()
            member.apply_assignment(data)
            group.members[key.member_id] = member

    # == admin =========================================================================================

    def describe(self, group_id: str) -> dict:
        group = self.groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a streams group."
                       if group_id in self.shard.classic.groups or group_id in self.shard.consumer.groups
                       else f"Group {group_id} not found.")
            return {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "error_message": message, "group_id": group_id,
                    "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": []}
        configured = group.configured
        if configured is not None and configured.ready:
            topology = configured.describe()
        elif group.topology is not None:
            topology = group.topology.describe()
        else:
            topology = None
        members = []
        for m in group.members.values():
            target = group.target.get(m.member_id, EMPTY_TASKS)
            members.append({
                "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
                "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
                "topology_epoch": m.topology_epoch, "process_id": m.process_id,
                "user_endpoint": None if m.user_endpoint is None else
                {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                "client_tags": [{"key": k, "value": v} for k, v in m.client_tags.items()],
                "task_offsets": [], "task_end_offsets": [],
                "assignment": {"active_tasks": tasks_to_wire(m.assigned.active_sets()),
                               "standby_tasks": tasks_to_wire(m.assigned.standby),
                               "warmup_tasks": tasks_to_wire(m.assigned.warmup)},
                "target_assignment": {"active_tasks": tasks_to_wire(target.active),
                                      "standby_tasks": tasks_to_wire(target.standby),
                                      "warmup_tasks": tasks_to_wire(target.warmup)},
                "is_classic": False})
        return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": str(group.state), "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "topology": topology, "members": members}

    def list_groups(self, states: set[str], types: set[str]) -> list[dict]:
        if types and "streams" not in types:
            return []
        return [{"group_id": g.group_id, "protocol_type": "streams", "group_state": str(g.state),
                 "group_type": "streams"}
                for g in self.groups.values() if not states or g.state.lower in states]

    def records_for_delete(self, group_id: str) -> list:
        """Tombstones that delete an empty streams group (DeleteGroups, expiry, conversion to classic)."""
        group = self.groups[group_id]
        out = [(record_key("StreamsGroupCurrentMemberAssignment", group_id, m), None) for m in group.members]
        out += [(record_key("StreamsGroupTargetAssignmentMember", group_id, m), None) for m in group.members]
        out.append((record_key("StreamsGroupTargetAssignmentMetadata", group_id), None))
        out += [(record_key("StreamsGroupMemberMetadata", group_id, m), None) for m in group.members]
        out.append((record_key("StreamsGroupMetadata", group_id), None))
        out.append((record_key("StreamsGroupTopology", group_id), None))
        return out

    # == offsets =======================================================================================

    def validate_offset_commit(self, group: StreamsGroup, member_id: str, instance_id: Optional[str], epoch: int,
                               transactional: bool, api_version: int):
        """(error for the whole request or None, per-partition check (topic, partition) -> error or None)."""
        if epoch < 0 and not group.members:
            return None, None
        if transactional and epoch == -1 and member_id == "" and instance_id is None:
            return None, None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION, None
        if epoch == member.member_epoch:
            return None, None
        if epoch > member.member_epoch or group.topology is None:
            return ErrorCode.STALE_MEMBER_EPOCH, None
        sources = group.topology.source_topic_map()

        def check(topic: str, partition: int) -> Optional[ErrorCode]:
            sid = sources.get(topic)
            if sid is None:
                return ErrorCode.STALE_MEMBER_EPOCH
            assigned = member.assigned.active.get(sid, {}).get(partition)
            if assigned is None:
                assigned = member.pending_revocation.active.get(sid, {}).get(partition)
            if assigned is None or epoch < assigned:
                return ErrorCode.STALE_MEMBER_EPOCH
            return None
        return None, check

    def commit(self, group: StreamsGroup, request: dict, topics: list, api_version: int, commit_records,
               transactional: bool = False):
        """An OffsetCommit (or TxnOffsetCommit) into a streams group: validated as Kafka 4.2 does, the
        accepted partitions committed through the shard's ``commit_records(group_id, request, topics)``."""
        from minikafka.broker.group.result import CoordinatorResult, every_partition

        epoch = request.get("generation_id_or_member_epoch", request.get("generation_id", -1))
        error, check = self.validate_offset_commit(group, request.get("member_id", ""),
                                                   request.get("group_instance_id"), epoch, transactional, api_version)
        if error is not None:
            return CoordinatorResult(response=every_partition(topics, error))
        if check is None:
            return commit_records(group.group_id, request, topics)
        refused: dict[tuple[str, int], ErrorCode] = {}
        accepted = []
        for t in topics:
            parts = []
            for p in t["partitions"]:
                code = check(t["name"], p["partition_index"])
                if code is None:
                    parts.append(p)
                else:
                    refused[(t["name"], p["partition_index"])] = code
            if parts:
                accepted.append({**t, "partitions": parts})
        result = commit_records(group.group_id, request, accepted) if accepted else CoordinatorResult(
            response={"topics": []})
        answered = {(t["name"], p["partition_index"]): p for t in result.response["topics"] for p in t["partitions"]}
        result.response = {**result.response, "topics": [{"name": t["name"], "partitions": [
            answered.get((t["name"], p["partition_index"])) or
            {"partition_index": p["partition_index"], "error_code": refused[(t["name"], p["partition_index"])]}
            for p in t["partitions"]]} for t in topics]}
        return result

    def txn_commit_error(self, group: StreamsGroup, request: dict, topics: list) -> Optional[ErrorCode]:
        """TxnOffsetCommit into a streams group: the member epoch check, every partition included
        (one refused partition refuses the request here; Kafka answers it per partition)."""
        error, check = self.validate_offset_commit(group, request.get("member_id", ""),
                                                   request.get("group_instance_id"),
                                                   request.get("generation_id", -1), True, 5)
        if error is None and check is not None:
            for t in topics:
                for p in t["partitions"]:
                    error = error or check(t["name"], p["partition_index"])
        return error

    def validate_offset_fetch(self, group: StreamsGroup, member_id: Optional[str], epoch: int) -> Optional[ErrorCode]:
        if member_id is None and epoch < 0:
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None


def _subset(a: dict[str, set[int]], b: dict[str, set[int]]) -> bool:
    return all(s in b and parts <= b[s] for s, parts in a.items())


def _norm(t: TasksTuple) -> tuple:
    def n(d):
        return tuple(sorted((s, tuple(sorted(p))) for s, p in d.items() if p))
    return (n(t.active), n(t.standby), n(t.warmup))


def _appended(response: dict):
    def on_appended(error):
        if error is None:
            return None
        return {**error_response(error), "topics_to_create": {}}
    return on_appended
