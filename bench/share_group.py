"""Share groups, the group side: the coordinator's cost per ShareGroupHeartbeat and of replaying a
share group at start, in process (one CoordinatorShard over an in-memory partition, the injected
clock; no network, no client).

Run from the repo root:  .venv/bin/python bench/share_group.py [--members 50] [--topics 4]
    [--partitions 8] [--heartbeats 5000]

Measured:
* the first heartbeat of every member after the share state of the partitions was initialized (the
  group epoch is bumped and the target assignment computed once, with the simple assignor);
* steady heartbeats (nothing changes: the answer carries no assignment);
* loading the shard again from its partition (what a restart replays).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minikafka.broker.clock import MockTimer  # noqa: E402
from minikafka.broker.group.shard import CoordinatorShard, MemoryOffsetsLog  # noqa: E402
from minikafka.broker.share.group_manager import DefaultHooks  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--heartbeats", type=int, default=5000)
    args = parser.parse_args(argv)

    topics = {f"t{i}": (uuid.UUID(int=i + 1), args.partitions) for i in range(args.topics)}
    log = MemoryOffsetsLog()
    timer = MockTimer()
    hooks = DefaultHooks()

    def shard():
        s = CoordinatorShard(0, log, timer, timer.clock, share_hooks=hooks)
        s.topic_metadata = lambda: topics
        s.load()
        return s

    s = shard()

    def hb(member, epoch, names=None):
        return s.share.heartbeat({"group_id": "g", "member_id": member, "member_epoch": epoch, "rack_id": None,
                                  "subscribed_topic_names": names}, client_id="bench", client_host="/127.0.0.1")

    names = sorted(topics)
    for m in range(args.members):
        hb(f"m{m}", 0, names)
    timer.advance(0)  # the share state of every partition is initialized
    members = s.share.groups["g"].members
    t0 = time.perf_counter()
    for m in range(args.members):
        hb(f"m{m}", members[f"m{m}"].member_epoch)
    first = (time.perf_counter() - t0) / args.members
    t0 = time.perf_counter()
    for i in range(args.heartbeats):
        m = f"m{i % args.members}"
        hb(m, members[m].member_epoch)
    steady = (time.perf_counter() - t0) / args.heartbeats
    s.unload()
    t0 = time.perf_counter()
    shard()
    load = time.perf_counter() - t0
    print(f"{args.members} members, {args.topics} topics x {args.partitions} partitions:")
    print(f"  first heartbeat after initialization: {first * 1e6:.0f} us")
    print(f"  steady heartbeat:                     {steady * 1e6:.0f} us")
    print(f"  load ({len(log.batches)} batches):   {load * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
