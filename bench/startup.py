"""Broker start-up: fixture start to first usable bootstrap, and process start to first Metadata answer.

Two measurements:

1. The embedded broker (``minikafka.Broker``), thread and child-process mode: ``runs`` times
   start it (port 0, temporary data dir), which returns once the broker listens and its group
   coordinator is loaded, then make one real client round trip (a confluent-kafka Producer
   delivers one record, acks=all) and stop the broker.  Reported: the median time from the start
   call to the returned bootstrap, and to the first delivered record.

2. A child process, from ``Popen`` to the first answer to a raw Metadata v1 request (polled every
   2 ms on a fresh connection), for two command lines: ``minikafka serve`` with its defaults, and
   the command line the embedded broker's child-process mode runs (HTTP control API on, the test
   defaults).  With ``--baseline-python`` (the interpreter of another checkout's venv, e.g. a
   worktree of main) each start of this tree alternates with one of the baseline, each from its
   own checkout, so a noisy machine treats both alike; the report gives medians and their ratio.
   Python's bytecode cache is on (as an installed broker runs), whatever the environment says.

Run:

    .venv/bin/python bench/startup.py [--runs 10] [--config offsets.topic.num.partitions=50]
    .venv/bin/python bench/startup.py --serve-only --runs 15 --baseline-python /tmp/base/.venv/bin/python
    .venv/bin/python bench/startup.py --profile        # where a serve start's import time goes
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

ROOT = Path(__file__).resolve().parents[1]


def one(mode: str, config: dict | None = None) -> tuple[float, float, float]:
    from confluent_kafka import Producer

    from minikafka import Broker

    t0 = time.monotonic()
    broker = Broker(mode=mode, config=config).start()
    ready = time.monotonic() - t0
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        producer.produce("bench-startup", b"x")
        assert producer.flush(30) == 0
        first = time.monotonic() - t0
    finally:
        t1 = time.monotonic()
        broker.stop()
        stop = time.monotonic() - t1
    return ready, first, stop


# -- child process to first Metadata answer ------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_METADATA_V1 = struct.pack(">hhih", 3, 1, 1, 5) + b"bench" + struct.pack(">i", -1)


def _metadata_answered(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(struct.pack(">i", len(_METADATA_V1)) + _METADATA_V1)
            return len(s.recv(4)) == 4
    except OSError:
        return False


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MINIKAFKA_")}


COMMANDS = {
    "serve": [],
    "embedded process mode": ["--override", "http.port=0", "--override", "http.control.enable=true",
                              "--override", "offsets.topic.num.partitions=5",
                              "--override", "transaction.state.log.num.partitions=5",
                              "--override", "group.initial.rebalance.delay.ms=0"],
}


def _cpu_s(pid: int) -> float:
    """CPU time the process's main thread has run so far (/proc schedstat, nanoseconds): unlike
    the wall time it does not grow with the machine's load."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


