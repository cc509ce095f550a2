"""The broker's own time from a produce's arrival to the parked fetch's answer (issue 24).

In one process, on uvloop: a ``Broker`` (its real controller, storage in a temp dir, handlers,
codec) and two ``KafkaConnection`` objects on in-memory transports.  Per cycle, a Fetch v16
(what librdkafka 2.16 sends: sessionless, by topic id, max_wait 500 ms, min_bytes 1) is fed to one
connection and left to park; then a Produce v10 acks=-1 of one 100-byte record is fed to the
other, and the time is taken from just before its bytes reach ``buffer_updated`` to the fetch
connection's ``writelines``.  This is the broker's Python path only (no sockets, no kernel
wake-ups), so it can be compared on a loaded machine: medians and minima of several thousand
cycles.  ``--baseline-python`` runs the same in another checkout (this file is run by that
interpreter from that checkout, so it imports that tree's broker).

    .venv/bin/python bench/latency_path.py --rounds 5 --baseline-python /tmp/perf-base/.venv/bin/python
    .venv/bin/python bench/latency_path.py --profile        # cProfile of the cycles, this tree
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Transport(asyncio.Transport):
    def __init__(self, on_write=None):
        super().__init__()
        self.on_write = on_write
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def write(self, data):
        if self.on_write is not None:
            self.on_write()

    def writelines(self, chunks):
        if self.on_write is not None:
            self.on_write()

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed

    def set_write_buffer_limits(self, high=None, low=None):
        pass


def feed(conn, data: bytes) -> None:
    """As a transport hands bytes to a BufferedProtocol."""
    buf = conn.get_buffer(len(data))
    buf[:len(data)] = data
    conn.buffer_updated(len(data))


async def run_cycles(cycles: int, profile: bool) -> list[float]:
    from minikafka.broker.config import BrokerConfig
    from minikafka.broker.connection import KafkaConnection
    from minikafka.broker.server import Broker
    from minikafka.protocol import codec
    from minikafka.protocol.records import build_batch

    data = tempfile.mkdtemp(prefix="minikafka-path-")
    broker = Broker(BrokerConfig(port=0, data_dir=data, log_level="WARNING"))
    await broker.start()
    loop = asyncio.get_running_loop()
    listener = broker.listeners[0] if broker.listeners else None
    state = {"fut": None, "t1": 0.0}

    def fetch_written():
        state["t1"] = time.perf_counter()
        fut = state["fut"]
        if fut is not None and not fut.done():
            fut.set_result(None)

    admin = KafkaConnection(broker, listener=listener)
    admin.connection_made(Transport())
    fetcher = KafkaConnection(broker, listener=listener)
    fetcher.connection_made(Transport(fetch_written))
    producer = KafkaConnection(broker, listener=listener)
    producer.connection_made(Transport())
    feed(admin, codec.encode_request(19, 4, 1, "rdkafka", {
        "topics": [{"name": "latency", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 30000, "validate_only": False}))
    for _ in range(20):
        await asyncio.sleep(0)
    topic_id = broker.controller.topic("latency").topic_id
    fetch = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
             "forgotten_topics_data": [], "topics": [{"topic_id": topic_id, "partitions": [
                 {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                  "log_start_offset": -1, "partition_max_bytes": 1048576}]}]}
    pad = bytes(92)
    samples = []
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    for i in range(cycles + 200):
        fetch["topics"][0]["partitions"][0]["fetch_offset"] = i
        loop.call_soon(feed, fetcher, codec.encode_request(1, 16, i + 1, "rdkafka", fetch))
        for _ in range(3):
            await asyncio.sleep(0)  # the fetch parks
        now = int(time.time() * 1000)
        batch = build_batch([(None, struct.pack(">d", time.time()) + pad, [], now)])
        frame = codec.encode_request(0, 10, i + 1, "rdkafka", {
            "transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "latency", "partition_data": [{"index": 0, "records": batch}]}]})
        state["fut"] = loop.create_future()
        if profiler is not None and i >= 200:
            profiler.enable()

        def arrive(frame=frame):
            # From a loop callback, as uvloop calls data_received: no task is running then.
            state["t0"] = time.perf_counter()
            feed(producer, frame)

        loop.call_soon(arrive)
        await state["fut"]
        t0 = state["t0"]
        if profiler is not None:
            profiler.disable()
        if i >= 200:
            samples.append(state["t1"] - t0)
        for _ in range(3):
            await asyncio.sleep(0)  # the produce's answer, if it is still on its way
    await broker.stop()
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    return samples


def child(cycles: int, profile: bool) -> None:
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        samples = runner.run(run_cycles(cycles, profile))
    if not profile:
        print(json.dumps(samples))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--baseline-python")
    parser.add_argument("--cpu", type=int, help="pin the broker processes to this CPU")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or args.profile:
        child(args.cycles, args.profile)
        return
    trees = {"this tree": (sys.executable, str(ROOT))}
    if args.baseline_python:
        trees["baseline"] = (args.baseline_python, str(Path(args.baseline_python).absolute().parents[2]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MINIKAFKA_")}
    results: dict[str, list[tuple[float, float, float]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree, (python, cwd) in trees.items():
            cmd = [python, str(Path(__file__).resolve()), "--child", "--cycles", str(args.cycles)]
            if args.cpu is not None:
                cmd = ["taskset", "-c", str(args.cpu)] + cmd
            out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
            samples = sorted(json.loads(out.strip().splitlines()[-1]))
            n = len(samples)
            row = (samples[0] * 1e6, samples[n // 2] * 1e6, samples[int(n * 0.9)] * 1e6)
            results[tree].append(row)
            print(f"{tree:9s} round: min {row[0]:.1f} us, p50 {row[1]:.1f} us, p90 {row[2]:.1f} us, n={n}, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for tree, rows in results.items():
        print(f"{tree:9s} median of rounds: min {statistics.median(r[0] for r in rows):.1f} us, "
              f"p50 {statistics.median(r[1] for r in rows):.1f} us, p90 {statistics.median(r[2] for r in rows):.1f} us")


if __name__ == "__main__":
    main()
