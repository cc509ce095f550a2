"""Codec micro-benchmarks: the hot messages of a broker, against the targets of issue 2.

Run from the repository root:  .venv/bin/python bench/codec.py [--repeat 7] [--generic]

Each line is the median over ``repeat`` runs of the mean time per call within a run (timeit,
with enough calls per run to last ~0.2 s).  ``--generic`` also times the generic encoders where
protocol.fast has a hand-tuned one.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import timeit
import uuid


from minikafka.protocol import codec, fast  # noqa: E402

try:
    from minikafka.protocol.records import build_batch  # noqa: E402
except ImportError:  # pragma: no cover - the lead's module
    build_batch = None


def _batch(size: int) -> bytes:
    """A real record batch of about ``size`` bytes when protocol.records is there."""
    if build_batch is None:
        return bytes(size)
    value = b"v" * (size - 61 - 20)
    return bytes(build_batch([(b"key", value, [], 1_700_000_000_000)]))


def produce_request_frame(version: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "bench-topic", "partition_data": [{"index": 0, "records": _batch(16 * 1024)}]}],
    }
    return codec.encode_request(0, version, 1, "producer-1", body)[4:]


def fetch_request_frame(version: int) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "bench-topic",
                "partitions": [
                    {"partition": p, "current_leader_epoch": 0, "fetch_offset": 1000 * p, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1048576}
                    for p in range(10)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return codec.encode_request(1, version, 1, "consumer-1", body)[4:]


def fetch_response_body() -> dict:
    records = [_batch(64 * 1024) for _ in range(10)]
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "bench-topic",
                "partitions": [
                    {"partition_index": p, "error_code": 0, "high_watermark": 100000, "last_stable_offset": 100000,
                     "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
                     "records": records[p]}
                    for p in range(10)
                ],
            }
        ],
    }


def metadata_response_body(replicas: list[int]) -> dict:
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "minikafka-bench-cluster",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": f"topic-{t:03d}",
                "topic_id": uuid.UUID(int=t + 1),
                "is_internal": False,
                "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                     "replica_nodes": replicas, "isr_nodes": replicas, "offline_replicas": []}
                    for p in range(10)
                ],
                "topic_authorized_operations": -2147483648,
            }
            for t in range(100)
        ],
    }


def measure(fn, repeat: int) -> tuple[float, float, float]:
    """(median wall seconds, median CPU seconds, best wall seconds) per call.

    The CPU-time column (time.process_time) is there because these machines are shared: other
    processes inflate wall-clock medians while the work per call is unchanged."""
    wall = timeit.Timer(fn, timer=time.perf_counter)
    number, _ = wall.autorange()
    number = max(number, 1)
    walls = [r / number for r in wall.repeat(repeat=repeat, number=number)]
    cpu = timeit.Timer(fn, timer=time.process_time)
    cpus = [r / number for r in cpu.repeat(repeat=repeat, number=number)]
    return statistics.median(walls), statistics.median(cpus), min(walls)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--generic", action="store_true", help="also time the generic encoders")
    args = parser.parse_args()

    cases = []
    for v in (9, 7):
        frame = produce_request_frame(v)
        cases.append((f"decode ProduceRequest v{v}, one 16 KiB batch", 10.0, lambda f=frame: codec.decode_request(f)))
    fetch_body = fetch_response_body()
    for v in (12, 11):
        cases.append((f"encode FetchResponse v{v}, 10 x 64 KiB (chunk list)", 60.0,
                      lambda v=v: fast.encode_response(1, v, 1, fetch_body)))
        if args.generic:
            cases.append((f"  generic encoder, FetchResponse v{v}", None,
                          lambda v=v: codec.encode_response(1, v, 1, fetch_body)))
    for replicas in ([1], [1, 2, 3]):
        md = metadata_response_body(replicas)
        cases.append((f"encode MetadataResponse v12, 100 topics x 10 partitions, {len(replicas)} replica(s)", 1000.0,
                      lambda md=md: fast.encode_response(3, 12, 1, md)))
        if args.generic:
            cases.append(("  generic encoder, MetadataResponse v12", None,
                          lambda md=md: codec.encode_response(3, 12, 1, md)))
    fetch_req = fetch_request_frame(12)
    cases.append(("decode FetchRequest v12, 10 partitions", None, lambda: codec.decode_request(fetch_req)))

    print(f"python {platform.python_version()}, nproc {os.cpu_count()}, CPU {cpu_model()}")
    try:
        print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    except OSError:
        pass
    print(f"microseconds per call; median of {args.repeat} runs (wall), median (CPU time), best run (wall)")
    for name, target, fn in cases:
        fn()  # compile the generated functions outside the timing
        wall, cpu, best = (x * 1e6 for x in measure(fn, args.repeat))
        verdict = "" if target is None else ("  ok" if wall <= target else "  OVER TARGET (wall)")
        tgt = "" if target is None else f"  (target <= {target:g})"
        print(f"{wall:10.2f} {cpu:10.2f} {best:10.2f}  {name}{tgt}{verdict}")


if __name__ == "__main__":
    main()
