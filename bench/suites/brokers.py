"""Start minikafka and Apache Kafka 4.2 side by side with the same settings, for running a
client library's own test suite against both (issue 20, deliverable 6).

    python3 bench/suites/brokers.py start DIR [--node-id N] [--advertised-host H]
                                              [--schema-registry] [--override k=v ...]
    python3 bench/suites/brokers.py stop DIR

`start` writes DIR/ports.env (MK_PORT, KAFKA_PORT and, with --schema-registry, SR_PORT: the
registry served by minikafka, used for both brokers' runs) and leaves both brokers running;
`stop` stops the two by the pids written there. minikafka runs from this tree's .venv.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = ROOT / ".venv" / "bin" / "python"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def start(args: argparse.Namespace) -> int:
    run = Path(args.dir).resolve()
    run.mkdir(parents=True, exist_ok=True)
    overrides = list(args.override or [])
    env_lines = []
    # minikafka
    mk_port = free_port()
    # "{port}" in an override is the broker's own port, "{extra_port}" a second free port per
    # broker (a SASL listener beside PLAINTEXT), "{extra_port2}" a third; all written to ports.env
    mk_extra, k_extra, mk_extra2, k_extra2 = free_port(), free_port(), free_port(), free_port()
    cmd = [str(VENV_PY), "-m", "minikafka", "serve", "--port", str(mk_port),
           "--data-dir", str(run / "mk-data"), "--node-id", str(args.node_id)]
    if args.advertised_host:
        cmd += ["--advertised-host", args.advertised_host]
    sr_port = None
    if args.schema_registry:
        sr_port = free_port()
        cmd += ["--override", f"schema.registry.listeners=http://127.0.0.1:{sr_port}"]
    for o in overrides + list(args.minikafka_override or []):
        cmd += ["--override", o.replace("{port}", str(mk_port)).replace("{extra_port}", str(mk_extra))
                             .replace("{extra_port2}", str(mk_extra2))]
    log = open(run / "minikafka.log", "ab")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=str(run))
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and not wait_port(mk_port, 0.5):
        pass
    if proc.poll() is not None or not wait_port(mk_port, 0.1):
        print(f"minikafka did not listen on {mk_port}; see {run / 'minikafka.log'}", file=sys.stderr)
        proc.kill()
        return 1
    env_lines += [f"MK_PORT={mk_port}", f"MK_PID={proc.pid}"]
    if sr_port is not None:
        if not wait_port(sr_port, 30):
            print("schema registry did not listen", file=sys.stderr)
        env_lines.append(f"SR_PORT={sr_port}")
    # Apache Kafka 4.2
    k_port = free_port()
    kcmd = [sys.executable, str(ROOT / "tests" / "kafka" / "kafka_runner.py"), "start",
            "--dir", str(run / "kafka"), "--port", str(k_port),
            "--override", f"node.id={args.node_id}"]
    if args.advertised_host:
        kcmd += ["--override", f"advertised.listeners=PLAINTEXT://{args.advertised_host}:{k_port}"]
    for o in overrides + list(args.kafka_override or []):
        kcmd += ["--override", o.replace("{extra_port}", str(k_extra))  # {port}: the runner's
                             .replace("{extra_port2}", str(k_extra2))]
    result = subprocess.run(kcmd, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        print(result.stdout + result.stderr, file=sys.stderr)
        return 1
    env_lines.append(f"KAFKA_PORT={k_port}")
    env_lines += [f"MK_EXTRA_PORT={mk_extra}", f"KAFKA_EXTRA_PORT={k_extra}",
                  f"MK_EXTRA_PORT2={mk_extra2}", f"KAFKA_EXTRA_PORT2={k_extra2}"]
    (run / "ports.env").write_text("\n".join(env_lines) + "\n")
    print("\n".join(env_lines))
    return 0


def stop(args: argparse.Namespace) -> int:
    run = Path(args.dir).resolve()
    env = {}
    if (run / "ports.env").exists():
        for line in (run / "ports.env").read_text().splitlines():
            k, _, v = line.partition("=")
            env[k] = v
    pid = int(env.get("MK_PID", "0"))
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    subprocess.run([sys.executable, str(ROOT / "tests" / "kafka" / "kafka_runner.py"), "stop",
                    "--dir", str(run / "kafka")], timeout=120)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start")
    s.add_argument("dir")
    s.add_argument("--node-id", type=int, default=0)
    s.add_argument("--advertised-host")
    s.add_argument("--schema-registry", action="store_true")
    s.add_argument("--override", action="append", metavar="NAME=VALUE")
    s.add_argument("--minikafka-override", action="append", metavar="NAME=VALUE",
                   help="a setting for minikafka only")
    s.add_argument("--kafka-override", action="append", metavar="NAME=VALUE",
                   help="a setting only Kafka has (minikafka refuses unknown names)")
    t = sub.add_parser("stop")
    t.add_argument("dir")
    args = p.parse_args()
    return start(args) if args.cmd == "start" else stop(args)


if __name__ == "__main__":
    raise SystemExit(main())
