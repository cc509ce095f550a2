"""The shard's composition: one manager per group type behind one namespace (shard.py's docstring).

A group type plugs in by providing ``GroupManager`` and ``offsets.OffsetOwner``; these tests hold every
manager the shard holds to that, and check the routing the shard does for them (records by key class,
requests by the type that holds the id)."""

from __future__ import annotations

import inspect

from minikafka.broker.clock import MockTimer
from minikafka.broker.group.offsets import OffsetOwner
from minikafka.broker.group.records import ConsumerGroupKey, GroupMetadataKey, OffsetCommitKey
from minikafka.broker.group.shard import CoordinatorShard, GroupManager, MemoryOffsetsLog
from minikafka.protocol.errors import ErrorCode as E

from group_harness import Harness


def _protocol_members(protocol) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")} | set(
        getattr(protocol, "__annotations__", {}))


def test_every_group_manager_provides_the_plug_in_protocol():
    timer = MockTimer()
    shard = CoordinatorShard(0, MemoryOffsetsLog(), timer, timer.clock)
    assert [m.group_type for m in shard.group_managers] == ["classic", "consumer", "streams"]
    wanted = _protocol_members(GroupManager) | _protocol_members(OffsetOwner)
    assert {"replay", "on_loaded", "unload", "group", "list_groups", "validate_offset_commit"} <= wanted
    for manager in shard.group_managers:
        missing = {name for name in wanted if not hasattr(manager, name)}
        assert missing == set(), f"{manager.group_type} lacks {missing}"
        for name in wanted - {"group_type", "record_keys"}:
            assert callable(getattr(manager, name)), (manager.group_type, name)
        # Each manager holds a reference to the runtime, never to the shard's other managers' state.
        assert manager.runtime is shard
        params = inspect.signature(type(manager).__init__).parameters
        assert "runtime" in params


def test_records_are_routed_by_key_class_to_the_manager_that_declares_it():
    timer = MockTimer()
    shard = CoordinatorShard(0, MemoryOffsetsLog(), timer, timer.clock)
    owners = {key: shard._record_owners[key] for key in (GroupMetadataKey, ConsumerGroupKey, OffsetCommitKey)}
    assert owners == {GroupMetadataKey: shard.classic, ConsumerGroupKey: shard.consumer,
                      OffsetCommitKey: shard.offsets}


def test_one_group_id_is_one_group_type():
    h = Harness()
    assert h.shard.group_type("g") is None
    h.stable_group(1, protocol_type="connect")  # a classic group that cannot become a consumer group
    assert h.shard.group_type("g") == "classic"
    request = {"group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
               "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
               "server_assignor": None, "topic_partitions": None}
    response = h.shard.consumer_group_heartbeat(request, api_version=1, client_id="c", client_host="/h")
    # The classic group keeps its id: the consumer manager asked the namespace before creating one.
    assert response["error_code"] == E.GROUP_ID_NOT_FOUND
    assert h.shard.group_type("g") == "classic" and "g" not in h.shard.consumer.groups
    # Offsets of an id nobody holds make a "simple" classic group, as in Kafka.
    h.commit("simple", {("t", 0): 5})
    assert h.shard.group_type("simple") == "classic"
