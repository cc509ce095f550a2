"""KIP-848 consumer groups in one shard, driven with MockTimer/FakeClock: epochs, target assignment,
reconciliation (revoke before reassign), timeouts, leave/static leave, fencing, regex, offsets, replay."""

from __future__ import annotations

import uuid

import pytest

from minikafka.broker.group.consumer import ConsumerConfig, ConsumerGroupState, MemberState
from minikafka.broker.group.shard import CoordinatorShard, GroupConfig, MemoryOffsetsLog
from minikafka.broker.clock import MockTimer
from minikafka.protocol.errors import ErrorCode as E

T1, T2, T3 = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


class CG:
    def __init__(self, log=None, timer=None, topics=None, **consumer):
        self.timer = timer or MockTimer()
        self.log = log or MemoryOffsetsLog()
        self.topics = topics if topics is not None else {"t1": (T1, 6)}
        self.consumer = consumer
        self.shard = CoordinatorShard(0, self.log, self.timer, self.timer.clock, GroupConfig(),
                                      ConsumerConfig(**{"session_timeout_ms": 45000,
                                                        "heartbeat_interval_ms": 5000, **consumer}))
        self.shard.topic_metadata = lambda: dict(self.topics)
        self.shard.load()

    def restart(self) -> "CG":
        self.shard.unload()
        return CG(self.log, self.timer, self.topics, **self.consumer)

    def hb(self, member, epoch, *, group="g", topics=None, owned=None, regex=None, instance=None,
           rebalance=None, assignor=None, version=1, full=False):
        if epoch == 0:
            rebalance = 300000 if rebalance is None else rebalance
            if topics is None and regex is None:
                topics = ["t1"]
        request = {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": instance,
                   "rack_id": None, "rebalance_timeout_ms": -1 if rebalance is None else rebalance,
                   "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
                   "server_assignor": assignor,
                   "topic_partitions": None if owned is None else [
                       {"topic_id": t, "partitions": sorted(p)} for t, p in owned.items()]}
        return self.shard.consumer_group_heartbeat(request, api_version=version, client_id=member or "c",
                                                   client_host="/127.0.0.1")

    def group(self, gid="g"):
        return self.shard.consumer.groups[gid]


def parts(response) -> dict:
    assert response["assignment"] is not None, response
    return {tp["topic_id"]: set(tp["partitions"]) for tp in response["assignment"]["topic_partitions"]}


def owners(cg: CG, gid="g") -> dict:
    out: dict = {}
    for m in cg.group(gid).members.values():
        for source in (m.assigned, m.pending_revocation):
            for t, ps in source.items():
                for p in ps:
                    out.setdefault((t, p), []).append(m.member_id)
    return out


def assert_never_shared(cg: CG, gid="g"):
    shared = {tp: ms for tp, ms in owners(cg, gid).items() if len(ms) > 1}
    assert not shared, shared


def test_first_member_gets_everything_and_epoch_one():
    cg = CG()
    r = cg.hb("a", 0)
    assert r["error_code"] == E.NONE and r["member_id"] == "a"
    assert r["member_epoch"] == 1 and r["heartbeat_interval_ms"] == 5000
    assert parts(r) == {T1: {0, 1, 2, 3, 4, 5}}
    g = cg.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    # An unchanged steady heartbeat answers no assignment and writes nothing.
    batches = len(cg.log.batches)
    r = cg.hb("a", 1)
    assert r["assignment"] is None and r["member_epoch"] == 1
    assert len(cg.log.batches) == batches


def test_v0_generates_the_member_id_and_v1_requires_it():
    cg = CG()
    r = cg.hb("", 0, version=0)
    assert r["error_code"] == E.NONE and len(r["member_id"]) == 36
    assert cg.hb("", 0, version=1)["error_code"] == E.INVALID_REQUEST


