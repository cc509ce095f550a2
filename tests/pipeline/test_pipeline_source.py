"""The minikafka data source in a real SparkSession against the real broker."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

FMT = "minikafka"


def read(spark, bootstrap, **options):
    reader = spark.read.format(FMT).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_by_offset(df):
    return sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())


def test_batch_read_returns_every_column_like_sparks_connector(spark, kafka):
    topic = kafka.topic("cols", partitions=2)
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=5)
    kafka.produce(topic, [(b"k0", b"v0", 0, [("h1", b"a"), ("h2", None)]),
                          (None, b"v1", 1, None),
                          (b"k2", None, 1, None)])
    df = read(spark, kafka.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "binary", "binary", "string", "int", "bigint", "timestamp", "int",
        "array<struct<key:string,value:binary>>"]
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.key, r.value) for r in rows] == [
        (0, 0, b"k0", b"v0"), (1, 0, None, b"v1"), (1, 1, b"k2", None)]
    assert all(r.topic == topic and r.timestampType == 0 for r in rows)
    assert [(h.key, h.value) for h in rows[0].headers] == [("h1", b"a"), ("h2", None)]
    assert rows[1].headers is None
    stamp = rows[0].timestamp.replace(tzinfo=dt.timezone.utc)
    assert before <= stamp <= dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)
    # Without includeHeaders the column is absent, as in Spark's connector.
    assert "headers" not in read(spark, kafka.bootstrap, subscribe=topic).columns


@pytest.fixture(scope="module")
def big_batches(kafka):
    """Two partitions of 3000 records each, produced as a few large stored batches so that
    range ends fall inside batches and each partition's last batch holds many records."""
    topic = kafka.topic("ranges", partitions=2)
    kafka.produce(topic, [(b"k%d" % i, b"v%05d" % i, i % 2, None) for i in range(6000)],
                  batch=True)
    return topic


def test_batch_read_with_json_offsets_returns_exactly_that_range(spark, kafka, big_batches):
    topic = big_batches
    df = read(spark, kafka.bootstrap, subscribe=topic,
              startingOffsets=f'{{"{topic}":{{"0":1234,"1":-2}}}}',
              endingOffsets=f'{{"{topic}":{{"0":2345,"1":17}}}}')
    got = [(p, o) for p, o, _, _ in rows_by_offset(df)]
    assert got == [(0, o) for o in range(1234, 2345)] + [(1, o) for o in range(0, 17)]
    first = df.where("partition = 0 AND offset = 1234").collect()[0]
    assert first.value == b"v%05d" % (1234 * 2)


def test_a_partition_whose_last_batch_holds_many_records_is_read_to_its_end(
        spark, kafka, big_batches):
    topic = big_batches
    df = read(spark, kafka.bootstrap, subscribe=topic)
    from pyspark.sql import functions as F

    stats = df.groupBy("partition").agg(F.max("offset").alias("last"),
                                        F.count("*").alias("n")).collect()
    assert sorted((r.partition, r.last, r.n) for r in stats) == [(0, 2999, 3000),
                                                                   (1, 2999, 3000)]
    assert df.select("value").distinct().count() == 6000


def test_an_empty_or_missing_topic_reads_as_no_rows(spark, kafka):
    empty = kafka.topic("empty", partitions=2)
    assert read(spark, kafka.bootstrap, subscribe=empty).count() == 0
    assert read(spark, kafka.bootstrap, subscribe=empty + "-absent").collect() == []


