"""The share coordinator over real partition logs: what a share partition pays per durable write,
how fast a restart replays ``__share_group_state``, and how far pruning keeps the log down.

In-process (no network): a Controller over a temporary data dir, the share coordinator with its
``__share_group_state`` adapter, and the ``SharePersister`` share partitions call.  Each write is a
whole share-partition state of --batches state batches (as broker/share/partition.py writes it),
appended (a ShareUpdate, a ShareSnapshot every 500) before the call returns.

    .venv/bin/python bench/share_state.py                   # 5,000 writes, 10 and 100 batches
    .venv/bin/python bench/share_state.py --writes 2000     # quick look
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import types
import uuid

from minikafka.broker.config import BrokerConfig
from minikafka.broker.controller import Controller
from minikafka.broker.share.persister import RecordState, ShareState, StateBatch
from minikafka.broker.share.state import SHARE_STATE_TOPIC
from minikafka.broker.share.state.apis import StateLogAdapter, topic_configs
from minikafka.broker.share.state.coordinator import ShareCoordinator, ShareStateConfig
from minikafka.broker.share.state.persister import CoordinatorPersister


def run(writes: int, batches: int, data_dir: str) -> dict:
    config = BrokerConfig(data_dir=data_dir)
    controller = Controller.open(config)
    try:
        topic = controller.create_topic("bench", num_partitions=1)
        info = controller.create_topic(SHARE_STATE_TOPIC, num_partitions=1, configs=topic_configs(config),
                                       internal=True)
        broker = types.SimpleNamespace(controller=controller)
        clock = types.SimpleNamespace(now_ms=lambda: int(time.time() * 1000))

        def coordinator():
            c = ShareCoordinator(info.num_partitions, lambda p: StateLogAdapter(broker, p), clock,
                                 ShareStateConfig(info.num_partitions),
                                 lambda tid: 1 if tid == topic.topic_id else None)
            c.load()
            return c

        persister = CoordinatorPersister(coordinator())
        persister.initialize("g", topic.topic_id, 0, 0, 0)
        latencies = []
        started = time.perf_counter()
        for i in range(writes):
            start = i * 2
            state = ShareState(0, 0, start, [
                StateBatch(start + 4 * b, start + 4 * b + 1, RecordState.ACKNOWLEDGED, 1 + b % 3)
                for b in range(batches)])
            t0 = time.perf_counter()
            persister.write("g", topic.topic_id, 0, state)
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
        plog = controller.log(SHARE_STATE_TOPIC, 0)
        records = plog.high_watermark - plog.log_start_offset
        t0 = time.perf_counter()
        again = coordinator()
        load_s = time.perf_counter() - t0
        key_states = again.shards[0].states
        assert len(key_states) == 1
        prune = again.prune_points()
        if prune:
            plog.delete_records(prune[0][1])
        kept = plog.high_watermark - plog.log_start_offset
        t0 = time.perf_counter()
        coordinator()
        load_pruned_s = time.perf_counter() - t0
        latencies.sort()
        return {"writes/s": writes / elapsed, "p50 us": statistics.median(latencies) * 1e6,
                "p99 us": latencies[int(len(latencies) * 0.99)] * 1e6, "records": records,
                "load ms": load_s * 1000, "kept after prune": kept, "load after prune ms": load_pruned_s * 1000}
    finally:
        controller.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=5000)
    args = parser.parse_args()
    print(f"| batches per write | writes/s | p50 µs | p99 µs | records | load ms | kept after prune | load after prune ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batches in (10, 100):
        with tempfile.TemporaryDirectory() as d:
            r = run(args.writes, batches, d)
        print(f"| {batches} | {r['writes/s']:.0f} | {r['p50 us']:.0f} | {r['p99 us']:.0f} | {r['records']} | "
              f"{r['load ms']:.0f} | {r['kept after prune']} | {r['load after prune ms']:.1f} |")


if __name__ == "__main__":
    main()
