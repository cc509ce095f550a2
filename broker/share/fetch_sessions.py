"""Share sessions (KIP-932): Kafka's ``ShareSessionCache`` for ShareFetch and ShareAcknowledge.

A share session is keyed by (group id, member id) and remembers the partitions the member fetches,
so that later ShareFetch requests carry only changes (new partitions, ``ForgottenTopicsData``) and
acknowledgements.  Epochs, as Kafka's ``newContext`` / ``acknowledgeSessionUpdate`` check them:

- ShareFetch epoch 0 opens a session (a session of the same member is replaced); acknowledgements
  in it are INVALID_REQUEST.  The cache holds at most ``group.share.max.share.sessions`` (Kafka's
  default 2000); a full cache answers SHARE_SESSION_LIMIT_REACHED.
- ShareFetch epoch -1 closes the session (SHARE_SESSION_NOT_FOUND when there is none): its
  acknowledgements are applied, then the member's acquired records of the session's partitions are
  released, and nothing is fetched.
- Any other epoch must equal the session's: else INVALID_SHARE_SESSION_EPOCH (none: SHARE_SESSION_NOT_FOUND);
  the session's epoch then moves on (after INT32_MAX comes 1).
- ShareAcknowledge never opens a session (epoch 0: INVALID_SHARE_SESSION_EPOCH), -1 closes it.

A session belongs to the connection that opened it: when that connection is lost the session goes
and the member's acquired records in its partitions are released (Kafka 4.1+), so a consumer that
crashes hands its records back at once instead of after the lock timeout.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from minikafka.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT_MAX = 2147483647
SHARE_SESSION_LIMIT_REACHED = 133  # Kafka 4.1+; not in this project's error table yet


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= INT_MAX else epoch + 1


class SessionError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = int(code)


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    connection: object = None
    # (topic id, partition) in the order they were added.
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, partitions, connection=None) -> ShareSession:
        """Epoch 0: replace any session of this member with a new one at epoch 1."""
        key = (group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            raise SessionError(SHARE_SESSION_LIMIT_REACHED)
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection)
        for tp in partitions:
            session.partitions[tp] = None
        self.sessions[key] = session
        return session

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """An incremental or final request: the session must exist and (unless final) be at ``epoch``."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch != FINAL_EPOCH and session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session

    def advance(self, session: ShareSession, added=(), forgotten=()) -> None:
        for tp in added:
            session.partitions.setdefault(tp, None)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(session.epoch)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def of_connection(self, connection) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection is connection]

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.group_id == group_id]
