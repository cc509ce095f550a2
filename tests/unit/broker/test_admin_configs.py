"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs and DescribeCluster, called directly."""

import logging

import pytest

from minikafka.protocol.errors import ErrorCode

from minikafka.broker import configs as cfg
from minikafka.broker.config import BrokerConfig
from minikafka.broker.context import RequestContext
from minikafka.broker.controller import Controller
from minikafka.broker.handlers import admin_cluster, admin_configs
from broker_fakes import MemoryMetadataLog, RecordingLogManager

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


class FakeBroker:
    def __init__(self, tmp_path, metadata_log=None, **overrides):
        self.config = BrokerConfig.load(environ={}, overrides=overrides)
        self.config.data_dir = str(tmp_path)
        self.logs = RecordingLogManager()
        self.metadata_log = metadata_log or MemoryMetadataLog()
        self.controller = Controller(self.config, self.metadata_log, self.logs)


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(tmp_path)
    b.controller.create_topic("t", 1, configs={"retention.ms": "1000"})
    return b


def ctx(broker, api_key, version):
    return RequestContext(api_key, version, 1, "unit", "127.0.0.1", broker)


async def describe(broker, rtype, name, keys=None, synonyms=False, docs=False, version=4):
    body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": docs}
    return (await admin_configs.describe_configs(ctx(broker, 32, version), body))["results"][0]


def by_name(result):
    return {c["name"]: c for c in result["configs"]}


async def test_describe_topic_all_configs(broker):
    res = await describe(broker, TOPIC, "t")
    assert res["error_code"] == 0 and res["resource_name"] == "t"
    configs = by_name(res)
    assert set(configs) == set(cfg.TOPIC_CONFIGS)
    assert configs["retention.ms"]["value"] == "1000"
    assert configs["retention.ms"]["config_source"] == 1
    assert configs["segment.bytes"]["value"] == "1073741824"
    assert configs["segment.bytes"]["config_source"] == 5
    assert configs["segment.bytes"]["synonyms"] == []
    assert configs["cleanup.policy"]["config_type"] == 7
    assert configs["retention.ms"]["documentation"] is None
    assert all(c["read_only"] is False and c["is_sensitive"] is False for c in configs.values())


async def test_describe_topic_synonyms_like_kafka(broker):
    configs = by_name(await describe(broker, TOPIC, "t", ["retention.ms", "segment.bytes", "segment.ms"],
                                     synonyms=True, docs=True))
    assert list(configs) == ["retention.ms", "segment.bytes", "segment.ms"]
    assert configs["retention.ms"]["synonyms"] == [{"name": "retention.ms", "value": "1000", "source": 1}]
    assert configs["segment.bytes"]["synonyms"] == [
        {"name": "log.segment.bytes", "value": "1073741824", "source": 5}]
    # Kafka drops log.roll.hours (the only layer holding a value) because it is not log.roll.ms.
    assert configs["segment.ms"]["synonyms"] == []
    assert configs["segment.ms"]["config_source"] == 5
    assert configs["segment.ms"]["documentation"]


async def test_static_broker_setting_is_the_topic_default(tmp_path):
    b = FakeBroker(tmp_path, **{"log.segment.bytes": "2097152"})
    b.controller.create_topic("s", 1)
    configs = by_name(await describe(b, TOPIC, "s", ["segment.bytes"], synonyms=True))
    entry = configs["segment.bytes"]
    assert entry["value"] == "2097152" and entry["config_source"] == 4
    assert entry["synonyms"] == [{"name": "log.segment.bytes", "value": "2097152", "source": 4},
                                 {"name": "log.segment.bytes", "value": "1073741824", "source": 5}]


