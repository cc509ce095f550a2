"""The generic codec against itself and against the contract handlers rely on."""

from __future__ import annotations

import struct
import uuid

import pytest

from codec_samples import normalise, sample_body, served_versions
from minikafka.protocol import codec, specs
from minikafka.protocol.apis import SERVE
from minikafka.protocol.errors import ProtocolError, UnsupportedVersionError
from minikafka.protocol.specs import in_range


def _wire(chunks) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def _frame(api_key, version, cid, client_id, body) -> bytes:
    return codec.encode_request(api_key, version, cid, client_id, body)[4:]


# ---- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("api_key,version", served_versions())
def test_request_round_trip(api_key, version):
    for seed in range(4):
        body = sample_body(api_key, version, "request", seed)
        wire = codec.encode_request(api_key, version, 42 + seed, "client-é", body)
        assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
        req = codec.decode_request(wire[4:])
        assert req == (api_key, version, 42 + seed, "client-é", req.body)
        assert normalise(req.body) == normalise(body)
        # exactly the fields of this version, in spec order
        spec = specs.message(api_key, "request")
        assert list(req.body) == [f.key for f in spec.fields if in_range(f.versions, version)]


@pytest.mark.parametrize("api_key,version", served_versions())
def test_response_round_trip(api_key, version):
    for seed in range(4):
        body = sample_body(api_key, version, "response", seed)
        wire = _wire(codec.encode_response(api_key, version, 7 + seed, body))
        assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
        cid, got = codec.decode_response(api_key, version, wire[4:])
        assert cid == 7 + seed
        assert normalise(got) == normalise(body)


@pytest.mark.parametrize("api_key,version", served_versions())
def test_missing_fields_take_spec_defaults(api_key, version):
    for kind in ("request", "response"):
        if kind == "request":
            got = codec.decode_request(_frame(api_key, version, 1, None, {})).body
        else:
            _, got = codec.decode_response(api_key, version, _wire(codec.encode_response(api_key, version, 1, {}))[4:])
        expected = codec.default_body(api_key, version, kind)
        # records default to empty rather than null (librdkafka rejects null Fetch records)
        assert normalise(got) == normalise(expected)


def test_spec_defaults_are_kafkas():
    fetch = codec.default_body(1, 12, "request")
    assert fetch["replica_id"] == -1 and fetch["max_bytes"] == 0x7FFFFFFF and fetch["isolation_level"] == 0
    assert fetch["cluster_id"] is None and fetch["rack_id"] == ""
    meta = codec.default_body(3, 12, "request")
    assert meta["allow_auto_topic_creation"] is True
    produce = codec.default_body(0, 9, "request")
    assert produce["transactional_id"] is None
    responses = specs.message(0, "response").fields[0]
    partitions = next(f for f in responses.fields if f.key == "partition_responses")
    log_append = next(f for f in partitions.fields if f.key == "log_append_time_ms")
    assert codec.default_value(log_append, 9) == -1
    md = codec.default_body(3, 10, "response")  # cluster_authorized_operations: v8-10
    assert md["cluster_authorized_operations"] == -(2**31)


def test_fields_the_version_lacks_are_ignored():
    base = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 5}]}]}
    extra = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "base_offset": 5, "log_start_offset": 3, "record_errors": [{"batch_index": 1}]}
                ],
            }
        ],
        "node_endpoints": [{"node_id": 1, "host": "h", "port": 1}],
    }
    assert _wire(codec.encode_response(0, 3, 1, base)) == _wire(codec.encode_response(0, 3, 1, extra))


def test_none_for_a_non_nullable_field_means_default():
    a = _wire(codec.encode_response(3, 1, 1, {"brokers": None, "topics": [{"name": None, "partitions": None}]}))
    b = _wire(codec.encode_response(3, 1, 1, {"brokers": [], "topics": [{"name": "", "partitions": []}]}))
    assert a == b


def test_nullable_array_null_and_empty_are_distinct():
    # Metadata v1+: null topics = all topics, [] = none
    assert codec.decode_request(_frame(3, 1, 1, "c", {"topics": None})).body["topics"] is None
    assert codec.decode_request(_frame(3, 1, 1, "c", {"topics": []})).body["topics"] == []
    assert codec.decode_request(_frame(3, 12, 1, "c", {"topics": None})).body["topics"] is None
    # a missing key takes the default, which for Metadata topics is the empty list
    assert codec.decode_request(_frame(3, 12, 1, "c", {})).body["topics"] == []


def test_uuid_fields():
    tid = uuid.uuid4()
    body = {"topics": [{"name": "t", "topic_id": tid, "partitions": []}]}
    _, got = codec.decode_response(3, 12, _wire(codec.encode_response(3, 12, 1, body))[4:])
    assert got["topics"][0]["topic_id"] == tid
    _, got = codec.decode_response(3, 12, _wire(codec.encode_response(3, 12, 1, {"topics": [{"name": "t"}]}))[4:])
    assert got["topics"][0]["topic_id"] == uuid.UUID(int=0)


