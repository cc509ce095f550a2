"""CreateTopics / DeleteTopics / CreatePartitions / DeleteRecords handlers, called directly."""

import uuid

import pytest

from minikafka.protocol.errors import ErrorCode

from minikafka.broker.config import BrokerConfig
from minikafka.broker.context import RequestContext
from minikafka.broker.controller import Controller
from minikafka.broker.handlers import admin_topics
from broker_fakes import MemoryMetadataLog, RecordingLogManager


class FakePartitionLog:
    def __init__(self, high_watermark=10):
        self.log_start_offset = 0
        self.high_watermark = high_watermark
        self.deleted_to = []

    def delete_records(self, offset):
        self.deleted_to.append(offset)
        self.log_start_offset = max(self.log_start_offset, offset)
        return self.log_start_offset


class Logs(RecordingLogManager):
    def __init__(self):
        super().__init__()
        self.plogs = {}

    def get(self, topic, partition):
        return self.plogs.setdefault((topic, partition), FakePartitionLog())


class FakeBroker:
    def __init__(self, tmp_path, **overrides):
        self.config = BrokerConfig.load(environ={}, overrides=overrides)
        self.config.data_dir = str(tmp_path)
        self.logs = Logs()
        self.controller = Controller(self.config, MemoryMetadataLog(), self.logs)


@pytest.fixture
def broker(tmp_path):
    return FakeBroker(tmp_path)


def ctx(broker, api_key, version):
    return RequestContext(api_key, version, 1, "unit", "127.0.0.1", broker)


