"""Produce / Fetch / ListOffsets / OffsetForLeaderEpoch / InitProducerId / Metadata handlers on
real storage logs, without sockets or the codec."""

import asyncio
import uuid

import pytest

from minikafka.protocol.errors import CloseConnection
from minikafka.protocol.records import build_batch, iter_batches, read_header

from minikafka.broker.handlers import fetch, init_producer_id, list_offsets, metadata, offset_for_leader_epoch, produce
from broker_fakes import Ctx, FakeBroker


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("t", 2)
    yield b
    b.logs.close()


def batch(n=1, pid=-1, epoch=-1, seq=-1, ts=1000, value=b"v", **kw):
    return build_batch([(b"k%d" % i, value, [], ts + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, **kw)


def produce_req(records, topic="t", partition=0, acks=-1):
    return {"transactional_id": None, "acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def do_produce(broker, records, version=9, **kw):
    resp = asyncio.run(_produce(broker, records, version, **kw)) if broker.loop is None else None
    return resp


async def _produce(broker, records, version=9, **kw):
    return await _handler(produce, 0, version)(Ctx(broker, 0, version), produce_req(records, **kw))


def _handler(module, key, version):
    found = {}

    class Reg:
        def register(self, k, lo, hi, h):
            found[k] = h

    module.register(Reg(), None)
    return found[key]


def part(resp):
    return resp["responses"][0]["partition_responses"][0]


async def test_produce_assigns_offsets_and_wakes_fetchers(broker):
    r1 = part(await _produce(broker, batch(3)))
    r2 = part(await _produce(broker, batch(2)))
    assert (r1["error_code"], r1["base_offset"]) == (0, 0)
    assert (r2["error_code"], r2["base_offset"]) == (0, 3)
    assert broker.notified == [("t", 0), ("t", 0)]
    stored = broker.controller.log("t", 0)
    assert stored.log_end_offset == 5
    header = next(stored.iter_batches())[0]
    assert header.partition_leader_epoch == 0


@pytest.mark.parametrize("records,code", [
    (None, 87),
    (b"\x00" * 10, 87),
    (bytes(batch(1)) + bytes(batch(1)), 87),  # two batches
    (batch(1, pid=7, epoch=0, seq=-1), 87),  # a producer id needs a sequence
])
async def test_produce_invalid_records(broker, records, code):
    assert part(await _produce(broker, records))["error_code"] == code


async def test_produce_corrupt_crc(broker):
    b = batch(2)
    b[-1] ^= 0xFF
    assert part(await _produce(broker, b))["error_code"] == 2
    assert broker.controller.log("t", 0).log_end_offset == 0


async def test_produce_too_large(tmp_path):
    b = FakeBroker(str(tmp_path), **{"message.max.bytes": "200"})
    b.controller.create_topic("t", 1)
    assert part(await _produce(b, batch(1, value=b"x" * 300)))["error_code"] == 10
    b.controller.set_topic_configs("t", {"max.message.bytes": "100000"})
    assert part(await _produce(b, batch(1, value=b"x" * 300)))["error_code"] == 0
    b.logs.close()


async def test_produce_unknown_topic_and_partition_and_acks(broker):
    assert part(await _produce(broker, batch(1), topic="nope"))["error_code"] == 3
    assert broker.controller.topic("nope") is None  # never auto-created by Produce
    assert part(await _produce(broker, batch(1), partition=7))["error_code"] == 3
    assert part(await _produce(broker, batch(1), acks=2))["error_code"] == 21
    for version in (0, 1, 2):  # advertised, but Kafka 4.2 closes the connection on them
        with pytest.raises(CloseConnection):
            await _produce(broker, batch(1), version=version)


async def test_acks0_returns_none_but_appends(broker):
    assert await _produce(broker, batch(1), acks=0) is None
    assert broker.controller.log("t", 0).log_end_offset == 1


async def test_idempotent_duplicate_and_gap(broker):
    pid = broker.controller.producer_ids.next_id()
    first = part(await _produce(broker, batch(2, pid=pid, epoch=0, seq=0)))
    second = part(await _produce(broker, batch(2, pid=pid, epoch=0, seq=2)))
    dup = part(await _produce(broker, batch(2, pid=pid, epoch=0, seq=0)))
    assert dup["error_code"] == 0 and dup["base_offset"] == first["base_offset"] == 0
    assert second["base_offset"] == 2
    assert broker.controller.log("t", 0).log_end_offset == 4  # nothing appended for the dup
    gap = part(await _produce(broker, batch(1, pid=pid, epoch=0, seq=9)))
    assert gap["error_code"] == 45
    stale = part(await _produce(broker, batch(1, pid=pid, epoch=-1 + 0, seq=4)))
    assert stale["error_code"] in (0, 47)


async def test_idempotent_state_rebuilt_from_log(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("t", 1)
    await _produce(b, batch(2, pid=42, epoch=3, seq=0))
    b.logs.close()
    b2 = FakeBroker(str(tmp_path))
    b2.meta.saved = list(b.meta.saved)
    from minikafka.broker.controller import Controller

    b2.controller = Controller(b2.config, b2.meta, b2.logs)
    dup = part(await _produce(b2, batch(2, pid=42, epoch=3, seq=0)))
    assert dup["error_code"] == 0 and dup["base_offset"] == 0
    assert b2.controller.log("t", 0).log_end_offset == 2
    stale = part(await _produce(b2, batch(1, pid=42, epoch=2, seq=2)))
    assert stale["error_code"] == 47
    b2.logs.close()


def fetch_req(offset, max_wait_ms=0, min_bytes=1, isolation=0, partition_max_bytes=1 << 20,
              max_bytes=50 << 20, partition=0, topic="t"):
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                          "fetch_offset": offset, "log_start_offset": -1,
                                                          "partition_max_bytes": partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fpart(resp):
    return resp["responses"][0]["partitions"][0]


def joined(records):
    return b"".join(bytes(c) for c in records) if isinstance(records, list) else bytes(records)


async def test_fetch_from_middle_of_batch_returns_that_batch(broker):
    await _produce(broker, batch(3))
    await _produce(broker, batch(2))
    p = fpart(await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(4)))
    data = joined(p["records"])
    assert [h.base_offset for _, h in iter_batches(data)] == [3]
    assert (p["high_watermark"], p["last_stable_offset"], p["log_start_offset"]) == (5, 5, 0)
    assert p["aborted_transactions"] is None


async def test_fetch_read_committed_has_empty_aborted_list_and_empty_records_never_null(broker):
    p = fpart(await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(0, isolation=1)))
    assert p["aborted_transactions"] == [] and joined(p["records"]) == b""
    assert p["records"] is not None


async def test_fetch_out_of_range_and_unknown(broker):
    await _produce(broker, batch(1))
    assert fpart(await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(5)))["error_code"] == 1
    assert fpart(await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(0, topic="zz")))["error_code"] == 3


