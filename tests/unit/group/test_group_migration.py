"""KIP-848 online migration in one shard with MockTimer/FakeClock: a classic group upgraded by a
ConsumerGroupHeartbeat, classic members served inside the consumer group (JoinGroup/SyncGroup/Heartbeat/
LeaveGroup/OffsetCommit), the downgrade when the last consumer-protocol member leaves, the migration
policy, and the conversions replayed after a restart."""

from __future__ import annotations

import struct

import pytest
from test_consumer_group import CG, T1, assert_never_shared, parts

from minikafka.broker.group.consumer import MemberState
from minikafka.broker.group.records import GroupMetadataKey
from minikafka.broker.group.state import GroupState
from minikafka.protocol import codec
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import iter_records


def sub(owned=None, topics=("t1",), version=1) -> bytes:
    """A consumer-protocol Subscription as a classic client writes it (v1+ carries owned partitions)."""
    data = {"topics": list(topics), "user_data": None,
            "owned_partitions": [{"topic": "t1", "partitions": sorted(owned or ())}] if owned else [],
            "generation_id": -1, "rack_id": None}
    return struct.pack(">h", version) + codec.encode_data("ConsumerProtocolSubscription", version, data)


def assignment(*partitions) -> bytes:
    return struct.pack(">h", 1) + codec.encode_data("ConsumerProtocolAssignment", 1, {
        "assigned_partitions": [{"topic": "t1", "partitions": sorted(partitions)}] if partitions else [],
        "user_data": None})


def decode_assignment(raw: bytes) -> set[int]:
    (version,) = struct.unpack_from(">h", raw, 0)
    data, _ = codec.decode_data("ConsumerProtocolAssignment", min(version, 3), raw, 2)
    return {p for tp in data["assigned_partitions"] if tp["topic"] == "t1" for p in tp["partitions"]}


