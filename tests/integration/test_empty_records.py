"""Records with null and empty keys and values, in every codec, through four real clients.

The smallest record Kafka stores has a null or empty key and value and no headers (a six-byte
body); the broker once refused it as INVALID_RECORD.  Each client here produces every combination
of null, empty and one-byte key and value, with and without headers whose values are null and
empty, compressed with each codec and not, then reads them back and compares null with null and
empty with empty.  The stored batches are read from the log too, so a client that would turn an
empty value into null (or back) cannot hide a broker that did.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clienttools import ROOT, require_java_jars, require_tool
from conftest import broker_for

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
E, X = b"", b"x"
PAIRS = [(None, None), (None, E), (E, None), (E, E), (None, X), (X, None), (E, X), (X, E), (X, X)]
HEADERS = [("null", None), ("empty", E)]
# Round 0 without headers, round 1 with a null-valued and an empty-valued header.
EXPECTED = [(k, v, []) for k, v in PAIRS] + [(k, v, HEADERS) for k, v in PAIRS]
# kafka-python's producer itself refuses a record with neither key nor value (ValueError in send())
# and a header whose value is None (TypeError): it sends the rest.
EXPECTED_KAFKA_PYTHON = [(k, v, [h for h in hs if h[1] is not None]) for k, v, hs in EXPECTED
                         if k is not None or v is not None]
# aiokafka's producer refuses a record with neither key nor value too (an assertion in send()).
EXPECTED_AIOKAFKA = [r for r in EXPECTED if r[0] is not None or r[1] is not None]


@pytest.fixture(scope="module")
def shared_broker(request, broker_kind, tmp_path_factory):
    """The round trips run on Apache Kafka 4.2 as well: what Kafka accepts, minikafka must."""
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("empty-records"))
    handle.kind = broker_kind
    yield handle
    handle.stop()


def stored_batches(broker, topic: str) -> list[bytearray]:
    """The raw batches in minikafka's log files for the topic, each as its producer sent it (the
    base offset, which is outside the CRC, set back to 0)."""
    from minikafka.protocol.records import read_header

    out = []
    for log in sorted((Path(broker.data_dir) / f"{topic}-0").glob("*.log")):
        data = log.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            size = read_header(data, pos).size
            batch = bytearray(data[pos:pos + size])
            batch[0:8] = b"\x00" * 8
            out.append(batch)
            pos += size
    return out


def stored_records(broker, topic: str) -> list[tuple]:
    """(key, value, headers) of every record in minikafka's log files for the topic, as stored."""
    from minikafka.protocol.records import iter_records

    return [(r.key, r.value, [(k, v) for k, v in r.headers])
            for batch in stored_batches(broker, topic) for r in iter_records(batch)]


def consume_confluent(bootstrap: str, topic: str, count: int) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.key(), m.value(), list(m.headers() or [])))
        return out
    finally:
        c.close()


def produce_confluent(bootstrap: str, topic: str, codec: str) -> None:
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                  "message.timeout.ms": 20000})
    for key, value, headers in EXPECTED:
        kw = {"headers": headers} if headers else {}
        p.produce(topic, key=key, value=value, partition=0,
                  on_delivery=lambda err, msg: errors.append(err) if err else None, **kw)
    assert p.flush(30) == 0
    assert errors == []


def produce_kafka_python(bootstrap: str, topic: str, codec: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                      linger_ms=20, request_timeout_ms=10000)
    try:
        futures = [p.send(topic, key=key, value=value, partition=0, headers=list(headers))
                   for key, value, headers in EXPECTED_KAFKA_PYTHON]
        p.flush(30)
        for f in futures:
            f.get(timeout=20)
    finally:
        p.close(timeout=5)


def consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[tuple]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out, deadline = [], time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                out.extend((r.key, r.value, list(r.headers)) for r in records)
        return out
    finally:
        c.close()


async def _aiokafka_round_trip(bootstrap: str, topic: str, codec: str, count: int) -> list[tuple]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                         linger_ms=20)
    await p.start()
    try:
        futures = [await p.send(topic, key=key, value=value, partition=0, headers=list(headers) or None)
                   for key, value, headers in EXPECTED_AIOKAFKA]
        for f in futures:
            await asyncio.wait_for(f, 20)
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out, deadline = [], time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=200)).values():
                out.extend((r.key, r.value, list(r.headers)) for r in records)
        return out
    finally:
        await c.stop()


