"""KIP-848 specs that kafka-python does not ship (protocol/schemas/): loaded beside kafka-python's by
``specs``, byte for byte as Kafka's message definitions lay them out (bytes derived by hand below)."""

from __future__ import annotations

import uuid

from minikafka.broker.group.records import (
    ConsumerGroupKey, ConsumerGroupValue, decode_consumer_value, decode_key, encode_key, encode_value)
from minikafka.protocol import codec, specs

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def h(text: str) -> bytes:
    """Hex with ``#`` comments to the end of the line."""
    return bytes.fromhex("".join(line.split("#")[0].replace(" ", "") for line in text.splitlines()))


def test_specs_load_from_our_folder_through_the_same_loader():
    for api_key, name in ((68, "ConsumerGroupHeartbeat"), (69, "ConsumerGroupDescribe")):
        for kind in ("request", "response"):
            spec = specs.message(api_key, kind)
            assert spec.name == f"{name}{kind.capitalize()}" and spec.valid == (0, 1) and spec.flexible == (0, None)
        assert specs.api_name(api_key) == name
    assert {68, 69} <= specs.known_api_keys()
    assert specs.load("ConsumerGroupCurrentMemberAssignmentKey").kind == "coordinator-key"


HEARTBEAT_V0 = h("""
    02 67  # group_id "g" (compact string)
    02 6d  # member_id "m"
    00000000  # member_epoch 0
    00  # instance_id null
    00  # rack_id null
    000493e0  # rebalance_timeout_ms 300000
    02 02 74  # subscribed_topic_names ["t"]
    00  # server_assignor null
    00  # topic_partitions null
    00  # tagged fields
""")


def test_heartbeat_request_v0_and_v1_bytes():
    body = {"group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["t"], "server_assignor": None,
            "topic_partitions": None}
    frame = codec.encode_request(68, 0, 7, "c", body)
    # size, key 68, version 0, correlation 7, client id "c", header tags (flexible: header v2)
    assert frame[4:] == h("0044 0000 00000007 0001 63 00") + HEARTBEAT_V0
    req = codec.decode_request(frame[4:])
    assert req.body == body  # v0 has no regex field
    # v1 puts the regex after the topic names.
    body1 = {**body, "subscribed_topic_regex": "^t.*"}
    frame1 = codec.encode_request(68, 1, 7, "c", body1)
    assert frame1[4 + 12:] == HEARTBEAT_V0[:17] + h("05 5e742e2a") + HEARTBEAT_V0[17:]
    assert codec.decode_request(frame1[4:]).body == body1


def test_heartbeat_request_with_owned_partitions():
    body = {"group_id": "g", "member_id": "m", "member_epoch": 3, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": [{"topic_id": TOPIC, "partitions": [0, 2]}]}
    frame = codec.encode_request(68, 1, 1, None, body)
    assert frame[4 + 11:] == h("""02 67 02 6d 00000003 00 00 ffffffff 00 00 00
        02 00112233445566778899aabbccddeeff 03 00000000 00000002 00  00""")


def test_heartbeat_response_bytes():
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m", "member_epoch": 1,
            "heartbeat_interval_ms": 5000,
            "assignment": {"topic_partitions": [{"topic_id": TOPIC, "partitions": [0, 1]}]}}
    chunks = codec.encode_response(68, 0, 9, body)
    wire = b"".join(bytes(c) for c in chunks)
    assert wire[4:] == h("""00000009 00
        00000000 0000 00 02 6d 00000001 00001388
        01 02 00112233445566778899aabbccddeeff 03 00000000 00000001 00 00
        00""")
    assert codec.decode_response(68, 0, wire[4:])[1] == body
    # A null assignment is a single -1 byte.
    none = codec.encode_response(68, 1, 9, {**body, "assignment": None})
    assert b"".join(bytes(c) for c in none)[4 + 5 + 4 + 2 + 1 + 2 + 8:] == h("ff 00")


def test_describe_v1_has_the_member_type():
    member = {"member_id": "m", "instance_id": None, "rack_id": None, "member_epoch": 2, "client_id": "c",
              "client_host": "/h", "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
              "assignment": {"topic_partitions": []}, "target_assignment": {"topic_partitions": []}, "member_type": 1}
    group = {"error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable", "group_epoch": 2,
             "assignment_epoch": 2, "assignor_name": "uniform", "members": [member],
             "authorized_operations": -2147483648}
    body = {"throttle_time_ms": 0, "groups": [group]}
    v1 = b"".join(bytes(c) for c in codec.encode_response(69, 1, 1, body))
    v0 = b"".join(bytes(c) for c in codec.encode_response(69, 0, 1, body))
    assert len(v1) == len(v0) + 1  # the int8 member type
    assert codec.decode_response(69, 1, v1[4:])[1]["groups"][0]["members"][0]["member_type"] == 1
    assert "member_type" not in codec.decode_response(69, 0, v0[4:])[1]["groups"][0]["members"][0]