def serve_start(python: str, cwd: str, extra: list[str], cpu: list | None = None) -> float:
    """Seconds from Popen to the first Metadata answer of ``python -m minikafka serve``; the
    broker's CPU seconds up to that answer are appended to ``cpu``."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="minikafka-startup-") as data:
        argv = [python, "-m", "minikafka", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--data-dir", data, "--log-level", "WARNING", *extra]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = started + 30
            while not _metadata_answered(port):
                if time.perf_counter() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{argv} did not answer Metadata")
                time.sleep(0.002)
            elapsed = time.perf_counter() - started
            if cpu is not None:
                cpu.append(_cpu_s(proc.pid))
            return elapsed
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def serve_rows(runs: int, baseline_python: str | None) -> None:
    trees = {"this tree": (sys.executable, str(ROOT))}
    if baseline_python:
        base_root = str(Path(baseline_python).absolute().parents[2]) if "/.venv/" in baseline_python else os.getcwd()
        trees["baseline"] = (baseline_python, base_root)
    for name, extra in COMMANDS.items():
        for python, cwd in trees.values():
            serve_start(python, cwd, extra)  # one untimed start fills the bytecode cache
        times: dict[str, list[float]] = {t: [] for t in trees}
        cpus: dict[str, list[float]] = {t: [] for t in trees}
        for _ in range(runs):
            for tree, (python, cwd) in trees.items():
                times[tree].append(serve_start(python, cwd, extra, cpus[tree]))
        medians = {t: statistics.median(v) for t, v in times.items()}
        for tree, values in times.items():
            print(f"{name:22s} {tree:9s} Popen->first Metadata answer median {medians[tree]:.3f} s "
                  f"(min {min(values):.3f}, max {max(values):.3f}); broker CPU until then median "
                  f"{statistics.median(cpus[tree]):.3f} s (min {min(cpus[tree]):.3f}); n={runs}")
        if "baseline" in medians:
            print(f"{name:22s} this tree / baseline: {medians['this tree'] / medians['baseline']:.2f}")


# -- import profile ----------------------------------------------------------------------------------

_IMPORT_LINE = re.compile(r"^import time:\s*(\d+)\s*\|\s*(\d+)\s*\|( *)(\S+)\s*$")


def profile(python: str, cwd: str, top: int = 25) -> None:
    """``-X importtime`` of one serve start up to its first Metadata answer: the top-level imports by
    cumulative time.  (Modules loaded through importlib.import_module, as the handler modules are,
    are not in the interpreter's log; their imports by statement are.)"""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="minikafka-startup-") as data:
        log_path = Path(data) / "importtime.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([python, "-X", "importtime", "-m", "minikafka", "serve", "--port", str(port),
                                     "--data-dir", str(Path(data) / "d"), "--log-level", "WARNING"],
                                    cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, stderr=log)
            try:
                deadline = time.monotonic() + 30
                while not _metadata_answered(port) and time.monotonic() < deadline:
                    time.sleep(0.005)
            finally:
                proc.kill()
                proc.wait(5)
        rows = []
        for line in log_path.read_text(errors="replace").splitlines():
            m = _IMPORT_LINE.match(line)
            if m:
                rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)) // 2, m.group(4)))
    top_level = [r for r in rows if r[2] == 0]
    print(f"{len(rows)} modules imported by statement, top-level cumulative {sum(r[0] for r in top_level) / 1000:.1f} ms")
    for cumulative, _self, _depth, name in sorted(top_level, reverse=True)[:top]:
        print(f"  {cumulative / 1000:6.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                        help="broker setting, e.g. offsets.topic.num.partitions=50 (Kafka's default)")
    parser.add_argument("--baseline-python", help="another checkout's venv python, started from that checkout")
    parser.add_argument("--serve-only", action="store_true", help="only the Popen -> first Metadata rows")
    parser.add_argument("--profile", action="store_true", help="print the import-time profile of one serve start")
    args = parser.parse_args()
    if args.profile:
        print("this tree:")
        profile(sys.executable, str(ROOT))
        if args.baseline_python:
            print("baseline:")
            profile(args.baseline_python, str(Path(args.baseline_python).absolute().parents[2]))
        return
    serve_rows(args.runs, args.baseline_python)
    if args.serve_only:
        return
    config = dict(item.split("=", 1) for item in args.config)
    t = time.monotonic()
    import minikafka  # noqa: F401  (the import is part of a test session's start anyway)
    from minikafka import Broker  # noqa: F401

    print(f"import minikafka.Broker: {time.monotonic() - t:.3f} s (once per process)")
    one("thread")  # warm the import caches and the codec's compiled functions
    for mode in ("thread", "process"):
        results = [one(mode, config) for _ in range(args.runs)]
        ready = statistics.median(r[0] for r in results)
        first = statistics.median(r[1] for r in results)
        stop = statistics.median(r[2] for r in results)
        print(f"{mode:8s} start->bootstrap median {ready:.3f} s (min {min(r[0] for r in results):.3f}, "
              f"max {max(r[0] for r in results):.3f}); start->first record delivered {first:.3f} s; "
              f"stop {stop:.3f} s; n={args.runs}")


if __name__ == "__main__":
    main()
