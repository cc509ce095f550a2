"""The pipeline job: consume JSON events, total them per key and time window, produce the totals.

Input records (topic ``--input``) carry JSON values ``{"key": "sensor-1", "value": 2.5,
"ts": 1732200000000}`` (``ts`` in epoch milliseconds; when it is missing the record's Kafka
timestamp is used; the record key is used when ``key`` is missing). Events are grouped into
tumbling windows of ``--window`` per key, and every micro-batch writes the windows it changed
to ``--output`` as ``{"key", "window_start", "window_end", "count", "total"}`` (update output
mode), keyed by the event key. The last record for a (key, window) therefore holds its current
total. Late events older than ``--watermark`` behind the newest event are dropped, which bounds
the state kept in the checkpoint.

    minikafka-pipeline --bootstrap 127.0.0.1:9092 --input events --output totals \\
        --checkpoint /tmp/minikafka-pipeline [--available-now]

The offsets read and the aggregation state live in ``--checkpoint``: a restarted job continues
exactly after the last completed micro-batch. Output is at-least-once (a micro-batch that was
interrupted between writing and committing is written again on restart, with the same totals).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from minikafka.pipeline.options import FORMAT_NAME

EVENT_SCHEMA = "key STRING, value DOUBLE, ts LONG"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="minikafka-pipeline",
        description="Consume JSON events from Kafka, aggregate them per key and time window "
                    "with Spark Structured Streaming, and produce JSON totals to Kafka.")
    p.add_argument("--bootstrap", default="127.0.0.1:9092",
                   help="kafka.bootstrap.servers (default: %(default)s)")
    p.add_argument("--input", default="events", help="input topic(s), comma separated")
    p.add_argument("--output", default="totals", help="output topic")
    p.add_argument("--checkpoint", required=True,
                   help="checkpoint directory (offsets and aggregation state)")
    p.add_argument("--window", default="1 minute", help="tumbling window length")
    p.add_argument("--watermark", default="10 minutes",
                   help="how late an event may arrive and still be counted")
    p.add_argument("--starting-offsets", default="earliest",
                   help="startingOffsets for a new checkpoint (earliest, latest or JSON)")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--trigger-interval", default="5 seconds",
                   help="micro-batch interval when not --available-now")
    p.add_argument("--available-now", action="store_true",
                   help="process what is in the input topic now, then stop")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop a continuous run after this many seconds")
    p.add_argument("--master", default=None,
                   help="Spark master when not launched by spark-submit (default local[2])")
    p.add_argument("--shuffle-partitions", type=int, default=2,
                   help="spark.sql.shuffle.partitions (fixed in the checkpoint on first run)")
    p.add_argument("--format", default=FORMAT_NAME,
                   help="Kafka data source: minikafka (this package) or kafka (Spark's "
                        "spark-sql-kafka-0-10 connector; without spark-submit the job adds its "
                        "jars: MINIKAFKA_SPARK_JARS, the venv's cache, else spark.jars.packages)")
    p.add_argument("--kafka-option", action="append", default=[], metavar="NAME=VALUE",
                   help="extra kafka.* client setting for source and sink (repeatable)")
    p.add_argument("--exactly-once", action="store_true",
                   help="write each micro-batch in Kafka transactions, so a replayed micro-batch "
                        "is not written twice (read the output with read_committed)")
    p.add_argument("--query-name", default="minikafka-pipeline",
                   help="query name; with --exactly-once also the base of the transactional ids")
    return p.parse_args(argv)


def _prepare_local_env() -> None:
    # Python workers are forked by the JVM with its environment: give them this interpreter,
    # and the zip this package came from when it was shipped as one (pipeline/pack.py).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    container = Path(__file__).resolve().parents[2]
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if container.is_file() and str(container) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(container)] + [p for p in paths if p])


def get_session(args: argparse.Namespace):
    from pyspark.sql import SparkSession

    _prepare_local_env()
    builder = (SparkSession.builder.appName("minikafka-pipeline")
               .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions)))
    if args.master:
        builder = builder.master(args.master)
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Not launched by spark-submit (which passes its JVM's gateway): a local run, without
        # the web UI and progress bars a one-command job does not need.
        if not args.master:
            builder = builder.master("local[2]")
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
        if args.format == "kafka":
            # Spark's connector is not in the pyspark wheel: the jars make test installed (or
            # MINIKAFKA_SPARK_JARS), else --packages' coordinate for this pyspark.
            from minikafka.pipeline.connector import session_config

            for name, value in session_config().items():
                builder = builder.config(name, value)
    return builder.getOrCreate()


def _kafka_options(args: argparse.Namespace) -> dict[str, str]:
    opts = {"kafka.bootstrap.servers": args.bootstrap}
    for item in args.kafka_option:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--kafka-option expects NAME=VALUE, got {item!r}")
        opts["kafka." + name.removeprefix("kafka.")] = value
    return opts


def build_query(spark, args: argparse.Namespace):
    """Start the streaming query and return it (a ``StreamingQuery``)."""
    from pyspark.sql import functions as F

    if args.format == FORMAT_NAME:
        from minikafka.pipeline.source import register

        register(spark)
    kafka = _kafka_options(args)
    reader = (spark.readStream.format(args.format).options(**kafka)
              .option("subscribe", args.input)
              .option("startingOffsets", args.starting_offsets))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    raw = reader.load()
    events = (raw
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
                      F.col("key").cast("string").alias("record_key"),
                      F.col("timestamp").alias("record_ts"))
              .select(F.coalesce(F.col("e.key"), F.col("record_key")).alias("key"),
                      F.col("e.value").alias("value"),
                      F.coalesce(F.timestamp_millis(F.col("e.ts")),
                                 F.col("record_ts")).alias("event_time"))
              # Unparseable records carry no key or value: they are dropped, not counted.
              .where(F.col("key").isNotNull() & F.col("value").isNotNull()))
    totals = (events
              .withWatermark("event_time", args.watermark)
              .groupBy(F.col("key"), F.window("event_time", args.window).alias("w"))
              .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("total")))
    out = totals.select(
        F.col("key").cast("binary").alias("key"),
        F.to_json(F.struct(
            F.col("key"),
            F.date_format(F.col("w.start"), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("window_start"),
            F.date_format(F.col("w.end"), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias("window_end"),
            F.col("count"),
            F.col("total"),
        )).alias("value"))
    fmt = args.format

    def write_totals(batch, batch_id):
        # Python streaming sinks accept only append/complete output modes; update mode (only
        # the windows a micro-batch changed) goes through foreachBatch and the batch writer.
        # At-least-once: a replayed micro-batch rewrites the same totals.
        (batch.write.format(fmt).options(**kafka).option("topic", args.output)
         .mode("append").save())

    def write_totals_once(batch, batch_id):
        from minikafka.pipeline.eos import write_batch

        client = {k.removeprefix("kafka."): v for k, v in kafka.items()}
        write_batch(batch, client=client, topic=args.output, query=args.query_name, batch_id=batch_id)

    writer = (out.writeStream.foreachBatch(write_totals_once if args.exactly_once else write_totals)
              .option("checkpointLocation", args.checkpoint)
              .outputMode("update")
              .queryName(args.query_name))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger_interval)
    return writer.start()


def run(spark, args: argparse.Namespace) -> int:
    """Run the job to completion (available-now) or until ``--timeout``; returns rows read."""
    query = build_query(spark, args)
    mode = "until the input is drained" if args.available_now else \
        f"every {args.trigger_interval} until stopped (Ctrl-C)"
    print(f"minikafka-pipeline: {args.input!r} -> {args.output!r} on {args.bootstrap}, "
          f"checkpoint {args.checkpoint}, running {mode}", flush=True)
    try:
        if args.available_now:
            query.awaitTermination()
        elif args.timeout is not None:
            query.awaitTermination(args.timeout)
        else:
            query.awaitTermination()
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    return sum(p.get("numInputRows", 0) for p in query.recentProgress)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        # PySpark is the `spark` extra, not a dependency of the broker: say so instead of a traceback.
        print("minikafka-pipeline needs PySpark: pip install 'minikafka[spark]'", file=sys.stderr)
        return 2

    existing = SparkSession.getActiveSession()
    spark = existing or get_session(args)
    if existing is None:
        spark.sparkContext.setLogLevel("WARN")
    try:
        rows = run(spark, args)
        print(f"minikafka-pipeline: read {rows} input records from {args.input!r}, "
              f"totals in {args.output!r}, checkpoint {args.checkpoint}", flush=True)
    except KeyboardInterrupt:
        return 130
    finally:
        if existing is None:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
