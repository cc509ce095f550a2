"""Streams groups (KIP-1071) on one coordinator shard, driven by a MockTimer over a FakeClock.

Membership and epochs, topology configuration (missing source/internal topics, partition counts,
co-partitioning), Kafka 4.2's sticky assignor (active and standby tasks, stickiness), reconciliation
(no task owned twice), session and rebalance timeouts, leave, offsets by member epoch, and replay
after a restart (the same partition, a new shard).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from minikafka.broker.clock import MockTimer
from minikafka.broker.group.shard import CoordinatorShard, GroupConfig, MemoryOffsetsLog
from minikafka.broker.streams import assignor, java
from minikafka.broker.streams.manager import StreamsConfig, metadata_hash
from minikafka.broker.streams.topology import (INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS,
                                               MISSING_SOURCE_TOPICS, InvalidTopologyError, StreamsTopology,
                                               configure_topics)
from minikafka.protocol.errors import ErrorCode as E


class World:
    """A shard and the topics it sees (name -> (id, partitions))."""

    def __init__(self, log=None, timer=None, topics=None, **config) -> None:
        self.timer = timer or MockTimer()
        self.log = log or MemoryOffsetsLog()
        self.topics = topics if topics is not None else {}
        self.config = StreamsConfig(**{"initial_rebalance_delay_ms": 0, **config})
        self.shard = CoordinatorShard(0, self.log, self.timer, self.timer.clock, GroupConfig(),
                                      streams_config=self.config)
        self.shard.topic_metadata = lambda: dict(self.topics)
        self.shard.load()

    def restart(self) -> "World":
        self.shard.unload()
        return World(log=self.log, timer=self.timer, topics=self.topics, **self.config.__dict__)

    def topic(self, name: str, partitions: int) -> None:
        self.topics[name] = (uuid.uuid4(), partitions)

    def create_missing(self, response: dict) -> None:
        for name, spec in response["topics_to_create"].items():
            self.topic(name, spec["num_partitions"])

    def hb(self, member="m1", epoch=0, topology=None, group="app", process="p1", active=(), standby=(),
           report=True, **extra) -> dict:
        request = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
                   "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
                   "topology": topology if epoch == 0 else None, "process_id": process if epoch == 0 else None,
                   "client_tags": [] if epoch == 0 else None, "user_endpoint": None,
                   "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
                   "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}
        if report:
            request["active_tasks"] = [{"subtopology_id": s, "partitions": list(p)} for s, p in dict(active).items()]
            request["standby_tasks"] = [{"subtopology_id": s, "partitions": list(p)} for s, p in dict(standby).items()]
            request["warmup_tasks"] = []
        request.update(extra)
        return self.shard.execute(self.shard.streams.heartbeat(request, "client", "/127.0.0.1"))

    def group(self, group="app"):
        return self.shard.streams.groups[group]


def sub(sid, sources=(), sinks=(), repartition=(), changelogs=(), copartition=()):
    return {"subtopology_id": sid, "source_topics": list(sources), "source_topic_regex": [],
            "repartition_sink_topics": list(sinks),
            "repartition_source_topics": [{"name": n, "partitions": p, "replication_factor": 0, "topic_configs": []}
                                          for n, p in repartition],
            "state_changelog_topics": [{"name": n, "partitions": 0, "replication_factor": 0,
                                        "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}
                                       for n in changelogs],
            "copartition_groups": list(copartition)}


def word_count(epoch=0):
    """input -> (repartition) -> count store, as Kafka Streams' word count sends it."""
    return {"epoch": epoch, "subtopologies": [
        sub("0", sources=["input"], sinks=["app-rep"]),
        sub("1", repartition=[("app-rep", 0)], changelogs=["app-store-changelog"])]}


def tasks(wire) -> dict:
    """Response TaskIds (a list) or a member's task map (a dict), as {subtopology: sorted partitions}."""
    if isinstance(wire, dict):
        return {s: sorted(p) for s, p in wire.items() if p}
    return {t["subtopology_id"]: sorted(t["partitions"]) for t in wire or []}


