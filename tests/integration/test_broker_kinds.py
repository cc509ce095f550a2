"""The harness that runs integration tests on both brokers (conftest.broker_for, KAFKA_SETTINGS): the
shared Apache Kafka really has the settings the tests' overrides are checked against, minikafka gets
the overrides it is given, and an override the shared Kafka lacks is refused rather than ignored."""

from __future__ import annotations

import pytest

from conftest import KAFKA_IGNORED_OVERRIDES, KAFKA_SETTINGS, broker_for


def broker_configs(bootstrap: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {name: entry.value for name, entry in entries.items()}


def test_the_broker_has_the_settings_the_overrides_are_checked_against(request, broker_kind, tmp_path):
    broker = broker_for(request, broker_kind, tmp_path, group_min_session_timeout_ms=1000,
                        offsets_topic_num_partitions=5)
    try:
        configs = broker_configs(broker.bootstrap)
        assert configs["group.min.session.timeout.ms"] == "1000"
        if broker_kind == "kafka":
            # Every setting the override check relies on is what the shared broker runs with.
            assert {k: configs.get(k) for k in KAFKA_SETTINGS} == KAFKA_SETTINGS
            assert set(KAFKA_IGNORED_OVERRIDES) <= set(configs)
            # An override the shared broker does not have is refused (the test would silently run
            # with Kafka's value otherwise); an ignored one is accepted whatever its value.
            with pytest.raises(AssertionError, match="message.max.bytes=4096"):
                broker_for(request, broker_kind, tmp_path, message_max_bytes=4096)
            with pytest.raises(AssertionError, match="group.min.session.timeout.ms=6000"):
                broker_for(request, broker_kind, tmp_path, group_min_session_timeout_ms=6000)
            assert broker_for(request, broker_kind, tmp_path, offsets_topic_num_partitions=50) is broker
    finally:
        broker.stop()