def test_second_member_revocation_before_assignment():
    cg = CG()
    cg.hb("a", 0)
    rb = cg.hb("b", 0)
    # b is at the new epoch but gets nothing yet: a still owns every partition.
    assert rb["member_epoch"] == 2 and parts(rb) == {}
    assert cg.group().members["b"].state == MemberState.UNRELEASED_PARTITIONS
    assert cg.group().state == ConsumerGroupState.RECONCILING
    # a is asked to revoke half and keeps epoch 1 until it acknowledges.
    ra = cg.hb("a", 1)
    assert ra["member_epoch"] == 1
    kept = parts(ra)[T1]
    assert len(kept) == 3
    assert cg.group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert cg.timer.is_scheduled(("cg-revocation", "g", "a"))
    assert_never_shared(cg)
    # b still cannot get them: they are pending revocation on a.
    rb = cg.hb("b", 2, owned={})
    # Not a full request (only owned partitions) and nothing changed: no assignment (Kafka 4.2).
    assert rb["assignment"] is None
    assert cg.group().members["b"].assigned == {}
    # a acknowledges (reports only the kept partitions): epoch 2, stable.
    ra = cg.hb("a", 1, owned={T1: kept})
    assert ra["member_epoch"] == 2 and parts(ra) == {T1: kept}
    assert not cg.timer.is_scheduled(("cg-revocation", "g", "a"))
    # Now b gets the released partitions.
    rb = cg.hb("b", 2)
    assert parts(rb) == {T1: {0, 1, 2, 3, 4, 5} - kept}
    assert cg.group().members["b"].state == MemberState.STABLE
    assert cg.group().state == ConsumerGroupState.STABLE
    assert_never_shared(cg)


def _stable_pair(cg: CG):
    cg.hb("a", 0)
    cg.hb("b", 0)
    kept = parts(cg.hb("a", 1))[T1]
    cg.hb("a", 1, owned={T1: kept})
    cg.hb("b", 2)
    assert cg.group().state == ConsumerGroupState.STABLE
    return cg


def test_third_member_moves_partitions_and_the_others_keep_the_rest():
    cg = _stable_pair(CG())
    before_a = set(cg.group().members["a"].assigned[T1])
    cg.hb("c", 0)
    ra = cg.hb("a", 2)
    # a keeps two of its three and loses one; what it keeps it never stops owning.
    assert parts(ra)[T1] <= before_a and len(parts(ra)[T1]) == 2
    assert_never_shared(cg)


def test_revocation_timeout_fences_the_member():
    cg = CG()
    cg.hb("a", 0, rebalance=1000)
    cg.hb("b", 0)
    cg.hb("a", 1)  # asked to revoke
    assert cg.group().members["a"].state == MemberState.UNREVOKED_PARTITIONS
    cg.timer.advance(999)
    assert "a" in cg.group().members
    cg.timer.advance(1)
    assert "a" not in cg.group().members
    # A fenced member's next heartbeat is UNKNOWN_MEMBER_ID; b gets every partition.
    assert cg.hb("a", 1)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert parts(cg.hb("b", 2))[T1] == {0, 1, 2, 3, 4, 5}


def test_session_timeout_removes_a_silent_member():
    cg = _stable_pair(CG(session_timeout_ms=3000))
    epoch = cg.group().group_epoch
    cg.timer.advance(2000)
    cg.hb("b", 2)  # b keeps its session alive
    cg.timer.advance(1000)
    assert set(cg.group().members) == {"b"}
    assert cg.group().group_epoch == epoch + 1
    assert parts(cg.hb("b", 2))[T1] == {0, 1, 2, 3, 4, 5}


def test_leave_moves_partitions_and_answers_minus_one():
    cg = _stable_pair(CG())
    r = cg.hb("a", -1)
    assert r["error_code"] == E.NONE and r["member_epoch"] == -1
    assert set(cg.group().members) == {"b"}
    assert not cg.timer.is_scheduled(("cg-session", "g", "a"))
    assert parts(cg.hb("b", 2))[T1] == {0, 1, 2, 3, 4, 5}


