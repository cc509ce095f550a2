"""A shard driven by a MockTimer, and small helpers that speak the request dicts of the codec."""

from __future__ import annotations

import struct

from minikafka.broker.group.coordinator import GroupCoordinator
from minikafka.broker.group.shard import CoordinatorShard, GroupConfig, MemoryOffsetsLog
from minikafka.broker.group.state import GroupState
from minikafka.broker.clock import MockTimer
from minikafka.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState


def subscription(*topics: str) -> bytes:
    """A consumer-protocol Subscription v0 (version, topics, null user data)."""
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1)
    return bytes(out)


class Box(list):
    """Collects the responses a parked request receives (normally at most one)."""

    @property
    def done(self) -> bool:
        return len(self) > 0

    @property
    def value(self) -> dict:
        assert len(self) == 1, f"expected exactly one response, got {len(self)}: {list(self)}"
        return self[0]


class Harness:
    def __init__(self, log: MemoryOffsetsLog | None = None, timer: MockTimer | None = None, **config) -> None:
        defaults = dict(min_session_timeout_ms=1000, max_session_timeout_ms=60000)
        defaults.update(config)
        self.config = GroupConfig(**defaults)
        self.timer = timer or MockTimer()
        self.log = log or MemoryOffsetsLog()
        self.shard = CoordinatorShard(0, self.log, self.timer, self.timer.clock, self.config)
        self.shard.load()

    def restart(self) -> "Harness":
        """A new shard over the same partition and clock, as after a broker restart."""
        self.shard.unload()
        return Harness(log=self.log, timer=self.timer, **self.config.__dict__)

    # -- requests ----------------------------------------------------------------------------

    def join(self, group="g", member_id="", *, session=10000, rebalance=30000, protocols=None,
             protocol_type="consumer", instance=None, version=9, client_id="client") -> Box:
        box = Box()
        if protocols is None:
            protocols = [("range", subscription("t"))]
        request = {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
                   "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
                   "protocols": [{"name": n, "metadata": m} for n, m in protocols]}
        self.shard.join_group(request, api_version=version, client_id=client_id, client_host="/127.0.0.1",
                              respond=box.append)
        return box

    def join_new(self, group="g", **kw) -> Box:
        """The KIP-394 two-step join of a new dynamic member; returns the parked second join."""
        first = self.join(group, "", **kw)
        assert first.value["error_code"] == E.MEMBER_ID_REQUIRED, first
        return self.join(group, first.value["member_id"], **kw)

    def sync(self, group, member_id, generation, assignments=None, instance=None, protocol_type=None,
             protocol_name=None) -> Box:
        box = Box()
        request = {"group_id": group, "generation_id": generation, "member_id": member_id,
                   "group_instance_id": instance, "protocol_type": protocol_type, "protocol_name": protocol_name,
                   "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}
        self.shard.sync_group(request, box.append)
        return box

    def heartbeat(self, group, member_id, generation, instance=None) -> ErrorCode:
        return self.shard.heartbeat({"group_id": group, "generation_id": generation, "member_id": member_id,
                                     "group_instance_id": instance})["error_code"]

    def leave(self, group, *members) -> dict:
        return self.shard.leave_group(group, [m if isinstance(m, dict) else {"member_id": m} for m in members])

    def commit(self, group, offsets, *, member_id="", generation=-1, instance=None, version=8,
               retention=-1) -> dict:
        topics: dict[str, list] = {}
        for (topic, partition), value in offsets.items():
            offset, metadata = value if isinstance(value, tuple) else (value, "")
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": metadata})
        request = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                   "group_instance_id": instance, "retention_time_ms": retention,
                   "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}
        return self.shard.commit_offsets(request, version)

    def committed(self, group, topic, partition) -> tuple[int, str]:
        r = self.shard.fetch_offsets(group, [{"name": topic, "partition_indexes": [partition]}])
        p = r["topics"][0]["partitions"][0]
        return p["committed_offset"], p["metadata"]

    # -- scenarios ---------------------------------------------------------------------------

    def group(self, group="g"):
        return self.shard.classic.groups[group]

    def state(self, group="g") -> GroupState:
        return self.shard.classic.groups[group].state

    def stable_group(self, n: int, group="g", **kw) -> list[str]:
        """Build a Stable group of n dynamic members, the first being leader; returns their ids."""
        ids: list[str] = []
        first = self.join_new(group, **kw)
        self.timer.advance(0)  # the initial-rebalance timer (delay 0) completes the first join
        ids.append(first.value["member_id"])
        gen = first.value["generation_id"]
        self.sync(group, ids[0], gen, {ids[0]: b"a0"})
        for _ in range(1, n):
            new = self.join_new(group, **kw)
            assert not new.done
            rejoins = [self.join(group, mid, **kw) for mid in ids]
            for box in [new, *rejoins]:
                assert box.done, box
            ids.append(new.value["member_id"])
            gen = new.value["generation_id"]
            leader = rejoins[0].value
            assert leader["leader"] == ids[0]
            boxes = [self.sync(group, mid, gen) for mid in ids[1:]]
            self.sync(group, ids[0], gen, {mid: f"a{i}".encode() for i, mid in enumerate(ids)})
            assert all(b.done for b in boxes)
        assert self.state(group) is S.STABLE
        return ids


def coordinator(num_partitions=3, **config) -> tuple[GroupCoordinator, MockTimer]:
    timer = MockTimer()
    logs = {}
    coord = GroupCoordinator(num_partitions, lambda p: logs.setdefault(p, MemoryOffsetsLog()), timer, timer.clock,
                             GroupConfig(**config))
    return coord, timer