# ---- records: zero copy both ways ------------------------------------------------------------


def test_records_decode_as_views_into_the_frame():
    batch = bytes(range(256)) * 64
    frame = _frame(0, 9, 3, "p", {"acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
    req = codec.decode_request(frame)
    rec = req.body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(rec, memoryview) and rec.obj is frame
    assert rec == batch


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_response_records_become_separate_chunks(version):
    a, b, c = bytearray(b"A" * 1000), b"B" * 10, memoryview(b"C" * 77)
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "records": a},
        {"partition_index": 1, "records": [b, c]},
        {"partition_index": 2, "records": b""},
        {"partition_index": 3},
    ]}]}
    chunks = codec.encode_response(1, version, 9, body)
    assert any(ch is a for ch in chunks)
    assert any(ch is b for ch in chunks)
    assert any(ch is c for ch in chunks)
    wire = _wire(chunks)
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    _, got = codec.decode_response(1, version, wire[4:])
    parts = got["responses"][0]["partitions"]
    assert bytes(parts[0]["records"]) == bytes(a)
    assert bytes(parts[1]["records"]) == b + bytes(c)
    # empty and missing records are sent as empty, never as null
    assert bytes(parts[2]["records"]) == b"" and bytes(parts[3]["records"]) == b""


def test_null_records_when_asked_explicitly():
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": None}]}]}
    _, got = codec.decode_response(1, 12, _wire(codec.encode_response(1, 12, 9, body))[4:])
    assert got["responses"][0]["partitions"][0]["records"] is None


# ---- headers ---------------------------------------------------------------------------------


def test_header_versions():
    assert codec.request_header_version(3, 8) == 1
    assert codec.request_header_version(3, 9) == 2
    assert codec.request_header_version(18, 2) == 1
    assert codec.request_header_version(18, 3) == 2
    assert codec.request_header_version(18, 99) == 2  # a newer client's ApiVersions
    assert codec.response_header_version(3, 9) == 1
    assert codec.response_header_version(3, 8) == 0
    assert codec.response_header_version(18, 4) == 0  # ApiVersions: always v0


def test_request_header_v2_tagged_fields_are_skipped():
    # Metadata v12 with a header carrying an unknown tag (7, 3 bytes)
    body = codec.encode_request(3, 12, 5, "cli", {"topics": None})[4:]
    header_len = 8 + 2 + 3
    assert body[header_len] == 0
    patched = body[:header_len] + b"\x01\x07\x03xyz" + body[header_len + 1 :]
    req = codec.decode_request(patched)
    assert req.client_id == "cli" and req.body["topics"] is None


def test_null_client_id():
    assert codec.decode_request(_frame(18, 0, 5, None, {})).client_id is None


def test_unsupported_version_carries_correlation_id():
    frame = struct.pack(">hhi", 18, 99, 1234) + b"\x00\x03abc"
    with pytest.raises(UnsupportedVersionError) as exc:
        codec.decode_request(frame)
    assert (exc.value.api_key, exc.value.api_version, exc.value.correlation_id) == (18, 99, 1234)
    assert exc.value.client_id == "abc"
    # below the served minimum, e.g. Fetch v3
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(struct.pack(">hhi", 1, 3, 1) + b"\xff\xff")
    # a version Kafka 4.0 removed (WriteTxnMarkers v0)
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(struct.pack(">hhi", 27, 0, 1) + b"\xff\xff")


def test_unknown_api_key_is_a_protocol_error():
    with pytest.raises(ProtocolError) as exc:
        codec.decode_request(struct.pack(">hhi", 999, 0, 1) + b"\xff\xff")
    assert not isinstance(exc.value, UnsupportedVersionError)
    with pytest.raises(ProtocolError):
        codec.decode_request(b"\x00\x03\x00")


def test_produce_v0_to_v2_decode_so_the_broker_can_refuse_them():
    assert SERVE[0] == (0, 13)
    for v in range(3):
        req = codec.decode_request(_frame(0, v, 1, "old", {"acks": 1, "timeout_ms": 5, "topic_data": []}))
        assert req.body == {"acks": 1, "timeout_ms": 5, "topic_data": []}


def test_trailing_bytes_after_a_request_are_ignored():
    frame = _frame(18, 3, 5, "c", {"client_software_name": "x", "client_software_version": "1"})
    assert codec.decode_request(frame + b"junk").body == codec.decode_request(frame).body


# ---- tagged fields -----------------------------------------------------------------------------


def _fetch_v12_with_tags(tag_section: bytes) -> bytes:
    frame = _frame(1, 12, 1, "c", {"topics": [], "rack_id": ""})
    assert frame[-1] == 0  # the body's (empty) tagged section is the last byte
    return frame[:-1] + tag_section


def test_unknown_tags_are_skipped_and_known_ones_read():
    cluster = b"\x04abc"  # compact string "abc"
    tags = b"\x03" + b"\x00" + bytes([len(cluster)]) + cluster + b"\x05\x02zz" + b"\x09\x00"
    req = codec.decode_request(_fetch_v12_with_tags(tags))
    assert req.body["cluster_id"] == "abc"


