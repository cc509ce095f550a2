"""protocol.fast must produce the generic codec's bytes exactly, and fall back when it can't."""

from __future__ import annotations

import random
import uuid

import pytest

from codec_samples import sample_body
from minikafka.protocol import codec, fast


def joined(chunks) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def fetch_body(rng: random.Random, version: int, n_topics: int = 2, n_parts: int = 3) -> dict:
    def records():
        kind = rng.randrange(7)
        if kind == 0:
            return b""
        if kind == 4:  # one view of the log: a caught-up consumer's read (its own fast path)
            return [memoryview(bytearray(rng.randrange(256) for _ in range(rng.randint(1, 300))))]
        if kind == 5:  # one view whose items are not bytes
            return [memoryview(bytearray(rng.randrange(256) for _ in range(4 * rng.randint(1, 30)))).cast("I")]
        if kind == 6:
            return [memoryview(b"")]
        if kind == 1:
            return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        if kind == 2:
            return memoryview(bytearray(rng.randrange(256) for _ in range(rng.randint(1, 300))))
        return [bytes([1, 2, 3]), b"", memoryview(b"tail")]

    return {
        "throttle_time_ms": rng.randint(0, 100),
        "error_code": 0,
        "session_id": rng.randint(0, 2**31 - 1),
        "responses": [
            {
                "topic": f"topic-{t}-é",
                "topic_id": uuid.UUID(int=rng.getrandbits(128)) if version >= 13 else None,
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": rng.choice([0, 1, 6]),
                        "high_watermark": rng.randint(0, 2**40),
                        "last_stable_offset": rng.randint(-1, 2**40),
                        "log_start_offset": rng.randint(-1, 10),
                        "aborted_transactions": rng.choice(
                            [None, [], [{"producer_id": rng.randint(0, 2**50), "first_offset": rng.randint(0, 99)}]]
                        ),
                        "preferred_read_replica": -1,
                        "records": records(),
                    }
                    for p in range(n_parts)
                ],
            }
            for t in range(n_topics)
        ],
    }


def metadata_body(rng: random.Random, version: int, n_topics: int = 5) -> dict:
    def ids():
        return [rng.randint(0, 5) for _ in range(rng.randint(0, 4))]

    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": n, "host": f"host-{n}", "port": 9092 + n, "rack": rng.choice([None, "r1"])}
            for n in range(rng.randint(0, 3))
        ],
        "cluster_id": rng.choice([None, "cluster-x"]),
        "controller_id": 1,
        "topics": [
            {
                "error_code": rng.choice([0, 3]),
                "name": rng.choice([None, f"t{t}"]) if version >= 12 else f"t{t}",
                "topic_id": rng.choice([None, uuid.UUID(int=rng.getrandbits(128))]),
                "is_internal": rng.random() < 0.2,
                "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": rng.randint(-1, 3),
                     "leader_epoch": rng.randint(-1, 9), "replica_nodes": ids(), "isr_nodes": ids(),
                     "offline_replicas": ids()}
                    for p in range(rng.randint(0, 6))
                ],
                "topic_authorized_operations": rng.choice([-(2**31), 0x0FF8]),
            }
            for t in range(n_topics)
        ],
        "cluster_authorized_operations": -(2**31),
        "error_code": rng.choice([0, 0, 56]),
    }


FETCH_FAST = list(range(11, 18))
METADATA_FAST = [9, 10, 11, 12, 13]


@pytest.mark.parametrize("version", FETCH_FAST)
def test_fetch_fast_path_matches_generic(version):
    rng = random.Random(version)
    for _ in range(50):
        body = fetch_body(rng, version)
        fast_chunks = fast._fetch(version, 5, body)  # the unguarded encoder: must not fall back
        assert joined(fast_chunks) == joined(codec.encode_response(1, version, 5, body))
        assert joined(fast.encode_response(1, version, 5, body)) == joined(fast_chunks)


@pytest.mark.parametrize("version", FETCH_FAST)
def test_fetch_fast_path_never_copies_records(version):
    recs = [bytes(65536) for _ in range(10)]
    body = fetch_body(random.Random(1), version, n_topics=1, n_parts=10)
    for p, r in zip(body["responses"][0]["partitions"], recs):
        p["records"] = r
    chunks = fast.encode_response(1, version, 5, body)
    for r in recs:
        assert any(c is r for c in chunks)
    assert sum(len(c) for c in chunks) - 4 == int.from_bytes(bytes(chunks[0][:4]), "big")


@pytest.mark.parametrize("version", METADATA_FAST)
def test_metadata_fast_path_matches_generic(version):
    rng = random.Random(100 + version)
    for _ in range(50):
        body = metadata_body(rng, version)
        fast_chunks = fast._metadata(version, 9, body)
        assert joined(fast_chunks) == joined(codec.encode_response(3, version, 9, body))
        assert joined(fast.encode_response(3, version, 9, body)) == joined(fast_chunks)


