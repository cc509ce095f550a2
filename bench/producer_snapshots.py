"""Ready time and first idempotent produce after a restart, without and with producer-state
snapshots, on a large data dir.

1. A broker creates the topic (``--partitions`` partitions) and stops; the partition logs are
   then filled through storage's PartitionLog directly (much faster than producing), with
   idempotent batches of ``--records`` records of ``--value-bytes`` bytes (one producer id per
   partition, real increasing sequences), to ``--gb`` GB in all, and closed cleanly.  No
   snapshot files exist yet: this is the state before snapshots (every run before issue 14, or
   the first start after upgrading).
2. "before": start the broker, time until it is ready, then one idempotent producer
   (InitProducerId) produces one batch to every partition, timing each first produce (each one
   rebuilds that partition's producer state from the whole log).  A clean stop writes a
   snapshot per partition (the snapshot-on-clean-shutdown path).
3. "after": the same on the same data dir, now with snapshots.

The data stays in the page cache (the box has the memory): this measures CPU, not disk reads.

    .venv/bin/python bench/producer_snapshots.py [--gb 5] [--partitions 500] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from conftest import BrokerProcess, RawClient  # noqa: E402
from minikafka.protocol.records import build_batch  # noqa: E402
from minikafka.storage import producer_snapshot  # noqa: E402
from minikafka.storage.log import PartitionLog  # noqa: E402

TOPIC = "snap-bench"


def create_topic(work: str, partitions: int) -> None:
    os.makedirs(work, exist_ok=True)
    broker = BrokerProcess(work, {"num.partitions": partitions})
    try:
        client = RawClient(broker.port, timeout=120)
        client.request(3, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True,
                              "include_cluster_authorized_operations": False,
                              "include_topic_authorized_operations": False})
    finally:
        broker.stop()


def fill(data_dir: str, partitions: int, total_bytes: int, records: int, value_bytes: int) -> tuple[int, float]:
    per_partition = total_bytes // partitions
    value = b"x" * value_bytes
    batches = 0
    t0 = time.monotonic()
    # Recent timestamps: with old fixed ones the first broker start rolled every segment
    # (segment.ms) and retention (7 days) then deleted the whole data set.
    ts0 = int(time.time() * 1000) - 3_600_000
    for p in range(partitions):
        plog = PartitionLog(os.path.join(data_dir, f"{TOPIC}-{p}"))
        seq, size = 0, 0
        pid = 100000 + p
        while size < per_partition:
            batch = bytearray(build_batch([(None, value, [], ts0 + seq + i) for i in range(records)],
                                          producer_id=pid, producer_epoch=0, base_sequence=seq))
            plog.append(batch)
            size += len(batch)
            seq += records
            batches += 1
        plog.close()
        if p % 50 == 49:
            print(f"  filled {p + 1}/{partitions} partitions ({time.monotonic() - t0:.0f} s)", flush=True)
    return batches, time.monotonic() - t0


def run(work: str, data_dir: str, partitions: int, label: str) -> dict:
    snapshots = sum(len(producer_snapshot.list_snapshots(os.path.join(data_dir, f"{TOPIC}-{p}")))
                    for p in range(partitions))
    os.makedirs(os.path.join(work, label), exist_ok=True)
    t0 = time.monotonic()
    broker = BrokerProcess(os.path.join(work, label), {}, data_dir=Path(data_dir))
    ready = time.monotonic() - t0
    try:
        client = RawClient(broker.port, timeout=120)
        init = client.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                      "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init["producer_id"], init["producer_epoch"]
        latencies = []
        for p in range(partitions):
            batch = build_batch([(None, b"first", [], int(time.time() * 1000))], producer_id=pid,
                                producer_epoch=epoch, base_sequence=0)
            body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                    "topic_data": [{"name": TOPIC, "partition_data": [{"index": p, "records": batch}]}]}
            t1 = time.perf_counter()
            resp = client.request(0, 9, body)
            latencies.append((time.perf_counter() - t1) * 1e3)
            err = resp["responses"][0]["partition_responses"][0]["error_code"]
            assert err == 0, err
        t2 = time.monotonic()
    finally:
        broker.stop(timeout=300)
    stop = time.monotonic() - t2
    started = re.findall(r"started in (\d+) ms", broker.read_log())
    latencies.sort()
    return {"label": label, "snapshots_at_start": snapshots, "ready_s": ready,
            "started_ms": int(started[-1]) if started else -1,
            "first_produce_median_ms": statistics.median(latencies),
            "first_produce_p90_ms": latencies[int(len(latencies) * 0.9)], "first_produce_max_ms": latencies[-1],
            "stop_s": stop}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=5.0)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--records", type=int, default=4, help="records per batch")
    parser.add_argument("--value-bytes", type=int, default=400)
    parser.add_argument("--keep", default=None, help="work directory to keep (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true", help="measure again on the kept data dir (--keep)")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="snapbench-")
    data_dir = os.path.join(work, "data")
    try:
        if args.reuse:
            for label in ("before", "after"):
                shutil.rmtree(os.path.join(work, label), ignore_errors=True)
            r = run(work, data_dir, args.partitions, "again")
            print(f"again   snapshots at start {r['snapshots_at_start']:4d}: ready {r['ready_s']:.2f} s "
                  f"(broker's own start {r['started_ms']} ms), first produce median "
                  f"{r['first_produce_median_ms']:.1f} ms, p90 {r['first_produce_p90_ms']:.1f} ms, "
                  f"max {r['first_produce_max_ms']:.1f} ms; clean stop {r['stop_s']:.2f} s")
            return
        t0 = time.monotonic()
        create_topic(os.path.join(work, "create"), args.partitions)
        shutil.move(os.path.join(work, "create", "data"), data_dir)
        batches, fill_s = fill(data_dir, args.partitions, int(args.gb * (1 << 30)), args.records, args.value_bytes)
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(data_dir) for f in fs)
        print(f"data dir: {size / (1 << 30):.2f} GiB, {args.partitions} partitions, {batches} batches "
              f"({batches // args.partitions} per partition), generated in {fill_s:.0f} s "
              f"(total setup {time.monotonic() - t0:.0f} s)")
        for label in ("before", "after"):
            r = run(work, data_dir, args.partitions, label)
            print(f"{label:7s} snapshots at start {r['snapshots_at_start']:4d}: ready {r['ready_s']:.2f} s "
                  f"(process start to ready line; the broker's own start {r['started_ms']} ms), first produce per partition median "
                  f"{r['first_produce_median_ms']:.1f} ms, p90 {r['first_produce_p90_ms']:.1f} ms, "
                  f"max {r['first_produce_max_ms']:.1f} ms; clean stop {r['stop_s']:.2f} s", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