def test_tagged_field_overrunning_its_size_is_malformed():
    tags = b"\x01" + b"\x00\x01" + b"\x04abc"
    with pytest.raises(ProtocolError):
        codec.decode_request(_fetch_v12_with_tags(tags))


def test_tagged_fields_omitted_at_default_and_sorted_when_present():
    empty = _wire(codec.encode_response(18, 3, 1, {"api_keys": [], "finalized_features_epoch": -1}))
    assert empty.endswith(b"\x00\x00\x00\x00" + b"\x00")  # throttle 0, no tags
    full = _wire(codec.encode_response(18, 3, 1, {
        "api_keys": [], "zk_migration_ready": True, "finalized_features_epoch": 5,
        "supported_features": [{"name": "f", "min_version": 1, "max_version": 2}],
    }))
    _, got = codec.decode_response(18, 3, full[4:])
    assert got["zk_migration_ready"] is True and got["finalized_features_epoch"] == 5
    tag_section = full[len(empty) - 1 :]
    assert tag_section[0] == 3
    tags = []
    pos = 1
    for _ in range(3):
        tags.append(tag_section[pos])
        pos += 2 + tag_section[pos + 1]
    assert tags == [0, 1, 3] and pos == len(tag_section)


def test_warm_up_compiles_every_served_version():
    assert codec.warm_up() == 2 * len(served_versions())
    for api_key, version in served_versions():
        assert (api_key, version, "request") in codec._decoders
        assert (api_key, version, "response") in codec._encoders


def test_generated_functions_are_cached():
    assert codec.body_decoder(3, 12, "request") is codec.body_decoder(3, 12, "request")
    assert codec.body_encoder(1, 12, "response") is codec.body_encoder(1, 12, "response")


def test_encode_error_names_the_api():
    with pytest.raises(ValueError, match="api 3 v1"):
        codec.encode_response(3, 1, 1, {"controller_id": "not an int"})


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_frames_may_be_any_bytes_like(wrap):
    body = sample_body(0, 9, "request", 1)
    frame = _frame(0, 9, 5, "c", body)
    req = codec.decode_request(wrap(frame))
    assert normalise(req.body) == normalise(body)
    body = sample_body(3, 12, "response", 1)
    wire = _wire(codec.encode_response(3, 12, 5, body))
    assert normalise(codec.decode_response(3, 12, wrap(wire[4:]))[1]) == normalise(body)


# ---- spec features no served API uses yet (float64, uint16, nullable structs, per-field
# flexibleVersions): compiled from a synthetic spec through the same generator.

SYNTHETIC = [
    {"name": "Ratio", "type": "float64", "versions": "0+"},
    {"name": "Port", "type": "uint16", "versions": "0+"},
    {"name": "Legacy", "type": "string", "versions": "0+", "flexibleVersions": "none"},
    {"name": "Cursor", "type": "Cursor", "versions": "0+", "nullableVersions": "0+", "default": "null",
     "fields": [{"name": "TopicName", "type": "string", "versions": "0+"},
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"}]},
    {"name": "Ids", "type": "[]int32", "versions": "0+", "nullableVersions": "0+", "default": "null"},
    {"name": "Extra", "type": "int64", "versions": "1+", "taggedVersions": "1+", "tag": 4, "default": "-1"},
]


@pytest.mark.parametrize("version,flexible", [(0, False), (0, True), (1, True)])
def test_synthetic_spec_features(version, flexible):
    fields = specs._parse_fields(SYNTHETIC, {})
    enc = codec._gen_encoder(fields, version, flexible, "enc_synthetic")
    dec = codec._gen_decoder(fields, version, flexible, "dec_synthetic")
    for value in [
        {"ratio": -2.5, "port": 65535, "legacy": "x", "cursor": {"topic_name": "t", "partition_index": 3},
         "ids": [1, -2], "extra": 99},
        {"ratio": 0.0, "port": 0, "legacy": "", "cursor": None, "ids": None, "extra": -1},
    ]:
        data = bytes(enc(value, bytearray(), []))
        got, end = dec(data, memoryview(data), 0, len(data))
        assert end == len(data)
        expected = {k: v for k, v in value.items() if k != "extra" or version >= 1}
        assert got == expected
        # the legacy string keeps its int16 length even in a flexible version
        assert data[10:12] == len(value["legacy"]).to_bytes(2, "big")
        # a nullable struct is a -1 / 1 marker byte before its fields
        assert data[12 + len(value["legacy"])] == (0xFF if value["cursor"] is None else 1)


def test_api_name_table_agrees_with_the_scanned_spec_index():
    from minikafka.protocol import specs

    index = specs._index()
    for api_key, name in specs.API_NAMES.items():
        assert index[(api_key, "request")] == name + "Request"
        assert index[(api_key, "response")] == name + "Response"