def join_until_stable(w: World, member="m1", process="p1", topology=None, rounds=6):
    r = w.hb(member, 0, topology or word_count(), process=process)
    w.create_missing(r)
    for _ in range(rounds):
        epoch = r["member_epoch"]
        owned = w.group().members[member].assigned
        r = w.hb(member, epoch, active=owned.active_sets(), standby=owned.standby)
        w.create_missing(r)
    return r


# -- membership, topology and the first assignment ---------------------------------------------

def test_first_member_initialises_the_topology_and_the_broker_is_asked_for_the_internal_topics():
    w = World()
    w.topic("input", 3)
    r = w.hb("m1", 0, word_count())
    assert r["error_code"] == E.NONE and r["member_epoch"] == 2  # Kafka's first bump goes 0 -> 2
    assert [s["status_code"] for s in r["status"]] == [MISSING_INTERNAL_TOPICS]
    assert r["status"][0]["status_detail"] == "Internal topics are missing: app-rep, app-store-changelog"
    assert {n: s["num_partitions"] for n, s in r["topics_to_create"].items()} == {"app-rep": 3,
                                                                                 "app-store-changelog": 3}
    assert r["topics_to_create"]["app-store-changelog"]["configs"] == {"cleanup.policy": "compact"}
    assert tasks(r["active_tasks"]) == {}  # not ready: no tasks
    assert str(w.group().state) == "NotReady"
    w.create_missing(r)
    r = w.hb("m1", r["member_epoch"])
    assert r["status"] == [] and r["member_epoch"] == 3
    assert tasks(r["active_tasks"]) == {"0": [0, 1, 2], "1": [0, 1, 2]}
    assert str(w.group().state) == "Stable"


def test_missing_source_topic_is_a_status_and_its_creation_later_makes_the_group_ready():
    w = World()
    r = w.hb("m1", 0, word_count())
    assert r["status"] == [{"status_code": MISSING_SOURCE_TOPICS, "status_detail": "Source topics input are missing."}]
    assert r["topics_to_create"] == {}
    w.topic("input", 2)
    r = w.hb("m1", r["member_epoch"])
    assert [s["status_code"] for s in r["status"]] == [MISSING_INTERNAL_TOPICS]
    w.create_missing(r)
    r = w.hb("m1", r["member_epoch"])
    assert tasks(r["active_tasks"]) == {"0": [0, 1], "1": [0, 1]}


def test_validation_errors_as_kafka_checks_them():
    w = World()
    w.topic("input", 1)
    assert w.hb("m1", 0, None)["error_code"] == E.INVALID_REQUEST
    bad = word_count()
    bad["subtopologies"][1]["state_changelog_topics"][0]["partitions"] = 4
    r = w.hb("m1", 0, bad)
    assert r["error_code"] == E.STREAMS_INVALID_TOPOLOGY
    assert r["error_message"] == ("Changelog topic app-store-changelog must have an undefined partition count, "
                                  "but it is set to 4.")
    assert w.hb("m1", 0, word_count(), instance_id="i")["error_message"] == "Static membership is not yet supported."
    assert w.hb("m1", 0, word_count(), rebalance_timeout_ms=-1)["error_code"] == E.INVALID_REQUEST
    assert w.hb("m1", 5)["error_message"] == "Streams group app not found."
    assert w.hb("m1", 0, word_count())["error_code"] == E.NONE
    assert w.hb("m2", 3)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert w.hb("m1", 9)["error_code"] == E.FENCED_MEMBER_EPOCH
    other = word_count()
    other["subtopologies"][0]["source_topics"] = ["input", "more"]
    r = w.hb("m2", 0, other)
    assert (r["error_code"], r["error_message"]) == (E.INVALID_REQUEST, "Topology updates are not supported yet.")


def test_an_unresolvable_repartition_topic_is_an_invalid_topology():
    w = World()
    w.topic("input", 1)
    topology = {"epoch": 0, "subtopologies": [sub("0", repartition=[("orphan", 0)])]}
    r = w.hb("m1", 0, topology)
    assert r["error_code"] == E.STREAMS_INVALID_TOPOLOGY
    assert "never used as a sink topic" in r["error_message"]


# -- configure_topics on its own -------------------------------------------------------------------

def _configure(topology, topics):
    t = StreamsTopology.from_request(topology)
    return configure_topics(t, 0, lambda name: topics.get(name))


