"""A streams group and its members (Kafka's ``StreamsGroup``, ``StreamsGroupMember``,
``CurrentAssignmentBuilder``).

States, Kafka's names: Empty (no members), NotReady (the topology's topics are not validated for its
epoch: missing source or internal topics, wrong partition counts), Assigning (the target assignment is
older than the group epoch), Reconciling (a member is not yet at the target), Stable.

Member states (stored as 1, 2, 3): STABLE, UNREVOKED_TASKS (the member must first give up tasks it
still owns; it keeps its epoch), UNRELEASED_TASKS (it waits for tasks another process still owns).  A
task moves only once released, so no active task runs twice.  Active tasks remember the epoch at which
each was assigned: an offset commit with an older member epoch is still accepted for a task assigned no
later than that epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from .topology import ConfiguredTopology, StreamsTopology

Active = dict[str, dict[int, int]]  # subtopology -> partition -> assignment epoch
Tasks = dict[str, set[int]]


class MemberState(enum.IntEnum):
    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


class StreamsGroupState(str, enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value

    @property
    def lower(self) -> str:
        return "not_ready" if self is StreamsGroupState.NOT_READY else self.value.lower()


@dataclass(frozen=True)
class TasksTuple:
    """A target assignment: active, standby and warm-up tasks."""
    active: dict = field(default_factory=dict)
    standby: dict = field(default_factory=dict)
    warmup: dict = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)


EMPTY_TASKS = TasksTuple()


@dataclass
class AssignedTasks:
    """A member's current (or pending-revocation) tasks; active ones with their assignment epochs."""
    active: Active = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def copy(self) -> "AssignedTasks":
        return AssignedTasks({s: dict(p) for s, p in self.active.items()},
                             {s: set(p) for s, p in self.standby.items()},
                             {s: set(p) for s, p in self.warmup.items()})

    def active_sets(self) -> Tasks:
        return {s: set(p) for s, p in self.active.items()}


@dataclass
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: Optional[str] = None
    rack_id: Optional[str] = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Optional[tuple[str, int]] = None
    client_tags: dict = field(default_factory=dict)
    assigned: AssignedTasks = field(default_factory=AssignedTasks)
    pending_revocation: AssignedTasks = field(default_factory=AssignedTasks)

    def copy(self, **changes) -> "StreamsMember":
        base = {"client_tags": dict(self.client_tags), "assigned": self.assigned.copy(),
                "pending_revocation": self.pending_revocation.copy()}
        base.update(changes)
        return replace(self, **base)

    def reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch

    def metadata_fields(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, tuple(sorted(self.client_tags.items())))

    def assignment_fields(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation)

    # -- records ------------------------------------------------------------------------------
    def metadata_value(self) -> dict:
        return {"instance_id": self.instance_id, "rack_id": self.rack_id, "client_id": self.client_id,
                "client_host": self.client_host, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "topology_epoch": self.topology_epoch, "process_id": self.process_id,
                "user_endpoint": None if self.user_endpoint is None else
                {"host": self.user_endpoint[0], "port": self.user_endpoint[1]},
                "client_tags": [{"key": k, "value": v} for k, v in sorted(self.client_tags.items())]}

    def apply_metadata(self, v: dict) -> None:
        self.instance_id, self.rack_id = v.get("instance_id"), v.get("rack_id")
        self.client_id, self.client_host = v["client_id"], v["client_host"]
        self.rebalance_timeout_ms, self.topology_epoch = v["rebalance_timeout_ms"], v["topology_epoch"]
        self.process_id = v["process_id"]
        e = v.get("user_endpoint")
        self.user_endpoint = None if e is None else (e["host"], e["port"])
        self.client_tags = {kv["key"]: kv["value"] for kv in v.get("client_tags") or []}

    def assignment_value(self) -> dict:
        return {"member_epoch": self.member_epoch, "previous_member_epoch": self.previous_member_epoch,
                "state": int(self.state),
                "active_tasks": _with_epochs(self.assigned.active), "standby_tasks": _plain(self.assigned.standby),
                "warmup_tasks": _plain(self.assigned.warmup),
                "active_tasks_pending_revocation": _with_epochs(self.pending_revocation.active),
                "standby_tasks_pending_revocation": _plain(self.pending_revocation.standby),
                "warmup_tasks_pending_revocation": _plain(self.pending_revocation.warmup)}

    def apply_assignment(self, v: dict) -> None:
        self.member_epoch, self.previous_member_epoch = v["member_epoch"], v["previous_member_epoch"]
        try:
            self.state = MemberState(v["state"])
        except ValueError:
            self.state = MemberState.UNKNOWN
        epoch = v["member_epoch"]
        self.assigned = AssignedTasks(_parse_epochs(v["active_tasks"], epoch), _parse(v["standby_tasks"]),
                                      _parse(v["warmup_tasks"]))
        self.pending_revocation = AssignedTasks(_parse_epochs(v["active_tasks_pending_revocation"], epoch),
                                                _parse(v["standby_tasks_pending_revocation"]),
                                                _parse(v["warmup_tasks_pending_revocation"]))


