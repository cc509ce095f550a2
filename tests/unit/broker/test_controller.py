import uuid

import pytest

from minikafka.protocol.errors import KafkaError

from minikafka.broker.config import BrokerConfig
from minikafka.broker.controller import Controller, topic_name_error
from broker_fakes import MemoryMetadataLog, RecordingLogManager


def make(records=None, **overrides):
    meta = MemoryMetadataLog(records)
    logs = RecordingLogManager()
    return Controller(BrokerConfig.load(environ={}, overrides=overrides), meta, logs), meta, logs


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/", "ünï"])
def test_illegal_topic_names(name):
    assert topic_name_error(name)
    ctrl, _, _ = make()
    with pytest.raises(KafkaError) as exc:
        ctrl.create_topic(name)
    assert exc.value.code == 17


@pytest.mark.parametrize("name", ["a", "A.b_c-1", "x" * 249, "..."])
def test_legal_topic_names(name):
    assert topic_name_error(name) is None


def test_cluster_id_and_topics_survive_reopen():
    ctrl, meta, logs = make()
    info = ctrl.create_topic("orders", 3, configs={"retention.ms": "1000"})
    assert logs.opened["orders"] == 3
    assert logs.configs["orders"]["retention.ms"] == "1000"
    assert len(ctrl.cluster_id) == 22
    again, _, logs2 = make(meta.saved)
    assert again.cluster_id == ctrl.cluster_id
    reopened = again.topic("orders")
    assert reopened.topic_id == info.topic_id and reopened.num_partitions == 3
    assert reopened.configs == {"retention.ms": "1000"}
    assert again.topic_by_id(info.topic_id) is reopened
    assert logs2.opened["orders"] == 3  # logs reopened on start


def test_create_errors():
    ctrl, _, _ = make()
    ctrl.create_topic("t")
    for kwargs, code in [(dict(name="t"), 36), (dict(name="u", num_partitions=0), 37),
                         (dict(name="u", replication_factor=3), 38),
                         (dict(name="u", configs={"nope": "1"}), 40),
                         (dict(name="u", configs={"retention.ms": "abc"}), 40),
                         (dict(name="u", configs={"cleanup.policy": "shred"}), 40)]:
        with pytest.raises(KafkaError) as exc:
            ctrl.create_topic(**kwargs)
        assert exc.value.code == code, kwargs


def test_dot_underscore_collision_is_invalid_topic():
    ctrl, _, _ = make()
    ctrl.create_topic("a.b")
    with pytest.raises(KafkaError) as exc:
        ctrl.create_topic("a_b")
    assert exc.value.code == 17


def test_validate_only_changes_nothing():
    ctrl, meta, logs = make()
    before = list(meta.saved)
    info = ctrl.create_topic("v", 2, validate_only=True)
    assert info.num_partitions == 2 and ctrl.topic("v") is None and meta.saved == before


def test_default_partitions_from_config():
    ctrl, _, _ = make(**{"num.partitions": "4"})
    assert ctrl.create_topic("d").num_partitions == 4


def test_delete_and_create_partitions_and_configs():
    ctrl, meta, logs = make()
    ctrl.create_topic("t", 1)
    ctrl.create_partitions("t", 3)
    assert ctrl.topic("t").num_partitions == 3 and logs.opened["t"] == 3
    with pytest.raises(KafkaError) as exc:
        ctrl.create_partitions("t", 2)
    assert exc.value.code == 37
    ctrl.set_topic_configs("t", {"retention.ms": "5", "segment.bytes": "1048576"})
    ctrl.set_topic_configs("t", {"retention.ms": None})
    assert ctrl.topic("t").configs == {"segment.bytes": "1048576"}
    assert ctrl.topic_config_value("t", "retention.ms") == 604800000
    ctrl.delete_topic("t")
    assert ctrl.topic("t") is None and logs.deleted == ["t"]
    with pytest.raises(KafkaError) as exc:
        ctrl.log("t", 0)
    assert exc.value.code == 3
    again, _, _ = make(meta.saved)
    assert again.topic("t") is None


def test_log_rejects_unknown_partition():
    ctrl, _, _ = make()
    ctrl.create_topic("t", 2)
    assert ctrl.log("t", 1) == ("t", 1)
    with pytest.raises(KafkaError):
        ctrl.log("t", 2)


def test_internal_topic_flag():
    ctrl, _, _ = make()
    assert ctrl.create_topic("__consumer_offsets", 50).internal
    assert not ctrl.create_topic("plain").internal


def test_producer_ids_persist_through_metadata_log():
    ctrl, meta, _ = make()
    first = ctrl.producer_ids.next_id()
    again, _, _ = make(meta.saved)
    assert again.producer_ids.next_id() > first


def test_stray_partition_directories_are_removed_on_start():
    meta = MemoryMetadataLog()
    logs = RecordingLogManager()
    logs.topics_on_disk = {"ghost"}
    Controller(BrokerConfig.load(environ={}), meta, logs)
    assert logs.deleted == ["ghost"]


def test_refresh_topic_configs_writes_no_record():
    ctrl, meta, logs = make()
    ctrl.create_topic("t", 1)
    before = len(meta.saved)
    ctrl.config.set("log.retention.ms", "1234")
    ctrl.refresh_topic_configs("t")
    assert len(meta.saved) == before
    assert logs.configs["t"]["retention.ms"] == 1234
