"""Produce-to-consume latency at a steady rate (issue 24: p50 <= 0.15 ms at 2,000 msg/s, acks=all).

One broker (``python -m minikafka serve``, a free port, a fresh data dir) per round; a librdkafka
producer (acks=all, linger.ms=0) sends 100-byte records at ``--rate`` per second for
``--seconds``, each carrying its send time (perf_counter, same process); a librdkafka consumer in
a group (its default fetch.wait.max.ms, so fetches park on the broker) polls them.  Latency is
the time from ``produce()`` to the consumer's ``poll()`` returning the record.  With
``--baseline-python`` rounds alternate between this tree's broker and another checkout's, each
started from its own checkout.

    .venv/bin/python bench/latency.py --rounds 3 --baseline-python /tmp/base/.venv/bin/python
    .venv/bin/python bench/latency.py --rounds 5 --seconds 4 --pin --baseline-python /tmp/perf-base/.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(r"minikafka ready on (\S+):(\d+)")


def start(python: str, cwd: str, data: str, pin: bool = False):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MINIKAFKA_")}
    cmd = [python, "-m", "minikafka", "serve", "--port", "0", "--data-dir", data, "--log-level", "WARNING"]
    if pin:
        cmd = ["taskset", "-c", "1"] + cmd
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY.search(proc.stdout.readline())
        if m:
            return proc, f"{m.group(1)}:{m.group(2)}"
    raise RuntimeError("the broker did not start")


def one_round(bootstrap: str, rate: int, seconds: float, topic: str = "latency",
              sent_at: list[float] | None = None) -> list[float]:
    """Latencies of one round; ``sent_at`` (if given) gets each sample's (key, start): the send
    time, which is also the record's first 8 bytes, twice."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "latest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(topic, b"warm")
    producer.flush(10)
    samples: list[float] = []
    total = int(rate * seconds)
    done = threading.Event()

    def consume() -> None:
        while len(samples) < total and not done.is_set():
            msg = consumer.poll(0.5)
            if msg is None or msg.error() or len(msg.value()) != 100:
                continue
            t_send = struct.unpack_from(">d", msg.value())[0]
            samples.append(time.perf_counter() - t_send)
            if sent_at is not None:
                sent_at.append((t_send, t_send))

    reader = threading.Thread(target=consume)
    reader.start()
    interval = 1.0 / rate
    next_at = time.perf_counter()
    pad = bytes(92)
    for _ in range(total):
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        producer.produce(topic, struct.pack(">d", time.perf_counter()) + pad)
        producer.poll(0)
        next_at += interval
    producer.flush(10)
    reader.join(10)
    done.set()
    consumer.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--baseline-python")
    parser.add_argument("--pin", action="store_true", help="broker on CPU 1, the clients on CPU 0 (taskset)")
    parser.add_argument("--bootstrap", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="also measure a broker already running there (e.g. another implementation); "
                             "a topic of its own is created per round")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {0})
    trees = {"this tree": (sys.executable, str(ROOT))}
    if args.baseline_python:
        trees["baseline"] = (args.baseline_python, str(Path(args.baseline_python).absolute().parents[2]))
    external = dict(b.split("=", 1) if "=" in b else (b, b) for b in args.bootstrap)
    results: dict[str, list[tuple[float, float]]] = {t: [] for t in [*trees, *external]}
    for n in range(args.rounds):
        for tree in results:
            if tree in external:
                # One topic per round: a running broker keeps the last round's records.
                samples = sorted(one_round(external[tree], args.rate, args.seconds, f"latency-{os.getpid()}-{n}"))
            else:
                python, cwd = trees[tree]
                with tempfile.TemporaryDirectory(prefix="minikafka-latency-") as data:
                    proc, bootstrap = start(python, cwd, data, args.pin)
                    try:
                        samples = sorted(one_round(bootstrap, args.rate, args.seconds))
                    finally:
                        proc.terminate()
                        proc.wait(10)
            p50 = samples[len(samples) // 2] * 1000
            p99 = samples[int(len(samples) * 0.99)] * 1000
            results[tree].append((p50, p99))
            print(f"{tree:9s} round: p50 {p50:.3f} ms, p99 {p99:.3f} ms, n={len(samples)}, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for tree, rows in results.items():
        print(f"{tree:9s} median of rounds: p50 {statistics.median(r[0] for r in rows):.3f} ms, "
              f"p99 {statistics.median(r[1] for r in rows):.3f} ms")


if __name__ == "__main__":
    main()