def test_copartitioned_external_topics_must_agree():
    topology = {"epoch": 0, "subtopologies": [
        sub("0", sources=["left", "right"], copartition=[{"source_topics": [0, 1], "source_topic_regex": [],
                                                          "repartition_source_topics": []}])]}
    c = _configure(topology, {"left": 2, "right": 3})
    assert c.error.status == INCORRECTLY_PARTITIONED_TOPICS
    assert c.error.message == "Following topics do not have the same number of partitions: [{left=2, right=3}]"
    assert _configure(topology, {"left": 3, "right": 3}).ready


def test_repartition_topic_copartitioned_with_a_source_gets_its_count():
    topology = {"epoch": 0, "subtopologies": [
        sub("0", sources=["a"], sinks=["a-rep"]),
        sub("1", sources=["b"], repartition=[("a-rep", 0)],
            copartition=[{"source_topics": [0], "source_topic_regex": [], "repartition_source_topics": [0]}],
            changelogs=["join-changelog"])]}
    c = _configure(topology, {"a": 8, "b": 4})
    assert c.subtopologies["1"].repartition_source_topics["a-rep"].partitions == 4
    assert c.subtopologies["1"].number_of_tasks == 4
    assert c.topics_to_create["join-changelog"]["num_partitions"] == 4
    # An existing internal topic with another partition count is refused.
    c = _configure(topology, {"a": 8, "b": 4, "a-rep": 5})
    assert c.error.status == INCORRECTLY_PARTITIONED_TOPICS
    assert c.error.message == "Existing topic a-rep has different number of partitions: expected 4, found 5"


def test_repartition_loop_is_invalid():
    topology = {"epoch": 0, "subtopologies": [
        sub("0", sinks=["x"], repartition=[("y", 0)]), sub("1", sinks=["y"], repartition=[("x", 0)])]}
    with pytest.raises(InvalidTopologyError):
        _configure(topology, {})


# -- several members: assignment, reconciliation, timeouts ------------------------------------------

def test_second_member_gets_half_the_tasks_only_after_the_first_revokes_them():
    w = World()
    w.topic("input", 4)
    r1 = join_until_stable(w, "m1", "p1")
    assert tasks(w.group().members["m1"].assigned.active_sets()) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}
    r2 = w.hb("m2", 0, word_count(), process="p2")
    target2 = w.group().target["m2"]
    assert sum(len(p) for p in target2.active.values()) == 4
    # m2 may not take tasks m1 still owns: it gets nothing yet (UNRELEASED_TASKS).
    assert tasks(r2["active_tasks"]) == {}
    assert w.group().members["m2"].state.name == "UNRELEASED_TASKS"
    # m1 must revoke first: same epoch, fewer tasks.
    owned = w.group().members["m1"].assigned
    r1 = w.hb("m1", r1["member_epoch"], active=owned.active_sets())
    m1 = w.group().members["m1"]
    assert m1.state.name == "UNREVOKED_TASKS" and r1["member_epoch"] == m1.previous_member_epoch
    kept = m1.assigned.active_sets()
    r1 = w.hb("m1", r1["member_epoch"], active=kept)
    assert w.group().members["m1"].state.name == "STABLE"
    r2 = w.hb("m2", r2["member_epoch"], active={})
    a1, a2 = w.group().members["m1"].assigned.active_sets(), w.group().members["m2"].assigned.active_sets()
    assert sum(map(len, a1.values())) == 4 and sum(map(len, a2.values())) == 4
    assert all(not (a1.get(s, set()) & a2.get(s, set())) for s in ("0", "1"))
    assert str(w.group().state) == "Stable"


def test_session_timeout_fences_a_member_and_its_tasks_move():
    w = World(session_timeout_ms=45000)
    w.topic("input", 2)
    join_until_stable(w, "m1", "p1")
    r2 = join_until_stable(w, "m2", "p2", rounds=1)
    for _ in range(4):  # m2 keeps heartbeating, m1 is silent
        w.timer.advance(20000)
        owned = w.group().members["m2"].assigned
        r2 = w.hb("m2", r2["member_epoch"], active=owned.active_sets())
    assert set(w.group().members) == {"m2"}
    assert tasks(w.group().members["m2"].assigned.active_sets()) == {"0": [0, 1], "1": [0, 1]}


