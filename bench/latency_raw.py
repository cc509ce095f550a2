"""The broker's part of produce-to-consume latency, without a client library (issue 24).

A parked Fetch v16 (sessionless, by topic id, max_wait 500 ms, min_bytes 1: what librdkafka 2.16
sends) on one socket, then a Produce v10 acks=-1 of one 100-byte record on another; the time from
the produce's ``send`` to the fetch response's arrival in a blocking ``recv``.  ``--cycles`` such
cycles per round, at most ``--rate`` per second; the broker (``python -m minikafka serve``) is a
child process, with ``--baseline-python`` rounds alternate between this tree's broker and another
checkout's.  ``--pin`` puts the broker on CPU 1 and this process on CPU 0 (``taskset``).

    .venv/bin/python bench/latency_raw.py --rounds 5 --pin --baseline-python /tmp/perf-base/.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minikafka.protocol import codec
from minikafka.protocol.records import build_batch

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(r"minikafka ready on (\S+):(\d+)")


def start(python: str, cwd: str, data: str, pin: bool, extra_env: dict | None = None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MINIKAFKA_")}
    env.update(extra_env or {})
    cmd = [python, "-m", "minikafka", "serve", "--port", "0", "--data-dir", data, "--log-level", "WARNING"]
    if pin:
        cmd = ["taskset", "-c", "1"] + cmd
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY.search(proc.stdout.readline())
        if m:
            return proc, (m.group(1), int(m.group(2)))
    raise RuntimeError("the broker did not start")


class Conn:
    def __init__(self, addr):
        self.sock = socket.create_connection(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def send(self, api_key: int, version: int, body: dict) -> int:
        self.cid += 1
        self.sock.sendall(codec.encode_request(api_key, version, self.cid, "rdkafka", body))
        return self.cid

    def recv(self, api_key: int, version: int) -> dict:
        size = struct.unpack(">i", self._exact(4))[0]
        return codec.decode_response(api_key, version, self._exact(size))[1]

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return self.recv(api_key, version)


def one_round(addr, cycles: int, rate: int, topic: str = "latency",
              sent_at: list[float] | None = None) -> list[float]:
    """Latencies of one round; ``sent_at`` (if given) gets each sample's (key, start): the record's
    first 8 bytes (a perf_counter time taken before it was encoded) and the time its send began."""
    admin = Conn(addr)
    admin.call(19, 4, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                   "assignments": [], "configs": []}], "timeout_ms": 30000,
                       "validate_only": False})
    meta = admin.call(3, 12, {"topics": [{"topic_id": None, "name": topic}],
                              "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})
    topic_id = meta["topics"][0]["topic_id"]
    fetcher, producer = Conn(addr), Conn(addr)
    pad = bytes(92)
    fetch = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
             "forgotten_topics_data": [], "topics": [{"topic_id": topic_id, "partitions": [
                 {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                  "log_start_offset": -1, "partition_max_bytes": 1048576}]}]}
    samples = []
    interval = 1.0 / rate
    next_offset = 0
    for i in range(cycles + 50):
        started = time.perf_counter()
        fetch["topics"][0]["partitions"][0]["fetch_offset"] = next_offset
        fetcher.send(1, 16, fetch)
        time.sleep(0.0003)  # let the fetch park
        key = time.perf_counter()  # the record's first 8 bytes (bench/latency_wire.py joins on it)
        batch = build_batch([(None, struct.pack(">d", key) + pad, [], int(time.time() * 1000))])
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
        data = codec.encode_request(0, 10, i + 1, "rdkafka", body)
        t0 = time.perf_counter()
        producer.sock.sendall(data)
        response = fetcher.recv(1, 16)
        t1 = time.perf_counter()
        producer.recv(0, 10)
        part = response["responses"][0]["partitions"][0]
        if part["error_code"] or not part["records"]:
            raise RuntimeError(f"unexpected fetch answer {part}")
        next_offset += 1
        if i >= 50:  # warm-up cycles left out
            samples.append(t1 - t0)
            if sent_at is not None:
                sent_at.append((key, t0))
        rest = interval - (time.perf_counter() - started)
        if rest > 0:
            time.sleep(rest)
    for c in (admin, fetcher, producer):
        c.sock.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--pin", action="store_true")
    parser.add_argument("--baseline-python")
    parser.add_argument("--bootstrap", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="also measure a broker already running there (a topic per round is created)")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {0})
    trees = {"this tree": (sys.executable, str(ROOT))}
    if args.baseline_python:
        trees["baseline"] = (args.baseline_python, str(Path(args.baseline_python).absolute().parents[2]))
    external = {}
    for b in args.bootstrap:
        name, _, hostport = b.rpartition("=")
        host, _, port = hostport.rpartition(":")
        external[name or hostport] = (host, int(port))
    results: dict[str, list[tuple[float, float, float]]] = {t: [] for t in [*trees, *external]}
    for n in range(args.rounds):
        for tree in results:
            if tree in external:
                samples = sorted(one_round(external[tree], args.cycles, args.rate, f"latency-raw-{os.getpid()}-{n}"))
            else:
                python, cwd = trees[tree]
                with tempfile.TemporaryDirectory(prefix="minikafka-latency-") as data:
                    proc, addr = start(python, cwd, data, args.pin)
                    try:
                        samples = sorted(one_round(addr, args.cycles, args.rate))
                    finally:
                        proc.terminate()
                        proc.wait(10)
            n = len(samples)
            row = (samples[n // 2] * 1e6, samples[int(n * 0.9)] * 1e6, samples[int(n * 0.99)] * 1e6)
            results[tree].append(row)
            print(f"{tree:9s} round: p50 {row[0]:.0f} us, p90 {row[1]:.0f} us, p99 {row[2]:.0f} us, n={n}, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for tree, rows in results.items():
        print(f"{tree:9s} median of rounds: p50 {statistics.median(r[0] for r in rows):.0f} us, "
              f"p90 {statistics.median(r[1] for r in rows):.0f} us, p99 {statistics.median(r[2] for r in rows):.0f} us")


if __name__ == "__main__":
    main()
