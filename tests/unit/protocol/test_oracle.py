"""kafka-python 3.0.12's own message classes as an oracle for every served (api_key, version).

* Requests: kafka-python encodes (header included), our ``decode_request`` must give the values
  it was given.
* Responses: our ``encode_response`` output (header included) is decoded by kafka-python, which
  must give back the values we encoded.

Normalised kafka-python quirks (documented, not hidden):
* ``authorized_operations``: kafka-python patches the spec of MetadataResponse (cluster and
  topic level, renamed from ``*_authorized_operations``), DescribeClusterResponse (renamed from
  ``cluster_authorized_operations``) and DescribeGroupsResponse into a set of bit numbers,
  ``None`` for INT32_MIN ("not requested").  We turn the set back into the int32.
* ApiVersionsResponse: kafka-python, like Kafka's Java client, decodes the body as v0 whenever
  ``error_code`` is non-zero, so the response samples use ``error_code = 0`` (the v0 error
  answer has its own golden test).
"""

from __future__ import annotations

import pytest

import kafka.protocol.admin  # noqa: F401  (the imports register kafka-python's classes)
import kafka.protocol.consumer  # noqa: F401
import kafka.protocol.metadata  # noqa: F401
import kafka.protocol.producer  # noqa: F401
import kafka.protocol.sasl  # noqa: F401
from kafka.protocol.api_message import ApiMessage

from codec_samples import normalise, sample_body, served_versions
from minikafka.protocol import codec, specs, specs_kafka4

