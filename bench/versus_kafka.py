"""minikafka beside Apache Kafka 4.2 in the same run: start-up, memory, throughput with broker CPU per
GB, produce-to-consume latency, and group join/rebalance.

    .venv/bin/python bench/versus_kafka.py [--runs 3] [--messages 300000] [--write-results]
    .venv/bin/python bench/versus_kafka.py --only kafka --runs 1          # one broker only

Apache Kafka is the single-node KRaft broker of tests/kafka/kafka_runner.py (the jars of
tests/kafka/pom.xml; ``python tests/kafka/kafka_runner.py install`` fetches them once), JVM flags
``kafka_runner.DEFAULT_JVM_OPTS`` (G1, -Xms128m -Xmx512m).  Both brokers run with the same settings
where they have them: the runner's defaults (5 partitions for each internal topic, no initial
rebalance delay, replication 1), given to minikafka as overrides.

Each round starts each broker afresh (alternating which goes first, so that the shared machine treats
both alike), and for each broker:

* start-up: launch -> first Metadata answer with the broker registered (Kafka: its storage formatted
  beforehand, as ``kafka-storage format`` is run once per cluster; the first start, format included, is
  reported apart);
  the broker is started on a fresh data dir, stopped and started again on it, and the second start
  is the one timed and measured (both brokers alike);
* idle RSS one second after start, and peak RSS (VmHWM) at the end of the round, of the broker process;
* produce N x 1 KiB with acks=all (idempotent librdkafka producer, 6 partitions) and consume them with a
  group consumer: MB/s, and broker CPU seconds per GB from ``/proc/PID/stat`` (utime + stime of the
  broker process, every thread: JIT and GC included for Kafka) over each phase;
* produce-to-consume latency at a fixed rate (1 KiB, acks=all, linger.ms=0, one consumer assigned to
  every partition, send time carried in the value): p50 and p99;
* first join of a new group and a new member joining a group of two (librdkafka at its defaults:
  heartbeat 3 s), with bench/group.py's ``measure``.

Medians over the rounds; ``--write-results`` writes the table with this command into bench/RESULTS.md
(between the versus-kafka markers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "kafka"))

import kafka_runner  # noqa: E402
import produce_consume as pc  # noqa: E402  (bench/produce_consume.py: producer/consumer loads, RSS)

RESULTS = ROOT / "bench" / "RESULTS.md"
START_MARK = "<!-- versus-kafka:start (written by bench/versus_kafka.py --write-results) -->"
END_MARK = "<!-- versus-kafka:end -->"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAME_SETTINGS = {k: v for k, v in kafka_runner.DEFAULT_CONFIG.items()
                 if k in ("num.partitions", "offsets.topic.num.partitions", "transaction.state.log.num.partitions",
                          "group.initial.rebalance.delay.ms", "auto.create.topics.enable")}


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of ``pid`` so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


# -- the two brokers, one interface: bootstrap, port, pid, read_log(), stop() ------------------------

class Minikafka:
    name = "minikafka"

    def __init__(self, workdir: Path):
        self.data = workdir / f"mk-{uuid.uuid4().hex[:6]}"
        argv = pc.minikafka_argv(self.data)
        overrides = [a for k, v in SAME_SETTINGS.items() for a in ("--override", f"{k}={v}")]
        self._argv = lambda port: argv(port) + overrides
        self._workdir = workdir
        self.fresh_start_s = self._start().start_seconds
        self.proc.stop()
        self.start_s = self._start().start_seconds

    def _start(self):
        self.proc = pc.BrokerProcess("minikafka", self._argv, self._workdir)
        self.bootstrap, self.port, self.pid = self.proc.bootstrap, self.proc.port, self.proc.proc.pid
        return self.proc

    def read_log(self) -> str:
        self.proc.log.flush()
        return Path(self.proc.log.name).read_text(errors="replace")

    def stop(self) -> None:
        self.proc.stop()


class Kafka:
    name = "kafka"

    def __init__(self, workdir: Path):
        run_dir = workdir / f"kafka-{uuid.uuid4().hex[:6]}"
        self.broker = kafka_runner.KafkaBroker(run_dir, keep_data=True)
        began = time.monotonic()
        self.broker.start()  # formats the storage, then starts
        self.fresh_start_s = time.monotonic() - began
        self.broker.stop()
        self.broker.start()  # keep_data: the formatted storage is reused, no format step
        self.start_s = self.broker.start_seconds
        self.bootstrap, self.port, self.pid = self.broker.bootstrap, self.broker.port, self.broker.pid

    def read_log(self) -> str:
        return ""  # no broker-side group timings: bench/group.py then reports client-side numbers only

    def stop(self) -> None:
        self.broker.stop()


BROKERS = {"minikafka": Minikafka, "kafka": Kafka}


# -- measurements ------------------------------------------------------------------------------------

def with_cpu(pid: int, fn, *args) -> tuple[dict, float]:
    before = cpu_seconds(pid)
    result = fn(*args)
    return result, cpu_seconds(pid) - before


def _group_bench():
    """bench/group.py (group join and rebalance measurement; it imports the integration tests'
    conftest, so it is loaded only when a round runs)."""
    import group

    return group


def coordinator_ready(port: int, timeout: float = 60.0) -> None:
    """FindCoordinator until it answers without error (creates __consumer_offsets on first use)."""
    grp = _group_bench()
    deadline = time.monotonic() + timeout
    while True:
        client = grp.RawClient(port, client_id="bench-warm")
        try:
            answer = client.request(10, 3, {"key": "bench-warm", "key_type": 0})
        finally:
            client.close()
        if answer["error_code"] == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no group coordinator: {answer}")
        time.sleep(0.1)


def e2e_latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int = 1024) -> dict:
    """Produce at ``rate`` per second (acks=all, linger 0) while one consumer reads every partition;
    each value carries its send time, the consumer notes its arrival: p50/p99 of the difference."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 500})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(pc.PARTITIONS)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True})
    pad = os.urandom(size - 9)
    samples: list[float] = []
    warm: set[int] = set()
    stop = threading.Event()

    def consume():
        while not stop.is_set():
            msg = consumer.poll(0.05)
            if msg is None or msg.error():
                continue
            now = time.perf_counter()
            kind, sent = struct.unpack_from(">Bd", msg.value())
            if kind == 0:
                warm.add(msg.partition())
            else:
                samples.append(now - sent)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        # Warm-up: one record per partition, consumed, so the timed stream finds the consumer fetching.
        for p in range(pc.PARTITIONS):
            producer.produce(topic, struct.pack(">Bd", 0, time.perf_counter()) + pad, partition=p)
        producer.flush(30)
        deadline = time.monotonic() + 30
        while len(warm) < pc.PARTITIONS and time.monotonic() < deadline:
            time.sleep(0.01)
        total = int(rate * seconds)
        started = time.perf_counter()
        for i in range(total):
            target = started + i / rate
            while (now := time.perf_counter()) < target:
                producer.poll(max(0.0, min(0.001, target - now)))
            producer.produce(topic, struct.pack(">Bd", 1, time.perf_counter()) + pad, partition=i % pc.PARTITIONS)
            producer.poll(0)
        producer.flush(30)
        deadline = time.monotonic() + 30
        while len(samples) < total and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(10)
        consumer.close()
    samples.sort()
    if not samples:
        raise RuntimeError("no latency samples")
    return {"p50_ms": samples[len(samples) // 2] * 1000, "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
            "count": len(samples)}


def one_round(kind: str, workdir: Path, messages: int, rate: int, latency_s: float, group_runs: int) -> dict:
    broker = BROKERS[kind](workdir)
    try:
        time.sleep(1.0)  # idle RSS once start-up work has settled
        result = {"broker": kind, "start_s": broker.start_s, "fresh_start_s": broker.fresh_start_s,
                  "idle_rss_mb": pc.rss_kib(broker.pid, "VmRSS") / 1024}
        coordinator_ready(broker.port)
        topic = f"bench-1kib-{uuid.uuid4().hex[:6]}"
        pc.create_topic(broker.bootstrap, topic)
        gb = messages * 1024 / 1e9
        produced, cpu = with_cpu(broker.pid, pc.produce, broker.bootstrap, topic, messages, 1024, "all")
        result["produce_1KiB_acksall_mb_s"] = produced["mb_per_s"]
        result["produce_cpu_s_per_gb"] = cpu / gb
        consumed, cpu = with_cpu(broker.pid, pc.consume_group, broker.bootstrap, topic, messages, 1024)
        result["consume_1KiB_mb_s"] = consumed["mb_per_s"]
        result["consume_cpu_s_per_gb"] = cpu / gb
        lat_topic = f"bench-lat-{uuid.uuid4().hex[:6]}"
        pc.create_topic(broker.bootstrap, lat_topic)
        lat = e2e_latency(broker.bootstrap, lat_topic, rate, latency_s)
        result["e2e_p50_ms"], result["e2e_p99_ms"] = lat["p50_ms"], lat["p99_ms"]
        groups = _group_bench().measure(broker, group_runs, 2)
        result["group_first_join_ms"] = statistics.median(groups["first"])
        result["group_raw_first_join_ms"] = statistics.median(groups["raw"]) if groups["raw"] else float("nan")
        result["group_new_member_ms"] = statistics.median(groups["client"])
        result["peak_rss_mb"] = pc.rss_kib(broker.pid, "VmHWM") / 1024
        return result
    finally:
        broker.stop()


# -- report ------------------------------------------------------------------------------------------

METRICS = [  # key, label, unit, True when higher is better
    ("start_s", "start-up: launch -> first Metadata answer", "s", False),
    ("fresh_start_s", "first start on a fresh data dir (Kafka: storage format included)", "s", False),
    ("idle_rss_mb", "idle RSS, 1 s after start", "MB", False),
    ("peak_rss_mb", "peak RSS (VmHWM) after the round", "MB", False),
    ("produce_1KiB_acksall_mb_s", "produce 1 KiB, acks=all (idempotent)", "MB/s", True),
    ("produce_cpu_s_per_gb", "broker CPU per GB produced", "s/GB", False),
    ("consume_1KiB_mb_s", "consume 1 KiB, group consumer from earliest", "MB/s", True),
    ("consume_cpu_s_per_gb", "broker CPU per GB consumed", "s/GB", False),
    ("e2e_p50_ms", "produce-to-consume latency p50", "ms", False),
    ("e2e_p99_ms", "produce-to-consume latency p99", "ms", False),
    ("group_raw_first_join_ms", "first join, raw JoinGroup x2 + SyncGroup", "ms", False),
    ("group_first_join_ms", "first join, librdkafka subscribe -> assigned", "ms", False),
    ("group_new_member_ms", "new member joins a group of 2 -> all assigned", "ms", False),
]


def table(rounds: list[dict], kinds: list[str]) -> str:
    medians = {k: {m: statistics.median(r[m] for r in rounds if r["broker"] == k) for m, *_ in METRICS}
               for k in kinds}
    both = len(kinds) == 2
    head = "| metric | unit | " + " | ".join(kinds) + (" | minikafka / Kafka | minikafka ahead? |" if both else " |")
    lines = [head, "|---|---|" + "---:|" * len(kinds) + ("---:|---|" if both else "")]
    for key, label, unit, higher_better in METRICS:
        cells = [f"{medians[k][key]:.3f}" if medians[k][key] < 10 else f"{medians[k][key]:.1f}" for k in kinds]
        row = f"| {label} | {unit} | " + " | ".join(cells)
        if both:
            a, b = medians["minikafka"][key], medians["kafka"][key]
            ratio = a / b if b else float("nan")
            ahead = (a > b) if higher_better else (a < b)
            row += f" | {ratio:.2f} | {'yes' if ahead else 'no'}"
        lines.append(row + " |")
    return "\n".join(lines)


def write_results(text: str, path: Path = RESULTS) -> None:
    """Put ``text`` between the versus-kafka markers of ``path`` (appended with them when absent)."""
    current = path.read_text()
    block = f"{START_MARK}\n{text}\n{END_MARK}"
    if START_MARK in current and END_MARK in current:
        before = current.split(START_MARK, 1)[0]
        after = current.split(END_MARK, 1)[1]
        path.write_text(before + block + after)
    else:
        path.write_text(current.rstrip("\n") + "\n\n" + block + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="rounds per broker (medians)")
    ap.add_argument("--messages", type=int, default=300_000, help="1 KiB messages produced and consumed per round")
    ap.add_argument("--rate", type=int, default=1000, help="messages per second of the latency stream")
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--group-runs", type=int, default=3, help="group joins per round (bench/group.py measure)")
    ap.add_argument("--only", choices=sorted(BROKERS))
    ap.add_argument("--json", help="write every round's result here")
    ap.add_argument("--write-results", action="store_true", help="write the table into bench/RESULTS.md")
    args = ap.parse_args()

    kafka_runner.ensure_installed()
    kinds = [args.only] if args.only else ["minikafka", "kafka"]
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-vs-kafka-") as tmp:
        workdir = Path(tmp)
        if "minikafka" in kinds:  # one untimed start fills the bytecode cache, as after an install
            pc.BrokerProcess("warm-up", pc.minikafka_argv(workdir / "warm-up"), workdir).stop()
        for i in range(args.runs):
            for kind in (kinds if i % 2 == 0 else list(reversed(kinds))):
                r = one_round(kind, workdir, args.messages, args.rate, args.latency_seconds, args.group_runs)
                print(json.dumps(r), flush=True)
                rounds.append(r)
    load_after = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(rounds, indent=1))

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    command = "    .venv/bin/python bench/versus_kafka.py " + " ".join(
        a for a in sys.argv[1:] if a != "--write-results")
    text = "\n".join([
        f"Run {started}: {args.runs} rounds per broker (alternating order), {args.messages} x 1 KiB per round, "
        f"latency stream {args.rate}/s for {args.latency_seconds:g} s, {args.group_runs} group joins per round; "
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, Apache Kafka "
        f"{kafka_runner.kafka_version()} (JVM {' '.join(kafka_runner.DEFAULT_JVM_OPTS[:2])}); "
        f"load average {load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end (shared machine).",
        "Both brokers with " + ", ".join(f"`{k}={v}`" for k, v in SAME_SETTINGS.items()) + ".",
        "",
        "Command:",
        "",
        command.rstrip(),
        "",
        table(rounds, kinds),
    ])
    print()
    print(text)
    if args.write_results:
        write_results(text)


if __name__ == "__main__":
    main()
