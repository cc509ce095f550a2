"""Transactions with real clients: confluent-kafka (librdkafka), kafka-python, aiokafka and kcat.

One broker for the module (short transaction timeouts are per producer).  For each client:
aborted records never reach a read_committed consumer, committed ones arrive exactly once, a
read_committed consumer stops at the LSO while a transaction is open and continues when it
ends, and a transaction that outlives its transaction.timeout.ms is aborted by the coordinator
and its producer fenced.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest

from clienttools import require_tool
from conftest import RawClient, broker_for

OVERRIDES = dict(offsets_topic_num_partitions=3, transaction_state_log_num_partitions=3,
                 group_min_session_timeout_ms=1000)
WAIT_S = 30


@pytest.fixture(scope="module")
def broker(request, broker_kind, tmp_path_factory):
    handle = broker_for(request, broker_kind, tmp_path_factory.mktemp("txn"), **OVERRIDES)
    yield handle
    handle.stop()


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "t-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1, timeout: float = 10.0) -> list[bytes]:
    """Every record a consumer with ``isolation`` gets until it reaches the end of each partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + uuid.uuid4().hex[:6],
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof = [], set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise AssertionError(m.error())
            eof.discard(m.partition())
            out.append(m.value())
        assert len(eof) == partitions, f"no EOF on {topic} within {timeout}s"
        return out
    finally:
        c.close()


def end_offset(bootstrap: str, topic: str, isolation: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] \
            if isolation == "read_uncommitted" else c.offsets_for_times([TopicPartition(topic, 0, -1)], 10)[0].offset
    finally:
        c.close()


def describe(bootstrap: str, transactional_id: str) -> dict:

    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as raw:
        return raw.request(65, 0, {"transactional_ids": [transactional_id]})["transaction_states"][0]


def wait_until(predicate, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# == confluent-kafka =============================================================================

def confluent_producer(bootstrap: str, tid: str, **extra):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(WAIT_S)
    return p


def test_confluent_commit_abort_read_committed(broker):
    topic = new_topic(broker.bootstrap)
    p = confluent_producer(broker.bootstrap, "cf-" + topic)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"c%d" % i)
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"a%d" % i)
    p.flush(WAIT_S)  # the records reach the log before the abort
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"c3")
    p.commit_transaction(WAIT_S)
    assert read_all(broker.bootstrap, topic, "read_committed") == [b"c0", b"c1", b"c2", b"c3"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted") == [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"c3"]
    assert describe(broker.bootstrap, "cf-" + topic)["transaction_state"] == "CompleteCommit"


def test_confluent_consumer_blocks_at_the_lso_until_the_transaction_ends(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = new_topic(broker.bootstrap)
    p = confluent_producer(broker.bootstrap, "lso-" + topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, b"before")
    plain.flush(10)
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    p.flush(WAIT_S)
    plain.produce(topic, b"after")  # above the LSO: invisible until the transaction ends
    plain.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    assert got == [b"before"]
    assert end_offset(broker.bootstrap, topic, "read_committed") == 1  # ListOffsets latest = LSO
    p.commit_transaction(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"before", b"in-txn", b"after"]


def test_confluent_send_offsets_to_transaction(broker):
    from confluent_kafka import Consumer, TopicPartition

    src, dst = new_topic(broker.bootstrap), new_topic(broker.bootstrap)
    seed = confluent_producer(broker.bootstrap, "seed-" + src)
    seed.begin_transaction()
    for i in range(10):
        seed.produce(src, b"%d" % i)
    seed.commit_transaction(WAIT_S)
    group = "ctp-" + src
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([src])
    p = confluent_producer(broker.bootstrap, "ctp-" + src)
    done = 0
    deadline = time.monotonic() + WAIT_S
    while done < 10 and time.monotonic() < deadline:
        msgs = c.consume(10, 0.5)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, m.value() * 2)
        p.send_offsets_to_transaction([TopicPartition(src, 0, msgs[-1].offset() + 1)],
                                      c.consumer_group_metadata(), WAIT_S)
        p.commit_transaction(WAIT_S)
        done += len(msgs)
    committed = c.committed([TopicPartition(src, 0)], 10)[0].offset
    assert done == 10 and committed == 10
    assert sorted(read_all(broker.bootstrap, dst, "read_committed")) == sorted(b"%d" % i * 2 for i in range(10))
    # an aborted transaction's offsets are never committed
    p.begin_transaction()
    p.produce(dst, b"zzz")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 3)], c.consumer_group_metadata(), WAIT_S)
    p.abort_transaction(WAIT_S)
    assert c.committed([TopicPartition(src, 0)], 10)[0].offset == 10
    c.close()
    assert b"zzz" not in read_all(broker.bootstrap, dst, "read_committed")


