"""The control API for tests: one table of operations, run on the broker's loop.

Each operation is ``async def op(broker, params: dict) -> dict`` taking and returning plain JSON
values, so the same table serves the embedded broker's Python handle (``minikafka.embedded``,
marshalled onto the loop) and the HTTP JSON API (``broker/http/control.py``, any language).
A request that is not valid raises ``ControlError`` (HTTP 400) or ``NotFound`` (404) before
anything changes; a wait that times out raises ``WaitTimeout`` (HTTP 408).

Operations (params in brackets, ? optional):

* ``faults.add`` [fault fields, see broker/faults.py]   ``faults.list``   ``faults.remove`` [id]
  ``faults.release`` [id]   ``reset`` (faults and stalls)
* ``partitions.stall`` / ``partitions.release`` [topic, partition]
* ``groups.expire`` [group, member_id?]   ``groups.rebalance`` [group]   ``groups.describe`` [group]
* ``clock.advance`` [ms]   ``clock.now``
* ``share.expire_lock`` [group, topic, partition, offset]: the acquisition lock holding that record
  expires now (its records become available again, or archived at the delivery limit)
* ``wait.group`` [group, state?, members?, timeout_ms?]   ``wait.hwm`` [topic, partition, offset,
  timeout_ms?]   ``wait.topic`` [topic, timeout_ms?]
* ``topics.create`` [topic, partitions?, configs?]   ``seed`` [items: seed lines as objects]
* ``coordinator.ready`` [timeout_ms?]: create ``__consumer_offsets`` and wait for its shards
* ``share.groups.list``   ``share.groups.describe`` [group]   ``share.groups.expire`` [group, member_id]
  (share groups, broker/share/operator.py)
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from .faults import FaultError

log = logging.getLogger("minikafka.control")

MAX_ADVANCE_MS = 10 * 365 * 24 * 3600 * 1000
MAX_WAIT_MS = 600_000
POLL_S = 0.005


class ControlError(FaultError):
    status = 400


class NotFound(ControlError):
    status = 404


class WaitTimeout(ControlError):
    status = 408


def _req(params: dict, name: str, kind, *, lo: int | None = None, hi: int | None = None, default=...):
    if name not in params or params[name] is None:
        if default is ...:
            raise ControlError(f"missing {name!r}")
        return default
    value = params[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ControlError(f"{name!r} must be an integer")
    if kind is str and not isinstance(value, str):
        raise ControlError(f"{name!r} must be a string")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise ControlError(f"{name!r} must be between {lo} and {hi}")
    return value


def _partition(broker, params: dict) -> tuple[str, int]:
    topic = _req(params, "topic", str)
    partition = _req(params, "partition", int, lo=0, hi=2**31 - 1)
    info = broker.controller.topic(topic)
    if info is None:
        raise NotFound(f"no topic {topic!r}")
    if partition >= info.num_partitions:
        raise NotFound(f"topic {topic!r} has no partition {partition}")
    return topic, partition


def _shard(broker, group: str):
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        raise NotFound(f"no group {group!r} (no group coordinator yet)")
    shard, _error = coordinator.check(group)
    if shard is None or group not in shard.classic.groups:
        raise NotFound(f"no group {group!r}")
    return shard


def _describe_group(broker, group: str) -> dict | None:
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return None
    shard, _ = coordinator.check(group)
    if shard is None or group not in shard.classic.groups:
        return None
    g = shard.classic.groups[group]
    return {"group": group, "state": g.state.value if hasattr(g.state, "value") else str(g.state),
            "generation": g.generation_id, "protocol": g.protocol_name, "leader": g.leader_id,
            "members": sorted(m.member_id for m in g.all_members())}


def _timeout(params: dict) -> float:
    return _req(params, "timeout_ms", int, lo=0, hi=MAX_WAIT_MS, default=10_000) / 1000.0


async def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() >= deadline:
            raise WaitTimeout(f"timed out after {timeout_s * 1000:.0f} ms waiting for {what}")
        await asyncio.sleep(POLL_S)


# -- operations ------------------------------------------------------------------------------

async def faults_add(broker, params: dict) -> dict:
    return broker.faults.add(params).describe()


async def faults_list(broker, params: dict) -> dict:
    return {"faults": broker.faults.list(), "stalled": [
        {"topic": t, "partition": p} for t, p in broker.faults.stalled]}


async def faults_remove(broker, params: dict) -> dict:
    fault_id = _req(params, "id", int, lo=1)
    try:
        return broker.faults.remove(fault_id).describe()
    except FaultError as exc:
        raise NotFound(str(exc)) from None


async def faults_release(broker, params: dict) -> dict:
    fault_id = _req(params, "id", int, lo=1)
    if fault_id not in broker.faults.faults:
        raise NotFound(f"no fault {fault_id}")
    return broker.faults.release(fault_id).describe()


async def reset(broker, params: dict) -> dict:
    broker.faults.reset()
    return {"ok": True}


async def partitions_stall(broker, params: dict) -> dict:
    topic, partition = _partition(broker, params)
    broker.faults.stall(topic, partition)
    return {"topic": topic, "partition": partition, "stalled": True}


async def partitions_release(broker, params: dict) -> dict:
    topic = _req(params, "topic", str)
    partition = _req(params, "partition", int, lo=0, hi=2**31 - 1)
    if not broker.faults.unstall(topic, partition):
        raise NotFound(f"partition {topic}-{partition} is not stalled")
    return {"topic": topic, "partition": partition, "stalled": False}


async def groups_expire(broker, params: dict) -> dict:
    group = _req(params, "group", str)
    member_id = _req(params, "member_id", str, default=None)
    shard = _shard(broker, group)
    g = shard.classic.groups[group]
    if member_id is not None and not (g.has_member(member_id) or g.is_pending_member(member_id)):
        raise NotFound(f"group {group!r} has no member {member_id!r}")
    expired = shard.expire_member_now(group, member_id)
    log.warning("control: expired %s of group %s", expired, group)
    return {"group": group, "expired": expired}


async def groups_rebalance(broker, params: dict) -> dict:
    group = _req(params, "group", str)
    shard = _shard(broker, group)
    if not shard.force_rebalance(group):
        raise ControlError(f"group {group!r} is {shard.classic.groups[group].state.value}: only a Stable or "
                           f"CompletingRebalance group can be made to rebalance")
    log.warning("control: forced a rebalance of group %s", group)
    return {"group": group, "rebalancing": True}


async def groups_describe(broker, params: dict) -> dict:
    group = _req(params, "group", str)
    described = _describe_group(broker, group)
    if described is None:
        raise NotFound(f"no group {group!r}")
    return described


async def clock_advance(broker, params: dict) -> dict:
    ms = _req(params, "ms", int, lo=0, hi=MAX_ADVANCE_MS)
    now = broker.advance_clock(ms)
    log.warning("control: clock advanced by %d ms (offset now %d ms)", ms, broker.clock.offset_ms)
    return {"now_ms": now, "offset_ms": broker.clock.offset_ms}


async def share_expire_lock(broker, params: dict) -> dict:
    from .share import view

    group = _req(params, "group", str)
    topic, partition = _partition(broker, params)
    offset = _req(params, "offset", int, lo=0, hi=2**63 - 1)
    if not view.expire_lock(broker, group, topic, partition, offset):
        raise NotFound(f"no acquisition lock holds {topic}-{partition} offset {offset} in share group {group!r}")
    log.warning("control: expired the acquisition lock of %s-%d offset %d in share group %s",
                topic, partition, offset, group)
    return {"group": group, "topic": topic, "partition": partition, "offset": offset, "expired": True}


async def clock_now(broker, params: dict) -> dict:
    return {"now_ms": broker.now_ms(), "offset_ms": broker.clock.offset_ms}


async def wait_group(broker, params: dict) -> dict:
    group = _req(params, "group", str)
    state = _req(params, "state", str, default=None)
    members = _req(params, "members", int, lo=0, hi=100_000, default=None)
    if state is not None:
        from .group.state import GroupState

        names = {s.value.lower(): s.value for s in GroupState}
        if state.lower() not in names:
            raise ControlError(f"unknown group state {state!r} (one of {', '.join(names.values())})")
        state = names[state.lower()]

    def ok() -> bool:
        d = _describe_group(broker, group)
        return (d is not None and (state is None or d["state"] == state)
                and (members is None or len(d["members"]) == members))

    await _wait(ok, _timeout(params), f"group {group} state={state} members={members}")
    return _describe_group(broker, group)


async def wait_hwm(broker, params: dict) -> dict:
    topic = _req(params, "topic", str)
    partition = _req(params, "partition", int, lo=0, hi=2**31 - 1)
    offset = _req(params, "offset", int, lo=0)
    timeout = _timeout(params)

    def hwm() -> int:
        info = broker.controller.topic(topic)
        if info is None or partition >= info.num_partitions:
            return -1
        return broker.controller.log(topic, partition).high_watermark

    await _wait(lambda: hwm() >= offset, timeout, f"{topic}-{partition} high watermark >= {offset}")
    return {"topic": topic, "partition": partition, "high_watermark": hwm()}


async def wait_topic(broker, params: dict) -> dict:
    topic = _req(params, "topic", str)
    await _wait(lambda: broker.controller.topic(topic) is not None, _timeout(params), f"topic {topic}")
    return {"topic": topic, "partitions": broker.controller.topic(topic).num_partitions}


async def coordinator_ready(broker, params: dict) -> dict:
    """Create ``__consumer_offsets`` if needed and wait until every coordinator shard is loaded,
    so the first FindCoordinator of a test is answered at once."""
    from .group.apis import ensure_coordinator

    coordinator = ensure_coordinator(broker)
    await _wait(lambda: all(s.loaded for s in coordinator.shards), _timeout(params),
                "the group coordinator to load")
    return {"partitions": coordinator.num_partitions}


async def topics_create(broker, params: dict) -> dict:
    from minikafka.protocol.errors import KafkaError

    topic = _req(params, "topic", str)
    partitions = _req(params, "partitions", int, lo=1, hi=10_000, default=-1)
    configs = params.get("configs") or {}
    if not isinstance(configs, dict):
        raise ControlError("'configs' must be an object")
    try:
        info = broker.controller.create_topic(topic, num_partitions=partitions,
                                              configs={str(k): str(v) for k, v in configs.items()})
    except KafkaError as exc:
        raise ControlError(str(exc)) from None
    return {"topic": topic, "partitions": info.num_partitions, "configs": dict(info.configs)}


async def seed(broker, params: dict) -> dict:
    from . import seed as seeding

    items = params.get("items")
    if not isinstance(items, list):
        raise ControlError("'items' must be a list of seed objects (topics and records)")
    try:
        parsed = [seeding.parse_item(obj, f"items[{i}]") for i, obj in enumerate(items)]
        return seeding.apply(broker, parsed)
    except seeding.SeedError as exc:
        raise ControlError(str(exc)) from None


async def share_groups_list(broker, params: dict) -> dict:
    from .share import operator

    return {"groups": operator.share_groups(broker)}


async def share_groups_describe(broker, params: dict) -> dict:
    from .share import operator

    group = _req(params, "group", str)
    described = operator.describe(broker, group)
    if described is None:
        raise NotFound(f"no share group {group!r}")
    return described


async def share_groups_expire(broker, params: dict) -> dict:
    from .share import operator

    group = _req(params, "group", str)
    member_id = _req(params, "member_id", str)
    expired = operator.expire_member(broker, group, member_id)
    if expired is None:
        raise NotFound(f"no share group {group!r}")
    if not expired:
        raise NotFound(f"share group {group!r} has no member {member_id!r}")
    return {"group": group, "expired": [member_id]}


OPERATIONS: dict[str, Callable[[Any, dict], Awaitable[dict]]] = {
    "faults.add": faults_add, "faults.list": faults_list, "faults.remove": faults_remove,
    "faults.release": faults_release, "reset": reset,
    "partitions.stall": partitions_stall, "partitions.release": partitions_release,
    "groups.expire": groups_expire, "groups.rebalance": groups_rebalance, "groups.describe": groups_describe,
    "clock.advance": clock_advance, "clock.now": clock_now, "share.expire_lock": share_expire_lock,
    "wait.group": wait_group, "wait.hwm": wait_hwm, "wait.topic": wait_topic,
    "topics.create": topics_create, "seed": seed, "coordinator.ready": coordinator_ready,
    "share.groups.list": share_groups_list, "share.groups.describe": share_groups_describe,
    "share.groups.expire": share_groups_expire,
}


async def call(broker, op: str, params: dict | None = None) -> dict:
    """Run one operation on the broker's loop (the caller is on that loop)."""
    fn = OPERATIONS.get(op)
    if fn is None:
        raise NotFound(f"unknown control operation {op!r} (one of {', '.join(sorted(OPERATIONS))})")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ControlError("parameters must be a JSON object")
    return await fn(broker, params)
