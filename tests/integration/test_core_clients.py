"""Produce and consume with real clients (kafka-python, confluent-kafka, aiokafka) through the
broker subprocess: round trips, compression stored as sent, offsets, seeks and restarts.

Consumers use assign()+seek(), so these tests need no group coordinator."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from conftest import RawClient, broker_for, start_broker
from minikafka.protocol.records import iter_batches, iter_records

# Recent CreateTime timestamps: records older than retention.ms (7 days) may be deleted by the
# broker's retention task at any moment, as in Kafka.
TS0 = (int(time.time() * 1000) // 1000) * 1000 - 60_000
DEADLINE_S = 20.0

RECORDS = [
    (b"key-0", b"value-0", [("h1", b"a"), ("h2", b"")], TS0 + 0),
    (None, b"null-key", [], TS0 + 1),
    (b"key-2", b"", [("only", b"one")], TS0 + 2),
    (b"key-3", b"x" * 3000, [("h", b"\x00\xff")], TS0 + 3),
]

CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]
CODECS = ["gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def shared(request, broker_kind, tmp_path_factory):
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("core-clients"))
    yield handle
    handle.stop()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- producing ---------------------------------------------------------------------------------

def produce_kafka_python(bootstrap, topic, records, compression=None, **extra):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=50,
                             request_timeout_ms=10000, **extra)
    futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts, partition=0)
               for k, v, h, ts in records]
    producer.flush(timeout=DEADLINE_S)
    offsets = [f.get(timeout=DEADLINE_S).offset for f in futures]
    producer.close(timeout=5)
    return offsets


def produce_confluent(bootstrap, topic, records, compression=None, **extra):
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": compression or "none"}
    conf.update(extra)
    producer = confluent_kafka.Producer(conf)
    offsets = {}
    errors = []

    def delivered(err, msg, i):
        if err is not None:
            errors.append(err)
        else:
            offsets[i] = msg.offset()

    for i, (k, v, h, ts) in enumerate(records):
        producer.produce(topic, key=k, value=v, headers=h or None, timestamp=ts, partition=0,
                         on_delivery=lambda err, msg, i=i: delivered(err, msg, i))
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors
    return [offsets[i] for i in range(len(records))]


def produce_aiokafka(bootstrap, topic, records, compression=None, **extra):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=50,
                                    **extra)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts, partition=0)
                       for k, v, h, ts in records]
            return [(await f).offset for f in futures]
        finally:
            await producer.stop()

    return asyncio.run(asyncio.wait_for(run(), DEADLINE_S))


PRODUCERS = {"kafka-python": produce_kafka_python, "confluent-kafka": produce_confluent,
             "aiokafka": produce_aiokafka}


# -- consuming ---------------------------------------------------------------------------------

def consume_kafka_python(bootstrap, topic, offset, count, timeout=DEADLINE_S):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             fetch_max_wait_ms=100)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=200).values():
            out += [(m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in msgs]
    consumer.close()
    return out


def consume_confluent(bootstrap, topic, offset, count, timeout=DEADLINE_S):
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "core-test",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, offset)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append((msg.offset(), msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1]))
    consumer.close()
    return out


def consume_aiokafka(bootstrap, topic, offset, count, timeout=DEADLINE_S):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            out = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for msgs in batches.values():
                    out += [(m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in msgs]
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


CONSUMERS = {"kafka-python": consume_kafka_python, "confluent-kafka": consume_confluent,
             "aiokafka": consume_aiokafka}


def expected(records, offsets):
    return [(o, k, v, [(hk, hv) for hk, hv in h], ts) for o, (k, v, h, ts) in zip(offsets, records)]


def normalise(rows):
    # confluent-kafka reports an empty value/header as b"" or None depending on version.
    return [(o, k, v if v is not None else b"", [(hk, hv if hv is not None else b"") for hk, hv in h], ts)
            for o, k, v, h, ts in rows]


def raw_batches(port, topic, partition=0, offset=0):
    """Every stored batch from ``offset`` as (header, bytes), fetched with the codec."""
    with RawClient(port) as client:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                              "fetch_offset": offset, "log_start_offset": -1,
                                                              "partition_max_bytes": 50 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        resp = client.request(1, 12, body)
    part = resp["responses"][0]["partitions"][0]
    assert part["error_code"] == 0
    data = bytes(part["records"] or b"")
    return [(h, data[pos:pos + h.size]) for pos, h in iter_batches(data)]


# -- tests -------------------------------------------------------------------------------------

@pytest.mark.parametrize("producer", CLIENTS)
@pytest.mark.parametrize("consumer", CLIENTS)
def test_round_trip_preserves_keys_values_headers_timestamps(shared, producer, consumer):
    topic = topic_name(f"rt-{producer}-{consumer}")
    offsets = PRODUCERS[producer](shared.bootstrap, topic, RECORDS)
    assert offsets == [0, 1, 2, 3]
    got = CONSUMERS[consumer](shared.bootstrap, topic, 0, len(RECORDS))
    assert normalise(got) == normalise(expected(RECORDS, offsets))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_compressed_batches_are_stored_and_served_as_sent(shared, client, codec):
    topic = topic_name(f"codec-{client}-{codec}")
    records = [(b"k%d" % i, b"compressible " * 50, [], TS0 + i) for i in range(20)]
    offsets = PRODUCERS[client](shared.bootstrap, topic, records, compression=codec)
    assert offsets == list(range(20))
    batches = raw_batches(shared.port, topic)
    assert batches and all(h.compression == CODEC_IDS[codec] for h, _ in batches)
    decoded = [(r.offset, r.key, r.value) for _, data in batches for r in iter_records(data)]
    assert decoded == [(i, k, v) for i, (k, v, _, _) in enumerate(records)]
    # Another client reads the same compressed batches back.
    other = CLIENTS[(CLIENTS.index(client) + 1) % len(CLIENTS)]
    got = CONSUMERS[other](shared.bootstrap, topic, 0, len(records))
    assert [(o, k, v) for o, k, v, _, _ in got] == [(i, k, v) for i, (k, v, _, _) in enumerate(records)]


def test_list_offsets_latest_after_multi_record_last_batch(shared):
    from kafka import KafkaConsumer, TopicPartition
    import confluent_kafka

    topic = topic_name("latest")
    records = [(b"k", b"v%d" % i, [], TS0 + i) for i in range(7)]
    produce_kafka_python(shared.bootstrap, topic, records[:2])
    produce_kafka_python(shared.bootstrap, topic, records[2:])  # one batch of 5 records last
    last = raw_batches(shared.port, topic)[-1][0]
    assert last.record_count > 1 and last.last_offset == 6
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=shared.bootstrap)
    assert consumer.end_offsets([tp])[tp] == 7
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.offsets_for_times({tp: TS0 + 4})[tp].offset == 4
    consumer.close()
    c = confluent_kafka.Consumer({"bootstrap.servers": shared.bootstrap, "group.id": "wm"})
    assert c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10) == (0, 7)
    c.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_fetch_from_the_middle_of_a_batch(shared, client):
    topic = topic_name(f"mid-{client}")
    records = [(b"k%d" % i, b"v%d" % i, [], TS0 + i) for i in range(10)]
    produce_kafka_python(shared.bootstrap, topic, records)
    assert len(raw_batches(shared.port, topic)) == 1  # all ten in one batch
    got = CONSUMERS[client](shared.bootstrap, topic, 6, 4)
    assert [(o, v) for o, _, v, _, _ in got] == [(i, b"v%d" % i) for i in range(6, 10)]


def test_seek_to_end_then_nothing_until_new_records(shared):
    from kafka import KafkaConsumer, TopicPartition

    topic = topic_name("tail")
    produce_kafka_python(shared.bootstrap, topic, [(b"k", b"old", [], TS0)] * 3)
    consumer = KafkaConsumer(bootstrap_servers=shared.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    assert consumer.position(tp) == 3
    t0 = time.monotonic()
    quiet = []
    while time.monotonic() - t0 < 1.0:
        for msgs in consumer.poll(timeout_ms=200).values():
            quiet += msgs
    assert quiet == []
    produce_kafka_python(shared.bootstrap, topic, [(b"k", b"new", [], TS0 + 9)])
    fresh = []
    deadline = time.monotonic() + DEADLINE_S
    while not fresh and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=200).values():
            fresh += msgs
    consumer.close()
    assert [(m.offset, m.value) for m in fresh] == [(3, b"new")]


@pytest.mark.minikafka_only(reason="restarts or kills the broker process")
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_reads_everything_back_at_the_same_offsets(tmp_path, how):
    handle = start_broker(tmp_path)
    try:
        topic = "durable"
        before = []
        for round_ in range(3):
            records = [(b"k%d-%d" % (round_, i), b"v" * (i + 1), [("r", b"%d" % round_)], TS0 + i)
                       for i in range(5)]
            produce_kafka_python(handle.bootstrap, topic, records, compression="gzip" if round_ == 1 else None)
        before = consume_kafka_python(handle.bootstrap, topic, 0, 15)
        assert [r[0] for r in before] == list(range(15))
        if how == "sigterm":
            assert handle.stop() == 0
            handle._start()
        else:
            handle.restart(kill=True)
        after = consume_confluent(handle.bootstrap, topic, 0, 15)
        assert normalise(after) == normalise(before)
        # The log continues where it stopped.
        assert produce_kafka_python(handle.bootstrap, topic, [(b"n", b"next", [], TS0)]) == [15]
    finally:
        handle.stop()


@pytest.mark.minikafka_only(reason="restarts or kills the broker process")
def test_kill_after_a_clean_restart_keeps_what_was_produced_since(tmp_path):
    """A clean start leaves each partition's clean-shutdown flag set until its first write
    (storage/log.py _mark_unclean), so a kill -9 after writes must still find and keep them."""
    handle = start_broker(tmp_path)
    try:
        topic = "durable-after-restart"
        first = [(b"a%d" % i, b"v%d" % i, [], TS0 + i) for i in range(5)]
        assert produce_kafka_python(handle.bootstrap, topic, first) == list(range(5))
        assert handle.stop() == 0
        handle._start()
        second = [(b"b%d" % i, b"w%d" % i, [], TS0 + 10 + i) for i in range(5)]
        assert produce_kafka_python(handle.bootstrap, topic, second) == list(range(5, 10))
        handle.restart(kill=True)
        after = consume_confluent(handle.bootstrap, topic, 0, 10)
        assert [(o, k, v) for o, k, v, _, _ in after] == [(i, k, v) for i, (k, v, _, _) in enumerate(first + second)]
        assert produce_kafka_python(handle.bootstrap, topic, [(b"n", b"next", [], TS0)]) == [10]
    finally:
        handle.stop()


@pytest.mark.minikafka_only(reason="minikafka's shutdown time and its log line")
def test_clean_shutdown_is_fast_and_exits_zero(tmp_path):
    handle = start_broker(tmp_path)
    produce_kafka_python(handle.bootstrap, "s", [(b"k", b"v", [], TS0)])
    t0 = time.monotonic()
    assert handle.stop() == 0
    assert time.monotonic() - t0 < 2.5
    assert "stopped cleanly" in handle.read_log()
