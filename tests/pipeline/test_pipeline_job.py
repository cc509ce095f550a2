"""The pipeline job end to end: events in, windowed totals out, stop and restart from the
checkpoint."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import defaultdict

import pytest

from minikafka.pipeline import job

BASE_MS = 1_700_000_040_000  # on a minute boundary, so the 1-minute windows are predictable


def events(start: int, count: int) -> list[dict]:
    # Seven seconds apart: the events of one run span two 1-minute windows and three keys.
    return [{"key": f"k{i % 3}", "value": i + 0.5, "ts": BASE_MS + i * 7000}
            for i in range(start, start + count)]


def expected_totals(evs) -> dict:
    out: dict = defaultdict(lambda: [0, 0.0])
    for e in evs:
        start = dt.datetime.fromtimestamp((e["ts"] // 60000) * 60, dt.timezone.utc)
        slot = out[(e["key"], start.strftime("%Y-%m-%dT%H:%M:%S.000Z"))]
        slot[0] += 1
        slot[1] += e["value"]
    return {k: (c, t) for k, (c, t) in out.items()}


def latest_totals(kafka, topic) -> dict:
    """The newest total per (key, window): records of one key share a partition, in order."""
    out = {}
    for m in sorted(kafka.read_all(topic), key=lambda m: (m.partition(), m.offset())):
        doc = json.loads(m.value())
        assert m.key() == doc["key"].encode()
        out[(doc["key"], doc["window_start"])] = (doc["count"], doc["total"])
    return out


def test_parse_args_defaults_and_options():
    args = job.parse_args(["--checkpoint", "/tmp/x"])
    assert (args.bootstrap, args.input, args.output) == ("127.0.0.1:9092", "events", "totals")
    assert not args.available_now and args.format == "minikafka"
    args = job.parse_args(["--bootstrap", "h:1", "--input", "a", "--output", "b",
                           "--checkpoint", "c", "--available-now", "--kafka-option",
                           "linger.ms=1"])
    assert job._kafka_options(args) == {"kafka.bootstrap.servers": "h:1",
                                        "kafka.linger.ms": "1"}
    with pytest.raises(SystemExit):
        job.parse_args([])  # --checkpoint is required


@pytest.mark.spark
@pytest.mark.integration
def test_stop_produce_more_restart_processes_only_new_records(spark, kafka, tmp_path):
    src = kafka.topic("events", 2)
    dst = kafka.topic("totals", 2)
    checkpoint = str(tmp_path / "checkpoint")
    argv = ["--bootstrap", kafka.bootstrap, "--input", src, "--output", dst,
            "--checkpoint", checkpoint, "--trigger-interval", "1 second"]

    first = events(0, 12)
    kafka.produce_json(src, first)
    # A continuous run, stopped once it has processed everything that was there.
    query = job.build_query(spark, job.parse_args(argv))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            if sum(p["numInputRows"] for p in query.recentProgress) >= len(first):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"continuous run did not process {len(first)} records in time")
    finally:
        query.stop()
    assert sum(p["numInputRows"] for p in query.recentProgress) == len(first)
    assert latest_totals(kafka, dst) == expected_totals(first)

    # A malformed record is skipped, not counted, and does not stop the job.
    kafka.produce(src, [(b"junk", b"not json", 0, None)])
    second = events(12, 9)
    kafka.produce_json(src, second)
    rows = job.run(spark, job.parse_args(argv + ["--available-now"]))
    assert rows == len(second) + 1  # only what arrived after the stop
    assert latest_totals(kafka, dst) == expected_totals(first + second)

    # Nothing new: a third run reads nothing and changes no total.
    before = len(kafka.read_all(dst))
    assert job.main(argv + ["--available-now"]) == 0
    assert len(kafka.read_all(dst)) == before


@pytest.mark.spark
@pytest.mark.integration
def test_format_kafka_writes_the_same_totals_as_format_minikafka(spark_kafka, kafka, tmp_path):
    """The job on Spark's own connector (reader and sink), and on the connector's reader with the
    job's transactional sink, writes exactly what it writes on this package's source."""
    src = kafka.topic("events-cmp", 2)
    evs = events(0, 30)
    kafka.produce_json(src, evs)
    kafka.produce(src, [(b"junk", b"not json", 1, None)])
    runs = {"minikafka": [], "kafka": ["--format", "kafka"],
            "kafka-exactly-once": ["--format", "kafka", "--exactly-once", "--query-name", "cmp-" + src]}
    outputs = {}
    for name, extra in runs.items():
        dst = kafka.topic("totals-" + name, 2)
        argv = ["--bootstrap", kafka.bootstrap, "--input", src, "--output", dst,
                "--checkpoint", str(tmp_path / name), "--available-now", *extra]
        assert job.run(spark_kafka, job.parse_args(argv)) == len(evs) + 1
        records = kafka.read_all(dst)
        outputs[name] = sorted((m.partition(), m.key(), m.value()) for m in records)
        assert latest_totals(kafka, dst) == expected_totals(evs)
    assert outputs["kafka"] == outputs["minikafka"]
    assert outputs["kafka-exactly-once"] == outputs["minikafka"]