def test_confluent_timed_out_transaction_is_aborted_and_the_producer_fenced(broker):
    from confluent_kafka import KafkaException

    topic = new_topic(broker.bootstrap)
    tid = "slow-" + topic
    p = confluent_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, b"late")
    p.flush(WAIT_S)
    wait_until(lambda: describe(broker.bootstrap, tid)["transaction_state"] == "CompleteAbort", "the abort")
    assert describe(broker.bootstrap, tid)["producer_epoch"] == 1
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(WAIT_S)
    assert info.value.args[0].fatal() or info.value.args[0].txn_requires_abort()
    assert read_all(broker.bootstrap, topic, "read_committed") == []


def test_confluent_zombie_is_fenced(broker):
    from confluent_kafka import KafkaException

    topic = new_topic(broker.bootstrap)
    tid = "zombie-" + topic
    old = confluent_producer(broker.bootstrap, tid)
    old.begin_transaction()
    old.produce(topic, b"zombie")
    old.flush(WAIT_S)
    new = confluent_producer(broker.bootstrap, tid)  # aborts the open transaction, bumps the epoch
    new.begin_transaction()
    new.produce(topic, b"new")
    new.commit_transaction(WAIT_S)
    with pytest.raises(KafkaException):
        old.commit_transaction(WAIT_S)
    assert read_all(broker.bootstrap, topic, "read_committed") == [b"new"]


# == kafka-python ================================================================================

def test_kafka_python_transactional_producer_and_read_committed_consumer(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = new_topic(broker.bootstrap)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-" + topic)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"c1")
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic, b"a1")
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic, b"c2")
    p.commit_transaction()
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000)
    c.assign([TopicPartition(topic, 0)])
    got = [m.value for m in c]
    c.close()
    assert got == [b"c1", b"c2"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted") == [b"c1", b"a1", b"c2"]


def test_kafka_python_read_committed_waits_for_the_commit(broker):
    from kafka import KafkaConsumer, TopicPartition

    topic = new_topic(broker.bootstrap)
    p = confluent_producer(broker.bootstrap, "kpw-" + topic)
    p.begin_transaction()
    p.produce(topic, b"x")
    p.flush(WAIT_S)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([TopicPartition(topic, 0)])
    assert c.poll(timeout_ms=1500) == {}
    p.commit_transaction(WAIT_S)
    got = []
    deadline = time.monotonic() + WAIT_S
    while not got and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    c.close()
    assert got == [b"x"]


# == aiokafka ====================================================================================

def test_aiokafka_transactional_producer_and_read_committed_consumer(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = new_topic(broker.bootstrap)

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-" + topic)
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"c1")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"a1")
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"c2")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            c.assign([TopicPartition(topic, 0)])
            await c.seek_to_beginning()
            got = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 2 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                got += [r.value for records in batch.values() for r in records]
            # nothing more arrives (the aborted record stays hidden)
            batch = await c.getmany(timeout_ms=500)
            got += [r.value for records in batch.values() for r in records]
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == [b"c1", b"c2"]
    assert read_all(broker.bootstrap, topic, "read_uncommitted") == [b"c1", b"a1", b"c2"]


# == kcat ========================================================================================

def test_kcat_read_committed(broker):
    kcat = require_tool("kcat")
    topic = new_topic(broker.bootstrap)
    p = confluent_producer(broker.bootstrap, "kc-" + topic)
    p.begin_transaction()
    p.produce(topic, b"c1")
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"a1")
    p.flush(WAIT_S)
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"open")  # still open: kcat stops at the LSO before it
    p.flush(WAIT_S)

    def kcat_read(isolation: str) -> list[str]:
        out = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                              "-X", f"isolation.level={isolation}"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert kcat_read("read_committed") == ["c1"]
    assert kcat_read("read_uncommitted") == ["c1", "a1", "open"]
    p.commit_transaction(WAIT_S)
    assert kcat_read("read_committed") == ["c1", "open"]