def _plain(tasks: Tasks) -> list[dict]:
    return [{"subtopology_id": s, "partitions": sorted(p)} for s, p in sorted(tasks.items())]


def _with_epochs(tasks: Active) -> list[dict]:
    out = []
    for s, parts in sorted(tasks.items()):
        ordered = sorted(parts.items())
        out.append({"subtopology_id": s, "partitions": [p for p, _ in ordered],
                    "assignment_epochs": [e for _, e in ordered]})
    return out


def _parse(items) -> Tasks:
    return {t["subtopology_id"]: set(t["partitions"]) for t in items or ()}


def _parse_epochs(items, member_epoch: int) -> Active:
    out: Active = {}
    for t in items or ():
        epochs = t.get("assignment_epochs") or []
        if epochs and len(epochs) != len(t["partitions"]):
            raise ValueError(f"assignment epochs for subtopology {t['subtopology_id']} do not match its partitions")
        out[t["subtopology_id"]] = (dict(zip(t["partitions"], epochs)) if epochs
                                    else {p: member_epoch for p in t["partitions"]})
    return out


def tasks_to_wire(tasks) -> list[dict]:
    """TaskIds of a response, sorted by subtopology (describe) and partition."""
    return [{"subtopology_id": s, "partitions": sorted(p)} for s, p in sorted(tasks.items())]


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    last_assignment_configs: dict = field(default_factory=dict)
    assignment_epoch: int = 0
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, TasksTuple] = field(default_factory=dict)
    topology: Optional[StreamsTopology] = None
    # Not stored: recomputed from the topology and the topics on the first heartbeat after a load.
    configured: Optional[ConfiguredTopology] = None
    metadata_refresh_deadline: tuple[int, int] = (0, 0)  # (deadline ms, group epoch)
    shutdown_requested_by: Optional[str] = None
    endpoint_information_epoch: int = 0

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def metadata_expired(self, now: int) -> bool:
        deadline, epoch = self.metadata_refresh_deadline
        return now >= deadline or self.group_epoch < epoch

    def request_metadata_refresh(self) -> None:
        self.metadata_refresh_deadline = (0, 0)

    # -- who owns what (for reconciliation) --------------------------------------------------
    def active_owner(self, exclude: str) -> Callable[[str, int], Optional[str]]:
        owners: dict[tuple[str, int], str] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for source in (m.assigned, m.pending_revocation):
                for s, parts in source.active.items():
                    for p in parts:
                        owners[(s, p)] = m.process_id
        return lambda s, p: owners.get((s, p))

    def owners_of(self, kind: str, exclude: str) -> Callable[[str, int], set[str]]:
        owners: dict[tuple[str, int], set[str]] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for source in (m.assigned, m.pending_revocation):
                for s, parts in getattr(source, kind).items():
                    for p in parts:
                        owners.setdefault((s, p), set()).add(m.process_id)
        return lambda s, p: owners.get((s, p), set())

    # -- offsets ------------------------------------------------------------------------------
    def offset_expiration_base(self):
        return lambda om: om.commit_timestamp

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if not self.members or self.topology is None:
            return False
        return topic in self.topology.source_topic_map()


