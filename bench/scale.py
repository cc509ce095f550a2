"""Scale figures (issue 14): many partitions, many idle connections, many groups rebalancing.

    .venv/bin/python bench/scale.py partitions  [--topics 100 --per-topic 100] [--keep DIR]
    .venv/bin/python bench/scale.py connections [--count 5000]
    .venv/bin/python bench/scale.py groups      [--groups 100 --members 10]

partitions: CreateTopics of topics x per-topic partitions (10,000 by default); Metadata of every
  topic (median of several); broker RSS; then a clean restart: time to ready and RSS again.
connections: opens --count sockets, each sends one ApiVersions (so each is a served connection),
  keeps them all open and idle; broker RSS before/after and the latency of a Metadata request
  on one more connection while they are open; all closed at the end.
groups: --groups x --members lightweight members (asyncio + the project's codec, no client
  library), each JoinGroup (with the KIP-394 member-id round trip) and SyncGroup as the
  classic protocol wants; then every member rejoins at once (a rebalance of every group
  together) and syncs again.  Times to all members synced, per-member latencies, broker CPU.

Loopback only; every wait is bounded; the broker is a subprocess started and stopped here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import conftest  # noqa: E402
from conftest import BrokerProcess, RawClient  # noqa: E402
from minikafka.protocol.codec import decode_response, encode_request  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
conftest.START_TIMEOUT_S = 600  # 10,000 partitions take longer than a test broker may


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1.0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def metadata_body(topics):
    return {"topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


# -- partitions ------------------------------------------------------------------------------

def bench_partitions(args) -> None:
    total = args.topics * args.per_topic
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch  # a kept DIR/data can be timed again with restart_ready.py
        t0 = time.monotonic()
        broker = BrokerProcess(tmp, {})
        empty_ready = time.monotonic() - t0
        try:
            rss0 = rss_mb(broker.proc.pid)
            client = RawClient(broker.port, timeout=600)
            t0 = time.monotonic()
            for start in range(0, args.topics, 10):
                names = [f"scale-{i:04d}" for i in range(start, min(start + 10, args.topics))]
                resp = client.request(19, 5, {"topics": [
                    {"name": n, "num_partitions": args.per_topic, "replication_factor": 1, "assignments": [],
                     "configs": []} for n in names], "timeout_ms": 600000, "validate_only": False})
                assert all(t["error_code"] == 0 for t in resp["topics"]), resp
            create_s = time.monotonic() - t0
            rss1 = rss_mb(broker.proc.pid)
            meta = []
            for _ in range(args.repeat):
                t1 = time.perf_counter()
                resp = client.request(3, 12, metadata_body(None))
                meta.append((time.perf_counter() - t1) * 1e3)
            parts = sum(len(t["partitions"]) for t in resp["topics"])
            assert parts >= total, parts
            one = []
            for _ in range(args.repeat):
                t1 = time.perf_counter()
                client.request(3, 12, metadata_body(["scale-0000"]))
                one.append((time.perf_counter() - t1) * 1e3)
            client.sock.close()
            t0 = time.monotonic()
            broker.stop(timeout=600)
            stop_s = time.monotonic() - t0
            t0 = time.monotonic()
            broker.restart()
            ready_s = time.monotonic() - t0
            rss2 = rss_mb(broker.proc.pid)
            client = RawClient(broker.port, timeout=600)
            t1 = time.perf_counter()
            resp = client.request(3, 12, metadata_body(None))
            first_meta = (time.perf_counter() - t1) * 1e3
            client.sock.close()
        finally:
            broker.stop(timeout=600)
    print(f"{args.topics} topics x {args.per_topic} partitions = {total} partitions")
    print(f"  empty broker: ready {empty_ready:.2f} s, RSS {rss0:.0f} MB")
    print(f"  CreateTopics (10 topics per request): {create_s:.1f} s in all, RSS after {rss1:.0f} MB")
    print(f"  Metadata of all topics ({parts} partitions): median {statistics.median(meta):.0f} ms "
          f"(min {min(meta):.0f}, max {max(meta):.0f}, {args.repeat} runs); "
          f"Metadata of one topic: median {statistics.median(one):.1f} ms")
    print(f"  clean stop {stop_s:.1f} s; restart to ready {ready_s:.2f} s (process start included), "
          f"RSS after restart {rss2:.0f} MB, first full Metadata {first_meta:.0f} ms")


# -- connections ---------------------------------------------------------------------------------

def bench_connections(args) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.count + 200
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    api_versions = encode_request(18, 3, 1, "idle", {"client_software_name": "scale", "client_software_version": "1"})
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(tmp, {})
        socks = []
        try:
            pid = broker.proc.pid
            rss0 = rss_mb(pid)
            base = _metadata_latency(broker.port, args.repeat)
            t0 = time.monotonic()
            cpu0 = cpu_s(pid)
            for i in range(args.count):
                s = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
                s.sendall(api_versions)
                socks.append(s)
                if len(socks) % 500 == 0:
                    for s2 in socks[-500:]:
                        _read_frame(s2)
            for s2 in socks[len(socks) - len(socks) % 500:]:
                _read_frame(s2)
            open_s = time.monotonic() - t0
            cpu1 = cpu_s(pid)
            rss1 = rss_mb(pid)
            time.sleep(args.idle)  # all idle: the broker should spend nothing on them
            cpu2 = cpu_s(pid)
            loaded = _metadata_latency(broker.port, args.repeat)
            alive = sum(1 for s in socks if _still_open(s))
        finally:
            for s in socks:
                s.close()
            broker.stop(timeout=120)
    print(f"{args.count} idle connections (each served one ApiVersions): opened in {open_s:.1f} s "
          f"(broker CPU {cpu1 - cpu0:.1f} s), RSS {rss0:.0f} -> {rss1:.0f} MB "
          f"({(rss1 - rss0) * 1024 / args.count:.1f} KB per connection); "
          f"broker CPU over {args.idle:.0f} s idle: {cpu2 - cpu1:.2f} s; still open {alive}/{args.count}")
    print(f"  Metadata latency on one more connection: median {statistics.median(base):.2f} ms without, "
          f"{statistics.median(loaded):.2f} ms with them open")


def _read_frame(s: socket.socket) -> bytes:
    size = struct.unpack(">i", _exact(s, 4))[0]
    return _exact(s, size)


def _exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _still_open(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def _metadata_latency(port: int, repeat: int) -> list[float]:
    client = RawClient(port, timeout=60)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        client.request(3, 12, metadata_body([]))
        out.append((time.perf_counter() - t0) * 1e3)
    client.sock.close()
    return out


# -- groups ------------------------------------------------------------------------------------

class Member:
    """One classic-protocol group member on its own connection."""

    def __init__(self, group: str, index: int):
        self.group, self.index = group, index
        self.member_id = ""
        self.generation = -1
        self.corr = 0

    async def connect(self, port: int) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)

    async def call(self, key: int, version: int, body: dict) -> dict:
        self.corr += 1
        self.writer.write(encode_request(key, version, self.corr, f"m-{self.group}-{self.index}", body))
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        corr, resp = decode_response(key, version, await self.reader.readexactly(size))
        assert corr == self.corr
        return resp

    async def join_and_sync(self) -> tuple[int, int]:
        """Join (twice if the broker asks for a member id first) then sync; (generation, size)."""
        for _ in range(5):
            resp = await self.call(11, 7, {
                "group_id": self.group, "session_timeout_ms": 60000, "rebalance_timeout_ms": 60000,
                "member_id": self.member_id, "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"}],
                "reason": None})
            if resp["error_code"] == 79:  # MEMBER_ID_REQUIRED
                self.member_id = resp["member_id"]
                continue
            if resp["error_code"] == 27:  # REBALANCE_IN_PROGRESS: join again
                continue
            assert resp["error_code"] == 0, resp
            break
        self.member_id = resp["member_id"]
        self.generation = resp["generation_id"]
        members = resp["members"]
        assignments = [{"member_id": m["member_id"], "assignment": b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"}
                       for m in members] if resp["leader"] == self.member_id else []
        sync = await self.call(14, 5, {"group_id": self.group, "generation_id": self.generation,
                                       "member_id": self.member_id, "group_instance_id": None,
                                       "protocol_type": "consumer", "protocol_name": "range",
                                       "assignments": assignments})
        if sync["error_code"] == 27:
            return await self.join_and_sync()
        assert sync["error_code"] == 0, sync
        return self.generation, len(members)

    async def leave(self) -> None:
        await self.call(13, 5, {"group_id": self.group, "members": [
            {"member_id": self.member_id, "group_instance_id": None, "reason": None}]})
        self.writer.close()


async def _round(members, deadline_s: float) -> tuple[float, list[float], list]:
    async def timed(m):
        t0 = time.perf_counter()
        result = await m.join_and_sync()
        return time.perf_counter() - t0, result

    t0 = time.perf_counter()
    done = await asyncio.wait_for(asyncio.gather(*(timed(m) for m in members)), deadline_s)
    return time.perf_counter() - t0, [d for d, _ in done], [r for _, r in done]


async def _groups(port: int, pid: int, groups: int, per_group: int):
    members = [Member(f"g{g:03d}", i) for g in range(groups) for i in range(per_group)]
    await asyncio.gather(*(m.connect(port) for m in members))
    fc = await members[0].call(10, 4, {"key_type": 0, "coordinator_keys": ["g000"]})
    assert fc["coordinators"][0]["error_code"] == 0, fc
    cpu0 = cpu_s(pid)
    first = await _round(members, 300)
    cpu1 = cpu_s(pid)
    second = await _round(members, 300)
    cpu2 = cpu_s(pid)
    await asyncio.gather(*(m.leave() for m in members))
    return first, second, cpu1 - cpu0, cpu2 - cpu1


def bench_groups(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(tmp, {"group.initial.rebalance.delay.ms": args.initial_delay_ms})
        try:
            first, second, cpu_a, cpu_b = asyncio.run(_groups(broker.port, broker.proc.pid, args.groups, args.members))
            rss = rss_mb(broker.proc.pid)
        finally:
            broker.stop(timeout=120)
    n = args.groups * args.members
    for label, (wall, lat, results), cpu in (("initial join", first, cpu_a), ("all rejoin together", second, cpu_b)):
        sizes = {size for _gen, size in results if size}  # only leaders see the member list
        lat.sort()
        print(f"{args.groups} groups x {args.members} members, {label}: all {n} synced in {wall:.2f} s "
              f"(broker CPU {cpu:.2f} s); per member join+sync median {statistics.median(lat) * 1e3:.0f} ms, "
              f"p99 {lat[int(len(lat) * 0.99)] * 1e3:.0f} ms; group sizes seen by the leaders {sorted(sizes)}")
    print(f"  broker RSS after: {rss:.0f} MB (group.initial.rebalance.delay.ms={args.initial_delay_ms})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["partitions", "connections", "groups"])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--initial-delay-ms", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", default=None, help="partitions: work directory to keep")
    args = parser.parse_args()
    {"partitions": bench_partitions, "connections": bench_connections, "groups": bench_groups}[args.what](args)


if __name__ == "__main__":
    main()
