"""What a coordinator operation returns: the records to append and the response (Kafka's
``CoordinatorResult``), what a manager may ask of the shard that runs it (``Runtime``), and the
error-shaped JoinGroup/SyncGroup responses every part of the shard uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional, Protocol

from minikafka.protocol.errors import ErrorCode

from ..clock import Timer

Record = tuple[Any, Any]  # (key, value or None for a tombstone), as in records.py


@dataclass
class CoordinatorResult:
    records: list[Record] = field(default_factory=list)
    response: Any = None
    replay: bool = True
    # Called after the append (error None) or its failure (error code); a non-None return value replaces
    # the response.  This is where responses that must follow persistence are released.
    on_appended: Optional[Callable[[Optional[ErrorCode]], Any]] = None
    # Transactional offset commits are written in a transactional batch of their producer.
    producer_id: int = -1
    producer_epoch: int = -1


class Runtime(Protocol):
    """The shard as its managers see it (Kafka's coordinator runtime): the time, running a result
    (append its records as one batch, replay them, release the response), keyed timeouts whose
    operation's result is run the same way, the group-id namespace (one id, one group type) and the
    broker's topic image."""

    timer: Timer

    def now(self) -> int: ...

    def execute(self, result: "CoordinatorResult") -> Any: ...

    def schedule(self, key: Hashable, delay_ms: int, operation: Callable[[], "CoordinatorResult"]) -> None: ...

    def group_type(self, group_id: str) -> Optional[str]:
        """The type of the group that holds ``group_id`` ("classic", "consumer", ...), None if none does."""

    def topic_metadata(self) -> dict:
        """The broker's topics: name -> (topic id, partition count) of every non-internal topic."""


def empty(response: Any = None) -> CoordinatorResult:
    return CoordinatorResult(response=response)


def join_error(code: ErrorCode, member_id: str = "") -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}


def sync_error(code: ErrorCode) -> dict:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}


def every_partition(topics: list, code: ErrorCode) -> dict:
    """An OffsetCommit-shaped response giving every requested partition the same error."""
    return {"topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": code} for p in t["partitions"]]}
        for t in topics]}
