"""The consumer protocol embedded in classic JoinGroup/SyncGroup payloads (protocol type ``consumer``).

A classic consumer's JoinGroup carries a ``ConsumerProtocolSubscription`` per assignor and its SyncGroup
answer a ``ConsumerProtocolAssignment``; both are an int16 version followed by the message (kafka-python's
spec files, read by the generic codec).  The coordinator reads them only when a classic group and a
consumer group are converted into each other, or when a classic member lives in a consumer group
(KIP-848 online migration): then the server, not a leader, decides what each classic member owns.

As Kafka's ``ConsumerProtocol``, a version newer than the newest known one is read as the newest one (the
format only ever grows at the end).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional

from minikafka.protocol import codec
from minikafka.protocol.errors import ProtocolError

MAX_VERSION = 3  # both ConsumerProtocolSubscription and ConsumerProtocolAssignment: 0-3

_I16 = struct.Struct(">h")


class EmbeddedProtocolError(ValueError):
    """A subscription or assignment that does not decode (Kafka's SchemaException)."""


@dataclass
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, set[int]] = field(default_factory=dict)  # topic name -> partitions
    generation_id: int = -1
    rack_id: Optional[str] = None


def _version(buf) -> int:
    if buf is None or len(buf) < 2:
        raise EmbeddedProtocolError("no version")
    (version,) = _I16.unpack_from(buf, 0)
    if version < 0:
        raise EmbeddedProtocolError(f"bad version {version}")
    return min(version, MAX_VERSION)


def version_of(metadata: bytes) -> int:
    """The version of a subscription, which Kafka also uses for the assignment it sends back."""
    return _version(metadata)


def parse_subscription(metadata: bytes) -> Subscription:
    version = _version(metadata)
    try:
        data, _ = codec.decode_data("ConsumerProtocolSubscription", version, bytes(metadata), 2)
    except (ProtocolError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise EmbeddedProtocolError(f"bad subscription: {exc}") from None
    owned: dict[str, set[int]] = {}
    for tp in data.get("owned_partitions") or ():
        if tp["partitions"]:
            owned.setdefault(tp["topic"], set()).update(tp["partitions"])
    return Subscription(version, list(data["topics"] or ()), owned, data.get("generation_id", -1),
                        data.get("rack_id"))


def parse_assignment(assignment: bytes) -> dict[str, set[int]]:
    if not assignment:
        return {}  # clients send (and some expect) an empty assignment for "nothing"
    version = _version(assignment)
    try:
        data, _ = codec.decode_data("ConsumerProtocolAssignment", version, bytes(assignment), 2)
    except (ProtocolError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise EmbeddedProtocolError(f"bad assignment: {exc}") from None
    out: dict[str, set[int]] = {}
    for tp in data["assigned_partitions"] or ():
        if tp["partitions"]:
            out.setdefault(tp["topic"], set()).update(tp["partitions"])
    return out


def encode_assignment(partitions: dict[str, set[int]], version: int) -> bytes:
    version = min(max(version, 0), MAX_VERSION)
    body = codec.encode_data("ConsumerProtocolAssignment", version, {
        "assigned_partitions": [{"topic": t, "partitions": sorted(p)} for t, p in sorted(partitions.items()) if p],
        "user_data": None})
    return _I16.pack(version) + body