def test_session_expires_exactly_at_the_timeout():
    w = World(session_timeout_ms=45000)
    w.topic("input", 1)
    join_until_stable(w)
    w.timer.advance(44999)
    assert "m1" in w.group().members
    w.timer.advance(1)
    assert w.group().members == {} and str(w.group().state) == "Empty"


def test_group_configs_override_the_broker_settings_per_group():
    """streams.session.timeout.ms / streams.heartbeat.interval.ms of a GROUP config resource apply to
    that group only (broker/group_configs.effective supplies them in the broker)."""
    w = World(session_timeout_ms=45000)
    w.config.group_configs = lambda group_id: ({"streams.session.timeout.ms": 50000,
                                                "streams.heartbeat.interval.ms": 2000}
                                               if group_id == "app" else {})
    w.topic("input", 1)
    r = join_until_stable(w)
    assert r["heartbeat_interval_ms"] == 2000
    other = w.hb("x1", 0, word_count(), group="other", process="p9")
    assert other["error_code"] == E.NONE and other["heartbeat_interval_ms"] == 5000  # the broker's
    w.timer.advance(49999)
    assert "m1" in w.group().members
    w.timer.advance(1)
    assert w.group().members == {}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    w = World()
    w.topic("input", 2)
    r1 = join_until_stable(w, "m1", "p1")
    w.hb("m2", 0, word_count(), process="p2")
    owned = w.group().members["m1"].assigned
    w.hb("m1", r1["member_epoch"], active=owned.active_sets())
    assert w.group().members["m1"].state.name == "UNREVOKED_TASKS"
    w.timer.advance(30000)  # its rebalance timeout
    assert "m1" not in w.group().members


def test_leave_removes_the_member_and_bumps_the_epoch():
    w = World()
    w.topic("input", 1)
    r = join_until_stable(w)
    epoch = w.group().group_epoch
    r = w.hb("m1", -1, report=False)
    assert (r["error_code"], r["member_id"], r["member_epoch"]) == (E.NONE, "m1", -1)
    assert w.group().members == {} and w.group().group_epoch == epoch + 1


def test_shutdown_request_reaches_every_member():
    w = World()
    w.topic("input", 2)
    join_until_stable(w, "m1", "p1")
    r2 = join_until_stable(w, "m2", "p2", rounds=1)
    r = w.hb("m2", r2["member_epoch"], report=False, shutdown_application=True)
    assert any(s["status_code"] == 4 for s in r["status"])
    r = w.hb("m1", w.group().members["m1"].member_epoch, report=False)
    assert any(s["status_code"] == 4 and "m2" in s["status_detail"] for s in r["status"])


def test_initial_rebalance_delay_holds_the_first_assignment():
    w = World(initial_rebalance_delay_ms=3000)
    w.topic("input", 2)
    w.topic("app-rep", 2)
    w.topic("app-store-changelog", 2)
    r = w.hb("m1", 0, word_count())
    assert [s["status_code"] for s in r["status"]] == [5] and r["member_epoch"] == 1
    w.timer.advance(2999)
    assert w.group().assignment_epoch == 0
    w.timer.advance(1)
    assert w.group().assignment_epoch == w.group().group_epoch
    r = w.hb("m1", r["member_epoch"])
    assert tasks(r["active_tasks"]) == {"0": [0, 1], "1": [0, 1]}


# -- offsets ------------------------------------------------------------------------------------

