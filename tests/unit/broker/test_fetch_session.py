"""Incremental fetch sessions (KIP-227): the session cache and the Fetch handler wrapped with
sessions, on real storage logs without sockets."""

import pytest

from minikafka.broker.handlers import fetch, produce
from minikafka.broker.handlers.fetch_session import (FetchSessionCache, INT_MAX, next_epoch)
from minikafka.protocol.records import build_batch
from broker_fakes import Ctx, FakeBroker


class Clock:
    def __init__(self):
        self.ms = 0.0

    def __call__(self):
        return self.ms


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("t", 4)
    b.controller.create_topic("u", 2)
    b.clock = Clock()
    b.fetch_sessions = FetchSessionCache(max_slots=2, eviction_ms=1000, clock=b.clock)
    yield b
    b.logs.close()


def _handler(module, key):
    found = {}

    class Reg:
        def register(self, k, lo, hi, h):
            found[k] = h

    module.register(Reg(), None)
    return found[key]


FETCH = _handler(fetch, 1)
PRODUCE = _handler(produce, 0)


async def produce_to(broker, topic, partition, n=1):
    records = build_batch([(b"k", b"v", [], 1000 + i) for i in range(n)])
    await PRODUCE(Ctx(broker, 0, 9), {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})


def fpart(partition, offset=0):
    return {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}


def req(session_id, epoch, topics=(), forgotten=(), by_id=None):
    key = "topic_id" if by_id else "topic"
    conv = (lambda name: by_id[name]) if by_id else (lambda name: name)
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{key: conv(t), "partitions": [fpart(p, o) for p, o in parts]} for t, parts in topics],
            "forgotten_topics_data": [{key: conv(t), "partitions": list(ps)} for t, ps in forgotten],
            "rack_id": ""}


def answered(resp, key="topic"):
    return sorted((t[key], p["partition_index"]) for t in resp["responses"] for p in t["partitions"])


ALL_T = [("t", [(p, 0) for p in range(4)])]


async def test_full_fetch_opens_a_session_and_idle_incremental_fetches_are_empty(broker):
    resp = await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T))
    sid = resp["session_id"]
    assert resp["error_code"] == 0 and sid != 0
    assert answered(resp) == [("t", p) for p in range(4)]
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 1))
    assert (resp["error_code"], resp["session_id"], resp["responses"]) == (0, sid, [])
    # New data on one partition: only that partition is answered, with the cached fetch offset.
    await produce_to(broker, "t", 2, n=3)
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 2))
    assert answered(resp) == [("t", 2)]
    p = resp["responses"][0]["partitions"][0]
    assert p["high_watermark"] == 3 and sum(len(c) for c in p["records"]) > 0
    # The client moved on to offset 3: nothing new, HW unchanged, so nothing is answered.
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 3, [("t", [(2, 3)])]))
    assert resp["responses"] == []
    assert broker.fetch_sessions.incremental == 3


async def test_a_partition_is_resent_when_only_its_high_watermark_changed(broker):
    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, [("t", [(0, 0)])])))["session_id"]
    await produce_to(broker, "t", 0)
    # Client asks from offset 1 (it already has offset 0 from somewhere): no records, but HW moved.
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 1, [("t", [(0, 1)])]))
    assert answered(resp) == [("t", 0)]
    assert resp["responses"][0]["partitions"][0]["high_watermark"] == 1
    assert resp["responses"][0]["partitions"][0]["records"] in (b"", [])
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 2))
    assert resp["responses"] == []


async def test_errors_are_always_answered_and_forgotten_partitions_leave_the_session(broker):
    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, [("t", [(0, 0)]), ("nope", [(0, 0)])])))["session_id"]
    for epoch in (1, 2):
        resp = await FETCH(Ctx(broker, 1, 12), req(sid, epoch))
        assert answered(resp) == [("nope", 0)]
        assert resp["responses"][0]["partitions"][0]["error_code"] == 3
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 3, forgotten=[("nope", [0])]))
    assert resp["responses"] == []
    assert list(broker.fetch_sessions.get(sid).partitions) == [("t", 0)]
    # Adding a partition incrementally answers it in full once.
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 4, [("u", [(1, 0)])]))
    assert answered(resp) == [("u", 1)]
    # Forgetting the last partitions closes the session; the answer is sessionless.
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 5, forgotten=[("t", [0]), ("u", [1])]))
    assert (resp["error_code"], resp["session_id"]) == (0, 0)
    assert broker.fetch_sessions.get(sid) is None


