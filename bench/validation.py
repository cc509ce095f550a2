"""Cost of validating produced batches (issue 15).

Two measurements, both printed as Markdown rows:

1. The validator alone per codec: MB/s of batch bytes through protocol.validation.validate_batch,
   beside the CRC-32C alone (the check every produce paid before).  1,000 records of 1 KiB per
   batch, compressible values (half random, half repeated), median of --runs.
2. End to end, 200,000 x 1 KiB uncompressed with confluent-kafka (bench/produce_consume.py's
   producer): this checkout's broker against a baseline broker run by another interpreter
   (``--baseline-python``: the .venv/bin/python of a checkout without validation), alternating
   in one run, medians of --runs.

    .venv/bin/python bench/validation.py --runs 5 --baseline-python /path/to/main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_consume import BrokerProcess, create_topic, produce  # noqa: E402

from minikafka.protocol.primitives import crc32c  # noqa: E402
from minikafka.protocol.records import COMPRESSION_NAMES, build_batch  # noqa: E402
from minikafka.protocol.validation import ValidationRules, validate_batch  # noqa: E402


def validator_rows(runs: int) -> list[str]:
    rng = os.urandom(512)
    value = rng + b"x" * 512
    rules = ValidationRules(max_message_bytes=8 << 20)
    rows = ["| codec | batch bytes | validate (MB/s of batch) | CRC only (MB/s) | us per record |",
            "|---|---|---|---|---|"]
    for codec in range(5):
        batch = build_batch([(b"key-%d" % i, value, [], 1_700_000_000_000 + i) for i in range(1000)],
                            compression=codec)
        n = max(3, int(2e7 // len(batch)) // 10)
        v = statistics.median(timeit.repeat(lambda: validate_batch(batch, rules), number=n, repeat=runs)) / n
        view = memoryview(batch)[21:]
        c = statistics.median(timeit.repeat(lambda: crc32c(view), number=n, repeat=runs)) / n
        rows.append(f"| {COMPRESSION_NAMES[codec]} | {len(batch)} | {len(batch) / v / 1e6:.0f} | "
                    f"{len(batch) / c / 1e6:.0f} | {v / 1000 * 1e6:.2f} |")
    return rows


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far: unlike throughput, barely moved by other jobs
    sharing the machine (they take wall time from the broker, not instructions)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def end_to_end(runs: int, baseline_python: str, count: int) -> list[str]:
    results: dict[str, list[float]] = {"validating": [], "baseline": []}
    cpu: dict[str, list[float]] = {"validating": [], "baseline": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for run in range(runs):
            for name, python in (("validating", sys.executable), ("baseline", baseline_python)):
                data = tmp / f"{name}-{run}"
                argv = lambda port, python=python, data=data: [  # noqa: E731
                    python, "-m", "minikafka", "serve", "--host", "127.0.0.1", "--port", str(port),
                    "--data-dir", str(data), "--log-level", "WARNING"]
                # Each broker starts in its own checkout: `python -m minikafka` looks in the current
                # directory first, so the baseline started here would import this checkout's code.
                cwd = Path(python).absolute().parents[2] if name == "baseline" else Path(__file__).resolve().parents[1]
                broker = BrokerProcess(name, argv, tmp, cwd=cwd)
                try:
                    create_topic(broker.bootstrap, "bench")
                    cpu0 = _cpu_seconds(broker.proc.pid)
                    results[name].append(produce(broker.bootstrap, "bench", count, 1024, "1")["mb_per_s"])
                    cpu[name].append((_cpu_seconds(broker.proc.pid) - cpu0) / count * 1e6)
                finally:
                    broker.stop()
    v, b = statistics.median(results["validating"]), statistics.median(results["baseline"])
    vc, bc = statistics.median(cpu["validating"]), statistics.median(cpu["baseline"])
    runs_of = lambda xs, f: ", ".join(f.format(x) for x in xs)  # noqa: E731
    return ["| broker | 1 KiB produce MB/s (median) | runs | broker CPU us per record (median) | runs |",
            "|---|---|---|---|---|",
            f"| validating (this checkout) | {v:.1f} | {runs_of(results['validating'], '{:.0f}')} | {vc:.2f} | "
            f"{runs_of(cpu['validating'], '{:.2f}')} |",
            f"| baseline ({baseline_python}) | {b:.1f} | {runs_of(results['baseline'], '{:.0f}')} | {bc:.2f} | "
            f"{runs_of(cpu['baseline'], '{:.2f}')} |",
            f"| ratio validating/baseline | {v / b:.3f} | | {vc / bc:.3f} | |"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--baseline-python", default=None)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print("\n".join(validator_rows(args.runs)))
    if args.baseline_python:
        print()
        print("\n".join(end_to_end(args.runs, args.baseline_python, args.count)))


if __name__ == "__main__":
    main()