def test_offset_commit_checks_member_epochs_per_task():
    w = World()
    w.topic("input", 2)
    r = join_until_stable(w)
    epoch = r["member_epoch"]

    def commit(e, version=9, member="m1"):
        return w.shard.commit_offsets({"group_id": "app", "generation_id_or_member_epoch": e, "member_id": member,
                                       "topics": [{"name": "input", "partitions": [
                                           {"partition_index": 0, "committed_offset": 5}]}]}, version)["topics"][0][
            "partitions"][0]["error_code"]

    assert commit(epoch) == E.NONE
    assert commit(epoch + 1) == E.STALE_MEMBER_EPOCH
    assert commit(epoch, version=8) == E.UNSUPPORTED_VERSION
    assert commit(epoch, member="who") == E.UNKNOWN_MEMBER_ID
    assert commit(epoch - 1) == E.STALE_MEMBER_EPOCH  # its tasks were assigned at ``epoch``
    fetched = w.shard.fetch_offsets("app", [{"name": "input", "partition_indexes": [0]}], member_id="m1",
                                    member_epoch=epoch)
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert w.shard.fetch_offsets("app", None, member_id="m1", member_epoch=epoch + 1)["error_code"] == \
        E.STALE_MEMBER_EPOCH
    # A second member joins: m1 moves to a newer epoch but keeps some tasks, assigned at the old epoch,
    # so a commit at the old epoch is still accepted for those (and only those).
    join_until_stable(w, "m2", "p2", rounds=1)
    join_until_stable(w, "m1", "p1", rounds=3)
    m1 = w.group().members["m1"]
    assert m1.member_epoch > epoch
    kept = {p for p, e in m1.assigned.active.get("0", {}).items() if e == epoch}
    assert kept, m1
    for p in range(2):
        code = w.shard.commit_offsets({"group_id": "app", "generation_id_or_member_epoch": epoch, "member_id": "m1",
                                       "topics": [{"name": "input", "partitions": [
                                           {"partition_index": p, "committed_offset": 7}]}]}, 9)["topics"][0][
            "partitions"][0]["error_code"]
        assert code == (E.NONE if p in kept else E.STALE_MEMBER_EPOCH)


# -- admin and persistence ---------------------------------------------------------------------

def test_describe_list_delete():
    w = World()
    w.topic("input", 1)
    join_until_stable(w)
    d = w.shard.streams.describe("app")
    assert d["group_state"] == "Stable" and d["members"][0]["process_id"] == "p1"
    assert d["topology"]["subtopologies"][1]["state_changelog_topics"][0]["partitions"] == 1
    assert w.shard.list_groups(["stable"], ["streams"])[0]["group_type"] == "streams"
    assert w.shard.list_groups([], ["consumer"]) == []
    assert w.shard.delete_group("app") == E.NON_EMPTY_GROUP
    w.hb("m1", -1, report=False)
    assert w.shard.delete_group("app") == E.NONE
    assert "app" not in w.shard.streams.groups
    assert w.shard.streams.describe("app")["error_code"] == E.GROUP_ID_NOT_FOUND


def test_replay_after_restart_rebuilds_the_group_and_rearms_sessions():
    w = World()
    w.topic("input", 2)
    join_until_stable(w, "m1", "p1")
    join_until_stable(w, "m2", "p2")
    join_until_stable(w, "m1", "p1", rounds=2)
    before = w.shard.streams.describe("app")
    w2 = w.restart()
    after = w2.shard.streams.describe("app")
    assert after["group_epoch"] == before["group_epoch"] and after["assignment_epoch"] == before["assignment_epoch"]
    assert {m["member_id"]: m["assignment"] for m in after["members"]} == \
        {m["member_id"]: m["assignment"] for m in before["members"]}
    assert w2.group().topology.same_as(w.group().topology)
    # The stored group-level metadata is back too; the configured topology is recomputed on demand.
    assert w2.group().validated_topology_epoch == 0
    assert w2.group().last_assignment_configs == {"num.standby.replicas": "0"}
    # Sessions are re-armed by the load: both members expire without heartbeats.
    w2.timer.advance(45000)
    assert w2.group().members == {}


def test_records_use_kafkas_key_versions():
    w = World()
    w.topic("input", 1)
    join_until_stable(w)
    from minikafka.protocol.records import iter_records
    versions = {int.from_bytes(bytes(r.key[:2]), "big") for b in w.log.batches for r in iter_records(b)}
    assert versions == {17, 19, 20, 21, 22, 23}


def test_metadata_hash_follows_the_topics():
    topics = {"a": (uuid.uuid4(), 2)}
    h = metadata_hash(topics, {"a", "missing"})
    assert h == metadata_hash(dict(topics), {"a"}) != 0
    assert metadata_hash({"a": (topics["a"][0], 3)}, {"a"}) != h
    assert metadata_hash(topics, {"missing"}) == 0


def test_config_bounds_as_kafka_checks_them():
    with pytest.raises(ValueError):
        StreamsConfig(heartbeat_interval_ms=50000).validate()
    with pytest.raises(ValueError):
        StreamsConfig(num_standby_replicas=3).validate()
    with pytest.raises(ValueError):
        StreamsConfig(session_timeout_ms=0).validate()
    StreamsConfig().validate()