async def test_unknown_session_wrong_epoch_and_topic_id_mismatch(broker):
    resp = await FETCH(Ctx(broker, 1, 12), req(12345, 1))
    assert (resp["error_code"], resp["session_id"], resp["responses"]) == (70, 0, [])
    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 5))
    assert (resp["error_code"], resp["session_id"]) == (71, 0)
    # A session opened by name cannot be used by topic id (v13+).
    ids = {"t": broker.controller.topic("t").topic_id}
    resp = await FETCH(Ctx(broker, 1, 13), req(sid, 1, by_id=ids))
    assert resp["error_code"] == 106
    # The failed attempts did not advance the epoch.
    assert (await FETCH(Ctx(broker, 1, 12), req(sid, 1)))["error_code"] == 0


async def test_full_fetch_with_session_id_closes_it_and_final_epoch_is_sessionless(broker):
    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 0, ALL_T))
    assert resp["session_id"] not in (0, sid)
    assert broker.fetch_sessions.get(sid) is None
    sid2 = resp["session_id"]
    resp = await FETCH(Ctx(broker, 1, 12), req(sid2, -1, ALL_T))
    assert resp["session_id"] == 0 and answered(resp) == [("t", p) for p in range(4)]
    assert broker.fetch_sessions.sessions == {}


async def test_sessions_by_topic_id_v13(broker):
    ids = {"t": broker.controller.topic("t").topic_id, "u": broker.controller.topic("u").topic_id}
    resp = await FETCH(Ctx(broker, 1, 13), req(0, 0, ALL_T, by_id=ids))
    sid = resp["session_id"]
    assert sid and answered(resp, "topic_id") == [(ids["t"], p) for p in range(4)]
    await produce_to(broker, "t", 1)
    resp = await FETCH(Ctx(broker, 1, 13), req(sid, 1, by_id=ids))
    assert answered(resp, "topic_id") == [(ids["t"], 1)]
    resp = await FETCH(Ctx(broker, 1, 13), req(sid, 2, forgotten=[("t", [0, 1, 2])], by_id=ids))
    assert list(broker.fetch_sessions.get(sid).partitions) == [(ids["t"], 3)]
    # A v12 request on a topic-id session is refused.
    assert (await FETCH(Ctx(broker, 1, 12), req(sid, 3)))["error_code"] == 106


async def test_cache_full_evicts_stale_then_smaller_sessions_else_declines(broker):
    cache = broker.fetch_sessions  # 2 slots, 1 s eviction
    a = (await FETCH(Ctx(broker, 1, 12), req(0, 0, [("t", [(0, 0)])])))["session_id"]
    b = (await FETCH(Ctx(broker, 1, 12), req(0, 0, [("t", [(0, 0), (1, 0)])])))["session_id"]
    assert a and b and len(cache.sessions) == 2
    # A new one-partition session is not worth more than either: declined, sessionless answer.
    resp = await FETCH(Ctx(broker, 1, 12), req(0, 0, [("u", [(0, 0)])]))
    assert resp["session_id"] == 0 and answered(resp) == [("u", 0)]
    # A bigger session evicts the smallest (a).
    c = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    assert c and set(cache.sessions) == {b, c} and cache.evicted == 1
    assert (await FETCH(Ctx(broker, 1, 12), req(a, 1)))["error_code"] == 70
    # b stays in use; c idles past the eviction time and gives way even to a small session.
    broker.clock.ms = 600
    assert (await FETCH(Ctx(broker, 1, 12), req(b, 1)))["error_code"] == 0
    broker.clock.ms = 1500
    d = (await FETCH(Ctx(broker, 1, 12), req(0, 0, [("u", [(0, 0)])])))["session_id"]
    assert d and set(cache.sessions) == {b, d}
    assert (await FETCH(Ctx(broker, 1, 12), req(c, 1)))["error_code"] == 70


