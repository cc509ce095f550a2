"""Issue 14 measurements: the cost of Fetch by topic id, of client quotas per request, and how
many log lines short connections cost.

Run from the repository root:  .venv/bin/python bench/kafka4.py [--repeat 7] [--request-memory]
[--java-quota MB]

* encode: FetchResponse of 10 partitions x 64 KiB, v12 (by name) against v17 (by topic id), on
  the hand-tuned path and the generic codec (median of ``repeat`` runs of the mean per call).
* quota: the Fetch handler's v17 edge (id -> name -> id) and ``ClientQuotas.run`` around a
  trivial handler, per request.
* connections: a real broker at the default log level; 2,000 connections opened and closed;
  the lines it logged.
* --request-memory: a client pipelining 200 x 1 MiB produces behind a parked Fetch without
  reading, with the bound (8 MiB per connection, 32 MiB in all) and without (-1): what the
  broker read and its RSS.
* --java-quota MB: the Java program of tests/integration/test_kafka4_java.py producing and
  consuming MB megabytes under 1 MB/s client-id quotas with Kafka's default window (11 x 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import types
import uuid

from minikafka.protocol import codec, fast


def _median_per_call(fn, repeat: int) -> float:
    timer = timeit.Timer(fn)
    n, _ = timer.autorange()
    return statistics.median(min(timer.repeat(1, n)) / n for _ in range(repeat))


def fetch_body(version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "bench-topic", "topic_id": uuid.UUID(int=12345), "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 1000, "last_stable_offset": 1000,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": [memoryview(bytes(64 * 1024))]} for p in range(10)]}]}


def bench_encode(repeat: int) -> None:
    print("FetchResponse, 10 x 64 KiB (median us per call)")
    for version in (12, 17):
        body = fetch_body(version)
        fast = _median_per_call(lambda: fast.encode_response(1, version, 1, body), repeat)
        generic = _median_per_call(lambda: codec.encode_response(1, version, 1, body), repeat)
        print(f"  v{version}: fast {fast * 1e6:.1f}  generic {generic * 1e6:.1f}")


def bench_quota(repeat: int) -> None:
    from minikafka.broker.quotas import ClientQuotas

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "unit", "broker"))
    from broker_fakes import Ctx, FakeBroker

    with tempfile.TemporaryDirectory() as tmp:
        broker = FakeBroker(tmp)
        broker.quotas = ClientQuotas(broker)

        async def handler(ctx, body):
            return {"throttle_time_ms": 0}

        ctx = Ctx(broker, 3, 12, client_id="c")
        loop = asyncio.new_event_loop()

        def plain():
            loop.run_until_complete(handler(ctx, {}))

        def with_quota():
            loop.run_until_complete(broker.quotas.run(handler, ctx, {}, 100))

        base = _median_per_call(plain, repeat)
        broker.controller.alter_client_quota((("client-id", "c"),), "request_percentage", 1e9)
        quota = _median_per_call(with_quota, repeat)
        print(f"request under a request_percentage quota: +{(quota - base) * 1e6:.1f} us per request "
              f"({base * 1e6:.1f} -> {quota * 1e6:.1f} us with the loop round trip)")

        from minikafka.broker.handlers import fetch
        from minikafka.protocol.records import build_batch

        broker.controller.create_topic("t", 10)
        for p in range(10):
            broker.controller.log("t", p).append(build_batch([(b"k", b"v" * 100, [], 1000)]))
        tid = broker.controller.topic("t").topic_id
        found = {}
        fetch.register(types.SimpleNamespace(register=lambda k, lo, hi, h: found.setdefault(k, h)), broker)
        by_id = found[1]

        def req(key, value):
            return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                    "topics": [{key: value, "partitions": [
                        {"partition": p, "fetch_offset": 0, "current_leader_epoch": -1, "partition_max_bytes": 1 << 20}
                        for p in range(10)]}]}

        v12, v17 = req("topic", "t"), req("topic_id", tid)
        t12 = _median_per_call(lambda: loop.run_until_complete(by_id(Ctx(broker, 1, 12), v12)), repeat)
        t17 = _median_per_call(lambda: loop.run_until_complete(by_id(Ctx(broker, 1, 17), v17)), repeat)
        print(f"Fetch handler, 10 partitions: v12 {t12 * 1e6:.1f} us, v17 (topic ids) {t17 * 1e6:.1f} us")
        loop.close()
        broker.logs.close()


def bench_connections(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "broker.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir",
                                     os.path.join(tmp, "data"), "--override", "connections.summary.interval.ms=1000"],
                                    stdout=subprocess.PIPE, stderr=log)
        line = proc.stdout.readline().decode()
        port = int(line.rsplit(":", 1)[1])
        try:
            t0 = time.monotonic()
            for _ in range(count):
                socket.create_connection(("127.0.0.1", port)).close()
            elapsed = time.monotonic() - t0
            time.sleep(2.5)
        finally:
            proc.terminate()
            proc.wait(10)
        lines = open(log_path).read().splitlines()
        conn_lines = [l for l in lines if "connection" in l]
        print(f"{count} connections opened and closed in {elapsed:.1f} s: {len(lines)} log lines in all, "
              f"{len(conn_lines)} about connections:")
        for l in conn_lines[:3]:
            print("   ", l[:160])


def _integration_path() -> None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration")
    if here not in sys.path:
        sys.path.insert(0, here)


def bench_request_memory() -> None:
    import pathlib

    _integration_path()
    from conftest import RawClient, start_broker
    from minikafka.protocol.records import build_batch

    def rss(pid):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024

    for label, total, per in (("bounded 32/8 MiB", 32 << 20, 8 << 20), ("unbounded (-1)", -1, -1)):
        b = start_broker(pathlib.Path(tempfile.mkdtemp()), message_max_bytes=2 << 20,
                         queued_max_request_bytes=total, queued_max_request_bytes_per_connection=per)
        c = RawClient(b.port, timeout=20)
        for t in ("parked", "big"):
            c.request(3, 12, {"topics": [{"name": t, "topic_id": None}], "allow_auto_topic_creation": True,
                              "include_topic_authorized_operations": False})
        before = rss(b.proc.pid)
        _, f = c.encode(1, 12, {"replica_id": -1, "max_wait_ms": 8000, "min_bytes": 1, "max_bytes": 1 << 20,
                                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                "forgotten_topics_data": [], "rack_id": "", "topics": [{"topic": "parked", "partitions": [
                                    {"partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                                     "partition_max_bytes": 1 << 20}]}]})
        c.send_bytes(f)
        batch = bytes(build_batch([(b"k", b"x" * ((1 << 20) - 200), [], 1)]))
        data = b"".join(c.encode(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "big", "partition_data": [{"index": 0, "records": batch}]}]})[1] for _ in range(200))
        c.sock.settimeout(0.5)
        sent, view = 0, memoryview(data)
        while sent < len(data):
            try:
                sent += c.sock.send(view[sent:sent + (1 << 20)])
            except socket.timeout:
                break
        time.sleep(0.5)
        print(f"{label}: the broker took {sent >> 20} of {len(data) >> 20} MiB before the client blocked; "
              f"broker RSS {before} -> {rss(b.proc.pid)} MiB")
        c.close()
        b.stop()


def bench_java_quota(megabytes: int) -> None:
    import pathlib

    _integration_path()
    import test_kafka4_java
    from clienttools import JARS
    from conftest import BrokerProcess

    out = tempfile.mkdtemp()
    src = os.path.join(out, "Kafka4Check.java")
    with open(src, "w") as f:
        f.write(test_kafka4_java.JAVA_SOURCE)
    subprocess.run(["javac", "-cp", f"{JARS}/*", "-d", out, src], check=True)
    b = BrokerProcess(pathlib.Path(tempfile.mkdtemp()), {"client.telemetry.enable": True})
    try:
        p = subprocess.run(["java", "-cp", f"{out}:{JARS}/*", "Kafka4Check", b.bootstrap, str(megabytes)],
                           capture_output=True, text=True, timeout=900)
        print("\n".join(l for l in p.stdout.splitlines() if l.startswith(("produce", "consume"))) or p.stderr[-2000:])
    finally:
        b.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--request-memory", action="store_true")
    parser.add_argument("--java-quota", type=int, default=0, metavar="MB")
    args = parser.parse_args()
    if args.request_memory:
        bench_request_memory()
    if args.java_quota:
        bench_java_quota(args.java_quota)
    if args.request_memory or args.java_quota:
        return
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    bench_encode(args.repeat)
    bench_quota(args.repeat)
    bench_connections(args.connections)


if __name__ == "__main__":
    main()
