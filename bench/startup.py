"""Fixture start to first usable bootstrap: the embedded broker (thread and child process).

For each mode, ``runs`` times: start ``minikafka.Broker`` (port 0, temporary data dir), which
returns once the broker listens and its group coordinator is loaded, then make one real client
round trip (a confluent-kafka Producer delivers one record, acks=all) and stop the broker.
Reported: the median time from the start call to the returned bootstrap, and to the first
delivered record.  Run:

    .venv/bin/python bench/startup.py [--runs 10] [--config offsets.topic.num.partitions=50]
"""

from __future__ import annotations

import argparse
import statistics
import time


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                        help="broker setting, e.g. offsets.topic.num.partitions=50 (Kafka's default)")
    args = parser.parse_args()
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
