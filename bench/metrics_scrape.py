"""What one ``GET /metrics`` costs the broker with many partitions (issue 24: <= 3% of a core at one
scrape per second with 10,000 partitions).

An embedded broker (thread mode, HTTP on) gets ``--topics`` topics of ``--partitions`` partitions
each (100 x 100 = 10,000 by default; storage's fsync is switched off while they are created, so
seeding takes seconds instead of minutes, and back on before anything is measured), then is
scraped ``--scrapes`` times over loopback HTTP.  Each scrape's cost is the CPU time of the
broker's thread alone (its pthread CPU clock), so the client's HTTP work is not counted.  The
first scrape (which opens every partition's state once) is reported apart.  Run:

    .venv/bin/python bench/metrics_scrape.py [--topics 100 --partitions 100 --scrapes 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.request


def _broker_cpu(broker) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(broker._thread.ident))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--scrapes", type=int, default=30)
    args = parser.parse_args()

    from minikafka import Broker
    from minikafka.storage import fs

    with Broker(http_port=0) as kafka:
        real_fsync = fs.fsync
        fs.fsync = lambda fd: None
        t = time.monotonic()
        try:
            for i in range(args.topics):
                kafka.control.create_topic(f"scrape-{i:04d}", args.partitions)
        finally:
            fs.fsync = real_fsync
        total = args.topics * args.partitions
        print(f"{total:,} partitions in {args.topics} topics created in {time.monotonic() - t:.1f} s")
        url = f"http://127.0.0.1:{kafka.http_port}/metrics"

        def scrape() -> tuple[float, float, int]:
            cpu, wall = _broker_cpu(kafka), time.perf_counter()
            with urllib.request.urlopen(url, timeout=120) as resp:
                body = resp.read()
            return _broker_cpu(kafka) - cpu, time.perf_counter() - wall, body.count(b"\n")

        first = scrape()
        print(f"first scrape: broker CPU {first[0] * 1000:.1f} ms, wall {first[1] * 1000:.1f} ms, {first[2]:,} lines")
        runs = [scrape() for _ in range(args.scrapes)]
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        print(f"scrape: broker CPU median {cpu * 1000:.1f} ms (min {min(r[0] for r in runs) * 1000:.1f}), "
              f"wall median {wall * 1000:.1f} ms, {runs[0][2]:,} lines, n={args.scrapes}")
        print(f"  = {cpu / total * 1e6:.2f} us per partition; at one scrape per second {cpu * 100:.1f}% of one core")


if __name__ == "__main__":
    main()
