"""Transactions in the pipeline: the source with kafka.isolation.level=read_committed, and the
job's exactly-once sink surviving a kill -9 in the middle of a micro-batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from test_pipeline_job import expected_totals, events

pytestmark = [pytest.mark.spark, pytest.mark.integration]

WAIT_S = 30


def txn_producer(bootstrap, tid):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(WAIT_S)
    return p


def test_source_read_committed_skips_aborted_records_and_stops_at_the_lso(spark, kafka):
    topic = kafka.topic("txn-src", partitions=1)
    p = txn_producer(kafka.bootstrap, "src-" + topic)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"c%d" % i, partition=0)
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"aborted%d" % i, partition=0)
    p.flush(WAIT_S)
    p.abort_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"c3", partition=0)
    p.commit_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)  # above the LSO until it commits
    p.flush(WAIT_S)

    def read(isolation):
        df = (spark.read.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", topic).option("kafka.isolation.level", isolation).load())
        return [r.value for r in df.orderBy("offset").collect()]

    assert read("read_committed") == [b"c0", b"c1", b"c2", b"c3"]
    assert read("read_uncommitted") == [b"c0", b"c1", b"c2", b"aborted0", b"aborted1", b"aborted2", b"c3", b"open"]
    p.commit_transaction(WAIT_S)
    assert read("read_committed") == [b"c0", b"c1", b"c2", b"c3", b"open"]


def read_committed(bootstrap, topic, partitions=2):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-check", "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof = [], set()
        import time

        deadline = time.monotonic() + WAIT_S
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == -191:
                        eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                out.append(json.loads(m.value()))
        assert len(eof) == partitions
        return out
    finally:
        c.close()


def run_job(argv, env_extra=None, timeout=240):
    env = dict(os.environ)
    env.update(env_extra or {})
    proc = subprocess.Popen([sys.executable, "-m", "minikafka.pipeline.job", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, out.decode(errors="replace")


def test_exactly_once_job_killed_in_the_middle_of_a_micro_batch(kafka, tmp_path):
    src = kafka.topic("eos-in", 2)
    dst = kafka.topic("eos-out", 2)
    evs = events(0, 24)
    kafka.produce_json(src, evs)
    argv = ["--bootstrap", kafka.bootstrap, "--input", src, "--output", dst, "--checkpoint",
            str(tmp_path / "ckpt"), "--available-now", "--max-offsets-per-trigger", "8", "--exactly-once",
            "--query-name", "eos-" + src]
    # Micro-batch 1 dies right after its first Spark partition committed its transaction.
    code, out = run_job(argv, {"MINIKAFKA_EOS_TEST_KILL_BATCH": "1"})
    assert code == -signal.SIGKILL, out[-3000:]
    partial = read_committed(kafka.bootstrap, dst)
    code, out = run_job(argv)
    assert code == 0, out[-3000:]
    results = read_committed(kafka.bootstrap, dst)
    assert len(results) > len(partial) > 0
    # Within a window the count only grows from one micro-batch to the next, so a (key, window,
    # count) seen twice would be a micro-batch written twice.
    seen = Counter((r["key"], r["window_start"], r["count"]) for r in results)
    assert [k for k, n in seen.items() if n > 1] == []
    latest = {}
    for r in results:
        key = (r["key"], r["window_start"])
        if r["count"] >= latest.get(key, (0, 0.0))[0]:
            latest[key] = (r["count"], r["total"])
    assert latest == expected_totals(evs)
