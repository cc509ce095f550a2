"""ClassicGroup: the membership bookkeeping of one classic (JoinGroup/SyncGroup) group.

This object holds state and answers questions about it (who is leader, which protocol wins the vote,
has everyone rejoined); the decisions about *when* to rebalance, time out or persist live in
``classic_manager.ClassicGroupManager``.  It follows the structure of Kafka's ``ClassicGroup`` so that behaviour can be
checked against Kafka's code line by line.
"""

from __future__ import annotations

import struct
import uuid
from collections import Counter
from typing import Callable, Optional

from minikafka.protocol.errors import ErrorCode

from .member import EMPTY_ASSIGNMENT, Member, Respond
from .state import VALID_PREVIOUS, GroupState, IllegalStateTransition

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupError(Exception):
    """A request that fails a membership/generation check: answered with ``code``."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: Callable[[], int], state: GroupState = GroupState.EMPTY,
                 generation_id: int = 0, protocol_type: Optional[str] = None,
                 protocol_name: Optional[str] = None, leader_id: Optional[str] = None,
                 current_state_timestamp: Optional[int] | object = "now") -> None:
        self.group_id = group_id
        self._now_ms = now_ms
        self.state = state
        self.previous_state = state
        # None for a group loaded from a record that had no timestamp (-1): retention then falls back
        # to each offset's commit time.
        self.current_state_timestamp: Optional[int] = (
            now_ms() if current_state_timestamp == "now" else current_state_timestamp)
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}  # insertion order: the first member is the first leader
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: Optional[set[str]] = None
        # Broker-side rebalance timing (logged, and read by bench/group.py).
        self.rebalance_started_ms: Optional[int] = None
        self.join_completed_ms: Optional[int] = None

    # -- state -----------------------------------------------------------------------------------

    def is_in_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state} -> {target} is not allowed")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = self._now_ms()

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members ---------------------------------------------------------------------------------

    def generate_member_id(self, client_id: str, group_instance_id: Optional[str]) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def all_members(self) -> list[Member]:
        return list(self.members.values())

    def num_members(self) -> int:
        return len(self.members)

    def has_static_member(self, instance_id: Optional[str]) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str) -> Optional[str]:
        return self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending_member(self, member_id: str) -> None:
        self.pending_join_members.add(member_id)

    def add(self, member: Member, respond: Optional[Respond] = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} already in group")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.awaiting_join = respond
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.supported_protocols.subtract(removed.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            if removed.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, respond: Optional[Respond]) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.supported_protocols.update(member.protocol_names())
        if respond is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif respond is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        elif respond is not None and member.is_awaiting_join:
            # Kafka drops the superseded callback; we answer it so that the connection it came from is
            # not held back forever (responses go out in request order per connection).
            superseded = member.awaiting_join
            member.awaiting_join = None
            superseded({"error_code": ErrorCode.REBALANCE_IN_PROGRESS, "member_id": member.member_id,
                        "generation_id": -1, "protocol_name": None, "protocol_type": None,
                        "leader": "", "members": []})
        member.awaiting_join = respond

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        removed = self.members.pop(old_member_id, None)
        if removed is None:
            raise ValueError(f"cannot replace unknown static member {old_member_id}")
        # Fence a duplicate instance that may still be parked on a join or a sync.
        self.complete_join(removed, {"error_code": ErrorCode.FENCED_INSTANCE_ID, "member_id": old_member_id,
                                     "generation_id": -1, "protocol_name": None, "protocol_type": None,
                                     "leader": "", "members": [], "skip_assignment": False})
        self.complete_sync(removed, {"error_code": ErrorCode.FENCED_INSTANCE_ID, "assignment": b"",
                                     "protocol_name": None, "protocol_type": None})
        new = Member(member_id=new_member_id, group_instance_id=removed.group_instance_id,
                     client_id=removed.client_id, client_host=removed.client_host,
                     rebalance_timeout_ms=removed.rebalance_timeout_ms,
                     session_timeout_ms=removed.session_timeout_ms, protocol_type=removed.protocol_type,
                     protocols=list(removed.protocols), assignment=removed.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def validate_member(self, member_id: str, group_instance_id: Optional[str]) -> None:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        elif member_id not in self.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)

    # -- join/sync bookkeeping -------------------------------------------------------------------

    def complete_join(self, member: Member, response: dict) -> bool:
        if member.awaiting_join is None:
            return False
        respond = member.awaiting_join
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        respond(response)
        return True

    def complete_sync(self, member: Member, response: dict) -> bool:
        if member.awaiting_sync is None:
            return False
        respond = member.awaiting_sync
        member.awaiting_sync = None
        respond(response)
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_join_members

    def not_yet_rejoined_members(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else promote the first member that did; False if nobody did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def add_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def clear_pending_sync_members(self) -> None:
        self.pending_sync_members.clear()

    # -- protocols -------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if self.is_in_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        n = len(self.members)
        return any(self.supported_protocols.get(name, 0) == n for name, _ in protocols)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        if not self.members:
            raise ValueError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        # Ties go to the protocol that received its first vote earliest (Counter keeps insertion order).
        return next(name for name, count in votes.items() if count == best)

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.clear_pending_sync_members()

    def current_members_for_leader(self) -> list[dict]:
        assert self.protocol_name is not None
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    def set_assignment(self, assignment: dict[str, bytes]) -> None:
        for member in self.members.values():
            member.assignment = assignment.get(member.member_id, EMPTY_ASSIGNMENT)

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    # -- offsets-related questions ---------------------------------------------------------------

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> Optional[set[str]]:
        """Topics the members subscribe to (consumer protocol only); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(parse_subscription_topics(member.metadata(self.protocol_name)))
        except (ValueError, KeyError, struct.error, UnicodeDecodeError):
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def offset_expiration_base(self) -> Optional[Callable[[object], int]]:
        """How old an offset is, for retention; None when the group's offsets must not expire now."""
        if self.protocol_type:
            if self.is_in_state(GroupState.EMPTY):
                state_ts = self.current_state_timestamp
                return lambda om: state_ts if state_ts is not None else om.commit_timestamp
            if self.uses_consumer_protocol() and self.subscribed_topics is not None \
                    and self.is_in_state(GroupState.STABLE):
                return lambda om: om.commit_timestamp
            return None
        return lambda om: om.commit_timestamp


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a consumer-protocol Subscription; version 0's layout is a prefix of every version."""
    buf = memoryview(metadata)
    if len(buf) < 6:
        raise ValueError("short subscription")
    (count,) = struct.unpack_from(">i", buf, 2)
    pos = 6
    topics = []
    if count < 0 or count > len(buf):
        raise ValueError("bad topic count")
    for _ in range(count):
        (length,) = struct.unpack_from(">h", buf, pos)
        pos += 2
        if length < 0 or pos + length > len(buf):
            raise ValueError("bad topic name")
        topics.append(bytes(buf[pos:pos + length]).decode("utf-8"))
        pos += length
    # The rest of the version's fields must be there too: Kafka's parser fails on a truncated
    # subscription, and the group then counts as subscribed to every topic.
    (version,) = struct.unpack_from(">h", buf, 0)
    pos = _skip_bytes(buf, pos)  # user_data (nullable)
    if version >= 1:  # owned_partitions: [topic string, partitions [int32]]
        (owned,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        if owned < 0 or owned > len(buf):
            raise ValueError("bad owned partitions")
        for _ in range(owned):
            (length,) = struct.unpack_from(">h", buf, pos)
            pos += 2 + max(length, 0)
            (n,) = struct.unpack_from(">i", buf, pos)
            pos += 4 + 4 * max(n, 0)
    if version >= 2:  # generation_id
        pos += 4
    if version >= 3:  # rack_id (nullable string)
        (length,) = struct.unpack_from(">h", buf, pos)
        pos += 2 + max(length, 0)
    if pos > len(buf):
        raise ValueError("truncated subscription")
    return topics


def _skip_bytes(buf, pos: int) -> int:
    (length,) = struct.unpack_from(">i", buf, pos)
    pos += 4 + max(length, 0)
    if pos > len(buf):
        raise ValueError("truncated subscription")
    return pos
