"""Golden bytes, written out by hand from the Kafka protocol guide and the JSON specs."""

from __future__ import annotations

import pytest

from minikafka.protocol import codec
from minikafka.protocol.apis import ApiRegistry, api_versions_error_response


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("\n", ""))


def wire(chunks) -> bytes:
    return b"".join(bytes(c) for c in chunks)


API_VERSIONS_V0_REQUEST = h(
    "0000000d"  # size 13
    "0012 0000 00000001"  # api key 18, version 0, correlation id 1
    "0003 616263"  # client id "abc" (int16 length)
)


def test_api_versions_v0_request():
    assert codec.encode_request(18, 0, 1, "abc", {}) == API_VERSIONS_V0_REQUEST
    req = codec.decode_request(API_VERSIONS_V0_REQUEST[4:])
    assert req == (18, 0, 1, "abc", {})


API_KEYS = [
    {"api_key": 18, "min_version": 0, "max_version": 4},
    {"api_key": 3, "min_version": 0, "max_version": 12},
]


def test_api_versions_v0_response():
    expected = h(
        "00000016"  # size 22
        "00000001"  # correlation id
        "0000"  # error code
        "00000002"  # array of 2 (int32 count)
        "0012 0000 0004"
        "0003 0000 000c"
    )
    assert wire(codec.encode_response(18, 0, 1, {"error_code": 0, "api_keys": API_KEYS})) == expected


def test_api_versions_v3_response_uses_header_v0():
    expected = h(
        "0000001a"  # size 26
        "00000001"  # correlation id, and NO header tagged-field byte: header v0
        "0000"  # error code
        "03"  # compact array: 2 + 1
        "0012 0000 0004 00"  # entry + its empty tagged section
        "0003 0000 000c 00"
        "00000000"  # throttle time
        "00"  # body tagged fields: none
    )
    assert wire(codec.encode_response(18, 3, 1, {"api_keys": API_KEYS})) == expected


def test_api_versions_v3_response_with_tagged_fields_in_tag_order():
    expected = h(
        "00000019"  # size 25
        "00000001 0000 01 00000000"  # cid, error, no api keys, throttle
        "02"  # two tagged fields
        "01 08 0000000000000005"  # tag 1 FinalizedFeaturesEpoch = 5 (8 bytes)
        "03 01 01"  # tag 3 ZkMigrationReady = true
    )
    body = {"api_keys": [], "zk_migration_ready": True, "finalized_features_epoch": 5}
    assert wire(codec.encode_response(18, 3, 1, body)) == expected


def test_api_versions_unsupported_version_answer():
    expected = h(
        "00000010"  # size 16
        "00000009"  # correlation id, header v0
        "0023"  # UNSUPPORTED_VERSION (35)
        "00000001 0012 0000 0004"  # [ApiVersions 0-4], v0 body
    )
    assert wire(api_versions_error_response(9, 0, 4)) == expected
    registry = ApiRegistry()
    registry.register(18, 0, 4, object())
    assert wire(registry.api_versions_error_response(9)) == expected
    _, body = codec.decode_response(18, 0, expected[4:])
    assert body == {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}


METADATA_V1_REQUEST = h(
    "00000014"  # size 20
    "0003 0001 00000007 0001 63"  # Metadata v1, cid 7, client "c"
    "00000001 0003 666f6f"  # topics: ["foo"] (v1 topics are structs with a name)
)


def test_metadata_v1_request():
    body = {"topics": [{"name": "foo"}]}
    assert codec.encode_request(3, 1, 7, "c", body) == METADATA_V1_REQUEST
    assert codec.decode_request(METADATA_V1_REQUEST[4:]).body == body
    null_topics = h("00000011 0003 0001 00000007 0001 63 ffffffff")
    assert codec.decode_request(null_topics[4:]).body == {"topics": None}


FETCH_V12_REQUEST = h(
    "0001 000c 00000002 0001 63 00"  # Fetch v12 (header v2: client id still int16, then tags)
    "ffffffff 000001f4 00000001 7fffffff 01"  # replica -1, max wait 500, min 1, max bytes, read_committed
    "00000000 ffffffff"  # session id 0, session epoch -1
    "02 02 74"  # one topic, "t" (compact string: 1 + 1)
    "02 00000000 ffffffff 0000000000000064 ffffffff ffffffffffffffff 00100000 00"  # one partition
    "00"  # topic tags
    "01"  # forgotten topics: empty compact array
    "01"  # rack id ""
    "01 00 03 03 6162"  # one tagged field: tag 0 ClusterId, 3 bytes, compact string "ab"
)


def test_fetch_v12_request_with_a_tagged_field():
    req = codec.decode_request(FETCH_V12_REQUEST)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (1, 12, 2, "c")
    assert req.body == {
        "cluster_id": "ab",
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 0x7FFFFFFF,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 100,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    assert codec.encode_request(1, 12, 2, "c", req.body)[4:] == FETCH_V12_REQUEST


def test_flexible_response_header_v1():
    # Heartbeat v4 response: correlation id, header tags, throttle, error, body tags
    expected = h("0000000c 00000005 00 00000000 0000 00")
    assert wire(codec.encode_response(12, 4, 5, {})) == expected
    assert wire(codec.encode_response(12, 3, 5, {})) == h("0000000a 00000005 00000000 0000")


@pytest.mark.parametrize("version,expected", [
    (0, h("0000001d 00000003 00000001 0001 74 00000001 00000000 0000 000000000000000a")),
    # v9: compact array, compact string, log_append_time, log_start_offset, record_errors, error_message
    (9, h("00000030 00000003 00 02 02 74 02 00000000 0000 000000000000000a"
          " ffffffffffffffff 0000000000000000 01 00 00 00 00000000 00")),
])
def test_produce_response(version, expected):
    body = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 10,
                                                                  "log_start_offset": 0}]}]}
    assert wire(codec.encode_response(0, version, 3, body)) == expected