def _same(got: list[tuple]) -> list[tuple]:
    """Headers as (str key, value) lists, so every client's shape compares with EXPECTED."""
    return [(k, v, [(hk if isinstance(hk, str) else hk.decode(), hv) for hk, hv in h]) for k, v, h in got]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(shared_broker, codec):
    topic = f"empty-confluent-{codec}"
    produce_confluent(shared_broker.bootstrap, topic, codec)
    assert _same(consume_confluent(shared_broker.bootstrap, topic, len(EXPECTED))) == EXPECTED
    if shared_broker.kind == "minikafka":  # Kafka's own files are not ours to read
        assert stored_records(shared_broker, topic) == EXPECTED


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(shared_broker, codec):
    topic = f"empty-kafka-python-{codec}"
    produce_kafka_python(shared_broker.bootstrap, topic, codec)
    got = consume_kafka_python(shared_broker.bootstrap, topic, len(EXPECTED_KAFKA_PYTHON))
    assert _same(got) == EXPECTED_KAFKA_PYTHON
    if shared_broker.kind == "minikafka":  # Kafka's own files are not ours to read
        assert stored_records(shared_broker, topic) == EXPECTED_KAFKA_PYTHON


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(shared_broker, codec):
    topic = f"empty-aiokafka-{codec}"
    got = asyncio.run(_aiokafka_round_trip(shared_broker.bootstrap, topic, codec, len(EXPECTED_AIOKAFKA)))
    assert _same(got) == EXPECTED_AIOKAFKA
    if shared_broker.kind == "minikafka":  # Kafka's own files are not ours to read
        assert stored_records(shared_broker, topic) == EXPECTED_AIOKAFKA


@pytest.fixture(scope="module")
def empty_records_classes(tmp_path_factory):
    javac = require_tool("javac")
    jars = require_java_jars()
    out = tmp_path_factory.mktemp("java-empty")
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(out), str(ROOT / "tests/integration/java/EmptyRecords.java")],
                   check=True, timeout=120)
    return f"{out}:{jars}/*"


@pytest.mark.parametrize("codec", CODECS)
def test_java_client(shared_broker, empty_records_classes, codec):
    topic = f"empty-java-{codec}"
    proc = subprocess.run([require_tool("java"), "-cp", empty_records_classes, "EmptyRecords",
                           shared_broker.bootstrap, topic, codec], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"
    # The program sends the pairs without and with headers, then one more null/null record.
    if shared_broker.kind == "minikafka":  # Kafka's own files are not ours to read
        assert stored_records(shared_broker, topic) == EXPECTED + [(None, None, [])]


# --- librdkafka's own batches, sampled with hypothesis ----------------------------------------


_blobs = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=1), st.binary(min_size=2, max_size=64),
                   st.binary(min_size=4_000, max_size=20_000))
# librdkafka takes header keys as C strings: a NUL would end the key there (the client's limit).
_headers = st.lists(st.tuples(st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=8), st.one_of(st.none(), st.just(b""), st.binary(max_size=8))),
                    max_size=4)
_examples = iter(range(10**6))


@pytest.mark.minikafka_only(reason="reads the batches from minikafka's log files")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.data_too_large])
@given(records=st.lists(st.tuples(_blobs, _blobs, _headers), min_size=1, max_size=12),
       codec=st.sampled_from(CODECS))
def test_librdkafka_batches_pass_both_walks_and_read_back(shared_broker, records, codec):
    """Whatever librdkafka builds is stored, and the stored batches pass the C walk and the Python
    walk alike and decode to exactly what was produced."""
    from confluent_kafka import Producer

    from minikafka.protocol import validation
    from minikafka.protocol.records import iter_records
    from minikafka.protocol.validation import ValidationRules, validate_batch

    topic = f"empty-sample-{next(_examples)}-{codec}"
    errors = []
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "compression.type": codec, "linger.ms": 5,
                  "message.timeout.ms": 20000})
    for key, value, headers in records:
        p.produce(topic, key=key, value=value, partition=0, headers=headers or None,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []
    del p  # librdkafka's threads end with the handle, not with the module's broker
    rules = ValidationRules(max_message_bytes=16 << 20)
    decoded = []
    for batch in stored_batches(shared_broker, topic):
        verdicts = []
        for walk in (validation._validate, None):
            saved = validation._validate
            validation._validate = walk
            try:
                verdicts.append(validate_batch(batch, rules).record_count)
            finally:
                validation._validate = saved
        assert verdicts[0] == verdicts[1]
        decoded += [(r.key, r.value, [(k, v) for k, v in r.headers]) for r in iter_records(batch)]
    assert decoded == [(k, v, list(h)) for k, v, h in records]