def test_static_leave_keeps_the_assignment_for_the_restarted_instance():
    cg = CG()
    cg.hb("a", 0, instance="i-a")
    cg.hb("b", 0, instance="i-b")
    kept = parts(cg.hb("a", 1))[T1]
    cg.hb("a", 1, owned={T1: kept})
    cg.hb("b", 2)
    epoch = cg.group().group_epoch
    r = cg.hb("a", -2, instance="i-a")
    assert r["member_epoch"] == -2
    # While the instance is away, its partitions stay with it; a new id for it takes them over.
    assert cg.group().group_epoch == epoch
    r = cg.hb("a2", 0, instance="i-a")
    assert r["error_code"] == E.NONE and r["member_epoch"] == 2 and parts(r) == {T1: kept}
    assert set(cg.group().members) == {"a2", "b"}
    assert cg.group().group_epoch == epoch


def test_static_instance_still_in_use_is_unreleased():
    cg = CG()
    cg.hb("a", 0, instance="i-a")
    assert cg.hb("x", 0, instance="i-a")["error_code"] == E.UNRELEASED_INSTANCE_ID
    assert cg.hb("x", 1, instance="i-a")["error_code"] == E.FENCED_INSTANCE_ID
    assert cg.hb("x", -2)["error_code"] == E.INVALID_REQUEST  # static leave needs the instance id


def test_fencing_by_epoch():
    cg = _stable_pair(CG())
    assert cg.hb("a", 3)["error_code"] == E.FENCED_MEMBER_EPOCH  # ahead of the coordinator
    cg.hb("c", 0)
    ra = cg.hb("a", 2)
    kept = parts(ra)[T1]
    cg.hb("a", 2, owned={T1: kept})
    assert cg.group().members["a"].member_epoch == 3
    # The previous epoch with a subset of the assignment is a lost response: accepted.
    assert cg.hb("a", 2, owned={T1: kept})["error_code"] == E.NONE
    # Anything else behind is fenced.
    assert cg.hb("a", 1, owned={T1: kept})["error_code"] == E.FENCED_MEMBER_EPOCH
    assert cg.hb("a", 2, owned={T1: {0, 1, 2, 3, 4, 5}})["error_code"] == E.FENCED_MEMBER_EPOCH
    assert cg.hb("nobody", 5)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_request_validation_and_assignors():
    cg = CG()
    assert cg.hb("a", 0, group="")["error_code"] == E.INVALID_REQUEST
    assert cg.hb("a", -3)["error_code"] == E.INVALID_REQUEST
    bad = cg.hb("a", 0, topics=None, regex=None, rebalance=1000)
    assert bad["error_code"] == E.NONE  # the helper subscribes to t1 by default
    assert cg.hb("z", 0, regex="(")["error_code"] == E.INVALID_REGULAR_EXPRESSION
    assert cg.hb("z", 0, assignor="sticky")["error_code"] == E.UNSUPPORTED_ASSIGNOR
    r = cg.hb("r", 0, group="ranged", assignor="range")
    assert parts(r) == {T1: {0, 1, 2, 3, 4, 5}}


def test_range_assignor_gives_contiguous_ranges():
    cg = CG(assignors=("range", "uniform"))
    cg.hb("a", 0)
    cg.hb("b", 0)
    ra = cg.hb("a", 1)
    assert parts(ra) == {T1: {0, 1, 2}}


