"""Idle memory of a broker: VmRSS two seconds after start, with an empty data dir and with 100 topics.

For each tree (this one, and with ``--baseline-python`` another checkout's venv, each started from
its own checkout) and each case, ``runs`` starts alternate between the trees: ``python -m minikafka
serve`` on a free port, RSS read from /proc two seconds after its ready line, then SIGTERM.  The
100-topic data dir is made once per tree by that tree's broker (CreateTopics through the Kafka
protocol, one partition each) and reused by every start.  The report gives medians of VmRSS and
of its anonymous part (RssAnon: the heap; the rest is shared libraries and the interpreter).
A first row gives the floor: an interpreter that only imports asyncio and uvloop and makes a loop.

``--tracemalloc`` instead runs one broker of this tree under tracemalloc (from interpreter start)
and prints what Python allocated, by file, two seconds after start: where idle memory goes.

    .venv/bin/python bench/idle_rss.py --runs 5 --baseline-python /tmp/base/.venv/bin/python
    .venv/bin/python bench/idle_rss.py --tracemalloc [--topics 100]
    .venv/bin/python bench/idle_rss.py --floors --runs 3      # interpreter, ssl, asyncio, uvloop
"""

from __future__ import annotations

import argparse
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(rb"minikafka ready on (\S+):(\d+)")
TOPICS = 100


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MINIKAFKA_")}


def _status(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


class Serve:
    def __init__(self, argv: list[str], cwd: str):
        self.proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        text = b""
        deadline = time.monotonic() + 30
        try:
            while (m := READY.search(text)) is None:
                if time.monotonic() > deadline or not sel.select(max(deadline - time.monotonic(), 0)):
                    raise RuntimeError(f"{argv} did not get ready: {text!r}")
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(f"{argv} exited: {text!r}")
                text += chunk
        finally:
            sel.close()
        self.ready_at = time.monotonic()
        self.port = int(m.group(2))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc.stdout.close()


def _serve_argv(python: str, data: str) -> list[str]:
    return [python, "-m", "minikafka", "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", data,
            "--log-level", "WARNING"]


def _create_topics(port: int, count: int) -> None:
    """CreateTopics v2 with ``count`` one-partition topics, on a raw socket (no client library in the broker's RSS)."""
    sys.path.insert(0, str(ROOT))
    from minikafka.protocol import codec

    topics = [{"name": f"idle-{i:03d}", "num_partitions": 1, "replication_factor": 1, "assignments": [],
               "configs": []} for i in range(count)]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(codec.encode_request(19, 2, 1, "idle-rss", {"topics": topics, "timeout_ms": 30000,
                                                                  "validate_only": False}))
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        _, body = codec.decode_response(19, 2, sock.recv(size, socket.MSG_WAITALL))
    errors = [t for t in body["topics"] if t["error_code"] not in (0, 36)]
    assert not errors, errors


def idle(python: str, cwd: str, data: str) -> dict[str, float]:
    broker = Serve(_serve_argv(python, data), cwd)
    try:
        time.sleep(max(0.0, broker.ready_at + 2.0 - time.monotonic()))
        return _status(broker.proc.pid)
    finally:
        broker.stop()


_FLOOR = """
import asyncio, sys, time, uvloop
loop = uvloop.new_event_loop()
print("minikafka ready on 127.0.0.1:0", flush=True)
time.sleep(60)
"""


def floor(runs: int) -> None:
    """The runtime alone: an interpreter that imports asyncio and uvloop and makes a loop."""
    values = []
    for _ in range(runs):
        broker = Serve([sys.executable, "-c", _FLOOR], str(ROOT))
        try:
            time.sleep(2.0)
            values.append(_status(broker.proc.pid))
        finally:
            broker.stop()
    rss = [v["VmRSS"] for v in values]
    print(f"{'floor':15s} {'asyncio+uvloop, no broker':26s} VmRSS median {statistics.median(rss):5.1f} MB; "
          f"RssAnon median {statistics.median(v['RssAnon'] for v in values):5.1f} MB; n={runs}")


# The runtimes beneath a broker, and the broker on each (``--floors``): which event loop and
# whether ``ssl`` is ever imported decide most of the idle size.
_FLOORS = {
    "bare interpreter": "",
    "import ssl": "import ssl",
    "import asyncio (imports ssl)": "import asyncio",
    "asyncio + default loop, no ssl": "import sys; sys.modules['ssl'] = None; import asyncio; asyncio.new_event_loop()",
    "asyncio + uvloop loop": "import asyncio, uvloop; uvloop.new_event_loop()",
}
_BROKER_ON = {
    "broker on uvloop (default)": "",
    "broker on asyncio's loop": "sys.modules['uvloop'] = None",
    "broker on asyncio's loop, no ssl": "sys.modules['uvloop'] = None; sys.modules['ssl'] = None",
}


def floors(runs: int) -> None:
    for name, code in _FLOORS.items():
        values = []
        for _ in range(runs):
            proc = subprocess.Popen([sys.executable, "-c", code + "\nprint('minikafka ready on x:0', flush=True)"
                                     "\nimport time; time.sleep(60)"], stdout=subprocess.PIPE, env=_env())
            proc.stdout.readline()
            time.sleep(0.5)
            values.append(_status(proc.pid))
            proc.kill()
            proc.wait()
        print(f"{name:40s} VmRSS median {statistics.median(v['VmRSS'] for v in values):5.1f} MB; "
              f"RssAnon median {statistics.median(v['RssAnon'] for v in values):5.1f} MB; n={runs}")
    for name, pre in _BROKER_ON.items():
        values = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="minikafka-rss-") as data:
                code = (f"import sys, runpy\n{pre}\nsys.argv = {_serve_argv('minikafka', data)[3:]!r}\n"
                        "sys.argv.insert(0, 'minikafka')\nrunpy.run_module('minikafka', run_name='__main__')")
                broker = Serve([sys.executable, "-c", code], str(ROOT))
                try:
                    time.sleep(2.0)
                    values.append(_status(broker.proc.pid))
                finally:
                    broker.stop()
        print(f"{name:40s} VmRSS median {statistics.median(v['VmRSS'] for v in values):5.1f} MB; "
              f"RssAnon median {statistics.median(v['RssAnon'] for v in values):5.1f} MB; n={runs}")