def topic(name, partitions=-1, rf=-1, configs=None, assignments=None):
    return {"name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": assignments or [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


async def create(broker, *topics, validate_only=False, version=7):
    body = {"topics": list(topics), "timeout_ms": 1000, "validate_only": validate_only}
    resp = await admin_topics.create_topics(ctx(broker, 19, version), body)
    return {r["name"]: r for r in resp["topics"]}


async def test_create_topic_with_defaults_reports_v5_fields(broker):
    res = (await create(broker, topic("orders")))["orders"]
    assert res["error_code"] == 0 and res["error_message"] is None
    info = broker.controller.topic("orders")
    assert info.num_partitions == 1 and res["num_partitions"] == 1
    assert res["replication_factor"] == 1
    assert res["topic_id"] == info.topic_id
    configs = {c["name"]: c for c in res["configs"]}
    assert configs["retention.ms"]["value"] == "604800000"
    assert configs["retention.ms"]["config_source"] == 5  # DEFAULT_CONFIG
    assert configs["cleanup.policy"]["value"] == "delete"
    assert [c["name"] for c in res["configs"]] == sorted(configs)


async def test_create_topic_num_partitions_default_comes_from_broker(tmp_path):
    broker = FakeBroker(tmp_path, **{"num.partitions": "4"})
    res = (await create(broker, topic("t")))["t"]
    assert res["error_code"] == 0 and res["num_partitions"] == 4
    assert broker.controller.topic("t").num_partitions == 4


async def test_create_topic_configs_are_canonical_and_reported_as_topic_overrides(broker):
    res = (await create(broker, topic("c", 2, 1, {"cleanup.policy": "compact, delete",
                                                   "retention.ms": " 1000 "})))["c"]
    assert res["error_code"] == 0
    assert broker.controller.topic("c").configs == {"cleanup.policy": "compact,delete", "retention.ms": "1000"}
    configs = {c["name"]: c for c in res["configs"]}
    assert configs["cleanup.policy"] == {"name": "cleanup.policy", "value": "compact,delete", "read_only": False,
                                         "config_source": 1, "is_sensitive": False}


async def test_validate_only_creates_nothing(broker):
    res = (await create(broker, topic("v", 3), validate_only=True))["v"]
    assert res["error_code"] == 0 and res["num_partitions"] == 3
    assert broker.controller.topic("v") is None


@pytest.mark.parametrize("name, message", [
    ("", "Topic name is invalid: the empty string is not allowed"),
    ("..", "Topic name is invalid: '..' is not allowed"),
    ("bad name", "Topic name is invalid: 'bad name' contains one or more characters other than ASCII "
                 "alphanumerics, '.', '_' and '-'"),
    ("x" * 250, f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max allowed length 249"),
])
async def test_invalid_topic_names(broker, name, message):
    res = (await create(broker, topic(name)))[name]
    assert res["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION == 17
    assert res["error_message"] == message


async def test_existing_topic_and_collision(broker):
    await create(broker, topic("a.b"))
    res = await create(broker, topic("a.b"), topic("a_b"))
    assert res["a.b"]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert res["a.b"]["error_message"] == "Topic 'a.b' already exists."
    assert res["a_b"]["error_code"] == 17
    assert res["a_b"]["error_message"] == "Topic 'a_b' collides with existing topic: a.b"


async def test_same_topic_twice_is_invalid_request_once(broker):
    resp = await admin_topics.create_topics(ctx(broker, 19, 7), {
        "topics": [topic("d"), topic("ok"), topic("d", 3)], "timeout_ms": 1, "validate_only": False})
    names = [r["name"] for r in resp["topics"]]
    assert names == ["d", "ok"]
    assert resp["topics"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert resp["topics"][0]["error_message"] == "Duplicate topic name."
    assert broker.controller.topic("d") is None and broker.controller.topic("ok") is not None


@pytest.mark.parametrize("rf, code, message", [
    (3, 38, "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
            "reached because only 1 broker(s) are registered."),
    (0, 38, "Replication factor must be larger than 0, or -1 to use the default value."),
    (-2, 38, "Replication factor must be larger than 0, or -1 to use the default value."),
])
async def test_replication_factor(broker, rf, code, message):
    res = (await create(broker, topic("r", 1, rf)))["r"]
    assert (res["error_code"], res["error_message"]) == (code, message)
    assert broker.controller.topic("r") is None


async def test_invalid_partition_count(broker):
    res = (await create(broker, topic("p", 0)))["p"]
    assert res["error_code"] == ErrorCode.INVALID_PARTITIONS
    assert res["error_message"] == "Number of partitions was set to an invalid non-positive value."


@pytest.mark.parametrize("configs, message", [
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"retention.ms": "-5"}, "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ({"cleanup.policy": "shred"}, "Invalid value shred for configuration cleanup.policy: String must be one of: "
                                  "compact, delete"),
    ({"compression.type": "brotli"}, "Invalid value brotli for configuration compression.type: String must be "
                                     "one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either "
                             "true or false"),
    ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
async def test_invalid_configs(broker, configs, message):
    res = (await create(broker, topic("cfg", 1, 1, configs)))["cfg"]
    assert res["error_code"] == ErrorCode.INVALID_CONFIG
    assert res["error_message"] == message
    assert broker.controller.topic("cfg") is None


async def test_manual_assignment_to_our_node(broker):
    res = (await create(broker, topic("m", assignments=[
        {"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}])))["m"]
    assert res["error_code"] == 0 and res["num_partitions"] == 2
    assert broker.controller.topic("m").num_partitions == 2


@pytest.mark.parametrize("assignments, partitions, code, message", [
    ([{"partition_index": 0, "broker_ids": [2]}], -1, 39,
     "The manual partition assignment includes broker 2, but no such broker is registered."),
    ([{"partition_index": 0, "broker_ids": [1, 1]}], -1, 39,
     "The manual partition assignment includes the broker 1 more than once."),
    ([{"partition_index": 0, "broker_ids": []}], -1, 39,
     "The manual partition assignment includes an empty replica list."),
    ([{"partition_index": 1, "broker_ids": [1]}], -1, 39,
     "partitions should be a consecutive 0-based integer sequence"),
    ([{"partition_index": 0, "broker_ids": [1]}], 1, 42,
     "A manual partition assignment was specified, but numPartitions was not set to -1."),
])
async def test_bad_manual_assignments(broker, assignments, partitions, code, message):
    res = (await create(broker, topic("m", partitions, assignments=assignments)))["m"]
    assert (res["error_code"], res["error_message"]) == (code, message)


# -- DeleteTopics ----------------------------------------------------------------------------

async def delete(broker, names=(), topics=(), version=6):
    body = {"timeout_ms": 1000}
    if version >= 6:
        body["topics"] = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names] + list(topics)
    else:
        body["topic_names"] = list(names)
    return (await admin_topics.delete_topics(ctx(broker, 20, version), body))["responses"]


async def test_delete_by_name_and_unknown(broker):
    await create(broker, topic("gone"))
    info = broker.controller.topic("gone")
    res = {r["name"]: r for r in await delete(broker, ["gone", "never"], version=4)}
    assert res["gone"]["error_code"] == 0 and res["gone"]["topic_id"] == info.topic_id
    assert broker.controller.topic("gone") is None
    assert res["never"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.logs.deleted == ["gone"]


async def test_delete_by_id_v6(broker):
    await create(broker, topic("byid"))
    tid = broker.controller.topic("byid").topic_id
    unknown = uuid.uuid4()
    res = await delete(broker, topics=[{"name": None, "topic_id": tid}, {"name": None, "topic_id": unknown}])
    by_id = {r["topic_id"]: r for r in res}
    assert by_id[tid]["error_code"] == 0 and by_id[tid]["name"] == "byid"
    assert by_id[unknown]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    assert by_id[unknown]["name"] is None
    assert broker.controller.topic("byid") is None


async def test_delete_duplicates_and_both_name_and_id(broker):
    await create(broker, topic("x"))
    tid = broker.controller.topic("x").topic_id
    res = await delete(broker, ["x", "x"], topics=[{"name": "x", "topic_id": tid},
                                                  {"name": None, "topic_id": uuid.UUID(int=0)}])
    messages = sorted(r["error_message"] for r in res)
    assert messages == ["Duplicate topic name.", "Neither topic name nor id were specified.",
                        "You may not specify both topic name and topic id."]
    assert all(r["error_code"] == ErrorCode.INVALID_REQUEST for r in res)
    assert broker.controller.topic("x") is not None


async def test_internal_topic_is_not_deleted(broker):
    broker.controller.create_topic("__consumer_offsets", 2, internal=True)
    res = await delete(broker, ["__consumer_offsets"])
    assert res[0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert broker.controller.topic("__consumer_offsets") is not None


async def test_delete_disabled(tmp_path):
    broker = FakeBroker(tmp_path, **{"delete.topic.enable": "false"})
    broker.controller.create_topic("keep")
    res = await delete(broker, ["keep"], version=5)
    assert res[0]["error_code"] == ErrorCode.TOPIC_DELETION_DISABLED
    res = await delete(broker, ["keep"], version=2)
    assert res[0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert broker.controller.topic("keep") is not None


# -- CreatePartitions ------------------------------------------------------------------------

async def grow(broker, name, count, assignments=None, validate_only=False):
    body = {"topics": [{"name": name, "count": count, "assignments": assignments}], "timeout_ms": 1,
            "validate_only": validate_only}
    return (await admin_topics.create_partitions(ctx(broker, 37, 3), body))["results"][0]


async def test_create_partitions(broker):
    await create(broker, topic("g", 2))
    assert (await grow(broker, "g", 5, validate_only=True))["error_code"] == 0
    assert broker.controller.topic("g").num_partitions == 2
    res = await grow(broker, "g", 5)
    assert res == {"name": "g", "error_code": 0, "error_message": None}
    assert broker.controller.topic("g").num_partitions == 5


@pytest.mark.parametrize("count, assignments, code, message", [
    (2, None, 37, "Topic already has 2 partition(s)."),
    (1, None, 37, "The topic g currently has 2 partition(s); 1 would not be an increase."),
    (4, [{"broker_ids": [1]}], 39, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were "
                                   "specified."),
    (3, [{"broker_ids": [7]}], 39, "The manual partition assignment includes broker 7, but no such broker is "
                                   "registered."),
])
async def test_create_partitions_errors(broker, count, assignments, code, message):
    await create(broker, topic("g", 2))
    res = await grow(broker, "g", count, assignments)
    assert (res["error_code"], res["error_message"]) == (code, message)
    assert broker.controller.topic("g").num_partitions == 2


async def test_create_partitions_unknown_topic(broker):
    res = await grow(broker, "nope", 3)
    assert res["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- DeleteRecords ---------------------------------------------------------------------------

async def delete_records(broker, name, *partitions):
    body = {"topics": [{"name": name, "partitions": [{"partition_index": p, "offset": o} for p, o in partitions]}],
            "timeout_ms": 1}
    resp = await admin_topics.delete_records(ctx(broker, 21, 2), body)
    return {p["partition_index"]: p for p in resp["topics"][0]["partitions"]}


async def test_delete_records(broker):
    await create(broker, topic("dr", 3))
    res = await delete_records(broker, "dr", (0, 4), (1, -1), (2, 11), (5, 1))
    assert res[0] == {"partition_index": 0, "low_watermark": 4, "error_code": 0}
    assert res[1] == {"partition_index": 1, "low_watermark": 10, "error_code": 0}
    assert res[2]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE and res[2]["low_watermark"] == -1
    assert res[5]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.logs.plogs[("dr", 0)].log_start_offset == 4
    # Below the current log start nothing moves and the current start is reported.
    again = await delete_records(broker, "dr", (0, 2))
    assert again[0] == {"partition_index": 0, "low_watermark": 4, "error_code": 0}


async def test_delete_records_refused_on_compacted_and_internal_topics(broker):
    await create(broker, topic("compacted", 1, 1, {"cleanup.policy": "compact"}))
    broker.controller.create_topic("__consumer_offsets", 1, internal=True)
    assert (await delete_records(broker, "compacted", (0, 1)))[0]["error_code"] == ErrorCode.POLICY_VIOLATION
    assert (await delete_records(broker, "__consumer_offsets", (0, 1)))[0]["error_code"] == 17
    res = await delete_records(broker, "unknown", (0, 1))
    assert res[0] == {"partition_index": 0, "low_watermark": -1, "error_code": 3}
