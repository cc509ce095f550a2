"""The records of ``__share_group_state``, in Kafka's coordinator record format.

A key is an int16 record type followed by the key struct at version 0 (not flexible); a value is an
int16 version followed by the value struct (version 0, flexible).  A null value is a tombstone.

* type 0, ShareSnapshot: key {group_id, topic_id, partition}; value {snapshot_epoch, state_epoch,
  leader_epoch, start_offset, create_timestamp, write_timestamp, state_batches[first_offset, last_offset,
  delivery_state, delivery_count]} and, tagged (0), delivery_complete_count (Kafka 4.2, -1 when unknown).
  The whole state of one share partition; a tombstone of this key deletes the state.
* type 1, ShareUpdate: the same key; value {snapshot_epoch, leader_epoch, start_offset (-1: unchanged),
  state_batches, tagged delivery_complete_count}: batches to combine with the state so far.

The field lists are the specs ``ShareSnapshotKey/Value`` and ``ShareUpdateKey/Value`` in
``protocol/schemas``; the generic codec encodes them.  Records of any other type are skipped on load,
as Kafka's share coordinator skips them.
"""

from __future__ import annotations

import functools

import struct
import uuid
from dataclasses import dataclass, field

from minikafka.protocol import codec
from minikafka.protocol.errors import CorruptRecordError, ProtocolError

SNAPSHOT, UPDATE = 0, 1
_NAMES = {SNAPSHOT: "ShareSnapshot", UPDATE: "ShareUpdate"}
_I16 = struct.Struct(">h")
VALUE_VERSION = 0


@dataclass(frozen=True)
class StateKey:
    """A share partition: Kafka's SharePartitionKey."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class Batch:
    """Offsets first..last (inclusive) in one delivery state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass
class ShareValue:
    """The value of a snapshot or an update (an update has no state epoch nor timestamps)."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[Batch] = field(default_factory=list)
    state_epoch: int = 0
    delivery_complete_count: int = -1
    create_timestamp: int = 0
    write_timestamp: int = 0


@functools.lru_cache(maxsize=1 << 14)
def encode_key(kind: int, key: StateKey) -> bytes:
    """The record key (the same bytes for every write of a share partition: kept, not re-encoded)."""
    return _I16.pack(kind) + bytes(codec.encode_data(_NAMES[kind] + "Key", 0, {
        "group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}))


def encode_value(kind: int, value: ShareValue | None) -> bytes | None:
    if value is None:
        return None
    fields = {"snapshot_epoch": value.snapshot_epoch, "leader_epoch": value.leader_epoch,
              "start_offset": value.start_offset, "delivery_complete_count": value.delivery_complete_count,
              "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                 "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                for b in value.batches]}
    if kind == SNAPSHOT:
        fields.update(state_epoch=value.state_epoch, create_timestamp=value.create_timestamp,
                      write_timestamp=value.write_timestamp)
    return _I16.pack(VALUE_VERSION) + bytes(codec.encode_data(_NAMES[kind] + "Value", VALUE_VERSION, fields))


def decode_key(buf) -> tuple[int, StateKey] | None:
    """(record type, key); None for a record type the share coordinator does not know."""
    try:
        (kind,) = _I16.unpack_from(buf, 0)
        if kind not in _NAMES:
            return None
        data, _ = codec.decode_data(_NAMES[kind] + "Key", 0, bytes(buf), 2)
    except (ProtocolError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed share state key: {exc}") from None
    return kind, StateKey(data["group_id"], data["topic_id"], data["partition"])


def decode_value(kind: int, buf) -> ShareValue | None:
    if buf is None:
        return None
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != VALUE_VERSION:
            raise CorruptRecordError(f"share state value version {version}")
        data, _ = codec.decode_data(_NAMES[kind] + "Value", version, bytes(buf), 2)
    except (ProtocolError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed share state value: {exc}") from None
    return ShareValue(
        data["snapshot_epoch"], data["leader_epoch"], data["start_offset"],
        [Batch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
         for b in data["state_batches"] or ()],
        data.get("state_epoch", 0), data.get("delivery_complete_count", -1),
        data.get("create_timestamp", 0), data.get("write_timestamp", 0))
