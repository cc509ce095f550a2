"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) against minikafka.

The connector is the Java client inside Spark: the driver plans offsets with an AdminClient
(ListOffsets by earliest/latest/timestamp, with the isolation level), the executors read with
KafkaConsumers (assign + seek, never committing) and write with KafkaProducers.  These tests run
it in the pipeline suite's one SparkSession against the suite's one broker; data is written and
checked with confluent-kafka.  Every wait is bounded.
"""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

from conftest import KafkaTool, _start_broker  # at import: a test-time import finds another conftest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

WAIT_S = 60
BASE_TS = 1_700_000_000_000


def reader(spark, bootstrap: str, topic: str, options: dict | None = None, stream: bool = False):
    r = (spark.readStream if stream else spark.read).format("kafka")
    r = r.option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for name, value in (options or {}).items():
        r = r.option(name, value)
    return r.load()


def offsets(df) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def admin(kafka):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka.bootstrap})


class Batches:
    """A ``foreachBatch`` body that keeps each micro-batch's rows by batch id (a replayed batch
    replaces its earlier attempt, as an idempotent sink would)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_id: dict[int, list[tuple]] = {}

    def __call__(self, df, batch_id):
        rows = [(r.topic, r.partition, r.offset, r.value) for r in
                df.select("topic", "partition", "offset", "value").collect()]
        with self.lock:
            self.by_id[batch_id] = rows

    def rows(self) -> list[tuple]:
        with self.lock:
            return [row for rows in self.by_id.values() for row in rows]


def run_available_now(df, checkpoint, sink: Batches, timeout: float = WAIT_S):
    query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        if not query.awaitTermination(timeout):
            pytest.fail(f"available-now query did not finish in {timeout} s")
    finally:
        if query.isActive:
            query.stop()
    return query


def wait_for(condition, query, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


# --------------------------------------------------------------------------- batch reads

@pytest.fixture(scope="module")
def timed_topic(kafka):
    """Two partitions, five records each, with create timestamps BASE_TS + i * 1000."""
    topic = kafka.topic("conn-ts", 2)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for part in (0, 1):
        for i in range(5):
            p.produce(topic, key=b"k%d" % i, value=b"p%d-%d" % (part, i), partition=part,
                      timestamp=BASE_TS + i * 1000)
    assert p.flush(WAIT_S) == 0
    return topic


def test_batch_read_earliest_to_latest_and_columns(spark_kafka, kafka, timed_topic):
    df = reader(spark_kafka, kafka.bootstrap, timed_topic,
                {"startingOffsets": "earliest", "endingOffsets": "latest"})
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.key, r.value) for r in rows] == [
        (p, i, b"k%d" % i, b"p%d-%d" % (p, i)) for p in (0, 1) for i in range(5)]
    assert {r.topic for r in rows} == {timed_topic}
    assert [int(r.timestamp.timestamp() * 1000) for r in rows[:5]] == [BASE_TS + i * 1000 for i in range(5)]
    assert {r.timestampType for r in rows} == {0}  # CreateTime


def test_batch_read_assign_and_subscribe_pattern(spark_kafka, kafka, timed_topic):
    r = (spark_kafka.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("assign", json.dumps({timed_topic: [1]})).load())
    assert offsets(r) == [(1, i) for i in range(5)]
    r = (spark_kafka.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribePattern", timed_topic.replace("conn-ts-", "conn-t[s]-")).load())
    assert len(offsets(r)) == 10


def test_compressed_writes_read_back(spark_kafka, kafka):
    """The Java producer's codecs (pyspark's own lz4-java, snappy-java and zstd-jni) through the
    broker's validation and back through the connector's consumer."""
    topic = kafka.topic("conn-codec", 1)
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    for codec in codecs:
        df = spark_kafka.createDataFrame([(f"{codec}-{i}" * 20,) for i in range(50)], "value string")
        (df.write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("topic", topic).option("kafka.compression.type", codec)
         .option("kafka.linger.ms", "50").save())
    values = [r.value.decode() for r in reader(spark_kafka, kafka.bootstrap, topic).collect()]
    assert sorted(values) == sorted(f"{c}-{i}" * 20 for c in codecs for i in range(50))


def test_log_append_time_and_records_larger_than_the_fetch_size(spark_kafka, kafka):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = f"conn-lat-{time.monotonic_ns()}"
    client = admin(kafka)
    client.create_topics([NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})])[topic].result(WAIT_S)
    before = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for i in range(3):
        p.produce(topic, b"%d" % i * 300_000, timestamp=1000)  # the broker's time replaces 1000
    assert p.flush(WAIT_S) == 0
    rows = (reader(spark_kafka, kafka.bootstrap, topic, {"kafka.max.partition.fetch.bytes": "1024",
                                                          "kafka.fetch.max.bytes": "1024"})
            .collect())
    # A batch larger than the fetch limits still comes back whole, one at a time.
    assert sorted((r.offset, len(r.value), r.timestampType) for r in rows) == [(i, 300_000, 1) for i in range(3)]
    assert all(before - 1000 <= r.timestamp.timestamp() * 1000 <= time.time() * 1000 + 1000 for r in rows)


