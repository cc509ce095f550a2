"""Transactions: transactional produce throughput, commit latency, read_committed consume rate.

librdkafka (confluent-kafka) is the load generator against one fresh minikafka broker on a free
loopback port.  In each run, side by side on the same broker:

* produce MB/s of the same records, sent as "batches" of --batch-records records each followed by
  flush() (so every mode pays the same round trips), non-transactional (idempotent producer,
  acks=all) and transactional with 1, 10 and 100 batches per transaction;
* commit latency: commit_transaction() of a transaction whose records are already acknowledged
  (EndTxn -> Prepare record -> markers on every partition -> Complete, all before the answer),
  p50 and p99 over --commits transactions touching --commit-partitions partitions;
* consume records/s of the same transactional topic (one aborted transaction in ten) with
  read_committed and read_uncommitted.

    .venv/bin/python bench/transactions.py --runs 3
    .venv/bin/python bench/transactions.py --runs 1 --scale 0.1      # quick look

Medians over the runs are printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, workdir: Path):
        self.port = free_port()
        self.log = open(workdir / "broker.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minikafka", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(workdir / "data"), "--override", "transaction.state.log.num.partitions=5",
             "--override", "offsets.topic.num.partitions=5"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("broker did not start")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, batches: int, batch_records: int, size: int,
            per_txn: int | None, tid: str) -> float:
    """Seconds to send ``batches`` batches; per_txn=None: not transactional."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
            "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20}
    if per_txn is not None:
        conf["transactional.id"] = tid
    p = Producer(conf)
    if per_txn is not None:
        p.init_transactions(30)
    value = os.urandom(size)
    # Warm up outside the clock: connections, metadata, producer id, one record per partition.
    if per_txn is not None:
        p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce(topic, value, partition=part)
    p.flush(60)
    if per_txn is not None:
        p.commit_transaction(60)
    started = time.perf_counter()
    for b in range(batches):
        if per_txn is not None and b % per_txn == 0:
            p.begin_transaction()
        for i in range(batch_records):
            p.produce(topic, value, partition=(b + i) % PARTITIONS)
        p.flush(60)
        if per_txn is not None and (b % per_txn == per_txn - 1 or b == batches - 1):
            p.commit_transaction(60)
    elapsed = time.perf_counter() - started
    return elapsed


def commit_latencies(bootstrap: str, topic: str, commits: int, partitions: int) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-latency", "linger.ms": 0})
    p.init_transactions(30)
    out = []
    for n in range(commits + 5):
        p.begin_transaction()
        for part in range(partitions):
            p.produce(topic, b"x" * 100, partition=part)
        p.flush(30)
        started = time.perf_counter()
        p.commit_transaction(30)
        if n >= 5:  # the first ones warm connections up
            out.append((time.perf_counter() - started) * 1000)
    return out


def fill_for_consume(bootstrap: str, topic: str, txns: int, per_txn: int, size: int) -> int:
    """Transactions of per_txn records, one in ten aborted; returns the committed record count."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-fill", "linger.ms": 5,
                  "batch.size": 1 << 20})
    p.init_transactions(30)
    value = os.urandom(size)
    committed = 0
    for t in range(txns):
        p.begin_transaction()
        for i in range(per_txn):
            p.produce(topic, value, partition=i % PARTITIONS)
        p.flush(60)
        if t % 10 == 9:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += per_txn
    return committed


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + isolation, "isolation.level": isolation,
                  "enable.partition.eof": True, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen, eof = 0, set()
    started = time.perf_counter()
    while len(eof) < PARTITIONS:
        for m in c.consume(10000, 1.0):
            if m.error():
                if m.error().code() == -191:
                    eof.add(m.partition())
                continue
            seen += 1
    elapsed = time.perf_counter() - started
    c.close()
    if seen != expected:
        raise AssertionError(f"{isolation}: {seen} records, expected {expected}")
    return elapsed


def one_run(args, run: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        broker = Broker(Path(tmp))
        try:
            bs = broker.bootstrap
            batches = max(100, int(args.batches * args.scale))
            topics = [f"p-{mode}" for mode in ("plain", "t1", "t10", "t100")] + ["lat", "cons"]
            create_topics(bs, topics)
            mb = batches * args.batch_records * args.size / 1e6
            out = {}
            # alternate the order between runs so drift on the shared machine hits every mode
            modes = [("plain", None), ("t1", 1), ("t10", 10), ("t100", 100)]
            if run % 2:
                modes.reverse()
            for name, per_txn in modes:
                secs = produce(bs, f"p-{name}", batches, args.batch_records, args.size, per_txn, f"bench-{name}")
                out[f"produce_{name}_mbs"] = mb / secs
            lat = commit_latencies(bs, "lat", max(20, int(args.commits * args.scale)), args.commit_partitions)
            lat.sort()
            out["commit_p50_ms"] = statistics.median(lat)
            out["commit_p99_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
            txns = max(20, int(args.consume_txns * args.scale))
            committed = fill_for_consume(bs, "cons", txns, args.consume_per_txn, args.size)
            total = txns * args.consume_per_txn
            order = ["read_committed", "read_uncommitted"] if run % 2 == 0 else ["read_uncommitted", "read_committed"]
            for iso in order:
                secs = consume(bs, "cons", iso, committed if iso == "read_committed" else total)
                out[f"consume_{iso}_rps"] = (committed if iso == "read_committed" else total) / secs
            return out
        finally:
            broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--batches", type=int, default=1000)
    ap.add_argument("--batch-records", type=int, default=300)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--commit-partitions", type=int, default=3)
    ap.add_argument("--consume-txns", type=int, default=500)
    ap.add_argument("--consume-per-txn", type=int, default=1000)
    args = ap.parse_args()
    results = [one_run(args, r) for r in range(args.runs)]
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"machine: {platform.machine()} nproc={os.cpu_count()} python {platform.python_version()}; "
          f"runs={args.runs} scale={args.scale}")
    print("| measure | median |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:,.2f} |")
    print(f"\ntxn(100 batches)/non-txn produce: {med['produce_t100_mbs'] / med['produce_plain_mbs']:.0%}; "
          f"txn(10): {med['produce_t10_mbs'] / med['produce_plain_mbs']:.0%}; "
          f"txn(1): {med['produce_t1_mbs'] / med['produce_plain_mbs']:.0%}")
    print(f"read_committed/read_uncommitted consume: "
          f"{med['consume_read_committed_rps'] / med['consume_read_uncommitted_rps']:.0%}")
    for r in results:
        print({k: round(v, 2) for k, v in r.items()})


if __name__ == "__main__":
    main()