class Mixed(CG):
    """CG plus the classic requests, the way a classic consumer sends them."""

    def join(self, member="", owned=None, *, version=5, session=10000, rebalance=20000, instance=None,
             protocols=None):
        box = []
        self.shard.join_group({
            "group_id": "g", "member_id": member, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": n, "metadata": m} for n, m in (protocols or [("range", sub(owned))])]},
            api_version=version, client_id="classic", client_host="/127.0.0.1", respond=box.append)
        return box[0] if box else None

    def sync(self, member, generation, assignments=None, protocol_name="range"):
        box = []
        self.shard.sync_group({"group_id": "g", "member_id": member, "generation_id": generation,
                               "group_instance_id": None, "protocol_type": "consumer",
                               "protocol_name": protocol_name,
                               "assignments": [{"member_id": m, "assignment": a}
                                               for m, a in (assignments or {}).items()]}, box.append)
        return box[0] if box else None

    def heartbeat(self, member, generation):
        return self.shard.heartbeat({"group_id": "g", "member_id": member, "generation_id": generation,
                                     "group_instance_id": None})["error_code"]

    def rejoin_and_sync(self, member, owned):
        """What a classic client does on REBALANCE_IN_PROGRESS: JoinGroup with what it owns, then SyncGroup."""
        joined = self.join(member, owned)
        assert joined["error_code"] == E.NONE and joined["leader"] == "" and joined["members"] == []
        synced = self.sync(member, joined["generation_id"])
        assert synced["error_code"] == E.NONE, synced
        return joined["generation_id"], decode_assignment(synced["assignment"])

    def classic_pair(self):
        """A Stable classic group: a owns 0-2, b owns 3-5 (generation 1)."""
        # JoinGroup v3: no KIP-394 round trip; both are parked until the initial rebalance delay (0) ends.
        assert self.join("", version=3) is None and self.join("", version=3) is None
        self.timer.advance(0)
        group = self.shard.classic.groups["g"]
        a, b = list(group.members)
        assert group.generation_id == 1
        leader = group.leader_id
        other = b if leader == a else a
        assert self.sync(other, 1) is None  # parked until the leader's SyncGroup
        self.sync(leader, 1, {a: assignment(0, 1, 2), b: assignment(3, 4, 5)})
        assert group.state is GroupState.STABLE
        return a, b


def test_heartbeat_upgrades_a_classic_group_and_classic_members_reconcile_by_rejoining():
    cg = Mixed()
    a, b = cg.classic_pair()
    r = cg.hb("n", 0)
    assert r["error_code"] == E.NONE
    assert "g" not in cg.shard.classic.groups and "g" in cg.shard.consumer.groups
    g = cg.group()
    # The classic members keep their generation as member epoch and their assignment; the newcomer waits.
    assert {m: (x.member_epoch, x.assigned, x.uses_classic_protocol) for m, x in g.members.items()} == {
        a: (1, {T1: {0, 1, 2}}, True), b: (1, {T1: {3, 4, 5}}, True), "n": (2, {}, False)}
    assert g.group_epoch == 2 and parts(r) == {}
    assert g.members["n"].state == MemberState.UNRELEASED_PARTITIONS
    assert cg.timer.deadline(("cg-session", "g", a)) == cg.timer.now_ms() + 10000  # the classic session timeout
    keys = [k for batch in cg.log.batches for k in _keys(batch)]
    assert GroupMetadataKey("g") in keys
    assert_never_shared(cg)

    # A classic member's heartbeat tells it to rejoin; it must do so within its rebalance timeout.
    assert cg.heartbeat(a, 1) == E.REBALANCE_IN_PROGRESS
    assert cg.timer.is_scheduled(("cg-join", "g", a))
    gen, got = cg.rejoin_and_sync(a, owned={0, 1, 2})
    assert not cg.timer.is_scheduled(("cg-join", "g", a))
    # First round: the member keeps its epoch and is told what it keeps (revocation first).
    assert gen == 1 and len(got) == 2 and got < {0, 1, 2}
    assert g.members[a].state == MemberState.UNREVOKED_PARTITIONS
    assert_never_shared(cg)
    assert cg.heartbeat(a, 1) == E.REBALANCE_IN_PROGRESS
    gen, got_a = cg.rejoin_and_sync(a, owned=got)
    assert gen == 2 and got_a == got and g.members[a].state == MemberState.STABLE
    # Same for b, a cooperative client this time (it reports what it still owns: nothing to revoke twice).
    assert cg.heartbeat(b, 1) == E.REBALANCE_IN_PROGRESS
    gen, got = cg.rejoin_and_sync(b, owned={3, 4, 5})
    gen, got_b = cg.rejoin_and_sync(b, owned=got)
    assert gen == 2 and len(got_b) == 2
    # The consumer-protocol member picks up the released partitions on its next heartbeat.
    rn = cg.hb("n", 2)
    assert parts(rn)[T1] == {0, 1, 2, 3, 4, 5} - got_a - got_b
    assert cg.heartbeat(a, 2) == E.NONE and cg.heartbeat(b, 2) == E.NONE
    assert str(g.state) == "Stable"
    assert_never_shared(cg)

    # Replaying the log rebuilds the same mixed group, classic members included.
    snapshot = {m: (x.member_epoch, x.assigned, x.classic) for m, x in g.members.items()}
    cg2 = cg.restart()
    assert {m: (x.member_epoch, x.assigned, x.classic) for m, x in cg2.group().members.items()} == snapshot
    assert "g" not in cg2.shard.classic.groups
    assert cg2.timer.deadline(("cg-session", "g", a)) == cg2.timer.now_ms() + 10000
    d = cg2.shard.consumer_group_describe("g", lambda t: "t1")
    assert sorted(m["member_type"] for m in d["members"]) == [0, 0, 1]


def _keys(batch):
    from minikafka.broker.group.records import decode_key
    return [decode_key(r.key) for r in iter_records(batch)]


@pytest.mark.parametrize("policy, upgrades", [("bidirectional", True), ("upgrade", True),
                                              ("downgrade", False), ("disabled", False)])
def test_the_migration_policy_governs_the_upgrade(policy, upgrades):
    cg = Mixed(migration_policy=policy)
    cg.classic_pair()
    r = cg.hb("n", 0)
    if upgrades:
        assert r["error_code"] == E.NONE and "g" in cg.shard.consumer.groups
    else:
        assert r["error_code"] == E.GROUP_ID_NOT_FOUND
        assert cg.shard.classic.groups["g"].state is GroupState.STABLE and "g" not in cg.shard.consumer.groups


def test_a_group_with_malformed_embedded_protocol_is_not_upgraded():
    cg = Mixed()
    box = []
    cg.shard.join_group({"group_id": "g", "member_id": "", "session_timeout_ms": 10000, "rebalance_timeout_ms": 1000,
                         "group_instance_id": None, "protocol_type": "consumer",
                         "protocols": [{"name": "range", "metadata": b"\x00"}]},
                        api_version=3, client_id="c", client_host="h", respond=box.append)
    cg.timer.advance(0)
    assert cg.hb("n", 0)["error_code"] == E.GROUP_ID_NOT_FOUND
    assert cg.shard.classic.groups["g"].all_members()


def _consumer_then_classic(cg: Mixed, instance=None) -> str:
    """A consumer group of "n" joined by a classic member through JoinGroup (KIP-394 first)."""
    assert cg.hb("n", 0, instance=instance)["error_code"] == E.NONE
    first = cg.join("", version=9)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED
    c = first["member_id"]
    joined = cg.join(c, version=9)
    assert joined["error_code"] == E.NONE and joined["generation_id"] == 2
    assert cg.group().members[c].uses_classic_protocol
    # n revokes what moves to c; then c is told to rejoin, and gets them.
    rn = cg.hb("n", 1)
    cg.hb("n", 1, owned=parts(rn))
    assert cg.sync(c, 2) is not None
    assert cg.heartbeat(c, 2) == E.REBALANCE_IN_PROGRESS
    gen, got = cg.rejoin_and_sync(c, owned=set())
    assert gen == 2 and len(got) == 3
    assert_never_shared(cg)
    return c


@pytest.mark.parametrize("policy, downgrades", [("bidirectional", True), ("downgrade", True),
                                                ("upgrade", False), ("disabled", False)])
def test_the_last_consumer_member_leaving_downgrades_as_the_policy_allows(policy, downgrades):
    cg = Mixed(migration_policy=policy)
    c = _consumer_then_classic(cg)
    r = cg.hb("n", -1)
    assert r["error_code"] == E.NONE
    if not downgrades:
        assert "g" in cg.shard.consumer.groups and list(cg.group().members) == [c]
        return
    assert "g" not in cg.shard.consumer.groups
    group = cg.shard.classic.groups["g"]
    # A classic group at the consumer group's epoch, rebalancing so that its members resynchronise.
    assert group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 2
    assert list(group.members) == [c] and group.protocol_name == "range"
    assert cg.heartbeat(c, 2) == E.REBALANCE_IN_PROGRESS
    joined = cg.join(c, version=9)
    assert joined["error_code"] == E.NONE and joined["leader"] == c and joined["generation_id"] == 3
    synced = cg.sync(c, 3, {c: assignment(0, 1, 2, 3, 4, 5)})
    assert decode_assignment(synced["assignment"]) == {0, 1, 2, 3, 4, 5}
    cg2 = cg.restart()
    assert "g" not in cg2.shard.consumer.groups and cg2.shard.classic.groups["g"].generation_id == 3


def test_downgrade_before_the_rebalance_survives_a_restart():
    cg = Mixed()
    c = _consumer_then_classic(cg)
    target = cg.group().target[c][T1]
    cg.hb("n", -1)
    cg2 = cg.restart()
    group = cg2.shard.classic.groups["g"]
    assert "g" not in cg2.shard.consumer.groups and list(group.members) == [c]
    # The record carries the consumer group's target as the member's classic assignment.
    assert decode_assignment(group.members[c].assignment) == target


def test_a_consumer_member_expired_by_its_session_also_downgrades():
    cg = Mixed()
    c = _consumer_then_classic(cg)
    assert cg.shard.expire_consumer_member("g", "n")
    assert "g" not in cg.shard.consumer.groups and list(cg.shard.classic.groups["g"].members) == [c]


def test_classic_members_are_fenced_by_their_session_join_and_sync_timeouts():
    cg = Mixed()
    a, b = cg.classic_pair()
    cg.hb("n", 0, rebalance=60000)
    # b heartbeats, is told to rejoin, and never does: fenced after its rebalance timeout (20 s).
    assert cg.heartbeat(b, 1) == E.REBALANCE_IN_PROGRESS
    for _ in range(2):
        cg.timer.advance(9000)
        for member in (a, b):
            assert cg.heartbeat(member, 1) == E.REBALANCE_IN_PROGRESS  # b's heartbeats keep its session
        cg.hb("n", 2)
    assert b in cg.group().members
    cg.timer.advance(2500)
    assert b not in cg.group().members
    # a joins and never syncs: fenced after its rebalance timeout.
    joined = cg.join(a, owned={0, 1, 2})
    assert joined["error_code"] == E.NONE
    assert cg.timer.is_scheduled(("cg-sync", "g", a))
    for _ in range(3):
        cg.timer.advance(7000)
        cg.heartbeat(a, joined["generation_id"])
        cg.hb("n", cg.group().members["n"].member_epoch)
    assert a not in cg.group().members
    # Only the consumer member is left; with no heartbeat, n's session ends too.
    assert list(cg.group().members) == ["n"]


def test_classic_member_session_timeout_is_its_own():
    cg = Mixed()
    a, b = cg.classic_pair()
    cg.hb("n", 0)
    cg.timer.advance(10001)
    assert list(cg.group().members) == ["n"]


def test_classic_members_commit_with_their_generation_and_get_classic_errors():
    cg = Mixed()
    a, _ = cg.classic_pair()
    cg.hb("n", 0)

    def commit(member, generation, version=8):
        request = {"group_id": "g", "generation_id_or_member_epoch": generation, "member_id": member,
                   "group_instance_id": None, "retention_time_ms": -1,
                   "topics": [{"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]}
        return cg.shard.commit_offsets(request, version)["topics"][0]["partitions"][0]["error_code"]

    assert commit(a, 1) == E.NONE  # OffsetCommit below v9 is fine for a classic member
    assert commit(a, 7) == E.ILLEGAL_GENERATION
    assert commit("n", 2, version=8) == E.UNSUPPORTED_VERSION
    assert commit("n", 1, version=9) == E.STALE_MEMBER_EPOCH


def test_classic_requests_to_a_consumer_group_are_validated():
    cg = Mixed()
    a, _ = cg.classic_pair()
    cg.hb("n", 0)
    assert cg.heartbeat("nobody", 1) == E.UNKNOWN_MEMBER_ID
    assert cg.heartbeat("n", 2) == E.UNKNOWN_MEMBER_ID  # not a classic member
    assert cg.heartbeat(a, 5) == E.ILLEGAL_GENERATION
    assert cg.sync(a, 1)["error_code"] == E.REBALANCE_IN_PROGRESS  # behind the group epoch: rejoin first
    assert cg.sync(a, 1, protocol_name="roundrobin")["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    other = cg.join("", protocols=[("roundrobin", sub())])
    assert other["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    left = cg.shard.leave_group("g", [{"member_id": a}, {"member_id": "n"}])
    assert [m["error_code"] for m in left["members"]] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert a not in cg.group().members and cg.group().group_epoch == 3


def test_a_failed_append_leaves_the_classic_group_as_it_was():
    from minikafka.protocol.errors import KafkaError
    cg = Mixed()
    a, b = cg.classic_pair()
    cg.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    r = cg.hb("n", 0)
    assert r["error_code"] == E.NOT_COORDINATOR
    assert "g" not in cg.shard.consumer.groups and set(cg.shard.classic.groups["g"].members) == {a, b}
    cg.log.fail_with = None
    cg.timer.advance(20000)  # the session timers armed for the conversion find no consumer group
    assert "g" not in cg.shard.consumer.groups


def test_an_upgrade_mid_rebalance_answers_the_parked_requests():
    cg = Mixed()
    a, b = cg.classic_pair()
    parked = []
    cg.shard.join_group({"group_id": "g", "member_id": a, "session_timeout_ms": 10000, "rebalance_timeout_ms": 20000,
                         "group_instance_id": None, "protocol_type": "consumer",
                         "protocols": [{"name": "range", "metadata": sub({0, 1, 2}, topics=("t1", "t2"))}]},
                        api_version=5, client_id="classic", client_host="h", respond=parked.append)
    assert not parked and cg.shard.classic.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert cg.hb("n", 0)["error_code"] == E.NONE
    assert parked[0]["error_code"] == E.REBALANCE_IN_PROGRESS
    # Still at generation 1 with its last assignment; it rejoins the consumer group like any classic member.
    assert cg.group().members[a].member_epoch == 1 and cg.group().members[a].assigned == {T1: {0, 1, 2}}


@pytest.mark.parametrize("policy, downgrades", [("bidirectional", True), ("upgrade", False)])
def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(policy, downgrades):
    cg = Mixed(migration_policy=policy)
    c = _consumer_then_classic(cg, instance="i1")
    target = cg.group().target["n"][T1]
    # The instance restarts with the classic protocol (no leave first): it takes over n's place.
    joined = cg.join("", version=9, instance="i1")
    assert joined["error_code"] == E.NONE
    new = joined["member_id"]
    if not downgrades:
        assert set(cg.group().members) == {c, new} and cg.group().members[new].uses_classic_protocol
        return
    assert "g" not in cg.shard.consumer.groups
    group = cg.shard.classic.groups["g"]
    # No rebalance: the newcomer has n's assignment and the classic member keeps its own.
    assert group.state is GroupState.STABLE and set(group.members) == {c, new}
    assert group.static_member_id("i1") == new
    assert decode_assignment(group.members[new].assignment) == target
    synced = cg.sync(new, group.generation_id)
    assert decode_assignment(synced["assignment"]) == target
    cg2 = cg.restart()
    assert "g" not in cg2.shard.consumer.groups and set(cg2.shard.classic.groups["g"].members) == {c, new}