@pytest.mark.parametrize("shape", [([1], [1], []), ([1, 2, 3], [3, 1, 2], []), ([1, 2], [2, 1], []),
                                   ([1, 2, 3], [1], [2, 3]), ([], [], []), (list(range(40)), list(range(30)), [7]),
                                   ([1], [1], None), ([1, 2], [1], None)])
def test_metadata_partition_shapes(shape):
    replicas, isr, offline = shape
    body = metadata_body(random.Random(7), 12)
    for t in body["topics"]:
        t["partitions"] = [{"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 4,
                            "replica_nodes": replicas, "isr_nodes": isr, "offline_replicas": offline}
                           for p in range(3)]
    expected = joined(codec.encode_response(3, 12, 1, body))
    assert joined(fast._metadata(12, 1, body)) == expected
    _, decoded = codec.decode_response(3, 12, expected[4:])
    assert decoded["topics"][0]["partitions"][2]["isr_nodes"] == isr


def test_encode_response_dispatches_to_the_fast_paths():
    for key in [(1, v) for v in FETCH_FAST] + [(3, v) for v in METADATA_FAST]:
        assert fast.ENCODERS[key].fast in (fast._fetch, fast._metadata)


@pytest.mark.parametrize("api_key,version", [(1, v) for v in FETCH_FAST] + [(3, v) for v in METADATA_FAST])
def test_incomplete_or_unusual_bodies_fall_back_to_generic(api_key, version):
    # sparse bodies (missing keys, None records, tagged fields, long arrays) take the generic path
    with_leader = None
    bodies = [{}, sample_body(api_key, version, "response", 1), sample_body(api_key, version, "response", 2)]
    if api_key == 1:
        b = fetch_body(random.Random(3), version)
        b["responses"][0]["partitions"][0]["records"] = None
        bodies.append(b)
        if version >= 12:
            b = fetch_body(random.Random(4), version)
            b["responses"][0]["partitions"][0]["current_leader"] = {"leader_id": 2, "leader_epoch": 7}
            bodies.append(b)
            with_leader = b
        if version >= 16:
            b = fetch_body(random.Random(5), version)
            b["node_endpoints"] = [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
            bodies.append(b)
    else:
        b = metadata_body(random.Random(5), version)
        b["topics"][0]["partitions"] = [{"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                                         "replica_nodes": list(range(200)), "isr_nodes": [1],
                                         "offline_replicas": []}]
        bodies.append(b)
    for body in bodies:
        got = joined(fast.encode_response(api_key, version, 3, body))
        assert got == joined(codec.encode_response(api_key, version, 3, body))
        _, decoded = codec.decode_response(api_key, version, got[4:])
        if body is with_leader:
            part = decoded["responses"][0]["partitions"][0]
            assert part["current_leader"] == {"leader_id": 2, "leader_epoch": 7}


def test_fast_path_errors_are_the_generic_ones():
    with pytest.raises(ValueError, match="api 3 v12"):
        fast.encode_response(3, 12, 1, {"topics": [{"partitions": [{"leader_id": "x"}]}]})


def test_the_codec_knows_nothing_of_the_fast_paths_and_the_broker_answers_with_them():
    # One way arrows (issue 24): fast builds on the codec's public writer seam; the codec does not
    # import it; the broker's connections encode through fast.encode_response.
    import subprocess
    import sys

    code = ("import sys\nfrom minikafka.protocol import codec\nprint('minikafka.protocol.fast' in sys.modules)\n"
            "from minikafka.broker.connection import _default_codec\n"
            "print(_default_codec()[1].__module__, _default_codec()[1].__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "minikafka.protocol.fast", "encode_response"]
    assert sorted(fast.ENCODERS) == sorted([(1, v) for v in FETCH_FAST] + [(3, v) for v in METADATA_FAST])


def test_encoding_a_response_touches_no_file(monkeypatch):
    # The spec of an API is looked up once: the generic encoder asks for it on every response
    # (its header version), and finding the file is two stat calls (~15 us of each Produce answer).
    import pathlib

    from minikafka.protocol import specs

    body = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5}]}],
            "throttle_time_ms": 0}
    first = joined(fast.encode_response(0, 7, 1, body))

    def no_files(*args, **kwargs):
        raise AssertionError("a file was looked up while encoding")

    monkeypatch.setattr(pathlib.Path, "is_file", no_files)
    monkeypatch.setattr(specs, "_find", no_files)
    assert joined(fast.encode_response(0, 7, 2, body))[8:] == first[8:]
    assert codec.response_header_version(0, 7) == 0 and codec.request_header_version(0, 9) == 2
