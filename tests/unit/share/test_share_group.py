"""Share groups on the group side (broker/share/group_manager.py) through a real coordinator shard:
membership, epochs, share-state initialization before assignment, the simple assignor, session
expiry on the injected timer, leave and fencing, the admin views, and replay after a restart."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from minikafka.broker.clock import MockTimer
from minikafka.broker.group.records import decode_key
from minikafka.broker.group.shard import CoordinatorShard, MemoryOffsetsLog
from minikafka.broker.share.group import simple_assign
from minikafka.broker.share.group_manager import DefaultHooks, ShareConfig
from minikafka.broker.share.persister import MemoryPersister
from minikafka.broker.share.records import ShareGroupKey
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import iter_records

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class Share:
    def __init__(self, log=None, timer=None, persister=None, topics=None, **config) -> None:
        self.timer = timer or MockTimer()
        self.log = log or MemoryOffsetsLog()
        self.persister = persister or MemoryPersister()
        self.hooks = DefaultHooks(self.persister)
        self.topics = topics if topics is not None else {"t1": (T1, 2), "t2": (T2, 1)}
        self.config = ShareConfig(**config)
        self.shard = CoordinatorShard(0, self.log, self.timer, self.timer.clock,
                                      share_config=self.config, share_hooks=self.hooks)
        self.shard.topic_metadata = lambda: dict(self.topics)
        self.shard.load()
        self.share = self.shard.share

    def restart(self) -> "Share":
        self.shard.unload()
        return Share(self.log, self.timer, self.persister, self.topics, **self.config.__dict__)

    def hb(self, member="m1", epoch=0, topics=("t1",), group="g", rack=None):
        return self.share.heartbeat({"group_id": group, "member_id": member, "member_epoch": epoch,
                                     "rack_id": rack, "subscribed_topic_names": None if topics is None else list(topics)},
                                    client_id="cid", client_host="/127.0.0.1")

    def join_and_settle(self, member="m1", topics=("t1",), group="g") -> dict:
        """Join, let the share state be initialized (a 0 ms timer task), heartbeat for the assignment."""
        first = self.hb(member, 0, topics, group)
        assert first["error_code"] == 0, first
        self.timer.advance(0)
        return self.hb(member, first["member_epoch"], None, group)

    def kinds(self) -> list[str]:
        out = []
        for batch in self.log.batches:
            for r in iter_records(batch):
                k = decode_key(r.key)
                if isinstance(k, ShareGroupKey):
                    out.append(k.kind + ("" if r.value is not None else "-"))
        return out


def parts(response) -> dict:
    return {tp["topic_id"]: set(tp["partitions"]) for tp in response["assignment"]["topic_partitions"]}


def test_join_answers_empty_assignment_until_share_state_is_initialized():
    s = Share()
    first = s.hb()
    assert first["error_code"] == 0 and first["member_id"] == "m1"
    assert first["member_epoch"] == 1 and first["heartbeat_interval_ms"] == 5000
    assert first["assignment"] == {"topic_partitions": []}  # nothing initialized yet
    assert s.share.state_name("g") == "Stable"
    # Initializing is recorded with the heartbeat; the persister is called after the answer.
    assert s.persister.states == {}
    assert s.kinds()[-1] == "ShareGroupStatePartitionMetadata"
    s.timer.advance(0)
    assert set(s.persister.states) == {("g", T1, 0), ("g", T1, 1)}
    assert s.persister.states[("g", T1, 0)].start_offset == -1
    assert s.persister.states[("g", T1, 0)].state_epoch == 1  # the group epoch
    assert s.share.initialized_partitions("g") == {T1: {0, 1}}
    # The next heartbeat bumps the epoch and gets both partitions.
    second = s.hb(epoch=1, topics=None)
    assert second["member_epoch"] == 2
    assert parts(second) == {T1: {0, 1}}
    # A plain heartbeat after that carries no assignment.
    third = s.hb(epoch=2, topics=None)
    assert third["member_epoch"] == 2 and third["assignment"] is None


def test_two_members_share_a_single_partition_and_three_split_two():
    s = Share(topics={"t1": (T1, 1)})
    s.join_and_settle("a")
    b = s.hb("b", 0)
    assert b["error_code"] == 0 and b["member_epoch"] == 3
    assert parts(b) == {T1: {0}}  # initialized already: assigned on joining
    a = s.hb("a", 2, None)
    assert a["member_epoch"] == 3 and a["assignment"] is None  # unchanged: no assignment in the answer
    assert s.share.groups["g"].members["a"].assigned == {T1: {0}}  # one partition, shared by both

    s2 = Share(topics={"t1": (T1, 2)})
    for m in ("a", "b", "c"):
        s2.hb(m, 0)
    s2.timer.advance(0)
    got = {}
    for m in ("a", "b", "c"):
        epoch = s2.share.groups["g"].members[m].member_epoch
        got[m] = s2.hb(m, epoch, ("t1",))
    counts = sorted(len(parts(r).get(T1, ())) for r in got.values())
    # 3 members, 2 partitions: each partition shared by ceil(3/2) = 2 members, 4 assignments in all.
    assert sum(counts) == 4 and counts[0] >= 1
    for p in (0, 1):
        assert sum(p in parts(r).get(T1, ()) for r in got.values()) == 2


def test_epoch_checks_unknown_member_and_fencing():
    s = Share()
    s.join_and_settle()
    assert s.hb(epoch=5, topics=None)["error_code"] == E.FENCED_MEMBER_EPOCH
    # The previous epoch is accepted (the answer with the new one may have been lost) ...
    assert s.hb(epoch=1, topics=None)["error_code"] == 0
    # ... an older one is not.
    r = s.hb(epoch=0, topics=("t1",))
    assert r["error_code"] == E.FENCED_MEMBER_EPOCH
    assert "smaller member epoch (0)" in r["error_message"]
    assert s.hb("ghost", 3, None)["error_code"] == E.UNKNOWN_MEMBER_ID
    r = s.hb("x", 2, None, group="nope")
    assert (r["error_code"], r["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Share group nope not found.")


@pytest.mark.parametrize("request_, message", [
    ({"member_id": "", "member_epoch": 0}, None),  # Kafka 4.2 gives no message for this one
    ({"group_id": "", "member_epoch": 0}, "GroupId can't be empty."),
    ({"rack_id": "", "member_epoch": 0}, "RackId can't be empty."),
    ({"subscribed_topic_names": [], "member_epoch": 0}, "SubscribedTopicNames must be set in first request."),
    ({"subscribed_topic_names": None, "member_epoch": 0}, "SubscribedTopicNames must be set in first request."),
    ({"member_epoch": -2}, "MemberEpoch is invalid."),
])
def test_invalid_requests(request_, message):
    s = Share()
    body = {"group_id": "g", "member_id": "m", "rack_id": None, "subscribed_topic_names": ["t1"], **request_}
    r = s.share.heartbeat(body)
    assert (r["error_code"], r["error_message"]) == (E.INVALID_REQUEST, message)
    assert r["member_epoch"] == 0 and r["member_id"] is None


def test_session_expiry_on_the_timer_and_leave():
    s = Share(session_timeout_ms=45000)
    s.join_and_settle("a")
    b = s.hb("b", 0)
    s.timer.advance(44999)
    s.hb("b", b["member_epoch"], None)  # b heartbeats, a does not
    assert set(s.share.groups["g"].members) == {"a", "b"}
    s.timer.advance(1)
    assert set(s.share.groups["g"].members) == {"b"}
    assert ("g", "a") in s.hooks.left
    assert s.kinds()[-4:] == ["ShareGroupCurrentMemberAssignment-", "ShareGroupTargetAssignmentMember-",
                              "ShareGroupMemberMetadata-", "ShareGroupMetadata"]
    epoch = s.share.groups["g"].members["b"].member_epoch
    left = s.hb("b", -1, None)
    assert (left["error_code"], left["member_id"], left["member_epoch"]) == (0, "b", -1)
    assert s.share.state_name("g") == "Empty"
    assert ("g", "b") in s.hooks.left
    assert s.hb("b", -1, None)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert epoch > 0


def test_group_max_size_and_other_group_types():
    s = Share(max_size=1)
    s.hb("a", 0)
    r = s.hb("b", 0)
    assert r["error_code"] == E.GROUP_MAX_SIZE_REACHED
    assert r["error_message"] == "The share group has reached its maximum capacity of 1 members."
    s.shard.consumer.groups["cg"] = object()  # a consumer group's id
    r = s.hb("a", 0, group="cg")
    assert (r["error_code"], r["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    d = s.share.describe("cg", lambda t: None)
    assert (d["error_code"], d["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")


def test_describe_list_and_delete():
    s = Share()
    s.join_and_settle("a")
    names = {T1: "t1", T2: "t2"}
    d = s.share.describe("g", names.get)
    assert d["group_state"] == "Stable" and d["assignor_name"] == "simple"
    assert d["group_epoch"] == 2 and d["assignment_epoch"] == 2
    (m,) = d["members"]
    assert m["member_id"] == "a" and m["client_id"] == "cid" and m["subscribed_topic_names"] == ["t1"]
    assert m["assignment"]["topic_partitions"] == [{"topic_id": T1, "topic_name": "t1", "partitions": [0, 1]}]
    assert s.share.describe("zz", names.get)["error_message"] == "Group zz not found."
    assert s.shard.list_groups(["stable"], ["share"]) == [
        {"group_id": "g", "protocol_type": "share", "group_state": "Stable", "group_type": "share"}]
    assert s.shard.list_groups(["empty"], []) == []
    assert s.shard.list_groups([], ["consumer"]) == []
    assert s.shard.delete_group("g") == E.NON_EMPTY_GROUP
    s.hb("a", -1, None)
    assert s.persister.states  # share state exists until the group is deleted
    assert s.shard.delete_group("g") == E.NONE
    assert s.persister.states == {}
    assert not s.share.has_group("g") and s.hooks.deleted == ["g"]
    assert s.shard.delete_group("g") == E.GROUP_ID_NOT_FOUND


def test_replay_after_restart_keeps_members_epochs_and_initialized_state():
    s = Share()
    s.join_and_settle("a")
    b = s.hb("b", 0, ("t1", "t2"))
    s.timer.advance(0)
    before = s.share.describe("g", {T1: "t1", T2: "t2"}.get)
    s2 = s.restart()
    after = s2.share.describe("g", {T1: "t1", T2: "t2"}.get)
    assert after == before
    assert s2.share.initialized_partitions("g") == {T1: {0, 1}, T2: {0}}
    # Sessions are re-armed on load: a member that never comes back expires.
    s2.timer.advance(30000)
    s2.hb("b", b["member_epoch"], None)
    s2.timer.advance(15000)
    assert set(s2.share.groups["g"].members) == {"b"}


def test_new_partitions_of_a_subscribed_topic_are_initialized_then_assigned():
    s = Share(topics={"t1": (T1, 1)})
    s.join_and_settle("a")
    s.topics["t1"] = (T1, 3)  # partitions added
    r = s.hb("a", 2, None)
    assert r["member_epoch"] == 3  # the metadata hash changed
    s.timer.advance(0)
    r = s.hb("a", 3, None)
    assert parts(r) == {T1: {0, 1, 2}}


def test_failed_initialization_is_undone_and_retried():
    class Failing(MemoryPersister):
        fail = True

        def initialize(self, *args):
            return E.COORDINATOR_NOT_AVAILABLE if self.fail else super().initialize(*args)

    persister = Failing()
    s = Share(persister=persister)
    s.hb("a", 0)
    s.timer.advance(0)
    assert s.share.state_partitions["g"].initializing == {}
    assert s.share.initialized_partitions("g") == {}
    persister.fail = False
    r = s.hb("a", 1, None)
    s.timer.advance(0)
    assert s.share.initialized_partitions("g") == {T1: {0, 1}}
    assert parts(s.hb("a", r["member_epoch"], None)) == {T1: {0, 1}}


def test_deleting_a_group_skips_the_share_state_of_deleted_topics():
    class Strict(MemoryPersister):
        def delete(self, group_id, topic_id, partition):
            if (group_id, topic_id, partition) not in self.states:
                return E.UNKNOWN_TOPIC_OR_PARTITION
            return super().delete(group_id, topic_id, partition)

    persister = Strict()
    s = Share(persister=persister)
    s.join_and_settle("a", topics=("t1", "t2"))
    s.hb("a", -1, None)
    del s.topics["t2"]  # the topic is deleted, and its share state with it
    persister.states.pop(("g", T2, 0))
    assert s.shard.delete_group("g") == E.NONE
    assert persister.states == {}


@settings(max_examples=60, deadline=None)
@given(members=st.integers(1, 7), partitions=st.integers(0, 9))
def test_simple_assignor_balances_and_shares(members, partitions):
    subs = {f"m{i}": {T1} for i in range(members)}
    out = simple_assign(subs, {T1: set(range(partitions))}, {})
    per_member = [len(a.get(T1, ())) for a in out.values()]
    if partitions == 0:
        assert sum(per_member) == 0
        return
    sharing = -(-members // partitions)
    holders = [sum(p in a.get(T1, ()) for a in out.values()) for p in range(partitions)]
    assert all(h == sharing for h in holders) or sum(holders) == sum(per_member)
    assert min(holders) >= 1  # every partition has a consumer
    assert max(per_member) - min(per_member) <= 1  # balanced
    # Sticky: the same input keeps the same answer.
    assert simple_assign(subs, {T1: set(range(partitions))}, out) == out


@pytest.mark.parametrize("overrides, message", [
    ({}, None),
    ({"group.share.heartbeat.interval.ms": "50000"},
     "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
    ({"group.share.session.timeout.ms": "1000"},
     "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"group.share.min.session.timeout.ms": "1000", "group.share.session.timeout.ms": "4000"},
     "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"),
    ({"group.share.max.size": "1001"}, "Invalid value 1001 for configuration group.share.max.size"),
    ({"group.share.assignors": "simple,other"}, "group.share.assignors must contain exactly one assignor, but found 2"),
])
def test_contradicting_share_settings_stop_the_broker(overrides, message):
    from minikafka.broker.config import BrokerConfig, ConfigError
    from minikafka.broker.share.group_manager import ShareConfigError, validate_broker_settings

    if message is None:
        config = BrokerConfig.load(environ={}, overrides=overrides)
        validate_broker_settings(config)
        assert ShareConfig.from_broker_config(config) == ShareConfig()  # Kafka 4.2's defaults
    else:
        # The group bounds are checked as the settings load (BrokerConfig.check_group_bounds), the
        # share-only rules by the share side: either way the broker does not start.
        with pytest.raises((ConfigError, ShareConfigError), match=message):
            validate_broker_settings(BrokerConfig.load(environ={}, overrides=overrides))


def test_the_manager_answers_the_shards_group_type_protocol():
    s = Share()
    s.join_and_settle("a")
    m = s.share
    assert m.group_type == "share" and m.record_keys == (ShareGroupKey,)
    assert m.group("g") is s.share.groups["g"] and m.group("x") is None
    assert m.validate_delete_group("g") == E.NON_EMPTY_GROUP and m.validate_delete_group("x") == E.GROUP_ID_NOT_FOUND
    assert m.validate_offset_commit("g", "a", None, 1, 9) == E.GROUP_ID_NOT_FOUND
    assert m.validate_offset_fetch("g", "a", 1) is None
    assert m.validate_offset_delete("g") == (E.GROUP_ID_NOT_FOUND, None)
    assert m.retention_candidates() == [] and not m.deletable_without_offsets(m.group("g"))
    kinds = [k.kind for k, v in m.group_tombstones("g") if v is None]
    assert kinds[0] == "ShareGroupCurrentMemberAssignment" and kinds[-1] == "ShareGroupMetadata"
    s.hb("a", -1, None)
    assert m.validate_delete_group("g") is None
