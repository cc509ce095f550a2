"""Every served version of the admin APIs through the real codec: request bytes -> handler ->
response bytes -> decoded, so the version-agnostic dicts the handlers build are encodable."""

import uuid

import pytest

from minikafka.protocol import codec

from minikafka.broker.config import BrokerConfig
from minikafka.broker.context import RequestContext
from minikafka.broker.controller import Controller
from minikafka.broker.handlers import admin_cluster, admin_configs, admin_topics
from broker_fakes import MemoryMetadataLog, RecordingLogManager


class FakePartitionLog:
    log_start_offset = 0
    high_watermark = 5

    def delete_records(self, offset):
        self.log_start_offset = offset
        return offset


class Logs(RecordingLogManager):
    def get(self, topic, partition):
        return FakePartitionLog()


class FakeBroker:
    def __init__(self, tmp_path):
        self.config = BrokerConfig.load(environ={})
        self.config.data_dir = str(tmp_path)
        self.controller = Controller(self.config, MemoryMetadataLog(), Logs())
        self.controller.create_topic("existing", 2)


HANDLERS = {19: admin_topics.create_topics, 20: admin_topics.delete_topics, 21: admin_topics.delete_records,
            37: admin_topics.create_partitions, 32: admin_configs.describe_configs,
            33: admin_configs.alter_configs, 44: admin_configs.incremental_alter_configs,
            60: admin_cluster.describe_cluster}
RANGES = {19: (2, 7), 20: (1, 6), 21: (0, 2), 37: (0, 3), 32: (1, 4), 33: (0, 2), 44: (0, 1), 60: (0, 2)}

BODIES = {
    19: {"topics": [{"name": "new", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                     "configs": [{"name": "retention.ms", "value": "100"}]},
                    {"name": "existing", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                     "configs": []}],
         "timeout_ms": 1000, "validate_only": False},
    20: {"topic_names": ["existing", "missing"], "timeout_ms": 1000,
         "topics": [{"name": "existing", "topic_id": uuid.UUID(int=0)}, {"name": "missing", "topic_id": uuid.UUID(int=0)}]},
    21: {"topics": [{"name": "existing", "partitions": [{"partition_index": 0, "offset": 3},
                                                        {"partition_index": 9, "offset": 3}]}], "timeout_ms": 1},
    37: {"topics": [{"name": "existing", "count": 4, "assignments": None}], "timeout_ms": 1, "validate_only": True},
    32: {"resources": [{"resource_type": 2, "resource_name": "existing", "configuration_keys": None},
                       {"resource_type": 4, "resource_name": "1", "configuration_keys": ["message.max.bytes"]},
                       {"resource_type": 2, "resource_name": "missing", "configuration_keys": None}],
         "include_synonyms": True, "include_documentation": True},
    33: {"resources": [{"resource_type": 2, "resource_name": "existing",
                        "configs": [{"name": "retention.ms", "value": "5"}]}], "validate_only": False},
    44: {"resources": [{"resource_type": 2, "resource_name": "existing",
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "5"}]}],
         "validate_only": False},
    60: {"include_cluster_authorized_operations": True, "endpoint_type": 1},
}

CASES = [(key, v) for key, (lo, hi) in RANGES.items() for v in range(lo, hi + 1)]


@pytest.mark.parametrize("api_key, version", CASES)
async def test_round_trip(tmp_path, api_key, version):
    broker = FakeBroker(tmp_path)
    frame = codec.encode_request(api_key, version, 7, "wire", BODIES[api_key])
    request = codec.decode_request(memoryview(frame)[4:])
    ctx = RequestContext(api_key, version, 7, "wire", "127.0.0.1", broker)
    response = await HANDLERS[api_key](ctx, request.body)
    chunks = codec.encode_response(api_key, version, 7, response)
    data = b"".join(bytes(c) for c in chunks)
    correlation_id, body = codec.decode_response(api_key, version, memoryview(data)[4:])
    assert correlation_id == 7
    if api_key == 19:
        results = {t["name"]: t for t in body["topics"]}
        assert results["new"]["error_code"] == 0 and results["existing"]["error_code"] == 36
        if version >= 5:
            assert results["new"]["num_partitions"] == 2
            assert {c["name"]: c["value"] for c in results["new"]["configs"]}["retention.ms"] == "100"
        if version >= 7:
            assert results["new"]["topic_id"] == broker.controller.topic("new").topic_id
    elif api_key == 20:
        codes = {t["name"]: t["error_code"] for t in body["responses"]}
        assert codes == {"existing": 0, "missing": 3}
    elif api_key == 21:
        parts = body["topics"][0]["partitions"]
        assert [(p["partition_index"], p["error_code"], p["low_watermark"]) for p in parts] == [(0, 0, 3), (9, 3, -1)]
    elif api_key == 37:
        assert body["results"] == [{"name": "existing", "error_code": 0, "error_message": None}]
    elif api_key == 32:
        topic, brk, missing = body["results"]
        assert topic["error_code"] == 0 and len(topic["configs"]) > 20
        assert brk["configs"][0]["name"] == "message.max.bytes"
        assert missing["error_code"] == 3
        if version >= 3:
            assert topic["configs"][0]["documentation"]
    elif api_key in (33, 44):
        assert body["responses"][0]["error_code"] == 0
        assert broker.controller.topic("existing").configs == {"retention.ms": "5"}
    elif api_key == 60:
        assert body["controller_id"] == 1 and body["brokers"][0]["broker_id"] == 1
