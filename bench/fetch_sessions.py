"""Broker CPU per Fetch of 1,000 partitions: sessionless full fetches (what every fetch cost
before issue 14's fetch sessions, and what a client gets when the cache declines it) against
incremental fetches of an open KIP-227 session, side by side on one broker.

The consumer is caught up on every partition (each partition holds a few records, the fetch
positions are at the high watermark) and ``max_wait_ms`` is 0, so each request is answered at
once and measures the per-fetch cost, not the long poll.  Broker CPU is the broker process's
utime+stime from /proc over blocks of fetches, alternating the two modes.

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--fetches 200] [--blocks 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from conftest import BrokerProcess, RawClient  # noqa: E402
from minikafka.protocol.codec import encode_request  # noqa: E402
from minikafka.protocol.records import build_batch  # noqa: E402

TOPIC = "sessions-bench"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def fetch_body(partitions: int, offsets: dict, session_id: int, epoch: int, with_partitions: bool) -> dict:
    parts = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": offsets[p], "last_fetched_epoch": -1,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(partitions)]
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "partitions": parts}] if with_partitions else [],
            "forgotten_topics_data": [], "rack_id": ""}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=200, help="fetches per block")
    parser.add_argument("--blocks", type=int, default=5, help="blocks per mode, alternating")
    args = parser.parse_args()
    n = args.partitions
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(tmp, {"num.partitions": n})
        try:
            client = RawClient(broker.port, client_id="bench-sessions", timeout=60)
            client.request(3, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False})
            batch = build_batch([(None, b"x" * 100, [], 1000 + i) for i in range(3)])
            data = [{"index": p, "records": batch} for p in range(n)]
            resp = client.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                         "topic_data": [{"name": TOPIC, "partition_data": data}]})
            assert all(p["error_code"] == 0 for t in resp["responses"] for p in t["partition_responses"])
            offsets = {p: 3 for p in range(n)}
            full_frame = encode_request(1, 12, 1, "bench-sessions", fetch_body(n, offsets, 0, -1, True))

            opened = client.request(1, 12, fetch_body(n, offsets, 0, 0, True))
            session_id, epoch = opened["session_id"], 1
            assert session_id != 0, "the broker declined the session"

            def run_full(count):
                size = 0
                for _ in range(count):
                    client.send_bytes(full_frame)
                    size = len(client.read_frame())
                return size

            def run_incremental(count):
                nonlocal epoch
                size = 0
                for _ in range(count):
                    frame = encode_request(1, 12, 1, "bench-sessions", fetch_body(n, offsets, session_id, epoch, False))
                    client.send_bytes(frame)
                    reply = client.read_frame()
                    size = len(reply)
                    epoch += 1
                return size

            # warm up both paths
            run_full(20)
            run_incremental(20)
            per_fetch = {"full": [], "incremental": []}
            wall = {"full": [], "incremental": []}
            sizes = {}
            for _ in range(args.blocks):
                for mode, fn in (("full", run_full), ("incremental", run_incremental)):
                    c0, t0 = cpu_seconds(broker.proc.pid), time.perf_counter()
                    sizes[mode] = fn(args.fetches)
                    t1, c1 = time.perf_counter(), cpu_seconds(broker.proc.pid)
                    per_fetch[mode].append((c1 - c0) / args.fetches * 1e3)
                    wall[mode].append((t1 - t0) / args.fetches * 1e3)
            check = client.request(1, 12, fetch_body(n, offsets, session_id, epoch, False))
            assert check["error_code"] == 0 and check["session_id"] == session_id and check["responses"] == []
            full_req = len(full_frame)
            incr_req = len(encode_request(1, 12, 1, "bench-sessions", fetch_body(n, offsets, session_id, epoch, False)))
        finally:
            broker.stop()
    print(f"{n} partitions, {args.blocks} blocks x {args.fetches} fetches per mode, max_wait_ms=0, caught up")
    for mode in ("full", "incremental"):
        print(f"  {mode:12s} broker CPU {statistics.median(per_fetch[mode]):7.3f} ms/fetch "
              f"(blocks: {', '.join(f'{x:.2f}' for x in per_fetch[mode])}), "
              f"round trip {statistics.median(wall[mode]):7.3f} ms, "
              f"request {full_req if mode == 'full' else incr_req} B, response {sizes[mode]} B")
    ratio = statistics.median(per_fetch["full"]) / max(statistics.median(per_fetch["incremental"]), 1e-9)
    print(f"  full / incremental broker CPU: {ratio:.1f}x")


if __name__ == "__main__":
    main()
