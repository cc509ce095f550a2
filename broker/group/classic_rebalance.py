"""Classic groups' membership and rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

The classic half of ``CoordinatorShard`` (mixed in), following Kafka's ``GroupMetadataManager`` for the
classic protocol; method names echo Kafka's so the two can be compared.  A member joins (JoinGroup, parked
until the join phase completes), the elected leader computes the assignment and sends it in its SyncGroup,
every member gets its part, and heartbeats tell members when a new rebalance needs them to rejoin.
Timers: the join phase (rebalance timeout, or the initial rebalance delay from Empty), each member's
session, and the sync phase.  Group metadata records are written with ``replay=False`` (the live group
already is what they describe); the shard's ``replay`` reads them only when loading.

A classic request for a group that is currently a KIP-848 consumer group goes to ``migration`` instead
(the shard's entry points decide).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from minikafka.protocol.errors import ErrorCode

from .classic import ClassicGroup, GroupError
from .member import EMPTY_ASSIGNMENT, Member, Respond
from .result import CoordinatorResult, join_error, sync_error
from .result import empty as _empty
from .state import GroupState

log = logging.getLogger("minikafka.group")


class ClassicRebalanceMixin:
    """Needs the shard's ``groups``, ``config``, ``timer``, ``_now``, ``_execute``, ``_schedule``,
    ``_create_group`` and ``_group_metadata_record``."""

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self._schedule(_hb_key(group_id, member_id),
                       member.session_timeout_ms if timeout_ms is None else timeout_ms,
                       lambda: self._expire_heartbeat(group_id, member_id))

    # == JoinGroup ===============================================================================

    def join_group(self, request: dict, *, api_version: int, client_id: str, client_host: str,
                   respond: Respond) -> None:
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
        streams = self.streams.groups.get(request["group_id"])
        if streams is not None:  # a streams group (broker/streams): converted only when empty, as in Kafka
            if streams.members:
                respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
                return
            self._execute(CoordinatorResult(self.streams.records_for_delete(request["group_id"])))
        self._execute(self._join(request, api_version, client_id or "", client_host, respond))

    def _join(self, request: dict, api_version: int, client_id: str, client_host: str,
              respond: Respond) -> CoordinatorResult:
        group_id = request["group_id"]
        member_id = request["member_id"]
        session_timeout = request["session_timeout_ms"]
        if not (self.config.min_session_timeout_ms <= session_timeout <= self.config.max_session_timeout_ms):
            respond(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
            return _empty()
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return _empty()
            group = self._create_group(group_id)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            respond(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
            return _empty()
        join = _JoinRequest.of(request, client_id, client_host)
        if is_unknown:
            return self._join_new_member(api_version, group, join, respond)
        return self._join_existing_member(api_version, group, join, respond)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        state = group.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            # Counting parked members (not all members) lets the last rejoiners be the ones turned away
            # when the group is over the limit.
            return (group.has_member(member_id) and group.member(member_id).is_awaiting_join) \
                or group.num_members_awaiting_join < self.config.max_size
        return group.has_member(member_id) or group.num_members() < self.config.max_size

    def _join_new_member(self, api_version: int, group: ClassicGroup, join: "_JoinRequest",
                         respond: Respond) -> CoordinatorResult:
        if group.is_in_state(GroupState.DEAD):
            respond(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))
            return _empty()
        if not group.supports_protocols(join.protocol_type, join.protocols):
            respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
            return _empty()
        new_member_id = group.generate_member_id(join.client_id, join.group_instance_id)
        if join.group_instance_id is not None:
            existing = group.static_member_id(join.group_instance_id)
            if existing is not None:
                return self._update_static_member_then_rebalance_or_complete_join(
                    api_version, group, join, existing, new_member_id, respond)
            return self._add_member_then_rebalance_or_complete_join(group, join, new_member_id, respond)
        if api_version >= 4:
            # KIP-394: hand out the id first; the member exists only once it rejoins with it.  Until then
            # it is pending, and the session timeout alone bounds how long the group waits for it.
            group.add_pending_member(new_member_id)
            gid = group.group_id
            self._schedule(_hb_key(gid, new_member_id), join.session_timeout_ms,
                           lambda: self._expire_heartbeat(gid, new_member_id))
            respond(join_error(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
            return _empty()
        return self._add_member_then_rebalance_or_complete_join(group, join, new_member_id, respond)

    def _join_existing_member(self, api_version: int, group: ClassicGroup, join: "_JoinRequest",
                              respond: Respond) -> CoordinatorResult:
        member_id = join.member_id
        if group.is_in_state(GroupState.DEAD):
            respond(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return _empty()
        if not group.supports_protocols(join.protocol_type, join.protocols):
            respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return _empty()
        if group.is_pending_member(member_id):
            if join.group_instance_id is not None:
                # Pending ids are only handed to dynamic members.
                respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return _empty()
            return self._add_member_then_rebalance_or_complete_join(group, join, member_id, respond)
        try:
            group.validate_member(member_id, join.group_instance_id)
        except GroupError as exc:
            respond(join_error(exc.code, member_id))
            return _empty()
        member = group.member(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_then_rebalance_or_complete_join(group, member, join, respond)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(join.protocols):
                # It probably lost the JoinGroup response: send the current generation again.
                respond(self._join_response(group, member_id, with_members=group.is_leader(member_id)))
                return _empty()
            return self._update_member_then_rebalance_or_complete_join(group, member, join, respond)
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(join.protocols):
                # A leader's rejoin is its way to ask for a new assignment (e.g. topic metadata changed).
                return self._update_member_then_rebalance_or_complete_join(group, member, join, respond)
            respond(self._join_response(group, member_id, with_members=False))
            return _empty()
        # Empty: the member is gone; make it reset its generation and join anew.
        respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        return _empty()

    def _join_response(self, group: ClassicGroup, member_id: str, *, with_members: bool,
                       leader: Optional[str] = None, skip_assignment: bool = False) -> dict:
        return {
            "error_code": ErrorCode.NONE,
            "members": group.current_members_for_leader() if with_members else [],
            "member_id": member_id,
            "generation_id": group.generation_id,
            "protocol_name": group.protocol_name,
            "protocol_type": group.protocol_type,
            "leader": (group.leader_id if leader is None else leader) or "",
            "skip_assignment": skip_assignment,
        }

    def _add_member_then_rebalance_or_complete_join(self, group: ClassicGroup, join: "_JoinRequest",
                                                    member_id: str, respond: Respond) -> CoordinatorResult:
        member = Member(member_id=member_id, group_instance_id=join.group_instance_id,
                        client_id=join.client_id, client_host=join.client_host,
                        rebalance_timeout_ms=join.rebalance_timeout_ms,
                        session_timeout_ms=join.session_timeout_ms, protocol_type=join.protocol_type,
                        protocols=join.protocols, is_new=True)
        if group.is_in_state(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, respond)
        # A parked new member cannot heartbeat and a muted connection hides its disconnect, so its
        # JoinGroup is bounded by the new-member timeout; a live client simply retries.
        self._reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_then_rebalance_or_complete_join(self, group: ClassicGroup, member: Member,
                                                       join: "_JoinRequest", respond: Respond) -> CoordinatorResult:
        group.update_member(member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms, respond)
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member_then_rebalance_or_complete_join(
            self, api_version: int, group: ClassicGroup, join: "_JoinRequest", old_member_id: str,
            new_member_id: str, respond: Respond) -> CoordinatorResult:
        instance_id = join.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.timer.cancel(_hb_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, new_member)
        old_rebalance_timeout = new_member.rebalance_timeout_ms
        old_session_timeout = new_member.session_timeout_ms
        old_protocols = list(new_member.protocols)
        group.update_member(new_member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms,
                            respond)
        if group.is_in_state(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # Same protocol next generation: no rebalance, just persist the new member id.
                def on_appended(error: Optional[ErrorCode]) -> None:
                    if error is not None:
                        group.update_member(new_member, old_protocols, old_rebalance_timeout,
                                            old_session_timeout, None)
                        old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                        self.timer.cancel(_hb_key(group.group_id, new_member_id))
                        self._reschedule_heartbeat(group, old)
                        response = join_error(error, "")
                        response.update(generation_id=group.generation_id, protocol_type=group.protocol_type,
                                        protocol_name=group.protocol_name, leader=current_leader or "")
                        respond(response)
                    elif api_version >= 9:
                        is_leader = group.is_leader(new_member_id)
                        group.complete_join(new_member, self._join_response(
                            group, new_member_id, with_members=is_leader, skip_assignment=is_leader))
                    else:
                        # Before v9 the old leader id is returned: a replaced leader then acts as a follower
                        # and keeps the current assignment instead of computing a new one.
                        group.complete_join(new_member, self._join_response(
                            group, new_member_id, with_members=False, leader=current_leader or ""))

                return CoordinatorResult([self._group_metadata_record(group, group.group_assignment())],
                                         replay=False, on_appended=on_appended)
            return self._maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in_state(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: rebalance so that the new id
            # gets an assignment.
            return self._prepare_rebalance(group)
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            raise AssertionError(f"static member replaced in group {group.group_id} in state {group.state}")
        return self._maybe_prepare_rebalance_or_complete_join(group)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> CoordinatorResult:
        if group.can_rebalance():
            return self._prepare_rebalance(group)
        return self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> CoordinatorResult:
        if group.is_in_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in_state(GroupState.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self._schedule(_join_key(gid), delay,
                           lambda: self._try_complete_initial_rebalance_else_schedule(gid, delay, remaining))
        group.transition_to(GroupState.PREPARING_REBALANCE)
        group.rebalance_started_ms = self._now()
        log.info("group %s: preparing to rebalance (generation %d, %d members)", group.group_id,
                 group.generation_id, group.num_members())
        return _empty() if initial else self._maybe_complete_join_else_schedule(group)

    def _try_complete_initial_rebalance_else_schedule(self, group_id: str, delay_ms: int,
                                                      remaining_ms: int) -> CoordinatorResult:
        group = self.groups.get(group_id)
        if group is None:
            return _empty()
        if group.new_member_added and remaining_ms != 0:
            # Someone joined during the delay: wait once more, never beyond the rebalance timeout.
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            self._schedule(_join_key(group_id), new_delay,
                           lambda: self._try_complete_initial_rebalance_else_schedule(
                               group_id, new_delay, new_remaining))
            return _empty()
        return self._complete_join(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> CoordinatorResult:
        if group.is_in_state(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            return self._complete_join(group)
        gid = group.group_id
        self._schedule(_join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
        return _empty()

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> CoordinatorResult:
        # An initial rebalance (from Empty) ends only by its delay timer, which gathers late joiners.
        if group.is_in_state(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined() \
                and group.previous_state is not GroupState.EMPTY:
            self.timer.cancel(_join_key(group.group_id))
            return self._complete_join(group)
        return _empty()

    def _complete_join_by_id(self, group_id: str) -> CoordinatorResult:
        group = self.groups.get(group_id)
        return _empty() if group is None else self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> CoordinatorResult:
        self.timer.cancel(_join_key(group.group_id))
        # Seed 002's stall ends here: dynamic members that did not rejoin within the rebalance timeout
        # (a consumer that stopped calling poll) are dropped and the others carry on.  Static members
        # keep their place; their session timeout decides.
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self.timer.cancel(_hb_key(group.group_id, member.member_id))
                log.info("group %s: removed %s, which did not rejoin in time", group.group_id, member.member_id)
        if group.is_in_state(GroupState.DEAD):
            return _empty()
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait for them (or their sessions) again.
            gid = group.group_id
            self._schedule(_join_key(gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return _empty()
        group.init_next_generation()
        now = self._now()
        group.join_completed_ms = now
        log.info("group %s: generation %d join phase done in %d ms with %d members (%s)", group.group_id,
                 group.generation_id, now - (group.rebalance_started_ms or now), group.num_members(),
                 group.protocol_name)
        if group.is_in_state(GroupState.EMPTY):
            return CoordinatorResult([self._group_metadata_record(group, {})], replay=False)
        for member in group.all_members():
            group.complete_join(member, self._join_response(
                group, member.member_id, with_members=group.is_leader(member.member_id)))
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)
        return _empty()

    def _expire_heartbeat(self, group_id: str, member_id: str) -> CoordinatorResult:
        group = self.groups.get(group_id)
        if group is None or group.is_in_state(GroupState.DEAD):
            return _empty()
        if group.is_pending_member(member_id):
            group.remove(member_id)
            if group.is_in_state(GroupState.PREPARING_REBALANCE):
                return self._maybe_complete_join_phase(group)
            return _empty()
        if not group.has_member(member_id):
            return _empty()
        member = group.member(member_id)
        if member.has_satisfied_heartbeat():
            return _empty()
        log.info("group %s: member %s session expired", group_id, member_id)
        return self._remove_member_and_update_group(group, member)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member) -> CoordinatorResult:
        # A new member may time out while its JoinGroup is parked: answer it, so that a live client
        # retries from scratch.
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self._maybe_prepare_rebalance_or_complete_join(group)
        if group.is_in_state(GroupState.PREPARING_REBALANCE):
            return self._maybe_complete_join_phase(group)
        return _empty()

    # == test control (broker/control.py) =========================================================

    def expire_member_now(self, group_id: str, member_id: str | None = None) -> list[str]:
        """Expire members' sessions now, as if their session timeout had passed without a
        heartbeat (all members when ``member_id`` is None); returns the expired member ids."""
        group = self.groups.get(group_id)
        if group is None or group.is_in_state(GroupState.DEAD):
            return []
        if member_id is None:
            targets = [m.member_id for m in group.all_members()] + list(group.pending_join_members)
        else:
            targets = [member_id]
        expired = []
        for mid in targets:
            self.timer.cancel(_hb_key(group_id, mid))
            if group.is_pending_member(mid):
                group.remove(mid)
                if group.is_in_state(GroupState.PREPARING_REBALANCE):
                    self._execute(self._maybe_complete_join_phase(group))
                expired.append(mid)
            elif group.has_member(mid):
                log.info("group %s: member %s session expired (forced)", group_id, mid)
                self._execute(self._remove_member_and_update_group(group, group.member(mid)))
                expired.append(mid)
        return expired

    def force_rebalance(self, group_id: str) -> bool:
        """Start a rebalance of a Stable or CompletingRebalance group, as a new joiner would."""
        group = self.groups.get(group_id)
        if group is None or group.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return False
        log.info("group %s: rebalance forced", group_id)
        self._execute(self._prepare_rebalance(group))
        return True

    # == SyncGroup ===============================================================================

    def sync_group(self, request: dict, respond: Respond) -> None:
        self._execute(self._sync(request, respond))

    def _sync(self, request: dict, respond: Respond) -> CoordinatorResult:
        consumer = self.consumer_groups.get(request["group_id"])
        if consumer is not None:
            return self._classic_sync_to_consumer_group(consumer, request, respond)
        group = self.groups.get(request["group_id"])
        if group is None:
            respond(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return _empty()
        member_id = request["member_id"]
        error = self._validate_sync(group, request)
        if error is not None:
            respond(sync_error(error))
            return _empty()
        if group.is_in_state(GroupState.EMPTY):
            respond(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return _empty()
        if group.is_in_state(GroupState.PREPARING_REBALANCE):
            respond(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
            return _empty()
        member = group.member(member_id)
        if group.is_in_state(GroupState.COMPLETING_REBALANCE):
            if member.awaiting_sync is not None:
                # A duplicate SyncGroup: answer the superseded one so its connection is not held back.
                superseded = member.awaiting_sync
                member.awaiting_sync = None
                superseded(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if not group.is_leader(member_id):
                return _empty()
            assignment = {a["member_id"]: bytes(a["assignment"]) for a in request.get("assignments") or []}
            for m in group.all_members():
                # Every member gets an answer; one the leader forgot gets an empty (not null) assignment.
                assignment.setdefault(m.member_id, EMPTY_ASSIGNMENT)
            generation = request["generation_id"]

            def on_appended(error: Optional[ErrorCode]) -> None:
                # Another join may have started a new generation meanwhile: then this result is stale.
                if group.is_in_state(GroupState.COMPLETING_REBALANCE) and generation == group.generation_id:
                    if error is not None:
                        self._reset_and_propagate_assignment_with_error(group, error)
                        self._execute(self._maybe_prepare_rebalance_or_complete_join(group))
                    else:
                        group.set_assignment(assignment)
                        self._propagate_assignment(group, ErrorCode.NONE)
                        group.transition_to(GroupState.STABLE)
                        now = self._now()
                        log.info("group %s: generation %d stable; sync phase %d ms, rebalance %d ms",
                                 group.group_id, group.generation_id, now - (group.join_completed_ms or now),
                                 now - (group.rebalance_started_ms or now))

            return CoordinatorResult([self._group_metadata_record(group, assignment)], replay=False,
                                     on_appended=on_appended)
        # Stable: the assignment of the current generation.
        self._remove_pending_sync_member(group, member_id)
        self._reschedule_heartbeat(group, member)
        respond({"error_code": ErrorCode.NONE, "protocol_type": group.protocol_type,
                 "protocol_name": group.protocol_name, "assignment": member.assignment})
        return _empty()

    def _validate_sync(self, group: ClassicGroup, request: dict) -> Optional[ErrorCode]:
        if group.is_in_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(request["member_id"], request.get("group_instance_id"))
        except GroupError as exc:
            return exc.code
        if request["generation_id"] != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(request.get("protocol_type"), group.protocol_type) or \
                _inconsistent(request.get("protocol_name"), group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for member in group.all_members():
            response = {"error_code": error, "protocol_type": group.protocol_type if ok else None,
                        "protocol_name": group.protocol_name if ok else None, "assignment": member.assignment}
            if group.complete_sync(member, response):
                # Sessions that "expired" while the member was parked were ignored; restart them now.
                self._reschedule_heartbeat(group, member)

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        if not group.is_in_state(GroupState.COMPLETING_REBALANCE):
            raise AssertionError(f"group {group.group_id} is {group.state}, not CompletingRebalance")
        for member in group.all_members():
            member.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        gid, generation = group.group_id, group.generation_id
        self._schedule(_sync_key(gid), group.rebalance_timeout_ms(),
                       lambda: self._expire_pending_sync(gid, generation))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        if group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE) \
                or group.has_received_sync_from_all_members():
            self.timer.cancel(_sync_key(group.group_id))

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.clear_pending_sync_members()
        self.timer.cancel(_sync_key(group.group_id))

    def _expire_pending_sync(self, group_id: str, generation: int) -> CoordinatorResult:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation_id:
            return _empty()
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                and not group.has_received_sync_from_all_members():
            late = sorted(group.pending_sync_members)
            for member_id in late:
                group.remove(member_id)
                self.timer.cancel(_hb_key(group_id, member_id))
            log.info("group %s: removed %s, which did not send SyncGroup in time", group_id, late)
            return self._prepare_rebalance(group)
        return _empty()

    # == Heartbeat, LeaveGroup ===================================================================

    def heartbeat(self, request: dict) -> dict:
        return self._execute(self._heartbeat(request))

    def _heartbeat(self, request: dict) -> CoordinatorResult:
        consumer = self.consumer_groups.get(request["group_id"])
        if consumer is not None:
            return self._classic_heartbeat_to_consumer_group(consumer, request)
        group = self.groups.get(request["group_id"])
        if group is None:
            return _empty({"error_code": ErrorCode.UNKNOWN_MEMBER_ID})
        if group.is_in_state(GroupState.DEAD):
            return _empty({"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE})
        member_id = request["member_id"]
        try:
            group.validate_member(member_id, request.get("group_instance_id"))
        except GroupError as exc:
            return _empty({"error_code": exc.code})
        if request["generation_id"] != group.generation_id:
            return _empty({"error_code": ErrorCode.ILLEGAL_GENERATION})
        if group.is_in_state(GroupState.EMPTY):
            return _empty({"error_code": ErrorCode.UNKNOWN_MEMBER_ID})
        self._reschedule_heartbeat(group, group.member(member_id))
        if group.is_in_state(GroupState.PREPARING_REBALANCE):
            return _empty({"error_code": ErrorCode.REBALANCE_IN_PROGRESS})
        # CompletingRebalance (a consumer may heartbeat between JoinGroup and SyncGroup) and Stable.
        return _empty({"error_code": ErrorCode.NONE})

    def leave_group(self, group_id: str, members: list[dict]) -> dict:
        """``members``: [{member_id, group_instance_id}]; the response has one entry per member."""
        return self._execute(self._leave(group_id, members))

    def _leave(self, group_id: str, members: list[dict]) -> CoordinatorResult:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            return self._classic_leave_to_consumer_group(consumer, members)
        group = self.groups.get(group_id)
        if group is None:
            return _empty({"error_code": ErrorCode.NONE, "members": [
                {"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                 "error_code": ErrorCode.UNKNOWN_MEMBER_ID} for m in members]})
        if group.is_in_state(GroupState.DEAD):
            return _empty({"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "members": []})
        responses = []
        for m in members:
            member_id, instance_id = m["member_id"], m.get("group_instance_id")
            code = ErrorCode.NONE
            if member_id == "":
                # Administrative removal by group.instance.id (the member id is unknown to the admin).
                if instance_id is not None and group.has_static_member(instance_id):
                    self._remove_current_member(group, group.static_member_id(instance_id))
                else:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(_hb_key(group_id, member_id))
            else:
                try:
                    group.validate_member(member_id, instance_id)
                    self._remove_current_member(group, member_id)
                except GroupError as exc:
                    code = exc.code
            responses.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
        result = _empty()
        if any(r["error_code"] == ErrorCode.NONE for r in responses):
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                result = self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in_state(GroupState.PREPARING_REBALANCE):
                result = self._maybe_complete_join_phase(group)
        result.response = {"error_code": ErrorCode.NONE, "members": responses}
        return result

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(_hb_key(group.group_id, member_id))
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        group.remove(member_id)


@dataclass
class _JoinRequest:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]

    @classmethod
    def of(cls, request: dict, client_id: str, client_host: str) -> "_JoinRequest":
        session = request["session_timeout_ms"]
        rebalance = request.get("rebalance_timeout_ms", -1)
        return cls(member_id=request["member_id"], group_instance_id=request.get("group_instance_id"),
                   client_id=client_id, client_host=client_host,
                   # v0 has no rebalance timeout: the session timeout plays both roles.
                   rebalance_timeout_ms=session if rebalance is None or rebalance < 0 else rebalance,
                   session_timeout_ms=session, protocol_type=request["protocol_type"],
                   protocols=[(p["name"], bytes(p["metadata"])) for p in request["protocols"]])


def _inconsistent(requested: Optional[str], current: Optional[str]) -> bool:
    return requested is not None and current is not None and requested != current


def _join_key(group_id: str) -> tuple:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple:
    return ("sync", group_id)


def _hb_key(group_id: str, member_id: str) -> tuple:
    return ("heartbeat", group_id, member_id)
