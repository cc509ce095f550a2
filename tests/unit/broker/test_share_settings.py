"""A share group's settings are read again after any GROUP config change (librdkafka's test 0177 sets
``share.isolation.level=read_committed`` and produces an aborted transaction 5 ms later: Kafka applies
the change to the next fetch; a settings cache with a time-to-live missed it)."""

from __future__ import annotations

import asyncio

from minikafka.broker import group_configs
from minikafka.broker.config import BrokerConfig
from minikafka.broker.share.fetch import ShareFetchManager


class _Broker:
    """What ShareFetchManager and view.share_config read: the settings, a loop, a group's configs."""

    def __init__(self, loop) -> None:
        self.config = BrokerConfig()
        self.loop = loop
        self.overrides: dict[str, dict] = {}

    def group_configs(self, group_id: str) -> dict:  # view.share_config's stand-in for GROUP configs
        return self.overrides.get(group_id, {})


def _altered(broker, group_id: str, **configs) -> None:
    # What group_configs.alter does after storing a change: the change count moves on.
    broker.overrides[group_id] = {name.replace("_", "."): value for name, value in configs.items()}
    broker._group_config_changes = group_configs.changes(broker) + 1


def test_a_group_config_change_reaches_the_next_fetch():
    loop = asyncio.new_event_loop()
    try:
        broker = _Broker(loop)
        manager = ShareFetchManager(broker)
        assert not manager.settings("g").read_committed
        _altered(broker, "g", share_isolation_level="read_committed")
        assert manager.settings("g").read_committed
        assert not manager.settings("other").read_committed
        _altered(broker, "g", share_isolation_level="read_uncommitted")
        assert not manager.settings("g").read_committed
    finally:
        loop.close()


def test_settings_are_not_rebuilt_without_a_change():
    loop = asyncio.new_event_loop()
    try:
        broker = _Broker(loop)
        manager = ShareFetchManager(broker)
        first = manager.settings("g")
        broker.overrides["g"] = {"share.isolation.level": "read_committed"}  # not through alter: no change count
        assert manager.settings("g") is first
    finally:
        loop.close()
