"""Issue 14's version plumbing on real storage: Fetch v13-17 by topic id, ListOffsets v8-10,
Metadata v13, DescribeGroups v6, and kafka-python's inference of the broker version."""

import uuid

from minikafka.protocol import codec, fast
from minikafka.protocol.records import build_batch

from minikafka.broker.handlers import fetch, list_offsets, metadata
from broker_fakes import Ctx, FakeBroker

import pytest


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.controller.create_topic("t", 2)
    b.controller.log("t", 0).append(build_batch([(b"k", b"v", [], 1000 + i) for i in range(3)]))
    yield b
    b.logs.close()


def _handler(module, key):
    found = {}

    class Reg:
        def register(self, k, lo, hi, h):
            found[k] = (lo, hi, h)

    module.register(Reg(), None)
    return found[key]


def fetch_by_id(topic_id, offset=0, partition=0, epoch=-1, max_wait_ms=0):
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17, 18])
async def test_fetch_by_topic_id(broker, version):
    lo, hi, handle = _handler(fetch, 1)
    assert (lo, hi) == (4, 18)
    tid = broker.controller.topic("t").topic_id
    resp = await handle(Ctx(broker, 1, version), fetch_by_id(tid))
    topic = resp["responses"][0]
    assert topic["topic_id"] == tid
    part = topic["partitions"][0]
    assert part["error_code"] == 0 and part["high_watermark"] == 3
    assert sum(len(c) for c in part["records"]) > 0
    # the response encodes (fast path) exactly as the generic codec does
    wire = b"".join(bytes(c) for c in fast.encode_response(1, version, 1, resp))
    assert wire == b"".join(bytes(c) for c in codec.encode_response(1, version, 1, resp))
    _, decoded = codec.decode_response(1, version, wire[4:])
    assert decoded["responses"][0]["topic_id"] == tid


async def test_unknown_topic_id_is_answered_at_once_with_unknown_topic_id(broker):
    _, _, handle = _handler(fetch, 1)
    tid = broker.controller.topic("t").topic_id
    body = fetch_by_id(uuid.uuid4(), max_wait_ms=30000)
    body["topics"].append(fetch_by_id(tid, offset=3)["topics"][0])  # nothing new here: would park
    body["topics"].append(fetch_by_id(uuid.UUID(int=0))["topics"][0])
    resp = await handle(Ctx(broker, 1, 13), body)  # no long poll: returns now
    codes = [t["partitions"][0]["error_code"] for t in resp["responses"]]
    assert codes == [100, 0, 100]
    assert resp["responses"][1]["topic_id"] == tid


async def test_fenced_epoch_carries_the_leader_and_node_endpoints_from_v16(broker):
    _, _, handle = _handler(fetch, 1)
    tid = broker.controller.topic("t").topic_id
    old = await handle(Ctx(broker, 1, 15), fetch_by_id(tid, epoch=-5))
    assert "node_endpoints" not in old
    new = await handle(Ctx(broker, 1, 16), fetch_by_id(tid, epoch=-5))
    part = new["responses"][0]["partitions"][0]
    assert part["error_code"] == 74
    assert part["current_leader"] == {"leader_id": 1, "leader_epoch": 0}
    host, port = broker.config.advertised
    assert new["node_endpoints"] == [{"node_id": 1, "host": host, "port": port, "rack": None}]
    wire = b"".join(bytes(c) for c in fast.encode_response(1, 16, 1, new))
    _, decoded = codec.decode_response(1, 16, wire[4:])
    assert decoded["node_endpoints"][0]["port"] == port


async def test_fetch_v12_still_by_name(broker):
    _, _, handle = _handler(fetch, 1)
    body = fetch_by_id(None)
    body["topics"][0]["topic"] = "t"
    resp = await handle(Ctx(broker, 1, 12), body)
    assert resp["responses"][0]["topic"] == "t"


@pytest.mark.parametrize("ts,offset,epoch", [(-4, 0, 0), (-5, -1, -1), (-2, 0, 0), (-1, 3, 0), (-6, -1, -1)])
async def test_list_offsets_v8_to_v11_special_timestamps(broker, ts, offset, epoch):
    lo, hi, handle = _handler(list_offsets, 2)
    assert (lo, hi) == (1, 11)
    body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]}
    resp = await handle(Ctx(broker, 2, 11), body)
    part = resp["topics"][0]["partitions"][0]
    assert (part["error_code"], part["offset"], part["leader_epoch"]) == (0, offset, epoch)


# The first version of each sentinel timestamp, as Kafka 4.2 answers (UNSUPPORTED_VERSION before).
_SENTINEL_FIRST = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9, -6: 11}


@pytest.mark.parametrize("ts", [-1, -2, -3, -4, -5, -6, -7, -100])
async def test_list_offsets_sentinels_only_from_their_version(broker, ts):
    _, _, handle = _handler(list_offsets, 2)
    for version in range(1, 12):
        body = {"replica_id": -1, "isolation_level": 0, "timeout_ms": 1000, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]}
        part = (await handle(Ctx(broker, 2, version), body))["topics"][0]["partitions"][0]
        if version >= _SENTINEL_FIRST.get(ts, 99):
            assert part["error_code"] == 0, (ts, version)
        else:
            assert (part["error_code"], part["offset"], part["timestamp"], part["leader_epoch"]) == (35, -1, -1, -1)


async def test_metadata_v13_has_a_top_level_error_code(broker):
    lo, hi, handle = _handler(metadata, 3)
    assert hi == 13
    resp = await handle(Ctx(broker, 3, 13), {"topics": None, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    assert resp["error_code"] == 0
    wire = b"".join(bytes(c) for c in fast.encode_response(3, 13, 1, resp))
    _, decoded = codec.decode_response(3, 13, wire[4:])
    assert decoded["error_code"] == 0 and decoded["topics"][0]["name"] == "t"


def test_kafka_python_infers_kafka_4_2_from_what_we_advertise(tmp_path):
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    from minikafka.broker.config import BrokerConfig
    from minikafka.broker.server import Broker

    class Closed:
        def close(self):
            pass

    broker = Broker(BrokerConfig.load(environ={}, fields={"port": 0}), controller=Closed())
    broker.build_registry()
    advertised = {e["api_key"]: (e["min_version"], e["max_version"])
                  for e in broker.registry.api_versions_body()["api_keys"]}
    assert infer_broker_version_from_api_versions(advertised) == (4, 2)