def test_batch_read_per_partition_json_offsets(spark_kafka, kafka, timed_topic):
    df = reader(spark_kafka, kafka.bootstrap, timed_topic, {
        "startingOffsets": json.dumps({timed_topic: {"0": 2, "1": -2}}),
        "endingOffsets": json.dumps({timed_topic: {"0": 4, "1": -1}})})
    assert offsets(df) == [(0, 2), (0, 3)] + [(1, i) for i in range(5)]


def test_batch_read_by_timestamp(spark_kafka, kafka, timed_topic):
    # Per partition: the first record at or after the timestamp starts (and, for the end, ends
    # exclusively) the range; ListOffsets by timestamp answers it.
    df = reader(spark_kafka, kafka.bootstrap, timed_topic, {
        "startingOffsetsByTimestamp": json.dumps({timed_topic: {"0": BASE_TS + 2500, "1": BASE_TS + 1000}}),
        "endingOffsetsByTimestamp": json.dumps({timed_topic: {"0": BASE_TS + 4000, "1": BASE_TS + 2000}})})
    assert offsets(df) == [(0, 3), (1, 1)]
    # One timestamp for every partition.
    df = reader(spark_kafka, kafka.bootstrap, timed_topic, {"startingTimestamp": str(BASE_TS + 3000)})
    assert offsets(df) == [(0, 3), (0, 4), (1, 3), (1, 4)]
    # No record that late: ListOffsets answers -1; the "latest" strategy then starts at the end.
    late = {"startingTimestamp": str(BASE_TS + 3_600_000),
            "startingOffsetsByTimestampStrategy": "latest"}
    assert offsets(reader(spark_kafka, kafka.bootstrap, timed_topic, late)) == []
    with pytest.raises(Exception, match="(?i)timestamp"):
        reader(spark_kafka, kafka.bootstrap, timed_topic,
               {"startingTimestamp": str(BASE_TS + 3_600_000)}).collect()


def test_include_headers_and_batch_write_of_key_value_headers_topic_partition(spark_kafka, kafka):
    from pyspark.sql import functions as F

    one, two = kafka.topic("conn-w1", 2), kafka.topic("conn-w2", 2)
    rows = [("a", "v-a", one, 1, [("h1", b"x"), ("h1", b"y"), ("h2", None)]),
            ("b", "v-b", two, 0, []),
            (None, "v-nokey", one, 0, None)]
    df = spark_kafka.createDataFrame(
        rows, "key string, value string, topic string, partition int, "
              "headers array<struct<key:string,value:binary>>")
    df.write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap).save()

    got = {(m.topic(), m.partition(), m.key(), m.value(), tuple(m.headers() or ()))
           for t in (one, two) for m in kafka.read_all(t)}
    assert got == {(one, 1, b"a", b"v-a", (("h1", b"x"), ("h1", b"y"), ("h2", None))),
                   (two, 0, b"b", b"v-b", ()),
                   (one, 0, None, b"v-nokey", ())}

    # And read back by the connector: headers keep their order, duplicates and null values.
    back = (reader(spark_kafka, kafka.bootstrap, one, {"includeHeaders": "true"})
            .select("value", "headers").collect())
    by_value = {r.value: [(h.key, h.value) for h in (r.headers or [])] for r in back}
    assert by_value == {b"v-a": [("h1", b"x"), ("h1", b"y"), ("h2", None)], b"v-nokey": []}
    # Without includeHeaders there is no headers column.
    assert "headers" not in reader(spark_kafka, kafka.bootstrap, one).columns
    # The `topic` option overrides the column.
    three = kafka.topic("conn-w3", 1)
    (df.withColumn("partition", F.lit(None).cast("int")).write.format("kafka")
     .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", three).save())
    assert sorted(m.value() for m in kafka.read_all(three)) == [b"v-a", b"v-b", b"v-nokey"]


def test_read_committed_over_committed_aborted_and_open_transactions(spark_kafka, kafka, tmp_path):
    from confluent_kafka import Producer

    topic = kafka.topic("conn-txn", 2)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "conn-" + topic,
                  "linger.ms": 0})
    p.init_transactions(WAIT_S)

    def txn(values, *, commit=True):
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, v, partition=i % 2)
        p.flush(WAIT_S)
        (p.commit_transaction if commit else p.abort_transaction)(WAIT_S)

    txn([b"c0", b"c1", b"c2"])
    txn([b"a0", b"a1", b"a2"], commit=False)
    txn([b"c3", b"c4"])
    p.begin_transaction()
    p.produce(topic, b"open0", partition=0)
    p.produce(topic, b"open1", partition=1)
    p.flush(WAIT_S)

    def values(level, stream=False):
        opts = {"kafka.isolation.level": level, "startingOffsets": "earliest"}
        df = reader(spark_kafka, kafka.bootstrap, topic, opts, stream=stream)
        if not stream:
            return sorted(r.value for r in df.select("value").collect())
        sink = Batches()
        run_available_now(df, tmp_path / f"ckpt-{level}-{time.monotonic_ns()}", sink)
        return sorted(row[3] for row in sink.rows())

    committed = [b"c0", b"c1", b"c2", b"c3", b"c4"]
    assert values("read_committed") == committed
    assert values("read_committed", stream=True) == committed
    assert values("read_uncommitted") == sorted(committed + [b"a0", b"a1", b"a2", b"open0", b"open1"])
    p.commit_transaction(WAIT_S)
    assert values("read_committed") == sorted(committed + [b"open0", b"open1"])