def test_kafka_python_timed_out_transaction_is_aborted_and_the_producer_fenced(broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    topic = new_topic(broker.bootstrap)
    tid = "kp-slow-" + topic
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid, transaction_timeout_ms=1500)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"late").get(timeout=WAIT_S)
        wait_until(lambda: describe(broker.bootstrap, tid)["transaction_state"] == "CompleteAbort", "the abort")
        with pytest.raises(KafkaError) as info:
            p.commit_transaction()
        assert type(info.value).__name__ in ("ProducerFencedError", "InvalidProducerEpochError"), info.value
    finally:
        p.close(timeout=1)
    assert read_all(broker.bootstrap, topic, "read_committed") == []


def test_aiokafka_consumer_blocks_at_the_lso_and_a_timed_out_producer_is_fenced(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.errors import KafkaError

    topic = new_topic(broker.bootstrap)
    tid = "aio-slow-" + topic

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        c.assign([TopicPartition(topic, 0)])
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-lso-" + topic)
        await p.start()
        try:
            await p.begin_transaction()
            await p.send_and_wait(topic, b"pending")
            assert await c.getmany(timeout_ms=1500) == {}  # held at the LSO
            await p.commit_transaction()
            got = []
            deadline = time.monotonic() + WAIT_S
            while not got and time.monotonic() < deadline:
                got += [r.value for rs in (await c.getmany(timeout_ms=500)).values() for r in rs]
            assert got == [b"pending"]
        finally:
            await p.stop()
        slow = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid, transaction_timeout_ms=1500)
        await slow.start()
        try:
            await slow.begin_transaction()
            await slow.send_and_wait(topic, b"late")
            deadline = time.monotonic() + WAIT_S
            while describe(broker.bootstrap, tid)["transaction_state"] != "CompleteAbort":
                assert time.monotonic() < deadline, "the coordinator did not abort the transaction"
                await asyncio.sleep(0.05)
            with pytest.raises(KafkaError):
                await slow.commit_transaction()
        finally:
            await slow.stop()
            await c.stop()

    asyncio.run(run())
    assert read_all(broker.bootstrap, topic, "read_committed") == [b"pending"]


def test_kafka_python_offsets_only_transaction_aborts_and_keeps_the_committed_offsets(broker):
    """kafka-python's own test_transactional_producer_offsets: commit a record with offsets, then a
    transaction that only sends offsets (for partition 1) and aborts.  It "hung" against an
    external broker whose topics get one partition: partition 1 then does not exist and
    TxnOffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION, which kafka-python retries until the
    transaction times out; Apache Kafka 4.2 answers and hangs the same way (checked side by side),
    and the suite's own brokers create four partitions.  With partition 1 present it completes."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic = new_topic(broker.bootstrap, partitions=4)
    group = f"txn-test-group-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}",
                             transaction_timeout_ms=10000, max_block_ms=10000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, partition=0, value=b"msg1").get(timeout=10)
        producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(0, "metadata", 0)}, group)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send_offsets_to_transaction({TopicPartition(topic, 1): OffsetAndMetadata(1, "bad", 1)}, group)
        started = time.monotonic()
        producer.abort_transaction()
        assert time.monotonic() - started < 5  # not the transaction timeout
    finally:
        producer.close(timeout=5)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin.list_group_offsets(group) == {
            group: {TopicPartition(topic, 0): OffsetAndMetadata(0, "metadata", 0)}}
    finally:
        admin.close()


def test_txn_offset_commit_for_a_missing_partition_is_unknown_topic_or_partition(broker):
    """What the one-partition run of that test met, answered as Kafka's KafkaApis does."""
    topic = new_topic(broker.bootstrap, partitions=1)
    txn_id = f"raw-{uuid.uuid4().hex[:6]}"
    with RawClient(broker.port) as client:
        init = client.request(22, 4, {"transactional_id": txn_id,
                                      "transaction_timeout_ms": 10000, "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == 0
        body = {"transactional_id": txn_id, "group_id": "g", "producer_id": init["producer_id"],
                "producer_epoch": init["producer_epoch"], "generation_id": -1, "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": 1, "committed_offset": 1, "committed_leader_epoch": -1,
                     "committed_metadata": None}]}]}
        answer = client.request(28, 3, body)
    assert answer["topics"][0]["partitions"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
