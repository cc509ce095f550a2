"""The share group (KIP-932) as the group coordinator keeps it: members, epochs, assignments, state.

A share group is a "modern" group like a KIP-848 consumer group, with three differences that make it
simpler: the client chooses its member id, there are no static members, and a partition may be given
to several members at once (they share it; the share partitions hand out records one by one), so a
member takes its target assignment at once, with no revocation step.

Epochs (Kafka's ``ShareGroup``/``ShareGroupMember``):

* the **group epoch** is bumped when a member joins or leaves, changes its subscription, when the
  subscribed topics change (created, deleted, partitions added: the metadata hash), and when share
  partitions become initialized that the target assignment does not cover yet;
* the **assignment epoch** is the group epoch the target assignment was computed for;
* a member's **member epoch** moves to the assignment epoch on its next heartbeat; a heartbeat with
  the previous member epoch is still accepted (the answer carrying the new one may have been lost).

States, Kafka's names (``ShareGroup.ShareGroupState``), derived from the membership:

==========  ==========================================  ==================================
state       action                                      transition
==========  ==========================================  ==================================
Empty       heartbeat with epoch 0 joins; DeleteGroups   -> Stable when a member joins;
            deletes the group and its share state         -> Dead when deleted
Stable      heartbeats as above; DeleteGroups answers    -> Empty when the last member
            NON_EMPTY_GROUP                               leaves or expires
Dead        the group is gone (described as not found)   (final)
==========  ==========================================  ==================================

Only partitions whose share state is initialized are assignable (``assignable``): a new topic's
partitions are initialized through the share coordinator first, and assigned once that is recorded.
The server-side assignor is Kafka's ``simple`` assignor (``simple_assign``).
"""

from __future__ import annotations

import enum
import hashlib
import math
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .settings import ASSIGNOR_NAME  # noqa: F401 (re-exported: the share assignor's name)

Assignment = dict[uuid.UUID, set[int]]

LEAVE_EPOCH = -1


class ShareGroupState(str, enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS = {
    ShareGroupState.EMPTY: {ShareGroupState.EMPTY, ShareGroupState.STABLE},
    ShareGroupState.STABLE: {ShareGroupState.EMPTY, ShareGroupState.STABLE},
    ShareGroupState.DEAD: {ShareGroupState.EMPTY, ShareGroupState.STABLE},
}


class MemberState(enum.IntEnum):
    """The member state stored in ShareGroupCurrentMemberAssignment (share members are always STABLE)."""
    STABLE = 0
    UNKNOWN = 127


@dataclass
class ShareMember:
    member_id: str
    rack_id: Optional[str] = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)

    def metadata_data(self) -> dict:
        return {"rack_id": self.rack_id, "client_id": self.client_id, "client_host": self.client_host,
                "subscribed_topic_names": list(self.subscribed_topic_names)}

    def assignment_data(self) -> dict:
        return {"member_epoch": self.member_epoch, "previous_member_epoch": self.previous_member_epoch,
                "state": int(self.state), "assigned_partitions": to_wire(self.assigned)}

    def copy(self) -> "ShareMember":
        return ShareMember(**{**self.__dict__, "assigned": copy_assignment(self.assigned)})


@dataclass
class InitInfo:
    """Partitions of one topic in ShareGroupStatePartitionMetadata, with when they were recorded."""
    name: str
    partitions: set[int]
    timestamp: int = -1


@dataclass
class StatePartitions:
    """Kafka's ShareGroupStatePartitionMetadataInfo: which share partitions have durable state."""
    initializing: dict[uuid.UUID, InitInfo] = field(default_factory=dict)
    initialized: dict[uuid.UUID, InitInfo] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)

    def record_data(self) -> dict:
        def infos(m: dict[uuid.UUID, InitInfo]) -> list[dict]:
            return [{"topic_id": t, "topic_name": i.name, "partitions": sorted(i.partitions)}
                    for t, i in sorted(m.items(), key=lambda e: str(e[0])) if i.partitions]
        return {"initializing_topics": infos(self.initializing), "initialized_topics": infos(self.initialized),
                "deleting_topics": [{"topic_id": t, "topic_name": n}
                                    for t, n in sorted(self.deleting.items(), key=lambda e: str(e[0]))]}

    def copy(self) -> "StatePartitions":
        return StatePartitions(
            {t: InitInfo(i.name, set(i.partitions), i.timestamp) for t, i in self.initializing.items()},
            {t: InitInfo(i.name, set(i.partitions), i.timestamp) for t, i in self.initialized.items()},
            dict(self.deleting))


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # Set by replay when the group's ShareGroupMetadata record exists (False: only created in memory).
    persisted: bool = False
    # Derived from members and target, recomputed after replay changes them (``changed``).
    _subscribed: Optional[frozenset[str]] = field(default=None, repr=False, compare=False)
    _targeted: Optional[dict[uuid.UUID, set[int]]] = field(default=None, repr=False, compare=False)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    @staticmethod
    def offset_expiration_base():
        return None  # no committed offsets

    @staticmethod
    def is_subscribed_to_topic(topic: str) -> bool:
        return False

    def changed(self) -> None:
        """Members or target changed (replay): drop what was derived from them."""
        self._subscribed = self._targeted = None

    def subscribed_topic_names(self, members: Optional[dict[str, ShareMember]] = None) -> set[str]:
        if members is None and self._subscribed is not None:
            return set(self._subscribed)
        names: set[str] = set()
        for m in (self.members if members is None else members).values():
            names.update(m.subscribed_topic_names)
        if members is None:
            self._subscribed = frozenset(names)
        return names

    def targeted_partitions(self) -> dict[uuid.UUID, set[int]]:
        """Every partition of the target assignment, whoever has it (do not modify the answer)."""
        if self._targeted is None:
            out: dict[uuid.UUID, set[int]] = {}
            for a in self.target.values():
                for t, parts in a.items():
                    out.setdefault(t, set()).update(parts)
            self._targeted = out
        return self._targeted


