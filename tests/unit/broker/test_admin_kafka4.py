"""The single-node answers of the Kafka 4.x admin APIs (log dirs, elections, reassignments,
DescribeTopicPartitions paging, the quorum, features), on real storage, through the codec."""

import os
import uuid

import pytest

from minikafka.protocol import codec
from minikafka.protocol.records import build_batch

from minikafka.broker import features
from minikafka.broker.handlers import admin_quorum, admin_replicas, api_versions
from broker_fakes import Ctx, FakeBroker


class Registry:
    def __init__(self):
        self.handlers = {}

    def register(self, key, lo, hi, handler):
        self.handlers[key] = (lo, hi, handler)

    def __contains__(self, key):
        return key in self.handlers

    def api_versions_body(self):
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path / "data"), **{"max.request.partition.size.limit": "5"})
    b.config.data_dir = str(tmp_path / "data")
    b.registry = Registry()
    for module in (admin_replicas, admin_quorum):
        module.register(b.registry, b)
    b.controller.create_topic("a", 3)
    b.controller.create_topic("b", 4)
    b.controller.create_topic("c", 1)
    b.controller.log("a", 1).append(build_batch([(b"k", b"v" * 1000, [], 1000)]))
    yield b
    b.logs.close()


async def call(broker, key, version, body):
    """Through the codec both ways, as the connection would."""
    frame = codec.encode_request(key, version, 1, "test", body)[4:]
    request = codec.decode_request(frame)
    response = await broker.registry.handlers[key][2](Ctx(broker, key, version), request.body)
    wire = b"".join(bytes(c) for c in codec.encode_response(key, version, 1, response))
    return codec.decode_response(key, version, wire[4:])[1]


async def test_describe_log_dirs_has_real_sizes(broker):
    r = await call(broker, 35, 4, {"topics": [{"topic": "a", "partitions": [0, 1, 9]}, {"topic": "zz", "partitions": [0]}]})
    [result] = r["results"]
    assert result["log_dir"] == os.path.abspath(broker.config.data_dir)
    assert result["total_bytes"] > 0 and 0 < result["usable_bytes"] <= result["total_bytes"]
    [topic] = result["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] == 0 and sizes[1] == broker.controller.log("a", 1).size_bytes > 1000
    everything = await call(broker, 35, 1, {"topics": None})
    assert sorted(t["name"] for t in everything["results"][0]["topics"]) == ["a", "b", "c"]


async def test_alter_replica_log_dirs(broker):
    here = os.path.abspath(broker.config.data_dir)
    r = await call(broker, 34, 2, {"dirs": [
        {"path": here, "topics": [{"name": "a", "partitions": [0, 7]}]},
        {"path": "/elsewhere", "topics": [{"name": "b", "partitions": [0]}]}]})
    codes = {(t["topic_name"], p["partition_index"]): p["error_code"] for t in r["results"] for p in t["partitions"]}
    assert codes == {("a", 0): 0, ("a", 7): 3, ("b", 0): 57}


async def test_elect_leaders(broker):
    r = await call(broker, 43, 2, {"election_type": 0, "timeout_ms": 1000, "topic_partitions": [
        {"topic": "a", "partitions": [0, 5]}, {"topic": "nope", "partitions": [0]}]})
    codes = [[p["error_code"] for p in t["partition_result"]] for t in r["replica_election_results"]]
    assert r["error_code"] == 0 and codes == [[84, 3], [3]]
    everything = await call(broker, 43, 1, {"election_type": 1, "timeout_ms": 1000, "topic_partitions": None})
    assert everything["replica_election_results"] == []


async def test_partition_reassignments(broker):
    def req(replicas, name="a", partition=0):
        return {"timeout_ms": 1000, "allow_replication_factor_change": False,
                "topics": [{"name": name, "partitions": [{"partition_index": partition, "replicas": replicas}]}]}

    async def code(replicas, **kw):
        r = await call(broker, 45, 1, req(replicas, **kw))
        return r["responses"][0]["partitions"][0]["error_code"]

    assert await code([1]) == 0
    assert await code([2]) == 39
    assert await code([]) == 39
    assert await code([1, 1]) == 39
    assert await code(None) == 85
    assert await code([1], name="ghost") == 3
    listed = await call(broker, 46, 0, {"timeout_ms": 1000, "topics": None})
    assert listed["error_code"] == 0 and listed["topics"] == []


async def test_describe_topic_partitions_pages_with_a_cursor(broker):
    seen, cursor, pages = [], None, 0
    while True:
        r = await call(broker, 75, 0, {"topics": [], "response_partition_limit": 100, "cursor": cursor})
        pages += 1
        for t in r["topics"]:
            assert t["error_code"] == 0 and t["topic_id"] == broker.controller.topic(t["name"]).topic_id
            seen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
        cursor = r["next_cursor"]
        if cursor is None:
            break
    # 8 partitions with a broker limit of 5: two pages, in name order, none lost or repeated
    assert pages == 2
    assert seen == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2), ("b", 3), ("c", 0)]
    r = await call(broker, 75, 0, {"topics": [{"name": "c"}, {"name": "zz"}], "response_partition_limit": 2,
                                   "cursor": None})
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("c", 0), ("zz", 3)]
    bad = await call(broker, 75, 0, {"topics": [{"name": "c"}], "response_partition_limit": 2,
                                     "cursor": {"topic_name": "a", "partition_index": 0}})
    assert [t["error_code"] for t in bad["topics"]] == [42]


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_quorum_this_node_is_the_only_voter_and_leader(broker, version):
    r = await call(broker, 55, version, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [
        {"partition_index": 0}]}]})
    p = r["topics"][0]["partitions"][0]
    assert (p["error_code"], p["leader_id"], p["leader_epoch"]) == (0, 1, 1)
    assert [v["replica_id"] for v in p["current_voters"]] == [1] and p["observers"] == []
    assert p["high_watermark"] == broker.controller.metadata_records > 0
    if version >= 2:
        assert r["nodes"][0]["node_id"] == 1
        assert p["current_voters"][0]["replica_directory_id"] != uuid.UUID(int=0)
    bad = await call(broker, 55, version, {"topics": [{"topic_name": "other", "partitions": [{"partition_index": 0}]}]})
    assert bad["topics"][0]["partitions"][0]["error_code"] == 3


