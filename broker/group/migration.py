"""KIP-848 online migration: classic groups and consumer groups converted into each other while in use.

Kafka's ``GroupMetadataManager`` (3.8+) lets a group be rolled from the classic protocol to the consumer
protocol one member at a time, and back, as ``group.consumer.migration.policy`` allows (``disabled``,
``upgrade``, ``downgrade``, ``bidirectional``; Kafka 4.x's default is ``bidirectional``):

* **Upgrade.**  A ConsumerGroupHeartbeat (epoch 0) for a non-empty classic group that uses the ``consumer``
  embedded protocol converts it: a tombstone for the classic group's record, then the records of a consumer
  group whose group epoch, assignment epoch and member epochs are the classic generation, each classic
  member's target and current assignment being its last classic assignment.  Its members stay, as
  *classic members* of the consumer group (``ClassicMemberMetadata`` in their member record).  Parked
  JoinGroup/SyncGroup requests are answered REBALANCE_IN_PROGRESS.
* **Classic members inside a consumer group.**  Their JoinGroup/SyncGroup/Heartbeat/LeaveGroup are served
  from the consumer group: a JoinGroup is a heartbeat with the subscription (and owned partitions) read
  from the embedded protocol, reconciled like any member (revoke before assign); its generation is the
  member epoch and nobody is leader: the SyncGroup answer is the member's current assignment, computed by
  the server.  A Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to move on (group
  epoch ahead of it, partitions to revoke, or partitions it waits for now released).  Rejoin and sync are
  each bounded by the member's rebalance timeout, the session by its classic session timeout.
* **Downgrade.**  When the last member that uses the consumer protocol leaves (or is fenced) and the
  remaining members all use the classic protocol, the group becomes a classic group again: tombstones for
  the consumer group's records, then a classic group record (generation = group epoch, assignments = the
  consumer group's targets), and a rebalance starts so that the classic members resynchronise.

``GroupMigration`` holds the classic and the consumer manager and is the only place that touches both:
the shard sends it the classic-protocol requests for ids that a consumer group holds, and the consumer
manager asks it (``consumer_group_for_heartbeat``, ``maybe_downgrade``, ``consumer_group_created``) when
its work crosses into a classic group.  Everything goes through the managers' own methods.

Conversions are records like everything else, so loading the log replays them.  An upgrade's records are
replayed as they are appended; a downgrade, as in Kafka, installs the classic group directly once its
records are appended (a classic group record is never replayed live: the live group carries its timers).
"""

from __future__ import annotations

import logging
import uuid
from typing import Optional

from minikafka.protocol.errors import ErrorCode

from .classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from .classic_manager import ClassicGroupManager
from .consumer import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupManager,
    ConsumerMember,
    MemberState,
    _copy,
    _HeartbeatError,
    _join_key,
    _key,
    _member_tombstones,
    _sync_key,
    _to_wire,
)
from .embedded import EmbeddedProtocolError, encode_assignment, parse_assignment, parse_subscription, version_of
from .member import Member, Respond
from .records import ConsumerGroupValue, GroupMetadataKey
from .result import CoordinatorResult, Runtime, join_error, sync_error
from .state import GroupState

log = logging.getLogger("minikafka.group")

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def _ids(by_name: dict[str, set[int]], metadata: dict) -> dict:
    """Topic names to topic ids; topics the broker does not know are dropped (Kafka's toTopicPartitionMap)."""
    return {metadata[n][0]: set(p) for n, p in by_name.items() if n in metadata and p}


def _names(by_id: dict, metadata: dict) -> dict[str, set[int]]:
    names = {tid: n for n, (tid, _) in metadata.items()}
    return {names[t]: set(p) for t, p in by_id.items() if t in names and p}


