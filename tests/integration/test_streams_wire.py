"""Streams groups on a broker of their own: the switches that turn them off, and a restart.

* ``streams.version`` finalized to 0 by UpdateFeatures: StreamsGroupHeartbeat/Describe stay advertised and
  answer UNSUPPORTED_VERSION without a message (as Kafka 4.2.2 answered by hand); 1 again turns them on.
* ``group.coordinator.rebalance.protocols`` without ``streams``: the same answer.
* A streams group survives a broker restart: its records in ``__consumer_offsets`` are replayed, so the
  member keeps its epoch and tasks, and its heartbeats go on.
"""

from __future__ import annotations

import time

import pytest

from conftest import RawClient, start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "changes broker-wide switches (UpdateFeatures, rebalance protocols) and restarts the broker; "
    "the UNSUPPORTED_VERSION answers were compared with Kafka 4.2.2 by hand"))]


def _heartbeat(group: str, epoch: int, topology=None, **extra) -> dict:
    body = {"group_id": group, "member_id": "m1", "member_epoch": epoch, "endpoint_information_epoch": 0,
            "rebalance_timeout_ms": 30000 if epoch == 0 else -1, "topology": topology,
            "active_tasks": [] if epoch == 0 else None, "standby_tasks": [] if epoch == 0 else None,
            "warmup_tasks": [] if epoch == 0 else None, "process_id": "p1" if epoch == 0 else None}
    body.update(extra)
    return body


def _topology(topic: str) -> dict:
    return {"epoch": 0, "subtopologies": [{"subtopology_id": "0", "source_topics": [topic], "source_topic_regex": [],
                                           "state_changelog_topics": [], "repartition_sink_topics": [],
                                           "repartition_source_topics": [], "copartition_groups": []}]}


def _coordinator(c: RawClient, group: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if c.request(10, 3, {"key": group, "key_type": 0})["error_code"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError("no coordinator")


def test_streams_version_0_turns_streams_groups_off(broker_factory):
    broker = broker_factory()
    with RawClient(broker.port) as c:
        _coordinator(c, "g")
        assert c.request(57, 1, {"timeout_ms": 5000, "validate_only": False, "feature_updates": [
            {"feature": "streams.version", "max_version_level": 0, "upgrade_type": 2}]})["results"][0]["error_code"] == 0
        versions = {a["api_key"]: a for a in c.request(18, 3, {"client_software_name": "t",
                                                               "client_software_version": "1"})["api_keys"]}
        assert 88 in versions and 89 in versions
        r = c.request(88, 0, _heartbeat("g", 0, _topology("t")))
        assert (r["error_code"], r["error_message"]) == (35, None)
        assert c.request(89, 0, {"group_ids": ["g"], "include_authorized_operations": False})["groups"][0][
            "error_code"] == 35
        assert c.request(57, 1, {"timeout_ms": 5000, "validate_only": False, "feature_updates": [
            {"feature": "streams.version", "max_version_level": 1, "upgrade_type": 1}]})["results"][0]["error_code"] == 0
        assert c.request(88, 0, _heartbeat("g", 0, _topology("t")))["error_code"] == 0


def test_rebalance_protocols_without_streams(broker_factory):
    broker = broker_factory(group_coordinator_rebalance_protocols="classic,consumer")
    with RawClient(broker.port) as c:
        _coordinator(c, "g")
        assert c.request(88, 0, _heartbeat("g", 0, _topology("t")))["error_code"] == 35


def test_a_streams_group_survives_a_restart(broker_factory):
    broker = broker_factory(group_streams_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=3)
    with RawClient(broker.port) as c:
        c.request(19, 7, {"topics": [{"name": "words", "num_partitions": 2, "replication_factor": 1, "configs": []}],
                          "timeout_ms": 5000})
        _coordinator(c, "app")
        r = c.request(88, 0, _heartbeat("app", 0, _topology("words")))
        assert r["error_code"] == 0 and r["active_tasks"] == [{"subtopology_id": "0", "partitions": [0, 1]}]
        epoch = r["member_epoch"]
        before = c.request(89, 0, {"group_ids": ["app"], "include_authorized_operations": False})["groups"][0]
    broker.restart()
    with RawClient(broker.port) as c:
        _coordinator(c, "app")
        deadline = time.monotonic() + 15
        while True:
            after = c.request(89, 0, {"group_ids": ["app"], "include_authorized_operations": False})["groups"][0]
            if after["error_code"] not in (14, 15) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert after == before
        r = c.request(88, 0, _heartbeat("app", epoch, active_tasks=[{"subtopology_id": "0", "partitions": [0, 1]}],
                                        standby_tasks=[], warmup_tasks=[]))
        assert (r["error_code"], r["member_epoch"]) == (0, epoch)


def test_bounds_kafka_refuses_to_start_with(tmp_path):
    """A heartbeat interval not below the session timeout stops the broker at start-up, as Kafka's
    GroupCoordinatorConfig does."""
    with pytest.raises(Exception):
        broker = start_broker(tmp_path, group_streams_heartbeat_interval_ms=15000,
                              group_streams_session_timeout_ms=45000, group_streams_min_heartbeat_interval_ms=5000,
                              group_streams_max_session_timeout_ms=60000, group_streams_num_standby_replicas=5)
        broker.stop()
    assert "group.streams.num.standby.replicas must be less than or equal to" in (tmp_path / "broker.log").read_text()