async def test_describe_unknown_and_invalid_topics(broker):
    res = await describe(broker, TOPIC, "missing")
    assert (res["error_code"], res["error_message"], res["configs"]) == (3, "", [])  # Kafka 4.2 answers "" (conformance)
    res = await describe(broker, TOPIC, "bad/name")
    assert res["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_describe_broker(broker):
    res = await describe(broker, BROKER, "1", synonyms=True)
    assert res["error_code"] == 0
    configs = by_name(res)
    assert configs["message.max.bytes"]["value"] == "1048588"
    assert configs["message.max.bytes"]["read_only"] is False
    assert configs["num.partitions"]["read_only"] is True
    assert configs["log.retention.hours"]["value"] == "168"
    assert configs["log.retention.ms"]["value"] is None
    assert configs["log.dirs"]["config_source"] == 4
    res = await describe(broker, BROKER, "2")
    assert res["error_code"] == 42
    assert res["error_message"] == "Unexpected broker id, expected 1 or empty string, but received 2"
    res = await describe(broker, BROKER, "x")
    assert res["error_message"] == "Broker id must be an integer, but it is: x"


async def test_describe_unsupported_resource_type(broker):
    res = await describe(broker, 16, "metrics")
    assert res["error_code"] == ErrorCode.INVALID_REQUEST


async def test_describe_broker_logger(broker):
    logging.getLogger("minikafka.broker.handlers.admin_configs")
    res = await describe(broker, BROKER_LOGGER, "1")
    configs = by_name(res)
    assert "root" in configs and configs["root"]["config_source"] == 6
    assert (await describe(broker, BROKER_LOGGER, ""))["error_code"] == 42


# -- AlterConfigs (legacy: replaces the whole set) ------------------------------------------

async def alter(broker, resources, validate_only=False, version=2):
    body = {"resources": resources, "validate_only": validate_only}
    return (await admin_configs.alter_configs(ctx(broker, 33, version), body))["responses"]


def resource(rtype, name, **configs):
    return {"resource_type": rtype, "resource_name": name,
            "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}


async def test_alter_configs_replaces_topic_overrides(broker):
    res = await alter(broker, [resource(TOPIC, "t", segment_ms="5000")])
    assert res == [{"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t"}]
    assert broker.controller.topic("t").configs == {"segment.ms": "5000"}


async def test_alter_configs_validate_only_and_errors(broker):
    res = await alter(broker, [resource(TOPIC, "t", segment_ms="5000")], validate_only=True)
    assert res[0]["error_code"] == 0
    assert broker.controller.topic("t").configs == {"retention.ms": "1000"}
    res = await alter(broker, [resource(TOPIC, "t", bogus="1")])
    assert (res[0]["error_code"], res[0]["error_message"]) == (40, "Unknown topic config name: bogus")
    res = await alter(broker, [resource(TOPIC, "nope", retention_ms="1")])
    assert (res[0]["error_code"], res[0]["error_message"]) == (3, "The topic 'nope' does not exist.")
    res = await alter(broker, [resource(TOPIC, "t"), resource(TOPIC, "t")])
    assert [r["error_message"] for r in res] == ["Each resource must appear at most once."] * 2
    res = await alter(broker, [{"resource_type": TOPIC, "resource_name": "t",
                                "configs": [{"name": "retention.ms", "value": None}]}])
    assert (res[0]["error_code"], res[0]["error_message"]) == (42, "Null value not supported for : retention.ms")
    assert broker.controller.topic("t").configs == {"retention.ms": "1000"}


async def test_alter_broker_dynamic_and_read_only(broker, tmp_path):
    res = await alter(broker, [resource(BROKER, "1", message_max_bytes="2000000")])
    assert res[0]["error_code"] == 0
    assert broker.config.get("message.max.bytes") == 2000000
    entry = by_name(await describe(broker, BROKER, "1", ["message.max.bytes"], synonyms=True))["message.max.bytes"]
    assert entry["config_source"] == 2 and entry["value"] == "2000000"
    assert [s["source"] for s in entry["synonyms"]] == [2, 5]
    # The topic default follows the broker's dynamic value.
    topic_entry = by_name(await describe(broker, TOPIC, "t", ["max.message.bytes"]))["max.message.bytes"]
    assert topic_entry["value"] == "2000000" and topic_entry["config_source"] == 2
    # Kept in the metadata log (a ``config`` record), as KRaft keeps a ConfigRecord.
    assert broker.controller.resource_configs[(BROKER, "1")] == {"message.max.bytes": "2000000"}
    assert not (tmp_path / cfg.DYNAMIC_CONFIG_FILE).exists()

    res = await alter(broker, [resource(BROKER, "1", num_partitions="3")])
    assert res[0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert res[0]["error_message"] == "Cannot update these configs dynamically: Set(num.partitions)"
    res = await alter(broker, [resource(BROKER, "1", message_max_bytes="lots")])
    assert res[0]["error_message"] == ("Invalid value lots for configuration message.max.bytes: "
                                       "Not a number of type INT")
    res = await alter(broker, [resource(BROKER, "3", message_max_bytes="1")])
    assert res[0]["error_message"] == "Unexpected broker id, expected 1, but received 3"

    # Legacy AlterConfigs with an empty set removes the dynamic value again.
    assert (await alter(broker, [resource(BROKER, "1")]))[0]["error_code"] == 0
    assert broker.config.get("message.max.bytes") == 1048588


async def test_dynamic_broker_configs_survive_restart(tmp_path):
    b = FakeBroker(tmp_path)
    res = await alter(b, [resource(BROKER, "", log_retention_ms="3600000", min_insync_replicas="1")])
    assert res[0]["error_code"] == 0
    again = FakeBroker(tmp_path, metadata_log=b.metadata_log)
    entry = by_name(await describe(again, BROKER, "1", ["log.retention.ms"], synonyms=True))["log.retention.ms"]
    assert entry["value"] == "3600000" and entry["config_source"] == 3
    assert again.config.get("log.retention.ms") == 3600000
    default = await describe(again, BROKER, "")
    assert [c["name"] for c in default["configs"]] == ["log.retention.ms", "min.insync.replicas"]


async def test_cluster_default_keeps_min_insync_replicas_while_elr_is_on(broker):
    # Kafka 4.2: AlterConfigs replaces the whole set, and leaving min.insync.replicas out is refused.
    res = await alter(broker, [resource(BROKER, "", log_retention_ms="60000")])
    assert (res[0]["error_code"], res[0]["error_message"]) == (
        40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    res = await incremental(broker, BROKER, "", ("min.insync.replicas", 1, None))
    assert res["error_code"] == 40
    entry = by_name(await describe(broker, TOPIC, "t", ["min.insync.replicas"], synonyms=True))["min.insync.replicas"]
    assert entry["config_source"] == 3 and [s["source"] for s in entry["synonyms"]] == [3, 5]


async def test_dynamic_configs_of_an_older_minikafka_move_into_the_metadata_log(tmp_path):
    (tmp_path / cfg.DYNAMIC_CONFIG_FILE).write_text('{"broker": {"message.max.bytes": "3000000"}, '
                                                    '"default": {"log.retention.ms": "60000"}}')
    b = FakeBroker(tmp_path)
    cfg.dynamic_configs(b)
    assert b.controller.resource_configs[(BROKER, "1")] == {"message.max.bytes": "3000000"}
    assert b.controller.resource_configs[(BROKER, "")] == {"log.retention.ms": "60000", "min.insync.replicas": "1"}
    assert b.config.get("message.max.bytes") == 3000000
    assert not (tmp_path / cfg.DYNAMIC_CONFIG_FILE).exists()


# -- IncrementalAlterConfigs ----------------------------------------------------------------

async def incremental(broker, rtype, name, *ops, validate_only=False):
    body = {"resources": [{"resource_type": rtype, "resource_name": name,
                           "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
            "validate_only": validate_only}
    return (await admin_configs.incremental_alter_configs(ctx(broker, 44, 1), body))["responses"][0]


async def test_incremental_set_delete_append_subtract(broker):
    res = await incremental(broker, TOPIC, "t", ("segment.ms", 0, "7000"), ("retention.ms", 1, None))
    assert res["error_code"] == 0
    assert broker.controller.topic("t").configs == {"segment.ms": "7000"}
    res = await incremental(broker, TOPIC, "t", ("cleanup.policy", 2, "compact"))
    assert res["error_code"] == 0
    assert broker.controller.topic("t").configs["cleanup.policy"] == "delete,compact"
    await incremental(broker, TOPIC, "t", ("cleanup.policy", 3, "delete"))
    assert broker.controller.topic("t").configs["cleanup.policy"] == "compact"
    # Subtracting the last policy leaves the empty list, which Kafka 4.2 accepts (neither policy).
    res = await incremental(broker, TOPIC, "t", ("cleanup.policy", 3, "compact"))
    assert res["error_code"] == 0 and broker.controller.topic("t").configs["cleanup.policy"] == ""
    res = await incremental(broker, TOPIC, "t", ("cleanup.policy", 0, "compact,,delete"))
    assert (res["error_code"], res["error_message"]) == (40, "Configuration 'cleanup.policy' values must not be empty.")
    res = await incremental(broker, TOPIC, "t", ("segment.ms", 2, "1"))
    assert (res["error_code"], res["error_message"]) == (40, "Can't APPEND to key segment.ms because its type is not LIST.")
    res = await incremental(broker, TOPIC, "t", ("segment.ms", 0, "1"), validate_only=True)
    assert res["error_code"] == 0 and broker.controller.topic("t").configs["segment.ms"] == "7000"


async def test_incremental_broker_and_logger(broker):
    res = await incremental(broker, BROKER, "", ("log.cleanup.policy", 2, "compact"))
    assert res["error_code"] == 0
    # min.insync.replicas: the cluster-level value Kafka 4.1+ writes at start (KIP-966).
    assert cfg.dynamic_configs(broker).cluster_default == {"log.cleanup.policy": "delete,compact",
                                                            "min.insync.replicas": "1"}
    res = await incremental(broker, BROKER, "1", ("message.max.bytes", 2, "5"))
    assert (res["error_code"], res["error_message"]) == (
        40, "Config value append is not allowed for config key: message.max.bytes")
    res = await incremental(broker, BROKER_LOGGER, "1", ("minikafka.test.admin.logger", 0, "DEBUG"))
    assert res["error_code"] == 0
    assert logging.getLogger("minikafka.test.admin.logger").level == logging.DEBUG
    res = await incremental(broker, BROKER_LOGGER, "1", ("root", 1, None))
    assert res["error_code"] == 42
    res = await incremental(broker, BROKER_LOGGER, "1", ("minikafka.test.admin.logger", 0, "LOUD"))
    assert res["error_code"] == 40


# -- DescribeCluster ------------------------------------------------------------------------

async def test_describe_cluster(broker):
    broker.config.port = 19092
    res = await admin_cluster.describe_cluster(ctx(broker, 60, 1), {
        "include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert res["error_code"] == 0
    assert res["cluster_id"] == broker.controller.cluster_id
    assert res["controller_id"] == 1
    assert res["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": 19092, "rack": None,
                               "is_fenced": False}]
    assert res["cluster_authorized_operations"] == -2147483648
    res = await admin_cluster.describe_cluster(ctx(broker, 60, 0), {"include_cluster_authorized_operations": True})
    assert res["cluster_authorized_operations"] == 8096
    res = await admin_cluster.describe_cluster(ctx(broker, 60, 1), {
        "include_cluster_authorized_operations": False, "endpoint_type": 2})
    assert res["error_code"] == ErrorCode.MISMATCHED_ENDPOINT_TYPE


async def test_dynamic_broker_change_reaches_existing_topic_logs(tmp_path):
    b = FakeBroker(tmp_path)
    b.controller.create_topic("plain", 1)
    b.controller.create_topic("pinned", 1, configs={"retention.ms": "5"})
    logs = b.logs
    assert str(logs.configs["plain"].get("retention.ms", 604800000)) == "604800000"
    res = await alter(b, [resource(BROKER, "", log_retention_ms="60000", min_insync_replicas="1")])
    assert res[0]["error_code"] == 0
    assert str(logs.configs["plain"]["retention.ms"]) == "60000"
    assert str(logs.configs["pinned"]["retention.ms"]) == "5"
