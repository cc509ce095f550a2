"""The share-group records in ``__consumer_offsets``, in Kafka 4.2's formats.

A share group is kept as six record types beside the classic and consumer groups of the same
partition.  As for every ``__consumer_offsets`` record, the key starts with an int16 whose value
tells the record type apart (Kafka's coordinator record "apiKey"), followed by the key struct; the
value starts with an int16 version (0 for all six) and is a flexible-version message:

====  ====================================  ===================================================
key   record                                 what it holds
====  ====================================  ===================================================
10    ShareGroupMemberMetadata (member)      rack, client id and host, subscribed topic names
11    ShareGroupMetadata                     the group epoch and the subscribed topics' hash
12    ShareGroupTargetAssignmentMetadata     the epoch the target assignment is for
13    ShareGroupTargetAssignmentMember       one member's target partitions
14    ShareGroupCurrentMemberAssignment      one member's epochs, state and partitions
15    ShareGroupStatePartitionMetadata       partitions whose share state is being initialized,
                                             is initialized, or is being deleted
====  ====================================  ===================================================

(Kafka 4.0's ShareGroupPartitionMetadata, key 9, is gone since 4.1; such records are skipped.)
The structs are specs in ``protocol/schemas/`` encoded by the generic codec; a null value is a
tombstone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from minikafka.protocol import codec
from minikafka.protocol.errors import CorruptRecordError, ProtocolError

KEY_VERSIONS = {
    "ShareGroupMemberMetadata": 10,
    "ShareGroupMetadata": 11,
    "ShareGroupTargetAssignmentMetadata": 12,
    "ShareGroupTargetAssignmentMember": 13,
    "ShareGroupCurrentMemberAssignment": 14,
    "ShareGroupStatePartitionMetadata": 15,
}
KINDS = {v: k for k, v in KEY_VERSIONS.items()}
PER_MEMBER = {"ShareGroupMemberMetadata", "ShareGroupTargetAssignmentMember", "ShareGroupCurrentMemberAssignment"}
VALUE_VERSION = 0

_I16 = struct.Struct(">h")


@dataclass(frozen=True)
class ShareGroupKey:
    """The key of a share-group record: its type, the group and (per-member types) the member."""
    kind: str
    group: str
    member_id: str | None = None


@dataclass
class ShareGroupValue:
    """The value of a share-group record: the spec's fields (snake_case), as the codec reads them."""
    kind: str
    data: dict


def key(kind: str, group_id: str, member_id: str | None = None) -> ShareGroupKey:
    return ShareGroupKey(kind, group_id, member_id if kind in PER_MEMBER else None)


def value(kind: str, **data) -> ShareGroupValue:
    return ShareGroupValue(kind, data)


def encode_key(k: ShareGroupKey) -> bytes:
    version = KEY_VERSIONS[k.kind]
    fields = {"group_id": k.group}
    if k.kind in PER_MEMBER:
        fields["member_id"] = k.member_id
    return _I16.pack(version) + codec.encode_data(k.kind + "Key", version, fields)


def encode_value(v: ShareGroupValue | None) -> bytes | None:
    if v is None:
        return None
    return _I16.pack(VALUE_VERSION) + codec.encode_data(v.kind + "Value", VALUE_VERSION, v.data)


def decode_key(version: int, buf) -> ShareGroupKey | None:
    kind = KINDS.get(version)
    if kind is None:
        return None
    try:
        fields, _ = codec.decode_data(kind + "Key", version, buf, 2)
    except (ProtocolError, struct.error) as exc:
        raise CorruptRecordError(f"bad {kind}Key: {exc}") from None
    return ShareGroupKey(kind, fields["group_id"], fields.get("member_id"))


def decode_value(kind: str, buf) -> ShareGroupValue | None:
    if buf is None:
        return None
    if len(buf) < 2:
        raise CorruptRecordError(f"truncated {kind}Value")
    (version,) = _I16.unpack_from(buf, 0)
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"unsupported {kind}Value version {version}")
    try:
        data, _ = codec.decode_data(kind + "Value", version, buf, 2)
    except (ProtocolError, struct.error) as exc:
        raise CorruptRecordError(f"bad {kind}Value: {exc}") from None
    return ShareGroupValue(kind, data)