# -- the sticky assignor ------------------------------------------------------------------------

def _assign(members, subs, replicas=0):
    return assignor.assign(members, subs, replicas)


def test_sticky_assignor_keeps_previous_owners():
    subs = {"0": assignor.SubtopologyInfo(4, True)}
    first = _assign({"a": assignor.MemberSpec("p1"), "b": assignor.MemberSpec("p2")}, subs)
    again = _assign({m: assignor.MemberSpec(p, first[m][0]) for m, p in (("a", "p1"), ("b", "p2"))}, subs)
    assert again == first


def test_standby_tasks_go_to_another_process():
    subs = {"0": assignor.SubtopologyInfo(2, True), "1": assignor.SubtopologyInfo(2, False)}
    out = _assign({"a": assignor.MemberSpec("p1"), "b": assignor.MemberSpec("p2")}, subs, replicas=1)
    for member, (active, standby) in out.items():
        assert "1" not in standby  # stateless subtopologies get no standbys
        for sid, parts in standby.items():
            assert not parts & active.get(sid, set())
    standby_tasks = sorted((s, p) for _, (_, sb) in out.items() for s, ps in sb.items() for p in ps)
    assert standby_tasks == [("0", 0), ("0", 1)]


@settings(max_examples=60, deadline=None)
@given(members=st.integers(1, 6), processes=st.integers(1, 3), counts=st.lists(st.integers(1, 8), min_size=1,
                                                                                max_size=3),
       replicas=st.integers(0, 2))
def test_every_active_task_once_and_balanced(members, processes, counts, replicas):
    subs = {str(i): assignor.SubtopologyInfo(n, i % 2 == 0) for i, n in enumerate(counts)}
    specs = {f"m{i}": assignor.MemberSpec(f"p{i % processes}") for i in range(members)}
    out = _assign(specs, subs, replicas)
    seen = [(s, p) for _, (active, _) in out.items() for s, ps in active.items() for p in ps]
    assert sorted(seen) == sorted((s, p) for s, info in subs.items() for p in range(info.tasks))
    loads = [sum(map(len, a.values())) for a, _ in out.values()]
    assert max(loads) - min(loads) <= max(1, len(seen))  # never more than the quota apart
    assert max(loads) <= -(-len(seen) // members) + max(counts)
    for member, (active, standby) in out.items():
        process = specs[member].process_id
        for sid, parts in standby.items():
            for p in parts:  # a standby never sits in a process that runs the task
                owners = {specs[m].process_id for m, (a, _) in out.items() if p in a.get(sid, set())}
                assert process not in owners


def test_java_orders():
    assert java.string_hash("hello") == 99162322
    assert java.string_hash("polygenelubricants") == -2147483648
    assert java.hashmap_order(["app-store-changelog", "app-rep"]) == ["app-rep", "app-store-changelog"]
    assert java.hashmap_order("a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb".split())[:3] == ["bb", "aa", "a"]
    q = java.PriorityQueue(key=lambda x: x[0])
    for item in [(1, "a"), (0, "b"), (1, "c"), (0, "d")]:
        q.add(item)
    assert [q.poll()[1] for _ in range(4)] == ["b", "d", "c", "a"]


def test_offset_delete_spares_the_topics_the_topology_reads():
    w = World()
    w.topic("input", 1)
    w.topic("other", 1)
    r = join_until_stable(w)
    w.shard.commit_offsets({"group_id": "app", "generation_id_or_member_epoch": r["member_epoch"], "member_id": "m1",
                            "topics": [{"name": n, "partitions": [{"partition_index": 0, "committed_offset": 1}]}
                                       for n in ("input", "other")]}, 9)
    out = w.shard.delete_offsets({"group_id": "app", "topics": [{"name": n, "partitions": [{"partition_index": 0}]}
                                                                for n in ("input", "other")]})
    codes = {t["name"]: t["partitions"][0]["error_code"] for t in out["topics"]}
    assert out["error_code"] == E.NONE and codes == {"input": E.GROUP_SUBSCRIBED_TO_TOPIC, "other": E.NONE}
    assert "other" not in w.shard.offsets.committed["app"] and "input" in w.shard.offsets.committed["app"]
