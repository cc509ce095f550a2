"""Where produce-to-consume latency goes on the wire: client, kernel or broker (issue 24).

The broker runs as a child process (``python -m minikafka serve`` of the tree the interpreter
belongs to, through a wrapper that times its socket edges) and records, per record, two moments
of its own: when the Produce request's bytes reach the connection (``buffer_updated``, before
anything is decoded) and when the Fetch response that carries the record, encoded, goes to the
connection's ``_flush`` (which pops it and calls ``writelines``: uvloop's ``writev`` at once).  The
moment is taken before the write, not after: the client the write wakes often preempts the broker
on its CPU right after ``writev`` (on 2 cores), which would count the client's time as the broker's.
The client records when it sent the record and when it had it.  ``perf_counter`` is
CLOCK_MONOTONIC, the same clock in both processes, and the record's first 8 bytes are the send
time, which joins the two sides.  Per record, then:

    in      client send -> broker has the produce's bytes (client library, kernel, broker wake-up)
    broker  produce bytes in -> fetch response ready to write (the broker's Python path)
    out     fetch response ready -> client has the record (the write, kernel, client wake-up, client library)

``--client raw``: bench/latency_raw.py's sockets (a parked Fetch v16, then a Produce v10 acks=-1);
``--client rdkafka``: bench/latency.py's librdkafka producer (acks=all) and group consumer.
Also counted: produces whose fetch was not parked when they arrived (the consumer's next fetch
came later: its wait is part of "broker" then).  The wrapper adds ~1 us to "broker" (a copy of
each produce read and of each fetch answer, taken outside the timed span where it can be).

    .venv/bin/python bench/latency_wire.py --client rdkafka --seconds 4
    .venv/bin/python bench/latency_wire.py --client raw --cycles 2000 --python /work/wt/base347/.venv/bin/python
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
READY = re.compile(r"minikafka ready on (\S+):(\d+)")
PAD = bytes(92)  # both clients send a 100-byte value: an 8-byte send time, then 92 zero bytes


def _key(data: bytes) -> float | None:
    """The send time in the record's value: 8 bytes before 92 zero bytes (the zero run may go on
    with the record's trailing fields, and the time's own last bytes may be zero too)."""
    at = data.rfind(PAD)
    start = at
    while start > 8 and data[start - 1] == 0:
        start -= 1
    for end in range(start, at + 1):
        if end >= 8:
            value = struct.unpack_from(">d", data, end - 8)[0]
            if 1.0 < value < 1e9:
                return value
    return None


def child(out_path: str, argv: list[str]) -> int:
    """The broker with its socket edges timed; the timings go to ``out_path`` at exit."""
    from minikafka.broker import connection as connection_mod
    from minikafka.broker.cli import main

    clock = time.perf_counter
    produce_in: list = []  # (t, frame bytes) of reads that start a Produce frame
    fetch_in: list = []  # t of reads that start a Fetch frame
    fetch_out: list = []  # (t, response bytes) of Fetch answers
    conn_cls = connection_mod.KafkaConnection
    original_buffer_updated = conn_cls.buffer_updated
    original_flush = conn_cls._flush

    def buffer_updated(self, nbytes):
        t = clock()
        buf = self._read_buffer
        if nbytes >= 8:
            api_key = buf[4] << 8 | buf[5]
            if api_key == 0:
                produce_in.append((t, bytes(buf[:nbytes])))
            elif api_key == 1:
                fetch_in.append(t)
        return original_buffer_updated(self, nbytes)

    def _flush(self):
        pending = self._pending
        slot = pending[0] if pending else None
        if slot is None or not slot.done or slot.api_key != 1 or not slot.chunks or self.transport is None:
            return original_flush(self)
        t = clock()  # the answer is encoded; _flush writes it now (timed before: see the docstring)
        chunks = list(slot.chunks)
        original_flush(self)
        fetch_out.append((t, b"".join(bytes(c) for c in chunks)))

    conn_cls.buffer_updated = buffer_updated
    conn_cls._flush = _flush

    def dump():
        produces = [(t, _key(frame)) for t, frame in produce_in]
        fetches = [(t, _key(data)) for t, data in fetch_out if len(data) > 150]
        with open(out_path, "w") as f:
            json.dump({"produce_in": produces, "fetch_in": fetch_in, "fetch_out": fetches}, f)

    atexit.register(dump)
    return main(argv)


def start(python: str, data: str, out_path: str):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MINIKAFKA_")}
    cwd = str(Path(python).absolute().parents[2])  # the checkout the venv belongs to
    cmd = [python, str(Path(__file__).resolve()), "--child", out_path, "serve", "--port", "0",
           "--data-dir", data, "--log-level", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY.search(proc.stdout.readline())
        if m:
            return proc, m.group(1), int(m.group(2))
    raise RuntimeError("the broker did not start")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        raise SystemExit(child(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=("raw", "rdkafka"), default="rdkafka")
    parser.add_argument("--python", default=sys.executable, help="the broker's interpreter (its checkout is served)")
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=4.0, help="rdkafka: seconds per round")
    parser.add_argument("--cycles", type=int, default=2000, help="raw: cycles per round")
    parser.add_argument("--json", help="write the per-record rows here")
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    with tempfile.TemporaryDirectory(prefix="minikafka-wire-") as tmp:
        out_path = os.path.join(tmp, "broker.json")
        proc, host, port = start(args.python, os.path.join(tmp, "data"), out_path)
        sent: list[tuple[float, float]] = []
        try:
            if args.client == "raw":
                import latency_raw

                lat = latency_raw.one_round((host, port), args.cycles, args.rate, "latency", sent)
            else:
                import latency

                lat = latency.one_round(f"{host}:{port}", args.rate, args.seconds, "latency", sent)
        finally:
            proc.terminate()
            proc.wait(10)
        with open(out_path) as f:
            broker = json.load(f)
    produce_in = {k: t for t, k in broker["produce_in"] if k is not None}
    fetch_out = {k: t for t, k in broker["fetch_out"] if k is not None}
    fetch_in = sorted(broker["fetch_in"])
    import bisect

    rows = []
    late_fetch = 0
    for (key, began), total in zip(sent, lat):
        if key not in produce_in or key not in fetch_out:
            continue
        t_in = produce_in[key]
        t_out = fetch_out[key]
        # The fetch that answered: the last one to arrive before the answer; parked if it came
        # before the produce.
        i = bisect.bisect_right(fetch_in, t_out) - 1
        parked = i >= 0 and fetch_in[i] <= t_in
        late_fetch += not parked
        rows.append({"total": total, "in": t_in - began, "broker": t_out - t_in, "out": began + total - t_out,
                     "parked": parked})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f)
    n = len(rows)
    print(f"client {args.client}, broker {args.python}: {n} of {len(lat)} records joined, "
          f"{late_fetch} answered by a fetch that came after the produce, load {os.getloadavg()[0]:.1f}")
    print(f"{'us':8s} {'p10':>7s} {'p50':>7s} {'p90':>7s} {'p99':>7s}")
    for part in ("in", "broker", "out", "total"):
        values = [r[part] * 1e6 for r in rows]
        print(f"{part:8s} " + " ".join(f"{pct(values, q):7.0f}" for q in (0.1, 0.5, 0.9, 0.99)))
    parked = [r for r in rows if r["parked"]]
    if parked and len(parked) != n:
        values = [r["broker"] * 1e6 for r in parked]
        print(f"{'broker*':8s} " + " ".join(f"{pct(values, q):7.0f}" for q in (0.1, 0.5, 0.9, 0.99))
              + "   (* only records whose fetch was parked)")


if __name__ == "__main__":
    main()