async def test_fetch_limits_whole_batches_but_first_batch_always_sent(broker):
    for _ in range(3):
        await _produce(broker, batch(1, value=b"x" * 500))
    size = read_header(batch(1, value=b"x" * 500)).size
    p = fpart(await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(0, partition_max_bytes=10)))
    assert len(joined(p["records"])) == size  # one batch although above the limit
    p = fpart(await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(0, partition_max_bytes=2 * size + 1)))
    assert len(joined(p["records"])) == 2 * size


async def test_fetch_long_poll_woken_by_produce(broker):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    task = asyncio.create_task(fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(0, max_wait_ms=5000)))
    await asyncio.sleep(0.05)
    assert not task.done()
    await _produce(broker, batch(1))
    resp = await asyncio.wait_for(task, 1)
    assert loop.time() - t0 < 1
    assert joined(fpart(resp)["records"])
    assert len(broker.append_waiters) == 0


async def test_fetch_long_poll_times_out_empty(broker):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await fetch.handle_fetch(Ctx(broker, 1, 12), fetch_req(0, max_wait_ms=100))
    assert 0.09 <= loop.time() - t0 < 1
    assert joined(fpart(resp)["records"]) == b""


async def test_fetch_session_is_declined(broker):
    req = fetch_req(0)
    req.update(session_id=5, session_epoch=3)
    resp = await fetch.handle_fetch(Ctx(broker, 1, 12), req)
    assert resp["error_code"] == 70 and resp["session_id"] == 0
    resp = await fetch.handle_fetch(Ctx(broker, 1, 12), dict(fetch_req(0), session_epoch=0))
    assert resp["error_code"] == 0 and resp["session_id"] == 0