def test_min_partitions_splits_ranges_without_losing_or_repeating_records(
        spark, kafka, big_batches):
    df = read(spark, kafka.bootstrap, subscribe=big_batches, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    offsets = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
    assert len(offsets) == 6000 and len(set(offsets)) == 6000


def test_assign_and_subscribe_pattern(spark, kafka, big_batches):
    df = read(spark, kafka.bootstrap, assign=f'{{"{big_batches}":[1]}}')
    assert {r.partition for r in df.select("partition").distinct().collect()} == {1}
    assert df.count() == 3000
    pattern = read(spark, kafka.bootstrap, subscribePattern=big_batches[:-2] + "..")
    assert pattern.count() == 6000


def test_batch_write_then_read_back(spark, kafka):
    topic = kafka.topic("sink", partitions=3)
    df = spark.createDataFrame(
        [("a", "one", 2, [("h", bytearray(b"x"))]), (None, "two", 0, None),
         ("c", "three", None, None)],
        "key string, value string, partition int, "
        "headers array<struct<key:string,value:binary>>")
    (df.write.format(FMT).option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", topic).mode("append").save())
    got = {m.value(): (m.key(), m.partition(), m.headers()) for m in kafka.read_all(topic)}
    assert set(got) == {b"one", b"two", b"three"}
    assert got[b"one"] == (b"a", 2, [("h", b"x")])
    assert got[b"two"][0] is None and got[b"two"][1] == 0


def test_write_with_a_topic_column(spark, kafka):
    t1, t2 = kafka.topic("route", 1), kafka.topic("route", 1)
    df = spark.createDataFrame([(t1, b"x"), (t2, b"y"), (t2, b"z")], "topic string, value binary")
    df.write.format(FMT).option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()
    assert [m.value() for m in kafka.read_all(t1)] == [b"x"]
    assert sorted(m.value() for m in kafka.read_all(t2)) == [b"y", b"z"]


def test_streaming_copy_with_max_offsets_per_trigger_and_available_now(spark, kafka, tmp_path):
    src = kafka.topic("copy-in", 2)
    dst = kafka.topic("copy-out", 2)
    kafka.produce(src, [(b"%d" % i, b"r%03d" % i, i % 2, None) for i in range(250)], batch=True)
    stream = (spark.readStream.format(FMT).option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "100").load())
    query = (stream.select("key", "value")
             .writeStream.format(FMT).option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "available-now query did not finish"
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [100, 100, 50]
    assert sorted(m.value() for m in kafka.read_all(dst)) == [b"r%03d" % i for i in range(250)]
    # The last batch's end offsets are in the checkpoint in Spark's JSON form.
    end = query.lastProgress["sources"][0]["endOffset"]
    assert json.loads(end) == {src: {"0": 125, "1": 125}}


def test_streaming_restart_replays_nothing_twice(spark, kafka, tmp_path):
    src = kafka.topic("replay", 2)
    ckpt = str(tmp_path / "ckpt")
    seen: list = []

    def collect(batch, _batch_id):
        seen.extend((r.partition, r.offset) for r in batch.select("partition", "offset").collect())

    def run():
        q = (spark.readStream.format(FMT).option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest").load()
             .writeStream.foreachBatch(collect).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None

    kafka.produce(src, [(None, b"a", i % 2, None) for i in range(10)])
    run()
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(5)]
    kafka.produce(src, [(None, b"b", i % 2, None) for i in range(6)])
    run()
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(8)]


def test_a_bad_option_fails_with_a_clear_message(spark, kafka):
    with pytest.raises(Exception) as info:
        read(spark, kafka.bootstrap, subscribe="x", startingOffsets="newest").collect()
    assert "option 'startingOffsets' must be 'earliest', 'latest' or JSON" in str(info.value)
    with pytest.raises(Exception) as info:
        read(spark, kafka.bootstrap, subscribe="x", startingOffset="earliest").collect()
    assert "unknown option 'startingoffset' (did you mean 'startingOffsets'?)" in \
        str(info.value)
    with pytest.raises(Exception) as info:
        (spark.createDataFrame([(1,)], "n int").write.format(FMT)
         .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", "t")
         .mode("append").save())
    assert "writing to Kafka needs a 'value' column" in str(info.value)


def test_an_unreachable_broker_fails_within_the_timeout(spark):
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        read(spark, f"127.0.0.1:{port}", subscribe="x", metadataTimeoutMs="2000").collect()
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in str(info.value)
    assert time.monotonic() - started < 30


def test_a_failed_micro_batch_is_replayed_with_exactly_the_same_ranges(spark, kafka, tmp_path):
    src = kafka.topic("crash", 2)
    ckpt = str(tmp_path / "ckpt")
    attempts: list = []
    crash = {"batch": 1}

    def sink(batch, batch_id):
        rows = sorted((r.partition, r.offset) for r in batch.select("partition", "offset")
                      .collect())
        attempts.append((batch_id, rows))
        if batch_id == crash["batch"]:
            raise RuntimeError("simulated crash after the offsets were logged")

    def run():
        q = (spark.readStream.format(FMT).option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "4").load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        try:
            q.awaitTermination(120)
        except Exception:
            pass
        return q

    kafka.produce(src, [(None, b"x", i % 2, None) for i in range(10)])
    first = run()
    assert first.exception() is not None and "simulated crash" in str(first.exception())
    assert [b for b, _ in attempts] == [0, 1]
    # More data arrives while the query is down; the replay must not stretch batch 1 over it.
    kafka.produce(src, [(None, b"y", i % 2, None) for i in range(6)])
    crash["batch"] = None
    second = run()
    assert second.exception() is None
    assert attempts[2][0] == 1 and attempts[2][1] == attempts[1][1]
    assert len(attempts[1][1]) == 4
    after = [rows for _, rows in attempts[2:]]
    done = [tp for rows in [attempts[0][1]] + after for tp in rows]
    assert sorted(done) == [(p, o) for p in (0, 1) for o in range(8)]