SEEDS = range(3)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _kp_classes() -> dict[str, type]:
    result = {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is None:
            try:
                result.setdefault(cls.name, cls)
            except Exception:  # abstract helpers without a spec
                continue
    return result


KP = _kp_classes()


def to_kafka_python(cls, value: dict, version: int):
    """Build a kafka-python DataContainer from one of our body dicts."""
    kwargs = {}
    for name, field in cls._struct.fields.items():
        if name not in value:
            continue
        val = value[name]
        if val is not None:
            if field.is_struct():
                val = to_kafka_python(field.data_class, val, version)
            elif field.is_struct_array():
                val = [to_kafka_python(field.data_class, e, version) for e in val]
        kwargs[name] = val
    return cls(version=version, **kwargs)


def _bits_to_int32(bits) -> int:
    if bits is None:
        return -(2**31)
    value = 0
    for b in bits:
        value |= 1 << b
    return value - (1 << 32) if value & 0x80000000 else value


def _unquirk(api_key: int, body: dict) -> dict:
    if api_key == 3:  # Metadata
        if "authorized_operations" in body:
            body["cluster_authorized_operations"] = _bits_to_int32(body.pop("authorized_operations"))
        for topic in body.get("topics") or ():
            if "authorized_operations" in topic:
                topic["topic_authorized_operations"] = _bits_to_int32(topic.pop("authorized_operations"))
    elif api_key == 60:  # DescribeCluster
        if "authorized_operations" in body:
            body["cluster_authorized_operations"] = _bits_to_int32(body.pop("authorized_operations"))
    elif api_key == 15:  # DescribeGroups
        for group in body.get("groups") or ():
            if "authorized_operations" in group:
                group["authorized_operations"] = _bits_to_int32(group["authorized_operations"])
    return body


def _int32_to_bits(value: int):
    u = value & 0xFFFFFFFF
    bits = {i for i in range(32) if u >> i & 1}
    return None if bits == {31} else bits


def _quirk(api_key: int, body: dict) -> dict:
    """The inverse of _unquirk: our dict in kafka-python's shape."""
    body = dict(body)
    if api_key in (3, 60) and "cluster_authorized_operations" in body:
        body["authorized_operations"] = _int32_to_bits(body.pop("cluster_authorized_operations"))
    if api_key == 3 and body.get("topics"):
        body["topics"] = [dict(t) for t in body["topics"]]
        for topic in body["topics"]:
            if "topic_authorized_operations" in topic:
                topic["authorized_operations"] = _int32_to_bits(topic.pop("topic_authorized_operations"))
    if api_key == 15 and body.get("groups"):
        body["groups"] = [dict(g) for g in body["groups"]]
        for group in body["groups"]:
            if "authorized_operations" in group:
                group["authorized_operations"] = _int32_to_bits(group["authorized_operations"])
    return body


# APIs whose specs kafka-python does not ship have no oracle here: KIP-848 68/69
# (protocol/schemas/, checked byte by byte in test_consumer_group_specs.py) and the KIP-714 pair
# (protocol.specs_kafka4, golden bytes in test_specs_kafka4.py); issue 20's delegation-token,
# UnregisterBroker and Raft-voter APIs (golden bytes in test_issue20_specs.py); issue 21's share
# coordinator APIs 83-87 and 90-92 (exchanged with Kafka 4.2 in tests/conformance/corpus/share_state.py),
# and ShareFetch/ShareAcknowledge 78/79 (exchanged with Kafka 4.2 in tests/conformance/corpus/share_fetch.py).
OURS = {68, 69, 38, 39, 40, 41, 64, 80, 81, 76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}
KAFKA4 = {key for key, _ in specs_kafka4.SPEC_BY_KEY}


def oracle_versions():
    return [(k, v) for k, v in served_versions() if k not in OURS | KAFKA4]


def test_kafka_python_knows_every_served_api():
    for api_key, _ in oracle_versions():
        for kind in ("request", "response"):
            spec = specs.message(api_key, kind)
            if api_key in OURS:
                assert spec.name not in KP and specs._find(spec.name).parent == specs.LOCAL_SPECS
            else:
                assert spec.name in KP


@pytest.mark.parametrize("api_key,version", oracle_versions())
def test_request_encoded_by_kafka_python_decodes_to_same_values(api_key, version):
    cls = KP[specs.message(api_key, "request").name]
    for seed in SEEDS:
        body = sample_body(api_key, version, "request", seed)
        msg = to_kafka_python(cls, body, version)
        msg.with_header(correlation_id=1000 + seed, client_id="oracle-client")
        frame = bytes(msg.encode(header=True))
        req = codec.decode_request(frame)
        assert (req.api_key, req.api_version, req.correlation_id) == (api_key, version, 1000 + seed)
        assert req.client_id == "oracle-client"
        assert normalise(req.body) == normalise(body)


@pytest.mark.parametrize("api_key,version", oracle_versions())
def test_response_encoded_by_us_decodes_in_kafka_python(api_key, version):
    cls = KP[specs.message(api_key, "response").name]
    for seed in SEEDS:
        body = sample_body(api_key, version, "response", seed)
        if api_key == 18:
            body["error_code"] = 0
        wire = b"".join(codec.encode_response(api_key, version, 2000 + seed, body))
        assert int.from_bytes(wire[:4], "big") == len(wire) - 4
        decoded = cls[version].decode(wire[4:], header=True)
        assert decoded.header.correlation_id == 2000 + seed
        got = _unquirk(api_key, normalise(decoded.to_dict(json=False)))
        assert got == normalise(body)


@pytest.mark.parametrize("api_key,version", oracle_versions())
def test_kafka_python_response_decodes_in_ours(api_key, version):
    """The other direction too, as a check on our response decoder (used by tools and tests)."""
    cls = KP[specs.message(api_key, "response").name]
    body = sample_body(api_key, version, "response", 7)
    if api_key == 18:
        body["error_code"] = 0
    msg = to_kafka_python(cls, _quirk(api_key, body), version)
    msg.with_header(correlation_id=77)
    frame = bytes(msg.encode(header=True))
    cid, got = codec.decode_response(api_key, version, frame)
    assert cid == 77
    assert normalise(got) == normalise(body)
