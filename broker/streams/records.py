"""The six streams-group record types in ``__consumer_offsets`` (Kafka 4.2's formats).

As for KIP-848 consumer groups, a record's key starts with an int16 version that tells its type apart
(Kafka's ``CoordinatorRecordType``): 17 group metadata (epoch, metadata hash, validated topology epoch,
last assignment configs), 19 member metadata, 20 target-assignment epoch, 21 a member's target tasks,
22 a member's current tasks, 23 the topology.  Keys and values are declared as message specs in
``protocol/schemas/StreamsGroup*.json`` and encoded by the generic codec; values are version 0
(flexible, with tagged fields).  A null value is a tombstone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

from minikafka.protocol import codec
from minikafka.protocol.errors import CorruptRecordError, ProtocolError

KEY_VERSIONS = {
    "StreamsGroupMetadata": 17,
    "StreamsGroupMemberMetadata": 19,
    "StreamsGroupTargetAssignmentMetadata": 20,
    "StreamsGroupTargetAssignmentMember": 21,
    "StreamsGroupCurrentMemberAssignment": 22,
    "StreamsGroupTopology": 23,
}
KINDS = {v: k for k, v in KEY_VERSIONS.items()}
PER_MEMBER = {"StreamsGroupMemberMetadata", "StreamsGroupTargetAssignmentMember",
              "StreamsGroupCurrentMemberAssignment"}
VALUE_VERSION = 0

_I16 = struct.Struct(">h")


@dataclass(frozen=True)
class StreamsGroupKey:
    kind: str
    group: str
    member_id: Optional[str] = None

    def encode(self) -> bytes:
        version = KEY_VERSIONS[self.kind]
        fields = {"group_id": self.group}
        if self.kind in PER_MEMBER:
            fields["member_id"] = self.member_id
        return _I16.pack(version) + bytes(codec.encode_data(self.kind + "Key", version, fields))


@dataclass
class StreamsGroupValue:
    kind: str
    data: dict

    def encode(self) -> bytes:
        return _I16.pack(VALUE_VERSION) + bytes(codec.encode_data(self.kind + "Value", VALUE_VERSION, self.data))


def key(kind: str, group: str, member_id: Optional[str] = None) -> StreamsGroupKey:
    return StreamsGroupKey(kind, group, member_id)


def is_streams_key_version(version: int) -> bool:
    return version in KINDS


def decode_key(buf) -> StreamsGroupKey:
    (version,) = _I16.unpack_from(buf, 0)
    kind = KINDS[version]
    try:
        fields, _ = codec.decode_data(kind + "Key", version, buf, 2)
    except ProtocolError as exc:
        raise CorruptRecordError(f"bad {kind}Key: {exc}") from None
    return StreamsGroupKey(kind, fields["group_id"], fields.get("member_id"))


def decode_value(kind: str, buf) -> Optional[StreamsGroupValue]:
    if buf is None:
        return None
    (version,) = _I16.unpack_from(buf, 0)
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"unsupported {kind}Value version {version}")
    try:
        data, _ = codec.decode_data(kind + "Value", version, buf, 2)
    except ProtocolError as exc:
        raise CorruptRecordError(f"bad {kind}Value: {exc}") from None
    return StreamsGroupValue(kind, data)