class GroupMigration:
    def __init__(self, runtime: Runtime, classic: ClassicGroupManager, consumer: ConsumerGroupManager) -> None:
        self.runtime = runtime
        self.timer = runtime.timer
        self.classic = classic
        self.consumer = consumer

    # == policy ==================================================================================

    def _migration_allows(self, direction: str) -> bool:
        return self.consumer.config.migration_policy in (direction, "bidirectional")

    # == what the consumer manager asks ===========================================================

    def consumer_group_created(self, group_id: str) -> None:
        """A consumer group's first record was replayed: offsets loaded before the group's records
        made a "simple" classic group of the id, which gives way (one id, one group type)."""
        classic = self.classic.group(group_id)
        if classic is not None and not classic.all_members():
            self.classic.remove_group(group_id)

    def consumer_group_for_heartbeat(self, group_id: str, epoch: int, records: list) -> Optional[ConsumerGroup]:
        """A ConsumerGroupHeartbeat for an id a classic group holds: the consumer group it becomes (its
        records go to ``records``), None when the classic group is empty and simply goes (a new
        consumer group takes its id), or _HeartbeatError GROUP_ID_NOT_FOUND."""
        classic = self.classic.group(group_id)
        if classic is None:
            raise _HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not classic.all_members():
            # An empty classic group becomes a consumer group whatever the migration policy (which
            # governs online conversions only, as in Kafka); its offsets (same group id) stay.
            log.info("group %s: empty classic group converted to a consumer group", group_id)
            records.append((GroupMetadataKey(group_id), None))
            return None
        if epoch == 0 and self._validate_online_upgrade(classic):
            # KIP-848 online migration: the classic members stay, as classic members of a consumer group.
            return self._convert_to_consumer_group(classic, records)
        raise _HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _validate_online_upgrade(self, classic: ClassicGroup) -> bool:
        gid = classic.group_id
        if not self._migration_allows("upgrade"):
            log.info("group %s: cannot upgrade to a consumer group: the online upgrade is disabled", gid)
            return False
        if not classic.uses_consumer_protocol():
            log.info("group %s: cannot upgrade to a consumer group: it does not use the consumer protocol", gid)
            return False
        if classic.num_members() > self.consumer.config.max_size:
            log.info("group %s: cannot upgrade to a consumer group: more members than group.consumer.max.size", gid)
            return False
        return True

    # == upgrade =================================================================================

    def _convert_to_consumer_group(self, classic: ClassicGroup, records: list) -> ConsumerGroup:
        """The consumer group a classic group becomes (not stored: its records create it on replay)."""
        gid, generation = classic.group_id, classic.generation_id
        metadata = self.runtime.topic_metadata()
        group = ConsumerGroup(gid, group_epoch=generation, assignment_epoch=generation)
        for m in classic.all_members():
            try:
                subscription = parse_subscription(
                    m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1])
                assigned = _ids(parse_assignment(m.assignment), metadata)
            except (EmbeddedProtocolError, KeyError, IndexError) as exc:
                log.warning("group %s: cannot upgrade, the embedded consumer protocol is malformed: %s", gid, exc)
                raise _HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {gid} to "
                                      "consumer group because the embedded consumer protocol is malformed.")
            # Every member starts Stable at the generation with its last assignment; members that were in
            # the middle of a classic rebalance find out on their next request and rejoin.
            group.members[m.member_id] = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=sorted(set(subscription.topics)),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=generation,
                previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
                classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)))
            group.target[m.member_id] = _copy(assigned)

        log.info("group %s: classic group (generation %d, %d members) converted to a consumer group",
                 gid, generation, len(group.members))
        for m in classic.all_members():
            classic.complete_join(m, join_error(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
            classic.complete_sync(m, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        records.append((GroupMetadataKey(gid), None))
        records.extend(self._consumer_group_records(group))
        for member in group.members.values():
            self.consumer.schedule_session(gid, member.member_id, member.classic.session_timeout_ms)
        return group

    @staticmethod
    def _consumer_group_records(group: ConsumerGroup) -> list:
        """Every record that creates ``group`` (Kafka's createConsumerGroupRecords, same order)."""
        gid = group.group_id
        out = [(_key("ConsumerGroupMemberMetadata", gid, mid), m.metadata_value()) for mid, m in group.members.items()]
        out.append((_key("ConsumerGroupMetadata", gid), ConsumerGroupValue("ConsumerGroupMetadata",
                                                                           {"epoch": group.group_epoch})))
        out.extend((_key("ConsumerGroupTargetAssignmentMember", gid, mid), ConsumerGroupValue(
            "ConsumerGroupTargetAssignmentMember", {"topic_partitions": _to_wire(group.target.get(mid, {}))}))
            for mid in group.members)
        out.append((_key("ConsumerGroupTargetAssignmentMetadata", gid), ConsumerGroupValue(
            "ConsumerGroupTargetAssignmentMetadata", {"assignment_epoch": group.assignment_epoch})))
        out.extend((_key("ConsumerGroupCurrentMemberAssignment", gid, mid), m.assignment_value())
                   for mid, m in group.members.items())
        return out

    # == downgrade ===============================================================================

    def maybe_downgrade(self, group: ConsumerGroup, leaving: set[str], response, records: list,
                         joining: Optional[ConsumerMember] = None, on_converted=None):
        """A CoordinatorResult that converts ``group`` to a classic group without ``leaving``, or None
        when it stays a consumer group (Kafka's validateOnlineDowngrade... and convertToClassicGroup).

        ``joining``: a classic static member replacing the one member in ``leaving``; it takes over that
        member's target assignment and the group converts without a rebalance.  ``on_converted`` runs once
        the classic group is installed."""
        gid = group.group_id
        remaining = [m for mid, m in group.members.items() if mid not in leaving]
        if joining is not None:
            remaining.append(joining)
        if not remaining or not all(m.uses_classic_protocol for m in remaining):
            return None
        if any(group.members[mid].uses_classic_protocol for mid in leaving if mid in group.members):
            return None  # only the departure of the last consumer-protocol member downgrades
        if not self._migration_allows("downgrade"):
            log.info("group %s: cannot downgrade to a classic group: the online downgrade is disabled", gid)
            return None
        if len(remaining) > self.classic.config.max_size:
            log.info("group %s: cannot downgrade to a classic group: more members than group.max.size", gid)
            return None

        classic = ClassicGroup(gid, self.runtime.now, state=GroupState.STABLE, generation_id=group.group_epoch,
                               protocol_type=CONSUMER_PROTOCOL_TYPE)
        for m in remaining:
            classic.add(Member(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms, protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=list(m.classic.protocols)))
        metadata = self.runtime.topic_metadata()
        try:
            classic.protocol_name = classic.select_protocol()
            for member in classic.all_members():
                owner = next(iter(leaving)) if joining is not None and member.member_id == joining.member_id \
                    else member.member_id
                # The assignment is written in the version of the member's own subscription, as Kafka does.
                member.assignment = encode_assignment(_names(group.target.get(owner, {}), metadata),
                                                      version_of(member.metadata(classic.protocol_name)))
        except (EmbeddedProtocolError, ValueError, KeyError) as exc:
            log.warning("group %s: cannot downgrade to a classic group: %s", gid, exc)
            return None
        classic.subscribed_topics = classic.compute_subscribed_topics()

        for mid in list(group.members) + ([joining.member_id] if joining is not None else []):
            records.extend(_member_tombstones(gid, mid))  # timers end with the group, once appended
        records.extend(self.consumer.group_tombstones(gid))
        records.append(self.classic.group_metadata_record(classic, classic.group_assignment()))

        def on_appended(error: Optional[ErrorCode]):
            if error is not None:
                return None
            log.info("group %s: consumer group (epoch %d) converted to a classic group with %d members",
                     gid, group.group_epoch, len(remaining))
            self.consumer.remove_group(gid)
            self.classic.install(classic)
            if joining is None:
                # The classic members resynchronise through an ordinary classic rebalance.
                self.runtime.execute(self.classic.prepare_rebalance(classic))
            if on_converted is not None:
                on_converted()
            return None

        return CoordinatorResult(records, response, replay=False, on_appended=on_appended)

    # == classic members of a consumer group: the classic protocol for a consumer group's id ==========

    def join(self, request: dict, api_version: int, client_id: str, client_host: str,
             respond: Respond) -> CoordinatorResult:
        group = self.consumer.groups[request["group_id"]]
        if not group.members:
            # An empty consumer group becomes a classic group whatever the migration policy (its offsets stay).
            log.info("group %s: empty consumer group converted to a classic group", request["group_id"])
            self.runtime.execute(CoordinatorResult(self.consumer.group_tombstones(request["group_id"])))
            return self.classic.join(request, api_version, client_id, client_host, respond)
        # Online migration: classic members live in a non-empty consumer group.
        session_timeout = request["session_timeout_ms"]
        config = self.classic.config
        if not (config.min_session_timeout_ms <= session_timeout <= config.max_session_timeout_ms):
            respond(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request["member_id"]))
            return CoordinatorResult()
        return self._classic_join_to_consumer_group(group, request, api_version, client_id, client_host, respond)

    def sync(self, request: dict, respond: Respond) -> CoordinatorResult:
        return self._classic_sync_to_consumer_group(self.consumer.groups[request["group_id"]], request, respond)

    def heartbeat(self, request: dict) -> CoordinatorResult:
        return self._classic_heartbeat_to_consumer_group(self.consumer.groups[request["group_id"]], request)

    def leave(self, group_id: str, members: list[dict]) -> CoordinatorResult:
        return self._classic_leave_to_consumer_group(self.consumer.groups[group_id], members)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: Optional[str]) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise _HeartbeatError(ErrorCode.FENCED_INSTANCE_ID)
        if not member.uses_classic_protocol:
            raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    @staticmethod
    def _supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
        """A classic member may join when it shares an assignor name with every classic member."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [m for m in group.members.values() if m.uses_classic_protocol]
        return not classic or any(all(n in {p for p, _ in m.classic.protocols} for m in classic) for n in names)

    def _schedule_join_timeout_if_absent(self, group_id: str, member: ConsumerMember) -> None:
        key = _join_key(group_id, member.member_id)
        if not self.timer.is_scheduled(key):
            member_id = member.member_id
            self.runtime.schedule(key, self._rebalance_timeout_of(member), lambda: self.consumer.fence_by_timer(
                group_id, member_id, "the classic member did not rejoin within its rebalance timeout"))

    def _rebalance_timeout_of(self, member: ConsumerMember) -> int:
        return member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else self.consumer.session_timeout_of(member)

    def _classic_join_to_consumer_group(self, group: ConsumerGroup, request: dict, api_version: int,
                                        client_id: str, client_host: str, respond: Respond):
        gid = group.group_id
        member_id = request["member_id"]
        instance_id = request.get("group_instance_id")
        unknown = member_id == ""
        if unknown:
            member_id = str(uuid.uuid4())
        protocols = [(p["name"], bytes(p["metadata"])) for p in request["protocols"]]
        known = member_id in group.members or (instance_id is not None and group.static_member(instance_id))
        try:
            if not known and len(group.members) >= self.consumer.config.max_size:
                raise _HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED)
            if not self._supports_classic_protocols(group, request["protocol_type"], {n for n, _ in protocols}):
                raise _HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if unknown and instance_id is None and api_version >= 4:
                # KIP-394, as for classic groups: hand out the id first; the member exists once it rejoins.
                respond(join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id))
                return CoordinatorResult()
            try:
                subscription = parse_subscription(protocols[0][1])
            except EmbeddedProtocolError:
                raise _HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from None

            records: list = []
            replaced: Optional[ConsumerMember] = None
            base: Optional[ConsumerMember] = None
            static = group.static_member(instance_id) if instance_id is not None else None
            if static is not None and static.member_id != member_id:
                if not unknown:
                    raise _HeartbeatError(ErrorCode.FENCED_INSTANCE_ID)
                # A restarted static member takes over its predecessor's place, assignment and epoch.
                replaced = static
                updated = static.copy()
                updated.member_id = member_id
                records.extend(self.consumer.remove_member_records(group, static.member_id, bump=False))
                if static.member_id in group.target:
                    records.append((_key("ConsumerGroupTargetAssignmentMember", gid, member_id), ConsumerGroupValue(
                        "ConsumerGroupTargetAssignmentMember", {"topic_partitions": _to_wire(group.target[static.member_id])})))
                if static.member_epoch < 0:
                    updated.member_epoch = static.previous_member_epoch
            elif member_id in group.members:
                base = group.members[member_id]
                updated = base.copy()
            else:
                updated = ConsumerMember(member_id)
        except _HeartbeatError as exc:
            respond(join_error(exc.code, request["member_id"]))
            return CoordinatorResult()

        session = request["session_timeout_ms"]
        rebalance = request.get("rebalance_timeout_ms", -1)
        updated.client_id, updated.client_host = client_id, client_host
        if instance_id is not None:
            updated.instance_id = instance_id
        if subscription.rack_id is not None:
            updated.rack_id = subscription.rack_id
        if rebalance is not None and rebalance != -1:
            updated.rebalance_timeout_ms = rebalance
        updated.classic = ClassicMemberMetadata(session, tuple(protocols))
        subscription_changed = base is None and replaced is None
        topics = sorted(set(subscription.topics))
        if topics != updated.subscribed_topic_names:
            updated.subscribed_topic_names = topics
            subscription_changed = True
        owned = _ids(subscription.owned, self.runtime.topic_metadata())
        reconciled = self.consumer.update_and_reconcile(group, updated, base, replaced, owned, subscription_changed, records)
        log.info("consumer group %s: classic member %s joins at epoch %d (%s)", gid, member_id,
                 reconciled.member_epoch, reconciled.state.name)

        response = {"error_code": ErrorCode.NONE, "generation_id": reconciled.member_epoch,
                    "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": protocols[0][0],
                    "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}

        if replaced is not None and not replaced.uses_classic_protocol:
            # The last consumer-protocol member, replaced by a classic static member: back to classic.
            downgrade = self.maybe_downgrade(group, {replaced.member_id}, None, records, joining=reconciled,
                                              on_converted=lambda: respond(response))
            if downgrade is not None:
                downgrade.on_appended = _or_error(downgrade.on_appended, respond, member_id)
                return downgrade

        def on_appended(error: Optional[ErrorCode]):
            if error is not None:
                respond(join_error(error, member_id))
                return None
            self.timer.cancel(_join_key(gid, member_id))
            self.consumer.schedule_session(gid, member_id, session)
            # SyncGroup must follow within the rebalance timeout.
            self.runtime.schedule(_sync_key(gid, member_id), self._rebalance_timeout_of(reconciled),
                           lambda: self.consumer.fence_by_timer(gid, member_id, "the classic member did not sync in time"))
            respond(response)
            return None

        return CoordinatorResult(records, None, on_appended=on_appended)

    def _classic_sync_to_consumer_group(self, group: ConsumerGroup, request: dict, respond: Respond):
        gid = group.group_id
        try:
            member = self._classic_member(group, request["member_id"], request.get("group_instance_id"))
            if request["generation_id"] != member.member_epoch:
                raise _HeartbeatError(ErrorCode.ILLEGAL_GENERATION)
            protocol_type, protocol_name = request.get("protocol_type"), request.get("protocol_name")
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                    (protocol_name is not None and protocol_name != member.classic.protocols[0][0]):
                raise _HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            # A member still revoking already rejoined for this round; any other member behind the group
            # epoch must rejoin first.
            if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
                self._schedule_join_timeout_if_absent(gid, member)
                raise _HeartbeatError(ErrorCode.REBALANCE_IN_PROGRESS)
            assignment = encode_assignment(_names(member.assigned, self.runtime.topic_metadata()),
                                           version_of(member.classic.protocols[0][1]))
        except (_HeartbeatError, EmbeddedProtocolError) as exc:
            code = exc.code if isinstance(exc, _HeartbeatError) else ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            respond(sync_error(code))
            return CoordinatorResult()
        self.timer.cancel(_sync_key(gid, member.member_id))
        self.consumer.schedule_session(gid, member.member_id)
        respond({"error_code": ErrorCode.NONE, "protocol_type": request.get("protocol_type"),
                 "protocol_name": request.get("protocol_name"), "assignment": assignment})
        return CoordinatorResult()

    def _classic_heartbeat_to_consumer_group(self, group: ConsumerGroup, request: dict):
        gid = group.group_id
        try:
            member = self._classic_member(group, request["member_id"], request.get("group_instance_id"))
            if request["generation_id"] != member.member_epoch:
                raise _HeartbeatError(ErrorCode.ILLEGAL_GENERATION)
        except _HeartbeatError as exc:
            return CoordinatorResult(response={"error_code": exc.code})
        self.consumer.schedule_session(gid, member.member_id)
        # Rejoin when the group moved on, when partitions must be revoked, or when the partitions the member
        # waits for have been released: a classic member learns its assignment only by rejoining.
        if member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS or (
                member.state == MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, member)):
            self._schedule_join_timeout_if_absent(gid, member)
            return CoordinatorResult(response={"error_code": ErrorCode.REBALANCE_IN_PROGRESS})
        return CoordinatorResult(response={"error_code": ErrorCode.NONE})

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
        owners = group.owners(exclude=member.member_id)
        for topic, partitions in group.target.get(member.member_id, {}).items():
            mine = member.assigned.get(topic, set())
            if any(p not in mine and (topic, p) in owners for p in partitions):
                return True
        return False

    def _classic_leave_to_consumer_group(self, group: ConsumerGroup, members: list[dict]):
        responses = []
        leaving: set[str] = set()
        for m in members:
            member_id, instance_id = m["member_id"], m.get("group_instance_id")
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
                    # An admin removes a static member by instance id alone (no member id).
                    if member_id != "" and member.member_id != member_id:
                        raise _HeartbeatError(ErrorCode.FENCED_INSTANCE_ID)
                    if not member.uses_classic_protocol:
                        raise _HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
                    member_id = member.member_id
                log.info("consumer group %s: classic member %s leaves", group.group_id, member_id)
                leaving.add(member_id)
                responses.append({"member_id": member_id, "group_instance_id": instance_id,
                                  "error_code": ErrorCode.NONE})
            except _HeartbeatError as exc:
                responses.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": exc.code})
        response = {"error_code": ErrorCode.NONE, "members": responses}
        if not leaving:
            return CoordinatorResult(response=response)
        return self.consumer.fence_members(group, leaving, response)


def _or_error(on_appended, respond: Respond, member_id: str):
    """``on_appended``, but a failed append answers the parked JoinGroup with the error."""
    def run(error: Optional[ErrorCode]):
        if error is not None:
            respond(join_error(error, member_id))
            return None
        return on_appended(error)
    return run