def measure(runs: int, baseline_python: str | None) -> None:
    trees = {"this tree": (sys.executable, str(ROOT))}
    if baseline_python:
        trees["baseline"] = (baseline_python, str(Path(baseline_python).absolute().parents[2]))
    with tempfile.TemporaryDirectory(prefix="minikafka-idle-") as work:
        with_topics = {}
        for tree, (python, cwd) in trees.items():
            data = os.path.join(work, f"topics-{len(with_topics)}")
            broker = Serve(_serve_argv(python, data), cwd)
            try:
                _create_topics(broker.port, TOPICS)
            finally:
                broker.stop()
            with_topics[tree] = data
        for case in ("empty data dir", f"{TOPICS} topics"):
            results: dict[str, list[dict]] = {t: [] for t in trees}
            for i in range(runs):
                for tree, (python, cwd) in trees.items():
                    data = with_topics[tree] if case != "empty data dir" else os.path.join(work, f"empty-{tree}-{i}")
                    results[tree].append(idle(python, cwd, data))
            for tree, values in results.items():
                rss = [v["VmRSS"] for v in values]
                anon = [v["RssAnon"] for v in values]
                print(f"{case:15s} {tree:9s} VmRSS median {statistics.median(rss):5.1f} MB (min {min(rss):.1f}, "
                      f"max {max(rss):.1f}); RssAnon median {statistics.median(anon):5.1f} MB; n={runs}")


_TRACE_CHILD = """
import sys, threading, tracemalloc
out, argv = sys.argv[1], sys.argv[2:]
def dump():
    snap = tracemalloc.take_snapshot()
    current, peak = tracemalloc.get_traced_memory()
    with open(out, "w") as f:
        f.write(f"traced now {current / 2**20:.2f} MB, peak {peak / 2**20:.2f} MB\\n")
        for stat in snap.statistics("filename")[:30]:
            f.write(f"{stat.size / 1024:9.1f} KiB {stat.count:7d} blocks  {stat.traceback[0].filename}\\n")
        f.write("by line:\\n")
        for stat in snap.statistics("lineno")[:20]:
            f.write(f"{stat.size / 1024:9.1f} KiB  {stat.traceback[0]}\\n")
threading.Timer(2.0, dump).start()
from minikafka.broker.cli import main
sys.exit(main(argv))
"""


def trace(topics: int) -> None:
    with tempfile.TemporaryDirectory(prefix="minikafka-idle-") as work:
        data = os.path.join(work, "data")
        if topics:
            broker = Serve(_serve_argv(sys.executable, data), str(ROOT))
            try:
                _create_topics(broker.port, topics)
            finally:
                broker.stop()
        out = os.path.join(work, "trace.txt")
        argv = [sys.executable, "-X", "tracemalloc=1", "-c", _TRACE_CHILD, out, "serve", "--port", "0",
                "--data-dir", data, "--log-level", "WARNING"]
        broker = Serve(argv, str(ROOT))
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(out) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
            print(f"VmRSS under tracemalloc: {_status(broker.proc.pid)}")
        finally:
            broker.stop()
        print(Path(out).read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-python", help="another checkout's venv python, started from that checkout")
    parser.add_argument("--tracemalloc", action="store_true", help="where this tree's idle memory goes")
    parser.add_argument("--topics", type=int, default=0, help="with --tracemalloc: topics in the data dir")
    parser.add_argument("--floors", action="store_true",
                        help="the runtimes beneath a broker, and this tree's broker on each event loop")
    args = parser.parse_args()
    if args.floors:
        floors(args.runs)
    elif args.tracemalloc:
        trace(args.topics)
    else:
        floor(args.runs)
        measure(args.runs, args.baseline_python)


if __name__ == "__main__":
    main()
