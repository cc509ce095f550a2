"""Hostile bytes: every request decoder must raise only ProtocolError, quickly, in bounded memory.

Mutation fuzzing with a fixed seed (reproducible, a few seconds in all) plus hypothesis properties
for compact strings and tagged fields.  The lead's tests cover varints, record batches and
framing.
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec_samples import sample_body, served_versions
from minikafka.protocol import codec
from minikafka.protocol.apis import SERVE
from minikafka.protocol.errors import ProtocolError
from minikafka.protocol.primitives import read_uvarint, write_uvarint

SEED = 20261121
CASES_PER_VERSION = 64  # x 182 served request versions > 10,000 cases


def _decode_only_protocol_errors(frame: bytes) -> bool:
    """True when the frame decoded, False when it raised ProtocolError; anything else fails."""
    try:
        codec.decode_request(frame)
    except ProtocolError:
        return False
    return True


_INTERESTING = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]
_WORDS = [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe", b"\xff\xff\xff\xff\x0f", b"\xff\xff"]


def _mutations(rng: random.Random, frame: bytes, header_len: int):
    n = len(frame)
    body_start = min(header_len, n)
    while True:
        kind = rng.randrange(7)
        data = bytearray(frame)
        if kind == 0:  # truncate
            yield bytes(data[: rng.randrange(body_start, n + 1)])
        elif kind == 1:  # flip bytes
            for _ in range(rng.randint(1, 4)):
                if n > body_start:
                    data[rng.randrange(body_start, n)] = rng.choice(_INTERESTING + [rng.randrange(256)])
            yield bytes(data)
        elif kind == 2:  # overwrite a length-like window with a huge or negative number
            if n > body_start:
                pos = rng.randrange(body_start, n)
                word = rng.choice(_WORDS)
                data[pos : pos + len(word)] = word
            yield bytes(data)
        elif kind == 3:  # insert random bytes
            pos = rng.randrange(body_start, n + 1)
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            yield bytes(data)
        elif kind == 4:  # delete a slice
            if n > body_start:
                a = rng.randrange(body_start, n)
                del data[a : a + rng.randint(1, 8)]
            yield bytes(data)
        elif kind == 5:  # random body after a valid header
            yield bytes(data[:body_start]) + bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        else:  # random bytes everywhere after the api key and version
            yield bytes(data[:4]) + bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))


def _header_len(api_key: int, version: int, client_id: str) -> int:
    return 8 + 2 + len(client_id.encode()) + (1 if codec.request_header_version(api_key, version) >= 2 else 0)


@pytest.mark.parametrize("api_key", sorted(SERVE))
def test_mutated_requests_raise_only_protocol_error(api_key):
    rng = random.Random(SEED + api_key)
    lo, hi = SERVE[api_key]
    total = 0
    for version in range(lo, hi + 1):
        frames = [codec.encode_request(api_key, version, 1, "fz", sample_body(api_key, version, "request", s))[4:]
                  for s in range(3)]
        hlen = _header_len(api_key, version, "fz")
        cases = 0
        for frame in frames:
            assert _decode_only_protocol_errors(frame)
            gen = _mutations(rng, frame, hlen)
            for _ in range(CASES_PER_VERSION // len(frames) + 1):
                _decode_only_protocol_errors(next(gen))
                cases += 1
        assert cases >= CASES_PER_VERSION
        total += cases
    assert total >= CASES_PER_VERSION * (hi - lo + 1)


def test_fuzz_budget_covers_ten_thousand_cases():
    versions = len(served_versions())
    assert versions * CASES_PER_VERSION >= 10_000


def test_random_frames_with_any_header():
    rng = random.Random(SEED)
    keys = sorted(SERVE) + [27, 99, -1, 32767]
    for _ in range(2000):
        key = rng.choice(keys)
        version = rng.randint(-1, 20)
        frame = struct.pack(">hhi", key, version, rng.randrange(2**31)) + bytes(
            rng.randrange(256) for _ in range(rng.randint(0, 30))
        )
        _decode_only_protocol_errors(frame)
    for n in range(8):
        with pytest.raises(ProtocolError):
            codec.decode_request(bytes(n))


# ---- bounded memory: a small input must never make a decoder allocate a lot -------------------


def _header(api_key: int, version: int) -> bytes:
    head = struct.pack(">hhi", api_key, version, 1) + b"\x00\x01c"
    return head + (b"\x00" if codec.request_header_version(api_key, version) >= 2 else b"")


HUGE = [
    ("metadata v1 int32 topic count", _header(3, 1) + b"\x7f\xff\xff\xff\x00\x01"),
    ("metadata v12 compact topic count", _header(3, 12) + write_uvarint(2**32 - 1) + b"\x00"),
    ("produce v3 records length", _header(0, 3) + b"\xff\xff\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x01t"
     + b"\x00\x00\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff"),
    ("produce v9 compact records length", _header(0, 9) + b"\x00\x00\x01\x00\x00\x00\x01\x02\x02t\x02\x00\x00\x00\x00"
     + write_uvarint(2**32 - 1)),
    ("offset fetch v1 int32 array count", _header(9, 1) + b"\x00\x01g\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff"),
    ("fetch v12 tag count", _header(1, 12) + b"\xff" * 25 + write_uvarint(2**32 - 1)),
    ("string length", _header(10, 0) + b"\x7f\xff"),
    ("bytes length", _header(36, 0) + b"\x7f\xff\xff\xff"),
]


@pytest.mark.parametrize("name,frame", HUGE, ids=[n for n, _ in HUGE])
def test_huge_counts_fail_fast_without_allocating(name, frame):
    assert len(frame) < 64
    # The codec builds an API version's decoder on its first use: that one-time work is not this
    # frame's allocation (alone, the test measured it; after other tests, it did not).
    with pytest.raises(ProtocolError):
        codec.decode_request(frame)
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(ProtocolError):
            codec.decode_request(frame)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5
    assert peak < 256 * 1024, f"{name}: peak {peak} bytes"


def test_invalid_utf8_is_a_protocol_error():
    frame = _header(10, 0) + b"\x00\x02\xff\xfe"  # FindCoordinator v0 key = two invalid bytes
    with pytest.raises(ProtocolError):
        codec.decode_request(frame)
    frame = struct.pack(">hhi", 10, 0, 1) + b"\x00\x02\xc3\x28"  # invalid client id
    with pytest.raises(ProtocolError):
        codec.decode_request(frame)


def test_null_where_not_nullable_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        codec.decode_request(_header(10, 0) + b"\xff\xff")  # null FindCoordinator key
    with pytest.raises(ProtocolError):
        codec.decode_request(_header(3, 0) + b"\xff\xff\xff\xff")  # null topics: nullable only from v1
    # like Kafka's generated readers, any negative length of a nullable field reads as null
    assert codec.decode_request(_header(3, 1) + b"\xff\xff\xff\xfe").body == {"topics": None}


# ---- hypothesis: compact strings and tagged fields --------------------------------------------


@settings(max_examples=200, deadline=None)
@given(member_id=st.text(max_size=300), instance=st.one_of(st.none(), st.text(max_size=200)))
def test_compact_strings_round_trip(member_id, instance):
    # JoinGroup v6: flexible; member_id is a compact string, group_instance_id a nullable one
    body = {"group_id": "g", "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": []}
    frame = codec.encode_request(11, 6, 1, "c", body)[4:]
    got = codec.decode_request(frame).body
    assert got["member_id"] == member_id and got["group_instance_id"] == instance
    encoded = member_id.encode()
    assert write_uvarint(len(encoded) + 1) + encoded in frame


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=200)))
def test_compact_nullable_string_encoding(value):
    out = bytearray()
    codec._wncs(out, value)
    if value is None:
        assert out == b"\x00"
    else:
        raw = value.encode()
        assert out == write_uvarint(len(raw) + 1) + raw
    assert codec._rncs(bytes(out), 0, len(out)) == (value, len(out))


unknown_tags = st.dictionaries(st.integers(min_value=1, max_value=5000), st.binary(max_size=40), max_size=6)


@settings(max_examples=200, deadline=None)
@given(tags=unknown_tags, cluster_id=st.one_of(st.none(), st.text(max_size=50)))
def test_unknown_tags_are_skipped(tags, cluster_id):
    frame = codec.encode_request(1, 12, 1, "c", {"topics": [], "rack_id": "r"})[4:]
    assert frame[-1] == 0
    fields = dict(tags)
    if cluster_id is not None:
        value = bytearray()
        codec._wncs(value, cluster_id)
        fields[0] = bytes(value)
    section = write_uvarint(len(fields)) + b"".join(
        write_uvarint(tag) + write_uvarint(len(data)) + data for tag, data in sorted(fields.items())
    )
    req = codec.decode_request(frame[:-1] + section)
    assert req.body["cluster_id"] == cluster_id
    assert req.body["rack_id"] == "r"


@settings(max_examples=100, deadline=None)
@given(
    features=st.lists(st.tuples(st.text(max_size=10), st.integers(0, 100), st.integers(0, 100)), max_size=3),
    epoch=st.integers(-1, 2**40),
    zk=st.booleans(),
)
def test_tagged_fields_written_sorted_and_only_when_set(features, epoch, zk):
    body = {
        "api_keys": [],
        "supported_features": [{"name": n, "min_version": a, "max_version": b} for n, a, b in features],
        "finalized_features_epoch": epoch,
        "zk_migration_ready": zk,
    }
    wire = b"".join(bytes(c) for c in codec.encode_response(18, 3, 1, body))
    _, got = codec.decode_response(18, 3, wire[4:])
    assert got["supported_features"] == body["supported_features"]
    assert got["finalized_features_epoch"] == epoch and got["zk_migration_ready"] is zk
    # the tag section starts after cid(4) error(2) api_keys(1) throttle(4)
    pos = 4 + 4 + 2 + 1 + 4
    count = wire[pos]
    pos += 1
    seen = []
    for _ in range(count):
        tag, pos = read_uvarint(wire, pos)
        size, pos = read_uvarint(wire, pos)
        seen.append(tag)
        pos += size
    assert pos == len(wire)
    expected = [t for t, present in ((0, bool(features)), (1, epoch != -1), (3, zk)) if present]
    assert seen == expected


# -- Produce requests whose CRCs are valid: the fuzzer reaches the validator ------------------

@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_mutated_batches_with_valid_crcs_are_refused_or_store_whole(compression, tmp_path):
    """Mutate the records of a real Produce request, recompute the CRC (so the batch passes the
    integrity check and reaches the validator), then validate and append as the produce path
    does.  Whatever is accepted must read back and decode whole; everything else must be
    refused with a Kafka error code.  No other exception, no partial append."""
    from minikafka.protocol.errors import ErrorCode
    from minikafka.protocol.records import build_batch, iter_records, set_crc
    from minikafka.protocol.validation import BatchRejected, ValidationRules, validate_batch
    from minikafka.storage import PartitionLog

    rng = random.Random(SEED + compression)
    batch = build_batch([(b"key-%d" % i, b"value-%d" % i * 3, [("h", b"x")], 1_700_000_000_000 + i)
                         for i in range(4)], compression=compression)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": bytes(batch)}]}]}
    frame = codec.encode_request(0, 9, 1, "fuzz", body)[4:]
    start = bytes(frame).index(bytes(batch))
    log = PartitionLog(str(tmp_path / "t-0"), {"flush.ms": 10**9})
    rules = ValidationRules(max_message_bytes=1 << 20, compact=rng.random() < 0.5)
    accepted = refused = 0
    for _ in range(400):
        data = bytearray(frame)
        for _ in range(rng.randint(1, 3)):
            data[start + rng.randrange(21, len(batch))] = rng.choice(_INTERESTING + [rng.randrange(256)])
        request = codec.decode_request(bytes(data))
        records = bytearray(request.body["topic_data"][0]["partition_data"][0]["records"])
        set_crc(records)
        try:
            validate_batch(records, rules)
        except BatchRejected as exc:
            assert isinstance(exc.code, ErrorCode) and exc.code != ErrorCode.NONE
            refused += 1
            continue
        before = log.log_end_offset
        log.append(records, validated=True)
        stored = [view for _, view in log.iter_batches(before)]
        assert len(stored) == 1
        decoded = list(iter_records(stored[0]))
        assert [r.offset for r in decoded] == list(range(before, log.log_end_offset))
        accepted += 1
    log.close()
    assert refused > 0 and accepted + refused == 400
