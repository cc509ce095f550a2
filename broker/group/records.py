"""Key and value formats of the records in ``__consumer_offsets``.

Kafka stores two kinds of classic-group records there, each a (key, value) pair in which key and value
both start with an int16 version followed by a struct; a null value is a tombstone that deletes the key.
The key version tells the record type apart:

* key version 0 or 1: an offset commit.  Key {group, topic, partition}; value = the committed offset.
* key version 2: group metadata.  Key {group}; value = generation, protocol, leader and members.

The structs are declared below as small spec tables in our own words (field, type, first version, last
version) and encoded with ``struct``; only the non-flexible versions are read and written.  Versions
written, as Kafka 3.x/4.x writes them: OffsetCommitKey v1, OffsetCommitValue v3 (v1 when the commit
carried a retention time, to keep its expireTimestamp), GroupMetadataKey v2, GroupMetadataValue v3.

KIP-848 consumer groups add six record types (key versions 3-8: group epoch, subscribed-topic metadata,
member metadata, target-assignment epoch, a member's target assignment, a member's current assignment).
Their keys and values are flexible-version messages, declared as specs in ``protocol/schemas/`` and
encoded by the generic codec (``ConsumerGroupKey``/``ConsumerGroupValue`` below).  Keys of any other
version 10-15 are share groups' (``broker/share/records.py``); any other (streams groups,
regular-expression records, ...) is skipped by ``decode_key``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from minikafka.protocol import codec
from minikafka.protocol.errors import CorruptRecordError, ProtocolError

from ..share import records as share_records  # share groups' record types (key versions 10-15)
from ..share.records import ShareGroupKey, ShareGroupValue

# A field: (name, type, first version, last version).  Types: int16, int32, int64, string,
# nullable_string, bytes, or a nested field list for an array of structs.
Spec = tuple[tuple[str, Any, int, int], ...]
ANY = 32767

OFFSET_COMMIT_KEY: Spec = (
    ("group", "string", 0, 1),
    ("topic", "string", 0, 1),
    ("partition", "int32", 0, 1),
)

OFFSET_COMMIT_VALUE: Spec = (
    ("offset", "int64", 0, 3),
    ("leader_epoch", "int32", 3, 3),
    ("metadata", "string", 0, 3),
    ("commit_timestamp", "int64", 0, 3),
    # Only version 1 keeps an absolute expiry: the retention time of OffsetCommit v2-v4 requests.
    ("expire_timestamp", "int64", 1, 1),
)

GROUP_METADATA_KEY: Spec = (("group", "string", 2, 2),)

MEMBER_METADATA: Spec = (
    ("member_id", "string", 0, 3),
    ("group_instance_id", "nullable_string", 3, 3),
    ("client_id", "string", 0, 3),
    ("client_host", "string", 0, 3),
    ("rebalance_timeout", "int32", 1, 3),
    ("session_timeout", "int32", 0, 3),
    ("subscription", "bytes", 0, 3),
    ("assignment", "bytes", 0, 3),
)

GROUP_METADATA_VALUE: Spec = (
    ("protocol_type", "string", 0, 3),
    ("generation", "int32", 0, 3),
    ("protocol", "nullable_string", 0, 3),
    ("leader", "nullable_string", 0, 3),
    ("current_state_timestamp", "int64", 2, 3),
    ("members", MEMBER_METADATA, 0, 3),
)

DEFAULTS = {"leader_epoch": -1, "expire_timestamp": -1, "current_state_timestamp": -1,
            "rebalance_timeout": -1, "group_instance_id": None}

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FIXED = {"int16": _I16, "int32": _I32, "int64": _I64}


def _encode(spec: Spec, version: int, values: dict, out: bytearray) -> None:
    for name, kind, lo, hi in spec:
        if not lo <= version <= hi:
            continue
        value = values.get(name, DEFAULTS.get(name))
        if isinstance(kind, tuple):
            out += _I32.pack(len(value))
            for item in value:
                _encode(kind, version, item, out)
        elif kind in _FIXED:
            out += _FIXED[kind].pack(value)
        elif kind in ("string", "nullable_string"):
            if value is None:
                if kind == "string":
                    raise ValueError(f"{name} is not nullable")
                out += _I16.pack(-1)
            else:
                raw = value.encode("utf-8")
                out += _I16.pack(len(raw))
                out += raw
        elif kind == "bytes":
            out += _I32.pack(len(value))
            out += value
        else:  # pragma: no cover - a typo in a spec table
            raise AssertionError(kind)


def _decode(spec: Spec, version: int, buf, pos: int) -> tuple[dict, int]:
    values: dict[str, Any] = {}
    try:
        for name, kind, lo, hi in spec:
            if not lo <= version <= hi:
                values[name] = DEFAULTS.get(name)
                continue
            if isinstance(kind, tuple):
                (count,) = _I32.unpack_from(buf, pos)
                pos += 4
                if count < 0 or count > len(buf):
                    raise CorruptRecordError(f"bad array length {count} for {name}")
                items = []
                for _ in range(count):
                    item, pos = _decode(kind, version, buf, pos)
                    items.append(item)
                values[name] = items
            elif kind in _FIXED:
                codec = _FIXED[kind]
                (values[name],) = codec.unpack_from(buf, pos)
                pos += codec.size
            elif kind in ("string", "nullable_string"):
                (length,) = _I16.unpack_from(buf, pos)
                pos += 2
                if length < 0:
                    values[name] = None
                else:
                    if pos + length > len(buf):
                        raise CorruptRecordError(f"truncated {name}")
                    values[name] = bytes(buf[pos:pos + length]).decode("utf-8")
                    pos += length
            else:
                (length,) = _I32.unpack_from(buf, pos)
                pos += 4
                if length < 0:
                    values[name] = None
                else:
                    if pos + length > len(buf):
                        raise CorruptRecordError(f"truncated {name}")
                    values[name] = bytes(buf[pos:pos + length])
                    pos += length
    except struct.error as exc:
        raise CorruptRecordError(f"truncated __consumer_offsets record: {exc}") from None
    return values, pos


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: none


@dataclass
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


# KIP-848 record types by their spec names (``<name>Key``/``<name>Value``) and key versions.
CONSUMER_KEY_VERSIONS = {
    "ConsumerGroupMetadata": 3,
    "ConsumerGroupPartitionMetadata": 4,
    "ConsumerGroupMemberMetadata": 5,
    "ConsumerGroupTargetAssignmentMetadata": 6,
    "ConsumerGroupTargetAssignmentMember": 7,
    "ConsumerGroupCurrentMemberAssignment": 8,
}
_CONSUMER_KINDS = {v: k for k, v in CONSUMER_KEY_VERSIONS.items()}
_PER_MEMBER = {"ConsumerGroupMemberMetadata", "ConsumerGroupTargetAssignmentMember",
               "ConsumerGroupCurrentMemberAssignment"}
CONSUMER_VALUE_VERSION = 0


@dataclass(frozen=True)
class ConsumerGroupKey:
    """The key of a KIP-848 record: its type, the group and (for per-member types) the member."""
    kind: str
    group: str
    member_id: str | None = None


@dataclass
class ConsumerGroupValue:
    """The value of a KIP-848 record: the spec's fields as the codec's dict (snake_case keys)."""
    kind: str
    data: dict


def _encode_consumer_key(key: ConsumerGroupKey) -> bytes:
    version = CONSUMER_KEY_VERSIONS[key.kind]
    fields = {"group_id": key.group}
    if key.kind in _PER_MEMBER:
        fields["member_id"] = key.member_id
    return _I16.pack(version) + codec.encode_data(key.kind + "Key", version, fields)


def decode_consumer_value(kind: str, buf) -> ConsumerGroupValue | None:
    if buf is None:
        return None
    (version,) = _I16.unpack_from(buf, 0)
    try:
        data, _ = codec.decode_data(kind + "Value", version, buf, 2)
    except ProtocolError as exc:
        raise CorruptRecordError(f"bad {kind}Value: {exc}") from None
    return ConsumerGroupValue(kind, data)


def encode_key(key: OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey) -> bytes:
    out = bytearray()
    if hasattr(key, "encode"):  # record types of other group kinds (broker/streams/records.py)
        return key.encode()
    if isinstance(key, ConsumerGroupKey):
        return _encode_consumer_key(key)
    if isinstance(key, ShareGroupKey):
        return share_records.encode_key(key)
    if isinstance(key, OffsetCommitKey):
        out += _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        _encode(OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY_VERSION, key.__dict__, out)
    else:
        out += _I16.pack(GROUP_METADATA_KEY_VERSION)
        _encode(GROUP_METADATA_KEY, GROUP_METADATA_KEY_VERSION, key.__dict__, out)
    return bytes(out)


def encode_value(value: OffsetCommitValue | GroupMetadataValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, ShareGroupValue):
        return share_records.encode_value(value)
    if hasattr(value, "encode"):  # record types of other group kinds (broker/streams/records.py)
        return value.encode()
    if isinstance(value, ConsumerGroupValue):
        return _I16.pack(CONSUMER_VALUE_VERSION) + codec.encode_data(
            value.kind + "Value", CONSUMER_VALUE_VERSION, value.data)
    out = bytearray()
    if isinstance(value, OffsetCommitValue):
        version = (OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if value.expire_timestamp >= 0
                   else OFFSET_COMMIT_VALUE_VERSION)
        out += _I16.pack(version)
        _encode(OFFSET_COMMIT_VALUE, version, value.__dict__, out)
    else:
        out += _I16.pack(GROUP_METADATA_VALUE_VERSION)
        values = dict(value.__dict__)
        values["members"] = [m.__dict__ for m in value.members]
        _encode(GROUP_METADATA_VALUE, GROUP_METADATA_VALUE_VERSION, values, out)
    return bytes(out)


def decode_key(buf) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | None:
    """The key of a ``__consumer_offsets`` record, or None for record types that are not ours."""
    if buf is None or len(buf) < 2:
        raise CorruptRecordError("__consumer_offsets record without a key")
    (version,) = _I16.unpack_from(buf, 0)
    if version in (0, 1):
        values, _ = _decode(OFFSET_COMMIT_KEY, version, buf, 2)
        return OffsetCommitKey(**values)
    if version == 2:
        values, _ = _decode(GROUP_METADATA_KEY, version, buf, 2)
        return GroupMetadataKey(**values)
    from minikafka.broker.streams import records as streams_records
    if streams_records.is_streams_key_version(version):
        return streams_records.decode_key(buf)
    kind = _CONSUMER_KINDS.get(version)
    if kind is not None:
        try:
            fields, _ = codec.decode_data(kind + "Key", version, buf, 2)
        except ProtocolError as exc:
            raise CorruptRecordError(f"bad {kind}Key: {exc}") from None
        return ConsumerGroupKey(kind, fields["group_id"], fields.get("member_id"))
    if version in share_records.KINDS:
        return share_records.decode_key(version, buf)
    return None


def decode_offset_commit_value(buf) -> OffsetCommitValue | None:
    if buf is None:
        return None
    (version,) = _I16.unpack_from(buf, 0)
    if not 0 <= version <= 3:
        raise CorruptRecordError(f"unsupported OffsetCommitValue version {version}")
    values, _ = _decode(OFFSET_COMMIT_VALUE, version, buf, 2)
    return OffsetCommitValue(**values)


def decode_group_metadata_value(buf) -> GroupMetadataValue | None:
    if buf is None:
        return None
    (version,) = _I16.unpack_from(buf, 0)
    if not 0 <= version <= 3:
        raise CorruptRecordError(f"unsupported GroupMetadataValue version {version}")
    values, _ = _decode(GROUP_METADATA_VALUE, version, buf, 2)
    values["members"] = [MemberMetadata(**m) for m in values["members"]]
    return GroupMetadataValue(**values)
