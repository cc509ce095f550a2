"""Throughput over TLS and SASL_SSL beside PLAINTEXT, and connection set-up time per mechanism.

One broker with four listeners (PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT); librdkafka
(confluent-kafka) produces COUNT records of SIZE bytes (acks=1) and reads them back with an
assign() consumer on each listener.  Each round measures every listener once, in rotating order,
so the noisy shared machine treats them alike; the report gives medians and the ratio to
PLAINTEXT of the same round, and the broker's CPU time (user + system, /proc) per MB moved, and
the producing client's (this process with librdkafka's threads: on a small machine the client's
own encryption competes with the broker for the same cores).  Consume is timed from the
consumer's first record to its last (connection set-up, which varies by hundreds of milliseconds
from one consumer to the next, is timed apart by the set-up table), and the consumer's fetcher
is not held back by its local queue (``fetch.queue.backoff.ms``) (librdkafka fetches ahead; the queue limits are raised so
the fetcher is not held back by the application).
Set-up time: a fresh client's first Metadata answer (TCP + TLS
handshake + SASL exchange + ApiVersions + Metadata), median of SAMPLES, per mechanism; SCRAM is
measured at 4096 and 16384 iterations (the client derives the salted password; the broker keeps
only StoredKey/ServerKey, so its own cost does not depend on iterations).

    .venv/bin/python bench/security.py --runs 3
    .venv/bin/python bench/security.py --runs 1 --count 20000          # quick look
    .venv/bin/python bench/security.py --runs 1 --samples 0 --broker-python /tmp/perf-base/.venv/bin/python
    .venv/bin/python bench/security.py --runs 3 --samples 0 --listeners PLAINTEXT,SSL --tls-path loop
    .venv/bin/python bench/security.py --runs 3 --samples 0 --listeners PLAINTEXT,SSL --data-dir-parent /dev/shm
    .venv/bin/python bench/security.py --runs 6 --samples 0 --listeners PLAINTEXT,SSL,SSL_LOOP --tls-path both

``--tls-path loop`` runs the broker with ``TlsServer.offload = False`` (TLS in the event loop's
SSL protocol) and ``--tls-path thread`` with it True (the listener's TLS thread); without it the
broker runs as configured.  The broker's CPU is also split by thread: the main thread (the event
loop) and the others (the TLS threads), from /proc/<pid>/task.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LISTENER_LINE = re.compile(r"minikafka listener (\S+) (\S+) on 127\.0\.0\.1:(\d+)")


def start_broker(workdir: Path, certs: Path, python: str | None = None, tls_path: str | None = None):
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.location": str(certs / "broker.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": 'x required user_alice="alice-secret";',
    }
    python = python or str(ROOT / ".venv/bin/python")
    cwd = Path(python).absolute().parents[2]  # <tree>/.venv/bin/python: run from its own tree
    if tls_path == "both":  # one more SSL listener, SSL_LOOP, served on the loop; SSL on the thread
        settings["listeners"] += ",SSL_LOOP://127.0.0.1:0"
        settings["listener.security.protocol.map"] = (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL_LOOP:SSL")
    if tls_path is None:
        cmd = [python, "-m", "minikafka"]
    else:  # the same CLI, with the TLS path chosen first
        choice = ("TlsServer.offload = property(lambda self: self.listener.name != 'SSL_LOOP')"
                  if tls_path == "both" else f"TlsServer.offload = {tls_path == 'thread'}")
        cmd = [python, "-c", "import sys; from minikafka.broker.security.tls import TlsServer; "
               f"{choice}; from minikafka.broker.cli import main; "
               "sys.argv[0] = 'minikafka'; raise SystemExit(main())"]
    cmd += ["serve", "--data-dir", str(workdir / "data"), "--log-level", "WARNING"]
    for k, v in settings.items():
        cmd += ["--override", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ports = {}
    deadline = time.monotonic() + 20
    for line in proc.stdout:
        m = LISTENER_LINE.search(line)
        if m:
            ports[m.group(1)] = int(m.group(3))
        if line.startswith("minikafka ready") or time.monotonic() > deadline:
            break
    return proc, ports


def client_conf(listener: str, port: int, certs: Path, mechanism: str = "PLAIN", user="alice",
                password="alice-secret") -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if listener in ("SSL", "SASL_SSL", "SSL_LOOP"):
        conf.update({"security.protocol": listener.replace("_LOOP", ""), "ssl.ca.location": str(certs / "ca.pem")})
    if listener.startswith("SASL"):
        conf.update({"security.protocol": listener, "sasl.mechanisms": mechanism, "sasl.username": user,
                     "sasl.password": password})
    return conf


def broker_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the broker process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_other_threads_cpu_s(pid: int) -> float:
    """CPU seconds of the broker's threads other than the main one (the event loop's): the TLS
    threads, and any executor thread."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name == str(pid):
            continue
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def client_cpu_s() -> float:
    """CPU seconds of this process: the client, librdkafka's threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def produce(conf: dict, topic: str, count: int, size: int) -> float:
    producer = Producer({**conf, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return count * size / (time.perf_counter() - t0) / 1e6


def consume(conf: dict, topic: str, count: int, size: int) -> float:
    # fetch.queue.backoff.ms: librdkafka (>= 2.2) stops fetching for 1 s by default once
    # queued.min.messages (100 000) are queued locally, which the faster listener hits: a PLAINTEXT
    # round then waited a second or two and SSL looked faster than PLAINTEXT.
    consumer = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                         "fetch.queue.backoff.ms": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    t0 = None
    deadline = time.perf_counter() + 120
    while seen < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                if t0 is None:  # from the first record: the connection's set-up is timed apart
                    t0 = time.perf_counter()
                seen += 1
    elapsed = time.perf_counter() - t0
    consumer.close()
    return (seen - 1) * size / elapsed / 1e6


def setup_ms(conf: dict, samples: int) -> float:
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        admin = AdminClient(conf)
        admin.list_topics(timeout=10)
        times.append((time.perf_counter() - t0) * 1000)
        del admin
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=15, help="0: no connection set-up table")
    parser.add_argument("--broker-python", help="run another checkout's broker (<tree>/.venv/bin/python)")
    parser.add_argument("--tls-path", choices=("loop", "thread", "both"),
                        help="TLS on the event loop (TlsServer.offload=False) or on the listener's thread; "
                        "both: SSL on the thread and one more listener, SSL_LOOP, on the loop (measure "
                        "--listeners PLAINTEXT,SSL,SSL_LOOP: the two paths side by side in each round)")
    parser.add_argument("--listeners", default="PLAINTEXT,SSL,SASL_SSL",
                        help="which listeners to measure, PLAINTEXT first (default all three)")
    parser.add_argument("--json", help="append this invocation's per-round figures to this file (one JSON line)")
    parser.add_argument("--data-dir-parent", help="where the broker's data directory goes (default: the "
                        "system's temp dir); /dev/shm keeps disk write-back, which varies from run to run "
                        "on a shared machine, out of the figures")
    args = parser.parse_args()
    from minikafka.broker.security.certs import generate

    with tempfile.TemporaryDirectory(dir=args.data_dir_parent) as tmp:
        workdir = Path(tmp)
        certs = workdir / "certs"
        generate(certs, ["127.0.0.1", "localhost"], [])
        proc, ports = start_broker(workdir, certs, args.broker_python, args.tls_path)
        try:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            from kafka.admin import KafkaAdminClient
            from kafka.admin._users import ScramMechanism, UserScramCredentialUpsertion

            kadmin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports['PLAINTEXT']}")
            for upsertion in (  # one request each: a user named twice in one request is refused
                    UserScramCredentialUpsertion("s4096", ScramMechanism.SCRAM_SHA_512, "pw", iterations=4096),
                    UserScramCredentialUpsertion("s16384", ScramMechanism.SCRAM_SHA_512, "pw", iterations=16384),
                    UserScramCredentialUpsertion("s4096", ScramMechanism.SCRAM_SHA_256, "pw", iterations=4096)):
                kadmin.alter_user_scram_credentials([upsertion])
            kadmin.close()
            mechanisms = {"PLAINTEXT": "PLAIN", "SSL": "PLAIN", "SASL_SSL": "SCRAM-SHA-512", "SSL_LOOP": "PLAIN"}
            listeners = [(name, mechanisms[name]) for name in args.listeners.split(",")]
            assert listeners[0][0] == "PLAINTEXT", "the ratios need PLAINTEXT, first in --listeners"
            results = {name: {"produce": [], "consume": [], "produce_cpu": [], "consume_cpu": [],
                              "produce_cpu_threads": [], "consume_cpu_threads": [],
                              "produce_client_cpu": [], "consume_client_cpu": []} for name, _ in listeners}
            ratios = {name: {"produce": [], "consume": []} for name, _ in listeners}
            for name, mech in listeners:  # warm-up, not counted: first connections, imports, page cache
                topic = f"warmup-{name.lower()}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
                conf = client_conf(name, ports[name], certs, mech, user="s4096", password="pw")
                produce(conf, topic, max(args.count // 10, 1000), args.size)
                consume(conf, topic, max(args.count // 10, 1000), args.size)
            for run in range(args.runs):
                k = run % len(listeners)
                order = listeners[k:] + listeners[:k]
                this = {}
                for name, mech in order:
                    topic = f"bench-{name.lower()}-{run}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
                    conf = client_conf(name, ports[name], certs, mech, user="s4096", password="pw")
                    mb = args.count * args.size / 1e6
                    cpu0, client0 = broker_cpu_s(proc.pid), client_cpu_s()
                    thr0 = broker_other_threads_cpu_s(proc.pid)
                    p = produce(conf, topic, args.count, args.size)
                    cpu1, client1 = broker_cpu_s(proc.pid), client_cpu_s()
                    thr1 = broker_other_threads_cpu_s(proc.pid)
                    results[name]["produce_client_cpu"].append((client1 - client0) * 1000 / mb)
                    c = consume(conf, topic, args.count, args.size)
                    cpu2, thr2 = broker_cpu_s(proc.pid), broker_other_threads_cpu_s(proc.pid)
                    results[name]["consume_client_cpu"].append((client_cpu_s() - client1) * 1000 / mb)
                    results[name]["produce_cpu"].append((cpu1 - cpu0) * 1000 / mb)
                    results[name]["consume_cpu"].append((cpu2 - cpu1) * 1000 / mb)
                    results[name]["produce_cpu_threads"].append((thr1 - thr0) * 1000 / mb)
                    results[name]["consume_cpu_threads"].append((thr2 - thr1) * 1000 / mb)
                    this[name] = (p, c)
                    results[name]["produce"].append(p)
                    results[name]["consume"].append(c)
                    admin.delete_topics([topic])[topic].result(10)  # its segments go: memory stays flat
                for name, _ in listeners:
                    ratios[name]["produce"].append(this[name][0] / this["PLAINTEXT"][0])
                    ratios[name]["consume"].append(this[name][1] / this["PLAINTEXT"][1])
            print(f"machine: {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
                  f"{args.runs} runs x {args.count} records x {args.size} B, acks=1, 1 partition, "
                  f"broker {args.broker_python or 'this tree'}, TLS path {args.tls_path or 'as configured'}, "
                  f"load {os.getloadavg()[0]:.2f}")
            print("| listener | produce MB/s | consume MB/s | produce vs PLAINTEXT | consume vs PLAINTEXT "
                  "| broker CPU ms/MB produce (other threads) | consume (other threads) | client CPU ms/MB produce "
                  "| consume |")
            print("|---|---|---|---|---|---|---|---|---|")
            med = statistics.median
            for name, _ in listeners:
                r, q = results[name], ratios[name]
                print(f"| {name} | {med(r['produce']):.1f} | {med(r['consume']):.1f} | "
                      f"{med(q['produce']):.0%} | {med(q['consume']):.0%} | "
                      f"{med(r['produce_cpu']):.2f} ({med(r['produce_cpu_threads']):.2f}) | "
                      f"{med(r['consume_cpu']):.2f} ({med(r['consume_cpu_threads']):.2f}) | "
                      f"{med(r['produce_client_cpu']):.2f} | {med(r['consume_client_cpu']):.2f} |")
            for kind in ("produce", "consume"):
                print(f"per-round {kind} ratios:", {n: [f"{x:.0%}" for x in ratios[n][kind]] for n, _ in listeners})
            if args.json:
                import json

                with open(args.json, "a") as fh:
                    fh.write(json.dumps({"broker": args.broker_python or "this tree", "tls_path": args.tls_path,
                                         "load": os.getloadavg()[0], "count": args.count, "size": args.size,
                                         "results": results, "ratios": ratios}) + "\n")
            if not args.samples:
                return
            setups = [
                ("PLAINTEXT", "PLAINTEXT", "-", "alice", "alice-secret"),
                ("SSL", "SSL", "-", "alice", "alice-secret"),
                ("SASL_PLAINTEXT PLAIN", "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
                ("SASL_PLAINTEXT SCRAM-SHA-256 (4096)", "SASL_PLAINTEXT", "SCRAM-SHA-256", "s4096", "pw"),
                ("SASL_PLAINTEXT SCRAM-SHA-512 (4096)", "SASL_PLAINTEXT", "SCRAM-SHA-512", "s4096", "pw"),
                ("SASL_PLAINTEXT SCRAM-SHA-512 (16384)", "SASL_PLAINTEXT", "SCRAM-SHA-512", "s16384", "pw"),
                ("SASL_SSL PLAIN", "SASL_SSL", "PLAIN", "alice", "alice-secret"),
                ("SASL_SSL SCRAM-SHA-512 (4096)", "SASL_SSL", "SCRAM-SHA-512", "s4096", "pw"),
            ]
            print(f"\n| connection set-up (first Metadata, median of {args.samples}) | ms |")
            print("|---|---|")
            for label, name, mech, user, pw in setups:
                conf = client_conf(name, ports[name], certs, mech, user, pw)
                print(f"| {label} | {setup_ms(conf, args.samples):.1f} |")
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
