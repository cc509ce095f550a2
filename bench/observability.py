"""Issue 13: what /metrics costs the broker, and how fast the console answers on big data.

1. Throughput: one broker (HTTP on, so the metrics hooks run), librdkafka producing 100-byte
   records; rounds alternate "scraped" (a thread GETs /metrics every second) and "unscraped",
   in the same run, and the medians are compared.  A second broker with HTTP off (no hooks at
   all) runs the same rounds for the cost of the hooks themselves.  Broker CPU (nanoseconds from
   /proc/<pid>/task/*/schedstat) per record is printed beside records/s: the producer, not the
   broker, bounds the wall-clock rate.  Then the broker CPU of one scrape itself (median of 30,
   idle broker): scraped every second, that fraction of a core is the most a CPU-bound broker
   can lose.
2. Console: 1,000 topics plus one partition of 10 million records (written through storage's
   PartitionLog while the broker is stopped, so seeding takes seconds), then the median time of
   each page over several loads (loopback HTTP, so it is server time plus a few 0.1 ms), and the
   broker CPU of one scrape with those 1,000 topics.

    .venv/bin/python bench/observability.py --rounds 5
    .venv/bin/python bench/observability.py --rounds 1 --records 200000 --big 1000000   # quick look
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]


class Broker:
    def __init__(self, data_dir: str, http: bool):
        cmd = [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir", data_dir,
               "--log-level", "WARNING"]
        if http:
            cmd += ["--override", "http.port=0"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.http = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("broker exited")
            m = re.search(r"http on ([\d.]+):(\d+)", line)
            if m:
                self.http = f"http://{m.group(1)}:{m.group(2)}"
            m = re.search(r"ready on ([\d.]+):(\d+)", line)
            if m:
                self.bootstrap = f"{m.group(1)}:{m.group(2)}"
                return
        raise RuntimeError("broker not ready")

    def cpu_seconds(self) -> float:
        """CPU time of the broker process so far, summed over its threads.

        /proc/<pid>/task/*/schedstat counts nanoseconds on the CPU; /proc/<pid>/stat's utime and
        stime come in clock ticks (10 ms), about 2% of a round's broker CPU, too coarse for a 3%
        target.  (Threads that already exited are not counted; the broker's live for its run.)"""
        total = 0
        try:
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
            return total / 1e9
        except (OSError, ValueError):
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def produce_rate(bootstrap: str, topic: str, n: int) -> float:
    # Full batches of 2,000 records whatever the producer's speed (linger far above the time to fill
    # one): the broker's work per record then does not swing with the load of the machine.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "batch.num.messages": 2000,
                  "batch.size": 1000000, "acks": "all", "queue.buffering.max.messages": 1000000})
    value = b"x" * 100
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % 4)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return n / (time.perf_counter() - t0)


class Scraper(threading.Thread):
    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.stop_event = threading.Event()
        self.times: list[float] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            t0 = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=30) as r:
                r.read()
            self.times.append(time.perf_counter() - t0)
            self.stop_event.wait(1.0)


def scrape_cpu(broker: Broker, n: int) -> tuple[float, float, int]:
    """Broker CPU seconds one GET /metrics costs (median of n, less the CPU of an equally long idle
    wait: maintenance ticks), its median wall time, and the size of the answer in lines."""
    costs, idle, walls = [], [], []
    lines = 0
    for _ in range(n):
        c0, t0 = broker.cpu_seconds(), time.perf_counter()
        with urllib.request.urlopen(broker.http + "/metrics", timeout=60) as r:
            lines = r.read().count(b"\n")
        wall = time.perf_counter() - t0
        c1 = broker.cpu_seconds()
        time.sleep(wall)
        idle.append(broker.cpu_seconds() - c1)
        costs.append(c1 - c0)
        walls.append(wall)
        time.sleep(0.05)
    return max(statistics.median(costs) - statistics.median(idle), 0.0), statistics.median(walls), lines


def report_scrape_cpu(broker: Broker, what: str, n: int = 30) -> None:
    cost, wall, lines = scrape_cpu(broker, n)
    print(f"  one /metrics scrape ({what}, {lines:,} lines): broker CPU {cost * 1000:.2f} ms, wall {wall * 1000:.1f} ms"
          f" (medians of {n}); scraped every second it takes {cost * 100:.2f}% of the one core a saturated"
          f" broker has, the most its throughput can lose")


def throughput(args) -> None:
    tmp = tempfile.mkdtemp(prefix="mk-obs-")
    on = Broker(os.path.join(tmp, "on"), http=True)
    off = Broker(os.path.join(tmp, "off"), http=False)
    try:
        for b in (on, off):
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic("t", num_partitions=4, replication_factor=1)])["t"].result(30)
            produce_rate(b.bootstrap, "t", 20000)  # warm-up
        rates = {"scraped": [], "unscraped": [], "http-off": []}
        cpu = {"scraped": [], "unscraped": [], "http-off": []}
        scrape_times: list[float] = []
        for r in range(args.rounds):
            # Reverse the order every other round so a drift in the machine's load favours no mode.
            modes = ("scraped", "unscraped", "http-off")
            for mode in modes if r % 2 == 0 else modes[::-1]:
                broker = off if mode == "http-off" else on
                scraper = Scraper(on.http + "/metrics") if mode == "scraped" else None
                if scraper:
                    scraper.start()
                c0 = broker.cpu_seconds()
                rates[mode].append(produce_rate(broker.bootstrap, "t", args.records))
                if scraper:
                    scraper.stop_event.set()
                    scraper.join()
                    scrape_times += scraper.times
                cpu[mode].append((broker.cpu_seconds() - c0) / args.records * 1e6)
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"\nproduce throughput, {args.records} x 100 B records per round, {args.rounds} rounds (median records/s)")
        for k, v in rates.items():
            print(f"  {k:10s} {med[k]:10,.0f}   rounds: {', '.join(f'{x:,.0f}' for x in v)}")
        print(f"  scraped / unscraped = {med['scraped'] / med['unscraped']:.3f}"
              f"   unscraped (hooks on) / http-off = {med['unscraped'] / med['http-off']:.3f}")
        cmed = {k: statistics.median(v) for k, v in cpu.items()}
        print("broker CPU per record (median us; less sensitive to the other jobs on the machine)")
        for k, v in cpu.items():
            print(f"  {k:10s} {cmed[k]:6.2f} us   rounds: {', '.join(f'{x:.2f}' for x in v)}")
        print(f"  scraped / unscraped = {cmed['scraped'] / cmed['unscraped']:.3f}"
              f"   unscraped (hooks on) / http-off = {cmed['unscraped'] / cmed['http-off']:.3f}")
        # Each round's pair ran back to back, so their ratio cancels slow drifts of the machine.
        pairs = [s / u for s, u in zip(cpu["scraped"], cpu["unscraped"])]
        print(f"  per-round scraped / unscraped CPU: median {statistics.median(pairs):.3f}"
              f"   rounds: {', '.join(f'{x:.3f}' for x in pairs)}")
        if scrape_times:
            print(f"  /metrics scrape time median {statistics.median(scrape_times) * 1000:.1f} ms over {len(scrape_times)} scrapes")
        report_scrape_cpu(on, "the throughput broker, idle after the rounds")
    finally:
        on.stop()
        off.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def seed_big(data_dir: str, topic: str, records: int) -> None:
    sys.path.insert(0, str(ROOT))
    from minikafka.protocol.records import build_batch
    from minikafka.storage.log import PartitionLog

    plog = PartitionLog(os.path.join(data_dir, f"{topic}-0"), {"flush.ms": 1 << 62, "segment.bytes": 1 << 30})
    per_batch = 1000
    now = int(time.time() * 1000) - records  # one record per millisecond up to now
    written = 0
    while written < records:
        n = min(per_batch, records - written)
        batch = build_batch([(b"key-%d" % (written + i), b'{"n": %d, "payload": "abcdefghij"}' % (written + i), [],
                              now + written + i) for i in range(n)])
        plog.append(batch)
        written += n
    plog.close()


def timed_get(url: str, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=60) as r:
            r.read()
            assert r.status == 200
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def console(args) -> None:
    tmp = tempfile.mkdtemp(prefix="mk-console-")
    data = os.path.join(tmp, "data")
    b = Broker(data, http=True)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    t0 = time.perf_counter()
    names = [f"topic-{i:04d}" for i in range(args.topics)] + ["big"]
    for i in range(0, len(names), 100):
        futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names[i:i + 100]])
        for f in futures.values():
            f.result(60)
    b.stop()
    seed_big(data, "big", args.big)
    print(f"\nconsole: {args.topics} topics + 'big' with {args.big:,} records seeded in {time.perf_counter() - t0:.0f} s")
    b = Broker(data, http=True)
    try:
        pages = ["/", "/topics", "/topics?page=10", "/topics/big", "/topics/big?offset=0",
                 f"/topics/big?offset={args.big // 2}&format=json", "/topics/big?timestamp="
                 + str(int(time.time() * 1000) - args.big // 3) + "&format=hex",
                 f"/api/topics/big/messages?partition=0&offset={args.big - 50}", "/groups", "/transactions",
                 "/producers", "/producers?q=big", "/metrics"]
        for page in pages:
            first = timed_get(b.http + page, 1)  # first load (imports, mappings, producer state built)
            print(f"  {page:60s} median {timed_get(b.http + page, args.loads) * 1000:7.1f} ms"
                  f"   first load {first * 1000:7.1f} ms")
        report_scrape_cpu(b, f"{args.topics} topics")
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=300000)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--big", type=int, default=10_000_000)
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-console", action="store_true")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    if not args.skip_throughput:
        throughput(args)
    if not args.skip_console:
        console(args)


if __name__ == "__main__":
    main()
