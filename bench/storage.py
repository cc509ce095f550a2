"""Storage benchmark: append N MiB of 16 KiB record batches, then read them all back zero-copy.

Run from the repository root:

    .venv/bin/python bench/storage.py                 # 1 GiB, 3 runs (issue 3's figures)
    .venv/bin/python bench/storage.py --size-mb 128   # quick run

Each run uses a fresh temporary directory (``--dir``, default /tmp) that is removed afterwards.

* append: ``PartitionLog.append`` of one 16 KiB batch at a time with the default flush policy
  (written to the OS on every append, fsync when the oldest unflushed append is flush.ms = 1 s old,
  on every 1 GiB segment roll), plus a final ``flush()`` so the figure includes making everything
  durable.  The same batch buffer is appended again and again (append patches its base offset in
  place, as it does with a request buffer), so no allocation is measured.
* read (views): ``PartitionLog.read(offset, 1 MiB)`` from offset 0 to the end: the mmap views the
  broker hands to the socket; only the read path's work is measured.
* read + crc32c: the same, and every byte of every view is run through CRC-32C so the pages are
  really touched (the data is in the page cache: it was just written).

Figures are MB/s (10^6 bytes per second), medians of the runs.  "per CPU-second" divides by the
process's user+sys time instead of wall time: on a shared machine it shows what the code costs
when it gets a core to itself (waiting for the disk is not CPU time).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time


import crc32c  # noqa: E402

from minikafka.protocol.records import build_batch, read_header  # noqa: E402
from minikafka.storage import PartitionLog  # noqa: E402


def make_batch(batch_bytes: int) -> bytearray:
    """A batch of ~batch_bytes: 16 records with incompressible-looking values."""
    n = 16
    overhead = 61 + n * 12
    value_size = max(1, (batch_bytes - overhead) // n)
    for _ in range(3):  # converge on the exact size (varint lengths depend on the value size)
        seed = os.urandom(value_size)
        records = [(b"key-%02d" % i, seed, [], 1_700_000_000_000 + i) for i in range(n)]
        batch = build_batch(records)
        value_size -= (len(batch) - batch_bytes + n - 1) // n
    return batch


def one_run(root: str, total_bytes: int, batch: bytearray, read_bytes: int) -> dict:
    directory = tempfile.mkdtemp(prefix="bench-storage-", dir=root)
    try:
        log = PartitionLog(os.path.join(directory, "bench-0"), {})
        size = len(batch)
        count = max(1, total_bytes // size)
        records_per_batch = read_header(batch).record_count
        t0 = time.perf_counter()
        c0 = time.process_time()
        append = log.append
        for _ in range(count):
            append(batch)
        log.flush()
        t_append = time.perf_counter() - t0
        c_append = time.process_time() - c0
        written = count * size

        t0 = time.perf_counter()
        offset, seen = 0, 0
        leo = log.log_end_offset
        read = log.read
        while offset < leo:
            views = read(offset, read_bytes)
            n = 0
            for v in views:
                n += len(v)
            seen += n
            offset += (n // size) * records_per_batch  # every batch has the same size and count
        t_read = time.perf_counter() - t0
        assert seen == written, (seen, written)

        t0 = time.perf_counter()
        offset, crc = 0, 0
        while offset < leo:
            views = read(offset, read_bytes)
            n = 0
            for v in views:
                crc = crc32c.crc32c(v, crc)
                n += len(v)
            offset += (n // size) * records_per_batch
        t_crc = time.perf_counter() - t0
        log.close()
        return {"append": written / t_append / 1e6, "append_cpu": written / c_append / 1e6,
                "read": written / t_read / 1e6,
                "read_crc": written / t_crc / 1e6, "bytes": written, "batches": count}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def machine() -> str:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, {platform.system()} {platform.release()}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="MiB to append per run (default 1024)")
    parser.add_argument("--batch-kb", type=int, default=16, help="batch size in KiB (default 16)")
    parser.add_argument("--read-kb", type=int, default=1024, help="max_bytes per read in KiB (default 1024)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary logs go")
    args = parser.parse_args(argv)
    batch = make_batch(args.batch_kb * 1024)
    results = [one_run(args.dir, args.size_mb << 20, batch, args.read_kb << 10) for _ in range(args.runs)]
    keys = ("append", "append_cpu", "read", "read_crc")
    med = {k: statistics.median(r[k] for r in results) for k in keys}
    print(f"machine: {machine()}")
    print(f"data: {results[0]['bytes'] / 2**20:.0f} MiB in {results[0]['batches']} batches of {len(batch)} bytes, "
          f"reads of {args.read_kb} KiB, dir {args.dir}, {args.runs} runs")
    print("| measure | median MB/s | runs |")
    print("|---|---|---|")
    for key, label in (("append", "append (default flush policy, incl. final fsync)"),
                       ("append_cpu", "append, bytes per CPU-second of this process (user+sys)"),
                       ("read", "read, zero-copy views"), ("read_crc", "read + CRC-32C over every byte")):
        runs = ", ".join(f"{r[key]:.0f}" for r in results)
        print(f"| {label} | {med[key]:.0f} | {runs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
