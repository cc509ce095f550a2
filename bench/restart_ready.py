"""Restart to ready on a large data dir, for two or more source trees side by side.

The data dir comes from ``bench/producer_snapshots.py --keep DIR`` (``DIR/data``: 5 GiB over
500 partitions by default).  Each run starts ``python -m minikafka serve`` on it, times process
start to the ready line (the broker listens and its coordinators are loaded) and reads the
broker's own "started in N ms", then stops it cleanly (SIGTERM), so every start is a clean
restart.  Trees alternate within each round so both see the same machine load.  Retention is
off (``log.retention.ms=-1``) so that every run opens the same data.

``--tree NAME=PATH`` names a checkout to run (default: this one); ``PATH`` is a repository
root, which is laid out as the ``minikafka`` package (symlinks, as pyproject.toml maps the
folders) under a temporary directory and put first on the child's ``sys.path``.  To compare with
an older commit: ``git archive <commit> | tar -x -C /tmp/base`` and pass ``--tree before=/tmp/base``
(copy protocol/_validate*.so into it too, so both use the C validator).

    .venv/bin/python bench/restart_ready.py --data /tmp/snapkeep/data --runs 5 \\
        --tree before=/tmp/base --tree after=.
"""

from __future__ import annotations

import argparse
import os
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
READY = re.compile(rb"minikafka ready on ")
STARTED = re.compile(rb"started in (\d+) ms")
FOLDERS = {"broker": "broker", "protocol": "protocol", "storage": "storage", "pipeline": "pipeline"}


def package_root(tree: str, scratch: str, name: str) -> str:
    """A directory holding ``minikafka/`` built from ``tree`` the way pyproject.toml maps it."""
    root = os.path.join(scratch, name)
    pkg = os.path.join(root, "minikafka")
    os.makedirs(pkg)
    for entry in os.listdir(os.path.join(tree, "minikafka")):
        os.symlink(os.path.join(tree, "minikafka", entry), os.path.join(pkg, entry))
    for sub, folder in FOLDERS.items():
        os.symlink(os.path.join(tree, folder), os.path.join(pkg, sub))
    return root


def start_and_stop(root: str, data: str, log_path: str, timeout: float = 300) -> tuple[float, int]:
    bootstrap = ("import os, runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
                 "runpy.run_module('minikafka', run_name='__main__', alter_sys=True)")
    cmd = [sys.executable, "-c", bootstrap, root, "serve", "--host", "127.0.0.1", "--port", "0",
           "--data-dir", data, "--override", "http.port=-1", "--override", "log.retention.ms=-1"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "ab") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=log)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    try:
        while not READY.search(buf):
            left = t0 + timeout - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                raise RuntimeError(f"broker not ready (exit {proc.poll()}); see {log_path}")
            if sel.select(timeout=left):
                buf += os.read(proc.stdout.fileno(), 4096)
        ready = time.monotonic() - t0
    finally:
        sel.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with open(log_path, "rb") as log:
        own = STARTED.findall(log.read())
    return ready, int(own[-1]) if own else -1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, help="data dir (producer_snapshots.py --keep DIR makes DIR/data)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.tree] or [["this", ROOT]]
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(args.data) for f in fs)
    partitions = sum(1 for d in os.listdir(args.data) if os.path.isdir(os.path.join(args.data, d)))
    print(f"data dir {args.data}: {size / (1 << 30):.2f} GiB, {partitions} directories; {args.runs} runs per tree")
    with tempfile.TemporaryDirectory(prefix="restart-ready-") as scratch:
        roots = {name: package_root(os.path.abspath(path), scratch, name) for name, path in trees}
        results: dict[str, list[tuple[float, int]]] = {name: [] for name in roots}
        for name, root in roots.items():  # one unmeasured start each: warms caches, first clean stop
            start_and_stop(root, args.data, os.path.join(scratch, f"{name}.log"))
        for i in range(args.runs):
            for name, root in roots.items():
                r = start_and_stop(root, args.data, os.path.join(scratch, f"{name}.log"))
                results[name].append(r)
                print(f"  run {i + 1} {name}: ready {r[0]:.3f} s (broker's own start {r[1]} ms)", flush=True)
        for name, rs in results.items():
            ready = [r[0] for r in rs]
            own = [r[1] for r in rs]
            print(f"{name:8s} process start -> ready median {statistics.median(ready):.3f} s "
                  f"(min {min(ready):.3f}, max {max(ready):.3f}); broker's own start median "
                  f"{statistics.median(own):.0f} ms (min {min(own)}, max {max(own)}); n={len(rs)}")


if __name__ == "__main__":
    main()