def test_group_max_size():
    cg = CG(max_size=1)
    cg.hb("a", 0)
    assert cg.hb("b", 0)["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_regex_picks_up_created_topics_and_drops_deleted_ones():
    cg = CG(topics={"re-1": (T1, 2), "other": (T3, 1)})
    r = cg.hb("a", 0, regex="re-.*")
    assert parts(r) == {T1: {0, 1}}
    cg.topics["re-2"] = (T2, 3)
    r = cg.hb("a", 1)
    assert r["member_epoch"] == 2 and parts(r) == {T1: {0, 1}, T2: {0, 1, 2}}
    del cg.topics["re-1"]
    r = cg.hb("a", 2)
    assert r["member_epoch"] == 2 and parts(r) == {T2: {0, 1, 2}}  # revoke first
    r = cg.hb("a", 2, owned={T2: {0, 1, 2}})
    assert r["member_epoch"] == 3
    assert cg.group().members["a"].subscribed_topic_regex == "re-.*"


def test_added_partitions_make_a_new_target():
    cg = CG()
    cg.hb("a", 0)
    cg.topics["t1"] = (T1, 8)
    r = cg.hb("a", 1)
    assert r["member_epoch"] == 2 and parts(r) == {T1: set(range(8))}


def test_offset_commit_and_fetch_check_member_epochs():
    cg = _stable_pair(CG())

    def commit(member, epoch):
        return cg.shard.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": epoch,
                                        "member_id": member, "topics": [
                                            {"name": "t1", "partitions": [
                                                {"partition_index": 0, "committed_offset": 5}]}]},
                                       api_version=9)["topics"][0]["partitions"][0]["error_code"]

    assert commit("a", 2) == E.NONE
    assert commit("a", 1) == E.STALE_MEMBER_EPOCH
    assert commit("zz", 2) == E.UNKNOWN_MEMBER_ID
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID  # only an empty group takes admin commits
    ok = cg.shard.fetch_offsets("g", [{"name": "t1", "partition_indexes": [0]}], member_id="a", member_epoch=2)
    assert ok["error_code"] == E.NONE and ok["topics"][0]["partitions"][0]["committed_offset"] == 5
    stale = cg.shard.fetch_offsets("g", [{"name": "t1", "partition_indexes": [0]}], member_id="a", member_epoch=1)
    assert stale["error_code"] == E.STALE_MEMBER_EPOCH
    admin = cg.shard.fetch_offsets("g", [{"name": "t1", "partition_indexes": [0]}])
    assert admin["error_code"] == E.NONE


def test_restart_replays_the_same_state_and_rearms_timers():
    cg = _stable_pair(CG(session_timeout_ms=3000))
    before = cg.group()
    snapshot = (before.group_epoch, before.assignment_epoch, before.target,
                {m: (x.member_epoch, x.assigned, x.state) for m, x in before.members.items()})
    cg2 = cg.restart()
    after = cg2.group()
    assert (after.group_epoch, after.assignment_epoch, after.target,
            {m: (x.member_epoch, x.assigned, x.state) for m, x in after.members.items()}) == snapshot
    assert cg2.timer.is_scheduled(("cg-session", "g", "a"))
    assert cg2.hb("a", 2)["error_code"] == E.NONE


