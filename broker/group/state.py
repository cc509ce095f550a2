"""The classic group state machine, with Apache Kafka's state names.

Each state documents how the coordinator answers requests while in it ("action") and what moves the group
out of it ("transition").  ``VALID_PREVIOUS`` is the single table of allowed moves; ``ClassicGroup.transition_to``
checks every move against it, so an impossible transition is a bug that fails loudly instead of a silent
corruption of the group.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    """Group has no members, but lingers until all of its offsets have expired.  Also the state of groups
    that only use Kafka to store offsets (standalone consumers, admin tools).

    action: respond to JoinGroup from new members normally (the first one starts a rebalance);
            respond to SyncGroup and Heartbeat with UNKNOWN_MEMBER_ID;
            accept OffsetCommit with generation -1 (and no member id), answer other commits per member checks;
            allow DeleteGroups and OffsetDelete.
    transition: the last offsets removed by retention/deletion -> Dead (the group disappears);
                a member joins -> PreparingRebalance.
    """

    PREPARING_REBALANCE = "PreparingRebalance"
    """Group is preparing to rebalance: every known member must send JoinGroup again.

    action: park JoinGroup requests until all known members have rejoined or the rebalance timeout expires;
            answer Heartbeat and SyncGroup with REBALANCE_IN_PROGRESS;
            accept OffsetCommit from members of the current (previous) generation.
    transition: all known members rejoined, or the rebalance timeout expired -> CompletingRebalance
                (or Empty when no member is left);
                the group is deleted -> Dead.
    """

    COMPLETING_REBALANCE = "CompletingRebalance"
    """The join phase is over; the group waits for the leader's assignment in SyncGroup.

    action: park SyncGroup requests of followers until the leader's SyncGroup arrives and its assignment is
            persisted; answer Heartbeat with NONE; answer OffsetCommit with REBALANCE_IN_PROGRESS;
            a JoinGroup with unchanged metadata gets the current generation again.
    transition: leader's assignment persisted -> Stable;
                a member joins with new metadata, leaves, or its session / the sync deadline expires
                -> PreparingRebalance.
    """

    STABLE = "Stable"
    """Every member holds the assignment of the current generation.

    action: answer Heartbeat with NONE, SyncGroup with the member's current assignment,
            JoinGroup from a follower with unchanged metadata with the current generation,
            OffsetCommit normally.
    transition: a member's session expires, a member leaves, the leader rejoins, a member rejoins with new
                metadata, or a new member joins -> PreparingRebalance.
    """

    DEAD = "Dead"
    """The group has no members and no metadata and is about to be removed.

    action: answer JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit with COORDINATOR_NOT_AVAILABLE
            (the client then rediscovers the coordinator), DeleteGroups and OffsetDelete with
            GROUP_ID_NOT_FOUND.
    transition: none.
    """

    def __str__(self) -> str:
        return self.value


# target state -> the states it may be entered from.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


def parse_state(name: str) -> GroupState | None:
    """Kafka's state name, compared case-insensitively as ListGroups' states filter does."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None


class IllegalStateTransition(RuntimeError):
    """A move that VALID_PREVIOUS forbids: always a coordinator bug."""