def test_record_keys_and_values_bytes():
    key = ConsumerGroupKey("ConsumerGroupMetadata", "g")
    assert encode_key(key) == h("0003 0001 67")  # key version 3, int16-length string
    assert decode_key(h("0003 0001 67")) == key
    member_key = ConsumerGroupKey("ConsumerGroupCurrentMemberAssignment", "g", "m")
    assert encode_key(member_key) == h("0008 0001 67 0001 6d")
    value = ConsumerGroupValue("ConsumerGroupMetadata", {"epoch": 7})
    assert encode_value(value) == h("0000 00000007 00")  # value version 0, flexible: tagged fields
    current = ConsumerGroupValue("ConsumerGroupCurrentMemberAssignment", {
        "member_epoch": 3, "previous_member_epoch": 2, "state": 1,
        "assigned_partitions": [{"topic_id": TOPIC, "partitions": [1]}],
        "partitions_pending_revocation": []})
    raw = encode_value(current)
    assert raw == h("""0000 00000003 00000002 01
        02 00112233445566778899aabbccddeeff 02 00000001 00
        01 00""")
    assert decode_consumer_value("ConsumerGroupCurrentMemberAssignment", raw) == current
    for kind, version in (("ConsumerGroupPartitionMetadata", 4), ("ConsumerGroupMemberMetadata", 5),
                          ("ConsumerGroupTargetAssignmentMetadata", 6), ("ConsumerGroupTargetAssignmentMember", 7)):
        k = ConsumerGroupKey(kind, "g", "m" if version in (5, 7) else None)
        assert encode_key(k)[:2] == version.to_bytes(2, "big") and decode_key(encode_key(k)) == k


def test_member_metadata_classic_tag_round_trips():
    data = {"instance_id": "i", "rack_id": None, "client_id": "c", "client_host": "/h",
            "subscribed_topic_names": ["t"], "subscribed_topic_regex": None, "rebalance_timeout_ms": 1000,
            "server_assignor": "range",
            "classic_member_metadata": {"session_timeout_ms": 45000,
                                        "supported_protocols": [{"name": "range", "metadata": b"\x00\x01"}]}}
    raw = encode_value(ConsumerGroupValue("ConsumerGroupMemberMetadata", data))
    plain = encode_value(ConsumerGroupValue("ConsumerGroupMemberMetadata", {**data, "classic_member_metadata": None}))
    # Tagged field 0 after the fixed fields: count 1, tag 0, size, then the struct.
    assert raw[:len(plain) - 1] == plain[:-1] and raw[len(plain) - 1:len(plain) + 1] == h("01 00")
    assert decode_consumer_value("ConsumerGroupMemberMetadata", raw).data == data


# First ConsumerGroupHeartbeat of real clients, captured through a TCP proxy in front of minikafka
# (subscribe(["cap"]), group.protocol=consumer), request header included, size prefix stripped.
LIBRDKAFKA_2_16_V1 = h("""
    0044 0001 00000003 0002 7264 00  # key 68, v1, correlation 3, client id "rd", header tags
    07 6361702d7264  # group_id "cap-rd"
    17 69565059 6a4b6c79 52574b43 496e4d56 584c4461 7651  # member id, generated by the client (v1)
    00000000  # member_epoch 0
    00 00  # instance_id, rack_id null
    000493e0  # rebalance_timeout_ms 300000 (max.poll.interval.ms)
    02 04 636170  # subscribed_topic_names ["cap"]
    01  # subscribed_topic_regex "" (librdkafka sends an empty regex beside names)
    00  # server_assignor null
    01  # topic_partitions: empty array
    00  # tagged fields
""")
JAVA_3_9_1_V0 = h("""
    0044 0000 0000000d 0004 6a617661 00  # key 68, v0, correlation 13, client id "java"
    09 6361702d6a617661  # group_id "cap-java"
    01  # member_id "" (v0: the coordinator generates it)
    00000000 00 00 000493e0  # epoch 0, no instance/rack, rebalance timeout 300000
    02 04 636170  # subscribed_topic_names ["cap"]
    00 01 00  # server_assignor null, topic_partitions [], tags
""")


def test_real_clients_first_heartbeats_decode_and_reencode():
    rd = codec.decode_request(LIBRDKAFKA_2_16_V1)
    assert (rd.api_key, rd.api_version, rd.client_id) == (68, 1, "rd")
    assert rd.body == {"group_id": "cap-rd", "member_id": "iVPYjKlyRWKCInMVXLDavQ", "member_epoch": 0,
                       "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 300000,
                       "subscribed_topic_names": ["cap"], "subscribed_topic_regex": "", "server_assignor": None,
                       "topic_partitions": []}
    assert codec.encode_request(68, 1, 3, "rd", rd.body)[4:] == LIBRDKAFKA_2_16_V1
    java = codec.decode_request(JAVA_3_9_1_V0)
    assert (java.api_version, java.body["member_id"], java.body["topic_partitions"]) == (0, "", [])
    assert codec.encode_request(68, 0, 13, "java", java.body)[4:] == JAVA_3_9_1_V0