# == assignments ===================================================================================

def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items()}


def to_wire(a: Assignment) -> list[dict]:
    return [{"topic_id": t, "partitions": sorted(p)} for t, p in sorted(a.items(), key=lambda i: str(i[0])) if p]


def from_wire(items) -> Assignment:
    return {tp["topic_id"]: set(tp["partitions"]) for tp in items or () if tp["partitions"]}


def count(a: Assignment) -> int:
    return sum(len(p) for p in a.values())


def simple_assign(subscriptions: dict[str, set[uuid.UUID]], assignable: dict[uuid.UUID, set[int]],
                  previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's ``simple`` share assignor.

    ``subscriptions``: member -> subscribed topic ids; ``assignable``: topic id -> partitions that may
    be assigned (initialized share partitions of existing topics); ``previous``: the current target.

    When all members subscribe to the same topics the partitions are spread evenly, balance first,
    then stickiness: with more members than partitions each partition is shared by
    ceil(members / partitions) members.  With different subscriptions the same is done topic by topic
    among that topic's subscribers, and the results combined (Kafka's heterogeneous builder)."""
    if not subscriptions:
        return {}
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    topic_sets = {frozenset(s) for s in subscriptions.values()}
    if len(topic_sets) == 1:
        topics = sorted(next(iter(topic_sets)), key=str)
        partitions = [(t, p) for t in topics for p in sorted(assignable.get(t, ()))]
        result = _balance(sorted(subscriptions), partitions, {
            m: {(t, p) for t, ps in previous.get(m, {}).items() if t in subscriptions[m] for p in ps}
            for m in subscriptions})
    else:
        result = {m: set() for m in subscriptions}
        for t in sorted({t for s in subscriptions.values() for t in s}, key=str):
            members = sorted(m for m, s in subscriptions.items() if t in s)
            partitions = [(t, p) for p in sorted(assignable.get(t, ()))]
            part = _balance(members, partitions, {
                m: {(t, p) for p in previous.get(m, {}).get(t, ())} for m in members})
            for m, tps in part.items():
                result[m].update(tps)
    for m, tps in result.items():
        for t, p in tps:
            out[m].setdefault(t, set()).add(p)
    return out


def _balance(members: list[str], partitions: list[tuple[uuid.UUID, int]],
             previous: dict[str, set[tuple[uuid.UUID, int]]]) -> dict[str, set[tuple[uuid.UUID, int]]]:
    """One homogeneous round of the simple assignor, in a deterministic order (Kafka iterates hash
    maps, so among equally good answers it may pick another one)."""
    n_members, n_parts = len(members), len(partitions)
    result: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    if n_parts == 0 or n_members == 0:
        return result
    sharing = (n_members + n_parts - 1) // n_parts  # members per partition
    precise = sharing * n_parts / n_members  # partitions per member, fractional
    desired = {m: math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i, m in enumerate(members)}
    valid = set(partitions)
    by_partition: dict[tuple[uuid.UUID, int], list[str]] = {tp: [] for tp in partitions}
    # 1. Keep what each member had and may still have, up to what it should hold.
    for m in members:
        kept = sorted((tp for tp in previous.get(m, ()) if tp in valid), key=lambda tp: (str(tp[0]), tp[1]))
        for tp in kept[:desired[m]]:
            result[m].add(tp)
            by_partition[tp].append(m)
    # 2. No partition shared by more members than wanted.
    for tp, holders in by_partition.items():
        while len(holders) > sharing:
            result[holders.pop()].discard(tp)
    # 3. Fill members that hold too little, partition by partition, round robin over members.
    unfilled = [m for m in members if len(result[m]) < desired[m]]
    i = 0
    for tp in partitions:
        holders = by_partition[tp]
        tried = 0
        while len(holders) < sharing and unfilled and tried < len(unfilled):
            m = unfilled[i % len(unfilled)]
            if m in holders:
                i += 1
                tried += 1
                continue
            result[m].add(tp)
            holders.append(m)
            tried = 0
            if len(result[m]) >= desired[m]:
                unfilled.remove(m)
            else:
                i += 1
        if not unfilled:
            break
    return result


def metadata_hash(topics: Iterable[tuple[str, uuid.UUID, int]]) -> int:
    """A 64-bit signed hash of the subscribed topics (name, id, partition count): it changes when a
    subscribed topic is created, deleted or gets partitions.  Kafka hashes its own topic image
    (Murmur3 of the topic's fields); the value is only compared with itself, never across brokers."""
    topics = sorted(topics)
    if not topics:
        return 0  # no subscribed topic, as Kafka
    h = hashlib.blake2b(digest_size=8)
    for name, topic_id, partitions in topics:
        h.update(name.encode())
        h.update(topic_id.bytes)
        h.update(partitions.to_bytes(4, "big"))
    return int.from_bytes(h.digest(), "big", signed=True)
