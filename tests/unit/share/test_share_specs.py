"""The share-group specs written for issue 21 (protocol/schemas/: ShareGroupHeartbeat 76,
ShareGroupDescribe 77 and the six ShareGroup* record types), which kafka-python does not ship,
against bytes that do not come from our codec:

* responses and records: what Apache Kafka 4.2.2 sent and wrote to ``__consumer_offsets`` for one
  share group (``data/share_group_kafka42.json``), decoded by our codec and encoded again byte for byte;
* requests: bytes built here by hand from Kafka's message definitions.
"""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest

from minikafka.broker.group.records import decode_key, encode_key, encode_value
from minikafka.broker.share import records as share_records
from minikafka.protocol import codec

DATA = json.loads((Path(__file__).parent / "data" / "share_group_kafka42.json").read_text())


@pytest.mark.parametrize("name", sorted(DATA["frames"]))
def test_kafka_responses_decode_and_encode_back(name):
    api_key, version = (int(x) for x in name.split("-")[:2])
    frame = bytes.fromhex(DATA["frames"][name])
    cid, body = codec.decode_response(api_key, version, frame)
    again = b"".join(bytes(c) for c in codec.encode_response(api_key, version, cid, body))
    assert again[4:] == frame


def test_recorded_answers_read_as_kafka_sent_them():
    _, join = codec.decode_response(76, 1, bytes.fromhex(DATA["frames"]["76-1-join"]))
    assert (join["member_epoch"], join["heartbeat_interval_ms"], join["assignment"]) == (1, 5000, {"topic_partitions": []})
    _, assigned = codec.decode_response(76, 1, bytes.fromhex(DATA["frames"]["76-1-assigned"]))
    assert assigned["member_epoch"] == 2 and assigned["assignment"]["topic_partitions"][0]["partitions"] == [0, 1]
    _, invalid = codec.decode_response(76, 1, bytes.fromhex(DATA["frames"]["76-1-invalid"]))
    assert (invalid["error_code"], invalid["error_message"]) == (42, None)
    _, described = codec.decode_response(77, 1, bytes.fromhex(DATA["frames"]["77-1"]))
    group, missing = described["groups"]
    assert (group["group_state"], group["assignor_name"], group["authorized_operations"]) == ("Stable", "simple", 3400)
    assert group["members"][0]["rack_id"] == "rack-a"
    assert (missing["error_code"], missing["error_message"]) == (69, "Group nope-g not found.")


def test_kafka_records_decode_and_encode_back():
    kinds = []
    for rec in DATA["records"]:
        key_bytes = bytes.fromhex(rec["key"])
        key = decode_key(key_bytes)
        assert isinstance(key, share_records.ShareGroupKey)
        assert encode_key(key) == key_bytes
        kinds.append(key.kind)
        if rec["value"] is not None:
            value_bytes = bytes.fromhex(rec["value"])
            value = share_records.decode_value(key.kind, value_bytes)
            assert encode_value(value) == value_bytes
    # The order Kafka writes a join in, then the initialization and the heartbeat that assigns.
    assert kinds[:6] == ["ShareGroupMemberMetadata", "ShareGroupMetadata", "ShareGroupTargetAssignmentMember",
                         "ShareGroupTargetAssignmentMetadata", "ShareGroupCurrentMemberAssignment",
                         "ShareGroupStatePartitionMetadata"]
    initialized = share_records.decode_value("ShareGroupStatePartitionMetadata", bytes.fromhex(DATA["records"][6]["value"]))
    assert initialized.data["initializing_topics"] == [] and initialized.data["initialized_topics"][0]["partitions"] == [0, 1]


def _cs(text):  # compact string; None is the compact null
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_heartbeat_and_describe_requests_by_hand():
    body = (_cs("g") + _cs("m") + struct.pack(">i", 0) + _cs(None)  # group, member, epoch, rack (null)
            + bytes([2]) + _cs("t")  # compact array of one topic name
            + b"\x00")  # no tagged fields
    request = {"group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]}
    encoded = codec.encode_request(76, 1, 7, "c", request)
    assert encoded.endswith(body)
    describe = bytes([3]) + _cs("a") + _cs("b") + b"\x01" + b"\x00"
    assert codec.encode_request(77, 1, 8, "c", {"group_ids": ["a", "b"], "include_authorized_operations": True}) \
        .endswith(describe)
    # The leave heartbeat: epoch -1, no topics (null array).
    leave = _cs("g") + _cs("m") + struct.pack(">i", -1) + _cs(None) + b"\x00" + b"\x00"
    assert codec.encode_request(76, 1, 9, "c", {"group_id": "g", "member_id": "m", "member_epoch": -1,
                                                 "rack_id": None, "subscribed_topic_names": None}).endswith(leave)


def test_record_keys_by_hand():
    key = share_records.key("ShareGroupCurrentMemberAssignment", "g", "m")
    assert encode_key(key) == struct.pack(">hh1sh1s", 14, 1, b"g", 1, b"m")
    assert encode_key(share_records.key("ShareGroupStatePartitionMetadata", "g")) == struct.pack(">hh1s", 15, 1, b"g")
    value = share_records.value("ShareGroupTargetAssignmentMember",
                                topic_partitions=[{"topic_id": uuid.UUID(int=5), "partitions": [3]}])
    assert encode_value(value) == (struct.pack(">h", 0) + bytes([2]) + uuid.UUID(int=5).bytes
                                   + bytes([2]) + struct.pack(">i", 3) + b"\x00" + b"\x00")
