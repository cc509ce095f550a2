"""Benchmark: the minikafka Spark source, Spark's own Kafka connector and a plain confluent-kafka consumer.

Produces N records of S bytes into a 2-partition topic, then alternates, on the same data and
in the same run:

* ``plain``: one confluent-kafka Consumer assigned to both partitions, reading from offset 0
  to the end (touching every value), with librdkafka's default fetch sizes;
* ``plain-tuned``: the same consumer with the fetch sizes the source uses;
* ``plain-2-threads``: two tuned consumers in two threads, one per partition, which is how
  the source's two tasks read;
* ``spark``: a Structured Streaming query ``readStream.format("minikafka")`` from earliest
  with ``Trigger.AvailableNow`` into the ``noop`` sink, on ``local[2]``; timed from
  ``start()`` to termination (planning, Python workers, Arrow transfer to the JVM included);
  ``spark-micro-batch`` is the part of it spent inside the micro-batch (``triggerExecution``
  of the query progress), i.e. without starting and stopping the query;
* ``spark-kafka`` and ``spark-kafka-micro-batch``: the same query on Spark's own connector,
  ``readStream.format("kafka")`` (spark-sql-kafka-0-10, the jars ``make test`` installs), in the
  same session, alternating with the rest.

Then the end-to-end latency of a micro-batch, for each format: a query runs continuously (default
trigger: the next micro-batch as soon as the previous one ends) from ``latest`` of one topic to
another topic through that format's sink; single records are produced one at a time, each
carrying its send time, and a consumer of the output topic takes the time it arrives.
``--probes`` records per format, alternating between the formats.

Prints Markdown tables of medians (records/s; latency median and p90) and the ratios. By default
a fresh minikafka broker is started in a temporary directory; ``--bootstrap`` uses a running
broker.

    .venv/bin/python bench/pipeline.py [--records 1000000] [--size 100] [--runs 3] [--probes 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# End-to-end latency variants: label -> (format, extra reader options).  The Java consumer inside
# Spark's connector leaves a Fetch long poll parked at the broker (fetch.max.wait.ms, 500 ms by
# default) while the next micro-batch's ListOffsets waits behind it on the same connection (a Kafka
# broker answers each connection's requests in order); the third variant shortens that wait.
LATENCY_VARIANTS = {"minikafka": ("minikafka", {}), "kafka": ("kafka", {}),
                    "kafka, fetch.max.wait.ms=50": ("kafka", {"kafka.fetch.max.wait.ms": "50"})}

TUNED = {"max.partition.fetch.bytes": 8 * 1024 * 1024, "fetch.max.bytes": 64 * 1024 * 1024,
         "queued.max.messages.kbytes": 256 * 1024}


def start_broker(tmp: Path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = open(tmp / "broker.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--host", "127.0.0.1",
                             "--port", "0", "--data-dir", str(tmp / "data")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log)
    # readline() blocks: a timer kills a broker that never becomes ready, which ends the loop.
    watchdog = threading.Timer(30, proc.kill)
    watchdog.start()
    try:
        for line in iter(proc.stdout.readline, b""):
            m = re.search(rb"minikafka ready on (\S+):(\d+)", line)
            if m:
                threading.Thread(target=shutil.copyfileobj, args=(proc.stdout, log),
                                 daemon=True).start()
                return proc, f"127.0.0.1:{int(m.group(2))}"
    finally:
        watchdog.cancel()
    raise SystemExit(f"broker did not become ready: see {tmp / 'broker.log'}")


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "acks": "1"})
    payload = os.urandom(size)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=payload, partition=i & 1)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise SystemExit("produce did not complete")
    return time.perf_counter() - started


def _consume(bootstrap: str, topic: str, partitions, extra: dict, out: list) -> None:
    conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False, "enable.partition.eof": True,
            "isolation.level": "read_uncommitted", **extra}
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    count = size = 0
    pending = set(partitions)
    deadline = time.monotonic() + 600
    while pending and time.monotonic() < deadline:
        for m in consumer.consume(10_000, timeout=1.0):
            err = m.error()
            if err is None:
                count += 1
                size += len(m.value())
            elif err.code() == KafkaError._PARTITION_EOF:
                pending.discard(m.partition())
    consumer.close()
    out.append(count)


def plain_consumer(bootstrap: str, topic: str, expected: int, extra: dict,
                   threads: int = 1) -> float:
    """One consumer for both partitions, or (threads=2) one consumer thread per partition
    (librdkafka releases the GIL while it waits)."""
    counts: list[int] = []
    groups = [(0, 1)] if threads == 1 else [(0,), (1,)]
    workers = [threading.Thread(target=_consume, args=(bootstrap, topic, g, extra, counts))
               for g in groups]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    if sum(counts) != expected:
        raise SystemExit(f"plain consumer read {sum(counts)} records, expected {expected}")
    return elapsed


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from minikafka.pipeline.connector import cached_jars

    jars = cached_jars()
    if not jars:
        raise SystemExit("Spark's Kafka connector is not installed: run "
                         ".venv/bin/python tests/tools/spark_connector.py (make test does)")
    spark = (SparkSession.builder.master("local[2]").appName("bench-pipeline")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from minikafka.pipeline import register

    register(spark)
    return spark


def spark_stream(spark, bootstrap: str, topic: str, expected: int,
                 tmp: Path, fmt: str = "minikafka") -> tuple[float, float]:
    """(seconds from start() to termination, seconds inside the micro-batches that read)."""
    checkpoint = tmp / f"ckpt-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    query = (spark.readStream.format(fmt)
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"spark query failed: {query.exception()}")
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    batch_s = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress
                  if p["numInputRows"]) / 1000
    if os.environ.get("BENCH_VERBOSE"):
        print([p["durationMs"] for p in query.recentProgress], flush=True)
    shutil.rmtree(checkpoint, ignore_errors=True)
    if rows != expected:
        raise SystemExit(f"spark read {rows} records, expected {expected}")
    return elapsed, batch_s


def latency(spark, bootstrap: str, tmp: Path, probes: int) -> dict[str, list[float]]:
    """Seconds from producing one record to reading it from the output topic of a running
    query, per format; the formats' probes alternate."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    queries, consumers, topics = {}, {}, {}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    try:
        for label, (fmt, extra) in LATENCY_VARIANTS.items():
            src, dst = f"lat-in-{fmt}-{uuid.uuid4().hex[:6]}", f"lat-out-{fmt}-{uuid.uuid4().hex[:6]}"
            for name in (src, dst):
                admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            topics[label] = src
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4()}",
                                 "enable.auto.commit": False, "fetch.wait.max.ms": 10})
            consumer.assign([TopicPartition(dst, 0, 0)])
            consumers[label] = consumer
            queries[label] = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                            .option("subscribe", src).option("startingOffsets", "latest")
                            .options(**extra).load()
                            .select("value")
                            .writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                            .option("topic", dst)
                            .option("checkpointLocation", str(tmp / f"lat-{uuid.uuid4().hex[:8]}"))
                            .start())
        # The first micro-batch fixes "latest": wait until each query has run one (bounded).
        deadline = time.monotonic() + 120
        while not all(q.recentProgress for q in queries.values()):
            if time.monotonic() > deadline or any(q.exception() for q in queries.values()):
                raise SystemExit("latency queries did not start")
            time.sleep(0.1)
        out: dict[str, list[float]] = {fmt: [] for fmt in queries}
        for i in range(probes + 2):  # the first two per format warm up (worker start, first fetch)
            for fmt, consumer in consumers.items():
                sent = time.time()
                producer.produce(topics[fmt], value=repr(sent).encode())
                producer.flush(10)
                deadline = time.monotonic() + 60
                got = None
                while got is None and time.monotonic() < deadline:
                    m = consumer.poll(0.05)
                    if m is not None and m.error() is None and float(m.value()) == sent:
                        got = time.time()
                if got is None:
                    raise SystemExit(f"latency probe {i} of {fmt} not seen within 60 s")
                if i >= 2:
                    out[fmt].append(got - sent)
                time.sleep(0.1)
        return out
    finally:
        for q in queries.values():
            q.stop()
        for c in consumers.values():
            c.close()


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", help="use a running broker instead of starting minikafka")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--probes", type=int, default=30, help="latency probes per format")
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    broker = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker, bootstrap = start_broker(tmp)
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        produce_s = produce(bootstrap, topic, args.records, args.size)
        print(f"produced {args.records} x {args.size} B in {produce_s:.1f} s", flush=True)
        spark = spark_session()
        # Warm-up: starts the Python workers (and loads the connector) once so every timed run
        # pays the same.
        spark_stream(spark, bootstrap, topic, args.records, tmp)
        spark_stream(spark, bootstrap, topic, args.records, tmp, fmt="kafka")
        times: dict[str, list[float]] = {"plain": [], "plain-tuned": [], "plain-2-threads": [],
                                         "spark": [], "spark-micro-batch": [],
                                         "spark-kafka": [], "spark-kafka-micro-batch": []}
        for run in range(args.runs):
            times["plain"].append(plain_consumer(bootstrap, topic, args.records, {}))
            times["plain-tuned"].append(plain_consumer(bootstrap, topic, args.records, TUNED))
            times["plain-2-threads"].append(
                plain_consumer(bootstrap, topic, args.records, TUNED, threads=2))
            total, batch = spark_stream(spark, bootstrap, topic, args.records, tmp)
            times["spark"].append(total)
            times["spark-micro-batch"].append(batch)
            total, batch = spark_stream(spark, bootstrap, topic, args.records, tmp, fmt="kafka")
            times["spark-kafka"].append(total)
            times["spark-kafka-micro-batch"].append(batch)
            print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                  flush=True)
        lat = latency(spark, bootstrap, tmp, args.probes) if args.probes else {}
        spark.stop()
        rate = {k: args.records / statistics.median(v) for k, v in times.items()}
        print()
        print(f"`{' '.join([Path(sys.executable).name, 'bench/pipeline.py'] + (argv or sys.argv[1:]))}`"
              f" on {os.cpu_count()} CPUs ({cpu_model()}), {args.records} x {args.size} B, "
              f"2 partitions, local[2], median of {args.runs} runs"
              + ("" if args.bootstrap else ", fresh minikafka broker"))
        print()
        print("| reader | median s | records/s | MB/s |")
        print("|---|---:|---:|---:|")
        for k, v in times.items():
            med = statistics.median(v)
            print(f"| {k} | {med:.2f} | {rate[k]:,.0f} | "
                  f"{rate[k] * args.size / 1e6:.1f} |")
        print()
        print(f"spark source / plain consumer: {rate['spark'] / rate['plain']:.0%}; "
              f"/ plain-tuned: {rate['spark'] / rate['plain-tuned']:.0%}; "
              f"/ plain-2-threads: {rate['spark'] / rate['plain-2-threads']:.0%}")
        print(f"format(\"minikafka\") / format(\"kafka\"): start() to end "
              f"{rate['spark'] / rate['spark-kafka']:.0%}, inside the micro-batch "
              f"{rate['spark-micro-batch'] / rate['spark-kafka-micro-batch']:.0%}")
        if lat:
            print()
            print(f"End-to-end micro-batch latency, produce -> query -> output topic -> consumer, "
                  f"{args.probes} probes per format (ms):")
            print()
            print("| format (reader and sink) | median | p90 | min | max |")
            print("|---|---:|---:|---:|---:|")
            for fmt, values in lat.items():
                ordered = sorted(values)
                p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
                print(f"| {fmt} | {statistics.median(values) * 1000:.0f} | {p90 * 1000:.0f} | "
                      f"{ordered[0] * 1000:.0f} | {ordered[-1] * 1000:.0f} |")
    finally:
        if broker is not None:
            broker.terminate()
            try:
                broker.wait(10)
            except subprocess.TimeoutExpired:
                broker.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
