"""One member of a classic group, as the coordinator sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

# A parked JoinGroup/SyncGroup request is completed by calling this with the response dict.
Respond = Callable[[dict], None]

EMPTY_ASSIGNMENT = b""


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference: the vote walks this list.
    protocols: list[tuple[str, bytes]]
    assignment: bytes = EMPTY_ASSIGNMENT
    awaiting_join: Optional[Respond] = field(default=None, repr=False)
    awaiting_sync: Optional[Respond] = field(default=None, repr=False)
    # A member added by the current join phase: until that phase completes it cannot heartbeat (it has no
    # generation yet), so only the new-member join timeout protects the group from a vanished client.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # New members can be expired while awaiting join: check this first.
            return False
        # Members parked in a rebalance count as alive; otherwise the next heartbeat is required.
        return self.is_awaiting_join or self.is_awaiting_sync