async def test_features_and_update_features(broker):
    fields = features.api_versions_fields(broker)
    finalized = {f["name"]: f["max_version_level"] for f in fields["finalized_features"]}
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in fields["supported_features"]}
    # transaction.version 2 (transactions V2) and eligible leader replicas (KIP-966) are finalized
    # by default, as in Kafka 4.2.
    assert finalized == {"metadata.version": 29, "transaction.version": 2, "eligible.leader.replicas.version": 1}
    assert supported["transaction.version"] == (0, 2) and supported["group.version"] == (0, 0)

    def upd(name, level, upgrade_type=1, validate_only=False):
        return {"timeout_ms": 1000, "validate_only": validate_only, "feature_updates": [
            {"feature": name, "max_version_level": level, "upgrade_type": upgrade_type}]}

    r = await call(broker, 57, 1, upd("transaction.version", 3))
    # Kafka 4.2 (tests/conformance admin_misc): the top-level error only, no per-feature results.
    assert r["error_code"] == 95 and r["results"] == []
    assert (await call(broker, 57, 2, upd("metadata.version", 24, 2)))["error_code"] == 95
    assert (await call(broker, 57, 2, upd("no.such.feature", 1)))["error_code"] == 95
    assert (await call(broker, 57, 2, upd("transaction.version", 0, 1)))["error_code"] == 95  # downgrade as upgrade
    assert (await call(broker, 57, 2, upd("transaction.version", 0, 2, validate_only=True)))["error_code"] == 0
    assert features.finalized(broker)["transaction.version"] == 2
    r = await call(broker, 57, 2, upd("transaction.version", 1, 2))  # safe downgrade to V1
    assert r["error_code"] == 0
    assert features.finalized(broker)["transaction.version"] == 1
    r = await call(broker, 57, 2, upd("transaction.version", 0, 2))
    assert r["error_code"] == 0 and "results" not in r or r.get("results") in (None, [])
    assert "transaction.version" not in features.finalized(broker)
    # the level is a metadata record: a new controller over the same log replays it
    from minikafka.broker.controller import Controller

    again = Controller(broker.config, broker.meta, broker.logs)
    assert again.finalized_features["transaction.version"] == 0


async def test_api_versions_v3_refuses_an_invalid_software_name(broker):
    # KIP-511 / Kafka 4.2 (tests/conformance api_versions): INVALID_REQUEST and no api keys.
    reg = Registry()
    api_versions.register(reg, broker)
    for name, version in (("bad name!", "1.0"), ("ok", ""), ("-x", "1"), ("x", "1.")):
        body = await reg.handlers[18][2](Ctx(broker, 18, 3), {"client_software_name": name,
                                                              "client_software_version": version})
        assert (body["error_code"], body["api_keys"]) == (42, []), (name, version)
    body = await reg.handlers[18][2](Ctx(broker, 18, 2), {})  # v0-2 carry no software name
    assert body["error_code"] == 0


async def test_api_versions_v3_carries_the_features(broker):
    reg = Registry()
    api_versions.register(reg, broker)
    body = await reg.handlers[18][2](Ctx(broker, 18, 3), {"client_software_name": "test",
                                                          "client_software_version": "1.0"})
    wire = b"".join(bytes(c) for c in codec.encode_response(18, 3, 1, body))
    _, decoded = codec.decode_response(18, 3, wire[4:])
    assert {f["name"] for f in decoded["finalized_features"]} == {"metadata.version", "transaction.version",
                                                                  "eligible.leader.replicas.version"}
    assert decoded["finalized_features_epoch"] == broker.controller.metadata_records