def test_group_id_and_group_id_prefix(spark_kafka, kafka):
    """The connector never commits; its consumers carry the group id, and the driver's offset
    reader of the consumer-based path (spark.sql.streaming.kafka.useDeprecatedOffsetFetching)
    subscribes with it, so the group shows on the broker."""
    topic = kafka.topic("conn-grp", 2)
    kafka.produce(topic, [(None, b"v%d" % i, i % 2, None) for i in range(6)])
    group = "conn-group-" + topic
    prefix = "conn-prefix-" + topic

    def groups():
        # Retried (bounded) while the answer carries a retriable error, e.g.
        # COORDINATOR_LOAD_IN_PROGRESS while the shards of a new __consumer_offsets load.
        deadline = time.monotonic() + WAIT_S
        client = admin(kafka)  # kept alive until its futures are done
        while True:
            result = client.list_consumer_groups().result(WAIT_S)
            if not result.errors:
                return {g.group_id for g in result.valid}
            assert time.monotonic() < deadline, result.errors
            time.sleep(0.2)

    # Default path: AdminClient on the driver, assign + seek on the executors.
    for opts in ({"kafka.group.id": group}, {"groupIdPrefix": prefix}):
        assert len(reader(spark_kafka, kafka.bootstrap, topic, opts).collect()) == 6
    spark_kafka.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    try:
        assert len(reader(spark_kafka, kafka.bootstrap, topic, {"kafka.group.id": group}).collect()) == 6
        assert group in groups()
        assert len(reader(spark_kafka, kafka.bootstrap, topic, {"groupIdPrefix": prefix}).collect()) == 6
        mine = [g for g in groups() if g.startswith(prefix + "-")]
        assert mine and all(g.endswith("-driver-0") for g in mine), mine
        # The group id is ignored when a prefix is also given (kafka.group.id wins).
        assert len(reader(spark_kafka, kafka.bootstrap, topic,
                          {"kafka.group.id": group + "-both", "groupIdPrefix": prefix + "x"}).collect()) == 6
        now = groups()
        assert group + "-both" in now and not any(g.startswith(prefix + "x") for g in now)
    finally:
        spark_kafka.conf.unset("spark.sql.streaming.kafka.useDeprecatedOffsetFetching")


# --------------------------------------------------------------------------- streaming reads