def lo_req(ts, partition=0, isolation=0):
    return {"replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": "t", "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                     "timestamp": ts}]}]}


async def lo(broker, ts, **kw):
    resp = await list_offsets.handle_list_offsets(Ctx(broker, 2, 7), lo_req(ts, **kw))
    return resp["topics"][0]["partitions"][0]


async def test_list_offsets(broker):
    await _produce(broker, batch(3, ts=1000))  # offsets 0-2, ts 1000-1002
    await _produce(broker, batch(4, ts=5000))  # offsets 3-6, ts 5000-5003
    assert (await lo(broker, -1))["offset"] == 7
    assert (await lo(broker, -2))["offset"] == 0
    mx = await lo(broker, -3)
    assert (mx["offset"], mx["timestamp"]) == (6, 5003)
    by = await lo(broker, 1001)
    assert (by["offset"], by["timestamp"]) == (1, 1001)
    by = await lo(broker, 4000)
    assert (by["offset"], by["timestamp"]) == (3, 5000)
    none = await lo(broker, 99999)
    assert (none["offset"], none["timestamp"]) == (-1, -1)
    assert (await lo(broker, -1, partition=9))["error_code"] == 3


async def test_offset_for_leader_epoch(broker):
    await _produce(broker, batch(3))
    body = {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 4},
        {"partition": 0, "current_leader_epoch": 3, "leader_epoch": 0},
        {"partition": 5, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
    resp = await offset_for_leader_epoch.handle_offset_for_leader_epoch(Ctx(broker, 23, 4), body)
    parts = resp["topics"][0]["partitions"]
    assert (parts[0]["error_code"], parts[0]["leader_epoch"], parts[0]["end_offset"]) == (0, 0, 3)
    assert (parts[1]["leader_epoch"], parts[1]["end_offset"]) == (-1, -1)
    assert parts[2]["error_code"] == 75
    assert parts[3]["error_code"] == 3


async def test_init_producer_id(broker):
    a = await init_producer_id.handle_init_producer_id(Ctx(broker, 22, 4), {"transactional_id": None})
    b = await init_producer_id.handle_init_producer_id(Ctx(broker, 22, 4), {"transactional_id": None})
    assert a["error_code"] == 0 and b["producer_id"] == a["producer_id"] + 1 and a["producer_epoch"] == 0
    t = await init_producer_id.handle_init_producer_id(Ctx(broker, 22, 4), {"transactional_id": "tx"})
    assert t["error_code"] == 15


async def test_metadata_all_topics_auto_create_and_errors(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("existing", 2)
    md = metadata.build_metadata(b, 12, {"topics": None})
    assert [t["name"] for t in md["topics"]] == ["existing"]
    assert md["controller_id"] == 1 and md["cluster_id"] == b.controller.cluster_id
    assert metadata.build_metadata(b, 0, {"topics": []})["topics"][0]["name"] == "existing"
    assert metadata.build_metadata(b, 1, {"topics": []})["topics"] == []
    md = metadata.build_metadata(b, 12, {"topics": [{"name": "fresh", "topic_id": None}],
                                         "allow_auto_topic_creation": True})
    t = md["topics"][0]
    assert t["error_code"] == 0 and len(t["partitions"]) == 1 and t["topic_id"] != uuid.UUID(int=0)
    md = metadata.build_metadata(b, 12, {"topics": [{"name": "nocreate", "topic_id": None}],
                                         "allow_auto_topic_creation": False})
    assert md["topics"][0]["error_code"] == 3
    md = metadata.build_metadata(b, 12, {"topics": [{"name": "bad name", "topic_id": None}],
                                         "allow_auto_topic_creation": True})
    assert md["topics"][0]["error_code"] == 17
    by_id = metadata.build_metadata(b, 12, {"topics": [{"name": None, "topic_id": t["topic_id"]}]})
    assert by_id["topics"][0]["name"] == "fresh"
    b.logs.close()


async def test_metadata_auto_create_disabled(tmp_path):
    b = FakeBroker(str(tmp_path), **{"auto.create.topics.enable": "false"})
    md = metadata.build_metadata(b, 12, {"topics": [{"name": "x", "topic_id": None}],
                                         "allow_auto_topic_creation": True})
    assert md["topics"][0]["error_code"] == 3 and b.controller.topic("x") is None
    b.logs.close()


async def test_log_append_time_topic_reports_and_stores_broker_time(broker):
    broker.controller.create_topic("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
    resp = part(await _produce(broker, batch(2, ts=5), topic="lat"))
    assert resp["error_code"] == 0 and resp["log_append_time_ms"] > 1_000_000
    header, _ = next(broker.controller.log("lat", 0).iter_batches())
    assert header.timestamp_type == 1 and header.max_timestamp == resp["log_append_time_ms"]
    create_time = part(await _produce(broker, batch(1)))
    assert create_time["log_append_time_ms"] == -1


async def test_timestamp_bounds_from_topic_config(broker):
    now = broker.now_ms()
    broker.controller.create_topic("ts", 1, configs={"message.timestamp.before.max.ms": "1000",
                                                     "message.timestamp.after.max.ms": "1000"})
    assert part(await _produce(broker, batch(1, ts=now), topic="ts"))["error_code"] == 0
    assert part(await _produce(broker, batch(1, ts=now - 5000), topic="ts"))["error_code"] == 32
    assert part(await _produce(broker, batch(1, ts=now + 5000), topic="ts"))["error_code"] == 32
    assert part(await _produce(broker, batch(1, ts=now - 5000)))["error_code"] == 0  # default: unlimited
