"""The KIP-714 specs kafka-python does not ship (protocol.specs_kafka4), checked against bytes
written out by hand from the KIP's field lists, and the small OTLP reader."""

import struct
import uuid

from minikafka.protocol import codec, otlp, specs


def test_telemetry_specs_are_found_by_key():
    assert specs.message(71, "request").name == "GetTelemetrySubscriptionsRequest"
    assert specs.message(72, "response").name == "PushTelemetryResponse"
    assert codec.is_flexible(71, 0) and codec.is_flexible(72, 0)


def test_get_telemetry_subscriptions_response_golden_bytes():
    iid = uuid.UUID("0123456789abcdef0123456789abcdef")
    body = {"throttle_time_ms": 0, "error_code": 0, "client_instance_id": iid, "subscription_id": -5,
            "accepted_compression_types": [4, 3], "push_interval_ms": 500, "telemetry_max_bytes": 1024,
            "delta_temporality": True, "requested_metrics": ["org.apache"]}
    wire = b"".join(bytes(c) for c in codec.encode_response(71, 0, 9, body))
    expected_body = (struct.pack(">ih", 0, 0) + iid.bytes + struct.pack(">i", -5)
                     + bytes([3, 4, 3])  # compact array of 2 int8
                     + struct.pack(">ii", 500, 1024) + b"\x01"
                     + bytes([2, 11]) + b"org.apache"  # compact array of 1 compact string
                     + b"\x00")  # tagged fields
    expected = struct.pack(">i", 9) + b"\x00" + expected_body  # header v1: correlation id + tags
    assert wire == struct.pack(">i", len(expected)) + expected


def test_push_telemetry_request_golden_bytes():
    iid = uuid.UUID(int=7)
    frame = (struct.pack(">hhi", 72, 0, 3) + struct.pack(">h", 2) + b"cl" + b"\x00"  # header v2
             + iid.bytes + struct.pack(">i", 11) + b"\x01" + b"\x04"
             + bytes([4]) + b"abc" + b"\x00")
    req = codec.decode_request(frame)
    assert (req.api_key, req.api_version, req.client_id) == (72, 0, "cl")
    assert req.body["client_instance_id"] == iid and req.body["subscription_id"] == 11
    assert req.body["terminating"] is True and req.body["compression_type"] == 4
    assert bytes(req.body["metrics"]) == b"abc"


def test_otlp_round_trip_and_garbage():
    data = otlp.encode_gauges({"org.apache.kafka.producer.record.send.rate": 12.5},
                              {"client_software_name": "x"}, time_ns=99)
    decoded = otlp.decode_metrics_data(data)
    assert decoded.resource == {"client_software_name": "x"}
    [point] = decoded.points
    assert (point.name, point.kind, point.value, point.time_unix_nano) == (
        "org.apache.kafka.producer.record.send.rate", "gauge", 12.5, 99)
    import pytest

    with pytest.raises(ValueError):
        otlp.decode_metrics_data(b"\x0a\xff\xff\xff")