def test_stream_max_offsets_per_trigger_available_now_and_restart(spark_kafka, kafka, tmp_path):
    topic = kafka.topic("conn-stream", 2)
    kafka.produce(topic, [(None, b"a%d" % i, i % 2, None) for i in range(25)])
    checkpoint = tmp_path / "ckpt"
    opts = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"}
    first = Batches()
    query = run_available_now(reader(spark_kafka, kafka.bootstrap, topic, opts, stream=True),
                              checkpoint, first)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 25 and max(sizes) <= 10 and len(sizes) >= 3, sizes
    assert sorted((r[1], r[2]) for r in first.rows()) == sorted((i % 2, i // 2) for i in range(25))

    # A continuous run on the same checkpoint, stopped in the middle of the new data ...
    kafka.produce(topic, [(None, b"b%d" % i, i % 2, None) for i in range(30)])
    second = Batches()
    df = reader(spark_kafka, kafka.bootstrap, topic, {**opts, "maxOffsetsPerTrigger": "6"}, stream=True)
    query = (df.writeStream.foreachBatch(second).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="200 milliseconds").start())
    try:
        wait_for(lambda: len(second.rows()) >= 6, query, "the first micro-batch of the second run")
    finally:
        query.stop()
    got = len(second.rows())
    assert 6 <= got < 30, got
    # ... and an available-now run after it: every new record once, nothing of the first run.
    third = Batches()
    run_available_now(df, checkpoint, third)
    batch_ids = sorted(set(first.by_id) | set(second.by_id) | set(third.by_id))
    assert batch_ids == list(range(len(batch_ids)))
    merged = {**first.by_id, **second.by_id, **third.by_id}  # a replayed batch id replaces its attempt
    seen = sorted((r[1], r[2]) for rows in merged.values() for r in rows)
    assert seen == sorted((i % 2, i // 2) for i in range(55))
    assert not set(first.by_id) & set(third.by_id)


def test_stream_from_latest_picks_up_a_partition_added_while_running(spark_kafka, kafka, tmp_path):
    topic = kafka.topic("conn-grow", 2)
    kafka.produce(topic, [(None, b"old%d" % i, i % 2, None) for i in range(4)])
    sink = Batches()
    df = reader(spark_kafka, kafka.bootstrap, topic, {"startingOffsets": "latest"}, stream=True)
    query = (df.writeStream.foreachBatch(sink).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        # The first micro-batch fixes "latest" as the start; only later records are read.
        wait_for(lambda: len(query.recentProgress) > 0, query, "the query's first progress")
        kafka.produce(topic, [(None, b"new%d" % i, i % 2, None) for i in range(4)])
        wait_for(lambda: len(sink.rows()) >= 4, query, "the records produced after the start")
        from confluent_kafka.admin import NewPartitions

        client = admin(kafka)
        client.create_partitions([NewPartitions(topic, 3)])[topic].result(WAIT_S)
        kafka.produce(topic, [(None, b"p2-%d" % i, 2, None) for i in range(3)])
        wait_for(lambda: len(sink.rows()) >= 7, query, "the records of the new partition")
        time.sleep(0.5)  # one more trigger: nothing else may arrive
    finally:
        query.stop()
    assert sorted((r[1], r[3]) for r in sink.rows()) == sorted(
        [(i % 2, b"new%d" % i) for i in range(4)] + [(2, b"p2-%d" % i) for i in range(3)])


def test_fail_on_data_loss_when_unread_records_are_deleted(spark_kafka, kafka, tmp_path):
    from confluent_kafka import TopicPartition

    topic = kafka.topic("conn-loss", 1)
    kafka.produce(topic, [(None, b"r%d" % i, 0, None) for i in range(10)])
    checkpoint = tmp_path / "ckpt"
    opts = {"startingOffsets": "earliest"}
    first = Batches()
    run_available_now(reader(spark_kafka, kafka.bootstrap, topic, opts, stream=True), checkpoint, first)
    assert len(first.rows()) == 10
    kafka.produce(topic, [(None, b"r%d" % i, 0, None) for i in range(10, 20)])
    # Offsets 10-14 are deleted before the query reads them (the log start moves to 15).
    client = admin(kafka)
    done = client.delete_records([TopicPartition(topic, 0, 15)])
    for future in done.values():
        assert future.result(WAIT_S).low_watermark == 15
    spare = tmp_path / "ckpt-copy"
    shutil.copytree(checkpoint, spare)

    failing = Batches()
    query = (reader(spark_kafka, kafka.bootstrap, topic, {**opts, "failOnDataLoss": "true"}, stream=True)
             .writeStream.foreachBatch(failing).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception) as failure:
        query.awaitTermination(WAIT_S)
    # The executor's consumer gets OFFSET_OUT_OF_RANGE for offset 10 from the broker.
    message = str(failure.value)
    assert "Some data may have been lost" in message and "OffsetOutOfRangeException" in message, message[-2000:]
    assert failing.rows() == []

    lenient = Batches()
    run_available_now(reader(spark_kafka, kafka.bootstrap, topic, {**opts, "failOnDataLoss": "false"},
                             stream=True), spare, lenient)
    assert sorted(r[2] for r in lenient.rows()) == [15, 16, 17, 18, 19]

    # A batch query asked for the deleted offsets behaves the same.
    gone = {"startingOffsets": json.dumps({topic: {"0": 10}})}
    with pytest.raises(Exception, match="Some data may have been lost"):
        reader(spark_kafka, kafka.bootstrap, topic, {**gone, "failOnDataLoss": "true"}).collect()
    assert offsets(reader(spark_kafka, kafka.bootstrap, topic, {**gone, "failOnDataLoss": "false"})) == [
        (0, i) for i in range(15, 20)]


def test_fail_on_data_loss_when_retention_deletes_unread_records(spark_kafka, tmp_path):
    """The same through the broker's retention: a broker of its own runs the retention check
    every 200 ms; segments roll after 50 ms and the topic's retention.ms drops to 1 once the query
    has read the first records, so the unread ones go with their segments."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import ConfigResource, ConfigEntry, AlterConfigOpType


    broker = _start_broker()(tmp_path / "broker", log_retention_check_interval_ms=200)
    try:
        kafka = KafkaTool(broker.bootstrap)
        topic = kafka.topic("conn-retention", 1)
        client = admin(kafka)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("segment.ms", "50", incremental_operation=AlterConfigOpType.SET)])
        client.incremental_alter_configs([resource])[resource].result(WAIT_S)
        kafka.produce(topic, [(None, b"r%d" % i, 0, None) for i in range(10)])
        checkpoint = tmp_path / "ckpt"
        opts = {"startingOffsets": "earliest"}
        first = Batches()
        run_available_now(reader(spark_kafka, kafka.bootstrap, topic, opts, stream=True), checkpoint, first)
        assert len(first.rows()) == 10
        kafka.produce(topic, [(None, b"r%d" % i, 0, None) for i in range(10, 20)])
        time.sleep(0.1)  # older than segment.ms: the next record rolls a new active segment
        from confluent_kafka import Producer

        # Retention deletes every segment whose newest timestamp is older than retention.ms, the
        # active one included (as Kafka does); record 20, stamped 30 minutes ahead, keeps its own.
        late = Producer({"bootstrap.servers": kafka.bootstrap})
        late.produce(topic, b"r20", partition=0, timestamp=int(time.time() * 1000) + 1_800_000)
        assert late.flush(WAIT_S) == 0
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
        client.incremental_alter_configs([resource])[resource].result(WAIT_S)
        from confluent_kafka import Consumer

        probe = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "conn-retention"})
        try:
            deadline = time.monotonic() + WAIT_S
            while True:
                low, high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
                if low > 10:
                    break
                assert time.monotonic() < deadline, f"retention did not delete offsets 10-19 (log start {low})"
                time.sleep(0.1)
        finally:
            probe.close()
        assert (low, high) == (20, 21)
        spare = tmp_path / "ckpt-copy"
        shutil.copytree(checkpoint, spare)

        failing = Batches()
        query = (reader(spark_kafka, kafka.bootstrap, topic, {**opts, "failOnDataLoss": "true"}, stream=True)
                 .writeStream.foreachBatch(failing).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        with pytest.raises(Exception) as failure:
            query.awaitTermination(WAIT_S)
        assert "Some data may have been lost" in str(failure.value), str(failure.value)[-2000:]
        assert failing.rows() == []

        lenient = Batches()
        run_available_now(reader(spark_kafka, kafka.bootstrap, topic, {**opts, "failOnDataLoss": "false"},
                                 stream=True), spare, lenient)
        assert [(r[2], r[3]) for r in lenient.rows()] == [(20, b"r20")]
    finally:
        broker.stop()


# --------------------------------------------------------------------------- streaming write

def test_streaming_write_key_value_headers_topic(spark_kafka, kafka, tmp_path):
    src = kafka.topic("conn-ssrc", 2)
    even, odd = kafka.topic("conn-seven", 2), kafka.topic("conn-sodd", 1)
    kafka.produce(src, [(b"k%d" % i, b"v%d" % i, i % 2, [("n", b"%d" % i)]) for i in range(8)])
    df = reader(spark_kafka, kafka.bootstrap, src, {"startingOffsets": "earliest", "includeHeaders": "true"},
                stream=True)
    # The topic column routes each row (partition 0 of the source to one topic, 1 to the other).
    query = (df.selectExpr("key", "upper(cast(value as string)) AS value", "headers",
                           f"if(partition = 0, '{even}', '{odd}') AS topic")
             .writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(WAIT_S), "streaming write did not finish"
    finally:
        if query.isActive:
            query.stop()
    for topic, parity in ((even, 0), (odd, 1)):
        got = sorted((m.key(), m.value(), tuple(m.headers() or ())) for m in kafka.read_all(topic))
        assert got == [(b"k%d" % i, b"V%d" % i, (("n", b"%d" % i),)) for i in range(parity, 8, 2)]