def reconcile(member: StreamsMember, target_epoch: int, target: TasksTuple, owned: Optional[TasksTuple],
              active_owner, standby_owners, warmup_owners) -> StreamsMember:
    """The member's next current assignment (Kafka's CurrentAssignmentBuilder); ``member`` is unchanged.

    ``owned``: the tasks the member reported (all three lists), None when it did not report them.
    Raises ``FencedMember`` for a member in an unknown state that still owns tasks.
    """
    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, owned, active_owner, standby_owners,
                         warmup_owners)
        return member
    if member.state == MemberState.UNREVOKED_TASKS:
        if owned is None or _contains_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owned, active_owner, standby_owners,
                     warmup_owners)
    if member.state == MemberState.UNRELEASED_TASKS:
        return _next(member, member.member_epoch, target_epoch, target, owned, active_owner, standby_owners,
                     warmup_owners)
    if owned is None or not owned.is_empty():
        raise FencedMember("The streams group member is in a unknown state. The member must abandon all its "
                           "tasks and rejoin.")
    return _next(member, target_epoch, target_epoch, target, owned, active_owner, standby_owners, warmup_owners)


class FencedMember(Exception):
    pass


def _contains_any(owned: TasksTuple, tasks: AssignedTasks) -> bool:
    for mine, theirs in ((owned.active, tasks.active), (owned.standby, tasks.standby),
                         (owned.warmup, tasks.warmup)):
        for s, parts in mine.items():
            if s in theirs and set(parts) & set(theirs[s]):
                return True
    return False


def _next(member: StreamsMember, member_epoch: int, target_epoch: int, target: TasksTuple,
          owned: Optional[TasksTuple], active_owner, standby_owners, warmup_owners) -> StreamsMember:
    pid = member.process_id
    new_active: Active = {}
    revoke_active: Active = {}
    add_active: Active = {}
    unreleased = False
    current = member.assigned
    for s in set(target.active) | set(current.active):
        cur = current.active.get(s, {})
        tgt = target.active.get(s, set())
        kept = {p: e for p, e in cur.items() if p in tgt}
        revoke = {p: e for p, e in cur.items() if p not in kept}
        pending = {p: target_epoch for p in tgt if p not in kept}
        blocked = {p for p in pending
                   if active_owner(s, p) is not None or pid in standby_owners(s, p) or pid in warmup_owners(s, p)}
        unreleased |= bool(blocked)
        for p in blocked:
            del pending[p]
        if kept:
            new_active[s] = kept
        if revoke:
            revoke_active[s] = revoke
        if pending:
            add_active[s] = pending

    def diff(cur_tasks: Tasks, tgt_tasks: Tasks):
        nonlocal unreleased
        kept_all, revoke_all, add_all = {}, {}, {}
        for s in set(tgt_tasks) | set(cur_tasks):
            cur = set(cur_tasks.get(s, set()))
            tgt = set(tgt_tasks.get(s, set()))
            kept = cur & tgt
            revoke = cur - kept
            pending = tgt - kept
            blocked = {p for p in pending if active_owner(s, p) == pid or pid in standby_owners(s, p)
                       or pid in warmup_owners(s, p)}
            unreleased |= bool(blocked)
            pending -= blocked
            if kept:
                kept_all[s] = kept
            if revoke:
                revoke_all[s] = revoke
            if pending:
                add_all[s] = pending
        return kept_all, revoke_all, add_all

    new_standby, revoke_standby, add_standby = diff(current.standby, target.standby)
    new_warmup, revoke_warmup, add_warmup = diff(current.warmup, target.warmup)
    pending_revocation = AssignedTasks(revoke_active, revoke_standby, revoke_warmup)
    assigned = AssignedTasks(new_active, new_standby, new_warmup)
    to_add = AssignedTasks(add_active, add_standby, add_warmup)

    if not pending_revocation.is_empty() and (owned is None or _contains_any(owned, pending_revocation)):
        return member.copy(state=MemberState.UNREVOKED_TASKS, member_epoch=member_epoch,
                           previous_member_epoch=member.member_epoch, assigned=assigned,
                           pending_revocation=pending_revocation)
    if not to_add.is_empty():
        merged = assigned.copy()
        for s, parts in to_add.active.items():
            merged.active.setdefault(s, {}).update(parts)
        for s, parts in to_add.standby.items():
            merged.standby.setdefault(s, set()).update(parts)
        for s, parts in to_add.warmup.items():
            merged.warmup.setdefault(s, set()).update(parts)
        return member.copy(state=MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE,
                           member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                           assigned=merged, pending_revocation=AssignedTasks())
    return member.copy(state=MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE,
                       member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
                       assigned=assigned, pending_revocation=AssignedTasks())