async def test_answered_partitions_rotate_to_the_end(broker):
    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    await produce_to(broker, "t", 0)
    await FETCH(Ctx(broker, 1, 12), req(sid, 1))
    assert [k[1] for k in broker.fetch_sessions.get(sid).partitions] == [1, 2, 3, 0]


def test_next_epoch_wraps_to_one():
    assert next_epoch(0) == 1 and next_epoch(7) == 8
    assert next_epoch(INT_MAX) == 1 and next_epoch(-1) == -1


async def test_consumer_fetch_before_version_7_bypasses_sessions(broker):
    resp = await FETCH(Ctx(broker, 1, 6), req(0, 0, ALL_T))
    assert resp["session_id"] == 0 and broker.fetch_sessions.sessions == {}


async def test_incremental_long_poll_waits_on_every_session_partition(broker):
    import asyncio

    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    await produce_to(broker, "t", 0)
    # t-0 changed (its high watermark) but the client is caught up on it: no bytes, so the
    # fetch waits; data on t-2, which had not changed, must end the wait.
    body = req(sid, 1, [("t", [(0, 1)])])
    body["max_wait_ms"] = 5000
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    task = asyncio.create_task(FETCH(Ctx(broker, 1, 12), body))
    await asyncio.sleep(0.05)
    assert not task.done()
    await produce_to(broker, "t", 2)
    resp = await asyncio.wait_for(task, 2)
    assert loop.time() - t0 < 2
    assert answered(resp) == [("t", 0), ("t", 2)]
    # An idle session with nothing new waits the whole max_wait_ms and answers nothing.
    body = req(sid, 2, [("t", [(2, 1)])])
    body["max_wait_ms"] = 100
    t0 = loop.time()
    resp = await FETCH(Ctx(broker, 1, 12), body)
    assert 0.09 <= loop.time() - t0 < 1 and resp["responses"] == []


async def test_caught_up_partitions_are_not_read(broker, monkeypatch):
    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    await produce_to(broker, "t", 1)
    read = []
    real = fetch.read_partitions

    def spy(b, body):
        read.append([(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]])
        return real(b, body)

    monkeypatch.setattr(fetch, "read_partitions", spy)
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 1))
    assert answered(resp) == [("t", 1)] and read == [[("t", 1)]]


async def test_a_response_dropped_by_throttling_is_not_counted_as_sent(broker):
    from minikafka.broker.handlers.fetch_session import UNDO_KEY

    sid = (await FETCH(Ctx(broker, 1, 12), req(0, 0, ALL_T)))["session_id"]
    await produce_to(broker, "t", 0)
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 1, [("t", [(0, 1)])]))
    assert answered(resp) == [("t", 0)]
    resp[UNDO_KEY]()  # what the quota code does when it empties a throttled fetch
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 2))
    assert answered(resp) == [("t", 0)] and resp["responses"][0]["partitions"][0]["high_watermark"] == 1
    resp = await FETCH(Ctx(broker, 1, 12), req(sid, 3))
    assert resp["responses"] == []


def test_the_broker_cache_ages_sessions_on_broker_time(tmp_path):
    """One notion of time: the cache a broker builds reads the broker's clock, so advancing it (the
    control API's clock advance) makes idle sessions evictable as it expires every other timeout."""
    from minikafka.broker.handlers.fetch_session import _cache_of

    b = FakeBroker(str(tmp_path), **{"fetch.session.eviction.ms": 1000,
                                     "max.incremental.fetch.session.cache.slots": 1})
    try:
        cache = _cache_of(b)
        assert _cache_of(b) is cache and cache.now_ms() == b.now_ms()
        idle = cache.maybe_create(False, 5, cache.now_ms())
        assert idle is not None
        assert cache.maybe_create(False, 0, cache.now_ms()) is None  # the one slot is taken, not stale yet
        b._now += 1001  # the broker's clock moves; nothing else does
        assert cache.now_ms() == b.now_ms()
        assert cache.maybe_create(False, 0, cache.now_ms()) is not None  # the stale session gave way
        assert cache.get(idle.id) is None
    finally:
        b.logs.close()