def test_list_describe_delete_and_the_other_protocols_group_id():
    cg = _stable_pair(CG())
    listed = cg.shard.list_groups((), ("consumer",))
    assert listed == [{"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "consumer"}]
    assert cg.shard.list_groups((), ("classic",)) == []
    d = cg.shard.consumer_group_describe("g", lambda t: "t1")
    assert d["group_state"] == "Stable" and d["group_epoch"] == 2 and d["assignor_name"] == "uniform"
    assert sorted(len(m["assignment"]["topic_partitions"][0]["partitions"]) for m in d["members"]) == [3, 3]
    assert cg.shard.consumer_group_describe("nope", lambda t: None)["error_code"] == E.GROUP_ID_NOT_FOUND
    # A classic JoinGroup for a non-empty consumer group.
    box = []
    cg.shard.join_group({"group_id": "g", "member_id": "", "session_timeout_ms": 10000, "rebalance_timeout_ms": 1000,
                         "group_instance_id": None, "protocol_type": "consumer", "protocols": []},
                        api_version=9, client_id="c", client_host="h", respond=box.append)
    assert box[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert cg.shard.delete_group("g") == E.NON_EMPTY_GROUP
    cg.hb("a", -1)
    cg.hb("b", -1)
    assert cg.group().state == ConsumerGroupState.EMPTY
    assert cg.shard.delete_group("g") == E.NONE
    assert "g" not in cg.shard.consumer.groups


def test_empty_classic_group_upgrades_and_empty_consumer_group_downgrades():
    cg = CG()
    cg.shard.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                             "topics": [{"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 7}]}]},
                            api_version=9)
    assert "g" in cg.shard.classic.groups
    r = cg.hb("a", 0)
    assert r["error_code"] == E.NONE
    assert "g" not in cg.shard.classic.groups and "g" in cg.shard.consumer.groups
    assert cg.shard.fetch_offsets("g", None)["topics"][0]["partitions"][0]["committed_offset"] == 7
    cg.hb("a", -1)
    box = []
    cg.shard.join_group({"group_id": "g", "member_id": "m", "session_timeout_ms": 10000, "rebalance_timeout_ms": 1000,
                         "group_instance_id": None, "protocol_type": "consumer", "protocols": []},
                        api_version=9, client_id="c", client_host="h", respond=box.append)
    assert "g" not in cg.shard.consumer.groups
    # After a restart, the log says the same: classic (offsets only), no consumer group.
    cg2 = cg.restart()
    assert "g" not in cg2.shard.consumer.groups
    assert cg2.shard.fetch_offsets("g", None)["topics"][0]["partitions"][0]["committed_offset"] == 7


def test_non_empty_classic_group_id_is_not_found_for_heartbeat():
    from group_harness import Harness  # noqa: F401  (the classic helpers)
    cg = CG()
    box = []
    cg.shard.join_group({"group_id": "classic", "member_id": "", "session_timeout_ms": 10000,
                         "rebalance_timeout_ms": 1000, "group_instance_id": None, "protocol_type": "consumer",
                         "protocols": [{"name": "range", "metadata": b""}]},
                        api_version=3, client_id="c", client_host="h", respond=box.append)
    cg.timer.advance(0)
    assert cg.shard.classic.groups["classic"].all_members()
    assert cg.hb("a", 0, group="classic")["error_code"] == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_an_empty_group_changes_type_whatever_the_migration_policy(policy):
    # Kafka's policy governs only the online conversion of non-empty groups.
    cg = CG(migration_policy=policy)
    cg.shard.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                             "topics": [{"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 7}]}]},
                            api_version=9)
    assert cg.hb("a", 0)["error_code"] == E.NONE and "g" not in cg.shard.classic.groups


def test_transactional_and_old_version_commits_of_consumer_group_members():
    cg = _stable_pair(CG())
    topics = [{"name": "t1", "partitions": [{"partition_index": 1, "committed_offset": 9}]}]

    def txn(member, epoch):
        return cg.shard.txn_commit_offsets({"group_id": "g", "generation_id": epoch, "member_id": member,
                                            "group_instance_id": None, "producer_id": 7, "producer_epoch": 0,
                                            "transactional_id": "tx", "topics": topics},
                                           api_version=3)["topics"][0]["partitions"][0]["error_code"]

    assert txn("a", 1) == E.STALE_MEMBER_EPOCH
    assert txn("zz", 2) == E.UNKNOWN_MEMBER_ID
    assert txn("a", 2) == E.NONE
    assert "g" not in cg.shard.classic.groups  # no classic group sneaks in beside the consumer group
    cg.shard.complete_transaction(7, 0, commit=True)
    # ... nor when the transaction commits: one id, one group type.
    assert "g" not in cg.shard.classic.groups
    assert [(g["group_id"], g["group_type"]) for g in cg.shard.list_groups()] == [("g", "consumer")]
    assert cg.shard.describe_group("g")["group_state"] == "Dead"
    assert cg.shard.fetch_offsets("g", [{"name": "t1", "partition_indexes": [1]}])["topics"][0]["partitions"][0][
        "committed_offset"] == 9
    v8 = cg.shard.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": 2, "member_id": "a",
                                  "topics": topics}, api_version=8)
    assert v8["topics"][0]["partitions"][0]["error_code"] == E.UNSUPPORTED_VERSION


def test_expire_member_on_request():
    cg = _stable_pair(CG())
    assert cg.shard.expire_consumer_member("g", "a") is True
    assert set(cg.group().members) == {"b"}
    assert cg.shard.expire_consumer_member("g", "a") is False


def test_retention_expires_offsets_and_deletes_the_empty_group():
    cg = CG()
    cg.hb("a", 0)
    cg.shard.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "a",
                             "topics": [{"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 3}]},
                                        {"name": "gone", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
                            api_version=9)
    retention = cg.shard.config.offsets_retention_ms
    cg.timer.clock.set(cg.timer.clock.now_ms() + retention + 1)
    cg.shard.cleanup_group_metadata()
    # While a member subscribes to t1 its offset stays; the unsubscribed topic's offset expires.
    assert set(cg.shard.offsets.committed["g"]) == {"t1"}
    cg.hb("a", -1)
    cg.shard.cleanup_group_metadata()
    # Nobody subscribes any more: the offset expires and the empty group goes with it.
    assert "g" not in cg.shard.offsets.committed and "g" not in cg.shard.consumer.groups
    assert "g" not in cg.restart().shard.consumer.groups


def test_empty_regex_beside_names_is_no_regex():
    # librdkafka's first heartbeat carries names and an empty regex (see test_consumer_group_specs.py).
    cg = CG(topics={"t1": (T1, 2), "x": (T2, 1)})
    r = cg.hb("a", 0, topics=["t1"], regex="")
    assert parts(r) == {T1: {0, 1}} and cg.group().members["a"].subscribed_topic_regex is None


def test_coordinator_expires_a_consumer_member_for_test_kits():
    from minikafka.broker.group.coordinator import GroupCoordinator

    timer = MockTimer()
    logs = {}
    coord = GroupCoordinator(3, lambda p: logs.setdefault(p, MemoryOffsetsLog()), timer, timer.clock,
                             topic_metadata=lambda: {"t1": (T1, 2)})
    coord.load()
    shard = coord.shard_for("g")
    r = shard.consumer_group_heartbeat({"group_id": "g", "member_id": "a", "member_epoch": 0, "instance_id": None,
                                        "rack_id": None, "rebalance_timeout_ms": 1000,
                                        "subscribed_topic_names": ["t1"], "subscribed_topic_regex": None,
                                        "server_assignor": None, "topic_partitions": []},
                                       api_version=1, client_id="c", client_host="h")
    assert r["error_code"] == E.NONE and r["assignment"]["topic_partitions"][0]["partitions"] == [0, 1]
    assert coord.expire_consumer_member("g", "a") is True
    assert coord.expire_consumer_member("g", "a") is False
    assert shard.consumer.groups["g"].members == {}


def test_heartbeat_or_leave_for_a_group_that_does_not_exist():
    cg = CG()
    assert cg.hb("a", 3, group="nope")["error_code"] == E.GROUP_ID_NOT_FOUND
    assert cg.hb("a", -1, group="nope")["error_code"] == E.GROUP_ID_NOT_FOUND
    assert "nope" not in cg.shard.consumer.groups


def test_offset_delete_of_a_consumer_group_spares_only_subscribed_topics():
    """As Kafka 4.2 (tests/conformance corpus/tidy.py): a consumer group with members may lose the
    offsets of topics no member subscribes to; a subscribed topic answers GROUP_SUBSCRIBED_TO_TOPIC."""
    cg = _stable_pair(CG(topics={"t1": (T1, 6), "t2": (T2, 1)}))
    commit = cg.shard.commit_offsets({"group_id": "g", "generation_id_or_member_epoch": 2, "member_id": "b",
                                      "topics": [{"name": t, "partitions": [{"partition_index": 0,
                                                                             "committed_offset": 4}]}
                                                 for t in ("t1", "t2")]}, api_version=9)
    assert {p["error_code"] for t in commit["topics"] for p in t["partitions"]} == {E.NONE}
    response = cg.shard.delete_offsets({"group_id": "g", "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0}]}, {"name": "t2", "partitions": [{"partition_index": 0}]}]})
    assert response["error_code"] == E.NONE
    codes = {t["name"]: t["partitions"][0]["error_code"] for t in response["topics"]}
    assert codes == {"t1": E.GROUP_SUBSCRIBED_TO_TOPIC, "t2": E.NONE}
    fetched = cg.shard.fetch_offsets("g", [{"name": "t1", "partition_indexes": [0]},
                                           {"name": "t2", "partition_indexes": [0]}])
    assert [t["partitions"][0]["committed_offset"] for t in fetched["topics"]] == [4, -1]
    assert cg.shard.delete_offsets({"group_id": "nope", "topics": []})["error_code"] == E.GROUP_ID_NOT_FOUND
