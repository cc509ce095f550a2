"""SERVE (the Serve column of shared/PROTOCOL.md) and the ApiRegistry that ApiVersions comes from."""

from __future__ import annotations

import pytest

from minikafka.protocol import codec, specs
from minikafka.protocol.apis import SERVE, ApiRegistry, api_versions_error_response


def test_serve_column():
    expected = {
        0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9),
        12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
        20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 28: (0, 5),
        32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2), 43: (0, 2),
        44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 55: (0, 2), 57: (0, 2),
        60: (0, 2), 61: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1), 69: (0, 1), 71: (0, 0), 72: (0, 0),
        75: (0, 0),
    }
    # ACL and SCRAM credential admin APIs (issue 12)
    expected.update({29: (1, 3), 30: (1, 3), 31: (1, 3), 50: (0, 0), 51: (0, 0)})
    # issue 20, as Kafka 4.2 advertises them: WriteTxnMarkers, delegation tokens, UnregisterBroker,
    # ListConfigResources and the KIP-853 voter APIs
    expected.update({27: (1, 2), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 64: (0, 0),
                     74: (0, 1), 80: (0, 1), 81: (0, 0)})
    # issue 21, the share coordinator: the share-group-state RPCs and the share-group offsets admin APIs
    # (76/77 ShareGroupHeartbeat/Describe come from the share-group branch, merged here)
    expected.update({76: (1, 1), 77: (1, 1), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 90: (0, 1), 91: (0, 0),
                     92: (0, 0)})
    # issue 21, the share partitions: ShareFetch and ShareAcknowledge (v0 was Kafka 4.0's early access)
    expected.update({78: (1, 2), 79: (1, 2)})
    assert SERVE == expected


def test_internal_and_unadvertised_apis_are_not_served():
    # 27 (WriteTxnMarkers) is served since issue 20; broker-to-controller APIs are not
    for key in (4, 5, 6, 7, 52, 53, 54, 56, 58, 62, 63, 67):
        assert key not in SERVE


def test_serve_is_inside_what_the_specs_describe():
    for key, (lo, hi) in SERVE.items():
        for kind in ("request", "response"):
            spec = specs.message(key, kind)
            assert spec is not None, key
            spec_lo, spec_hi = spec.valid
            assert hi <= spec_hi
            # only Produce goes below the 4.x floor (v0-2, see apis.py)
            assert lo >= spec_lo or key == 0


def test_register_and_lookup():
    reg = ApiRegistry()

    def handler(ctx, body):
        return body

    reg.register(3, 0, 12, handler)
    assert reg.lookup(3, 0) is handler and reg.lookup(3, 12) is handler
    assert reg.lookup(3, 13) is None
    assert reg.lookup(1, 12) is None
    assert 3 in reg and 1 not in reg
    assert reg.version_range(3) == (0, 12)


@pytest.mark.parametrize("key,lo,hi", [(3, 0, 14), (1, 3, 12), (27, 0, 2), (999, 0, 0), (3, 5, 4)])
def test_register_outside_serve_is_refused(key, lo, hi):
    with pytest.raises(ValueError):
        ApiRegistry().register(key, lo, hi, lambda ctx, body: None)


def test_register_twice_is_refused():
    reg = ApiRegistry()
    reg.register(18, 0, 4, object())
    with pytest.raises(ValueError):
        reg.register(18, 0, 3, object())


def test_api_versions_body_comes_only_from_registrations():
    reg = ApiRegistry()
    assert reg.api_versions_body()["api_keys"] == []
    reg.register(18, 0, 4, object())
    reg.register(3, 1, 9, object())
    reg.register(0, 3, 11, object())
    body = reg.api_versions_body()
    assert body["error_code"] == 0
    assert body["api_keys"] == [
        {"api_key": 0, "min_version": 3, "max_version": 11},
        {"api_key": 3, "min_version": 1, "max_version": 9},
        {"api_key": 18, "min_version": 0, "max_version": 4},
    ]
    assert reg.api_versions_body(error_code=35)["error_code"] == 35
    # it encodes at every ApiVersions version and reads back the same ranges
    for v in range(5):
        frame = b"".join(bytes(c) for c in codec.encode_response(18, v, 1, body))[4:]
        _, got = codec.decode_response(18, v, frame)
        assert got["api_keys"] == body["api_keys"]


def test_api_versions_error_response_is_readable_by_kafka_python():
    from kafka.protocol.metadata import ApiVersionsResponse

    frame = b"".join(api_versions_error_response(11, 0, 4))
    decoded = ApiVersionsResponse[4].decode(frame[4:], header=True)
    assert decoded.header.correlation_id == 11
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]
