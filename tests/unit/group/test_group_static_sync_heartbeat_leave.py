"""Static membership, SyncGroup, Heartbeat, LeaveGroup, session and pending-sync timeouts."""

from group_harness import E, Harness, S, subscription


def stable_static(h, instances=("i1", "i2"), **kw):
    """A Stable group of static members; returns {instance: member_id}."""
    boxes = [h.join("g", "", instance=i, **kw) for i in instances]
    h.timer.advance(0)
    # Static members skip MEMBER_ID_REQUIRED; with delay 0 the first join completes alone.
    ids = {}
    for i, b in zip(instances, boxes):
        if b.done:
            ids[i] = b.value["member_id"]
    gen = h.group().generation_id
    if len(ids) < len(instances):  # the others arrived during CompletingRebalance: they triggered a rebalance
        pass
    leader = h.group().leader_id
    for i, mid in list(h.group().static_members.items()):
        ids[i] = mid
    # Drive to Stable: everyone (re)joins, then syncs.
    if h.state() is not S.COMPLETING_REBALANCE:
        rejoins = [h.join("g", mid, instance=i, **kw) for i, mid in ids.items() if not h.group().member(mid).is_awaiting_join]
        h.timer.advance(0)
    gen = h.group().generation_id
    leader = h.group().leader_id
    for i, mid in ids.items():
        if mid != leader:
            h.sync("g", mid, gen, instance=i)
    h.sync("g", leader, gen, {mid: i.encode() for i, mid in ids.items()},
           instance=[i for i, m in ids.items() if m == leader][0])
    assert h.state() is S.STABLE, h.state()
    return ids


def test_static_member_joins_without_member_id_required():
    h = Harness()
    box = h.join("g", "", instance="inst-1", version=5)
    assert not box.done
    h.timer.advance(0)
    assert box.value["member_id"].startswith("inst-1-")


def test_static_rejoin_with_unchanged_metadata_keeps_generation_and_assignment():
    h = Harness()
    ids = stable_static(h)
    gen = h.group().generation_id
    old = ids["i2"]
    # i2 restarts: it lost its member id but keeps its group.instance.id.
    r = h.join("g", "", instance="i2", version=8).value
    assert r["error_code"] == E.NONE and r["generation_id"] == gen and r["member_id"] != old
    assert r["members"] == [] and not r["skip_assignment"]
    assert h.state() is S.STABLE
    s = h.sync("g", r["member_id"], gen, instance="i2").value
    assert s["error_code"] == E.NONE and s["assignment"] == b"i2"
    # The old incarnation is fenced.
    assert h.heartbeat("g", old, gen, instance="i2") == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", r["member_id"], gen, instance="i2") == E.NONE
    # The replacement was persisted with the new member id.
    h2 = h.restart()
    assert h2.group().static_members["i2"] == r["member_id"]


def test_static_leader_rejoin_v9_gets_skip_assignment():
    h = Harness()
    ids = stable_static(h)
    leader_instance = [i for i, m in ids.items() if m == h.group().leader_id][0]
    r = h.join("g", "", instance=leader_instance, version=9).value
    assert r["skip_assignment"] is True and r["leader"] == r["member_id"]
    assert len(r["members"]) == 2 and h.state() is S.STABLE


def test_static_leader_rejoin_before_v9_sees_the_old_leader_id():
    h = Harness()
    ids = stable_static(h)
    old_leader = h.group().leader_id
    leader_instance = [i for i, m in ids.items() if m == old_leader][0]
    r = h.join("g", "", instance=leader_instance, version=8).value
    assert r["leader"] == old_leader != r["member_id"] and r["members"] == []
    assert h.group().leader_id == r["member_id"]


def test_static_rejoin_with_changed_protocol_rebalances():
    h = Harness()
    stable_static(h)
    gen = h.group().generation_id
    box = h.join("g", "", instance="i1", protocols=[("range", subscription("t")), ("rr", b"")])
    assert h.state() is S.STABLE  # still range by vote: same protocol, no rebalance
    assert box.value["generation_id"] == gen


def test_static_rejoin_during_completing_rebalance_forces_rebalance():
    h = Harness()
    a = h.join("g", "", instance="i1")
    h.timer.advance(0)
    assert h.state() is S.COMPLETING_REBALANCE
    old = a.value["member_id"]
    b = h.join("g", "", instance="i1")
    assert h.state() in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
    h.timer.advance(0)
    assert b.value["generation_id"] == 2 and b.value["member_id"] != old


def test_stale_static_member_id_is_fenced():
    h = Harness()
    ids = stable_static(h)
    assert h.join("g", "wrong-id", instance="i1").value["error_code"] == E.FENCED_INSTANCE_ID
    assert h.sync("g", "wrong-id", h.group().generation_id, instance="i1").value["error_code"] \
        == E.FENCED_INSTANCE_ID
    assert h.join("g", ids["i1"], instance="i9").value["error_code"] == E.UNKNOWN_MEMBER_ID


def test_static_member_that_does_not_rejoin_stays_through_the_rebalance_timeout():
    h = Harness()
    ids = stable_static(h, rebalance=5000, session=50000)
    b = h.join_new("g", rebalance=5000, session=50000)
    leader = h.group().leader_id
    a = h.join("g", leader, instance=[i for i, m in ids.items() if m == leader][0], rebalance=5000, session=50000)
    h.timer.advance(5000)
    assert a.done and b.done
    assert h.group().num_members() == 3  # the silent static member is kept
    # ...until its session expires.
    h.timer.advance(50000)
    assert not any(m in h.group().members for m in ids.values() if m != leader)


def test_sync_followers_parked_until_leader_assignment_is_persisted():
    h = Harness()
    ids = h.stable_group(2)
    new = h.join_new("g")
    j = [h.join("g", m) for m in ids]
    gen = new.value["generation_id"]
    all_ids = ids + [new.value["member_id"]]
    f1 = h.sync("g", ids[1], gen)
    f2 = h.sync("g", all_ids[2], gen)
    assert not f1.done and not f2.done and h.state() is S.COMPLETING_REBALANCE
    batches_before = len(h.log.batches)
    seen = []
    f1.append = lambda resp: seen.append((resp, len(h.log.batches)))  # record log length at delivery
    h.shard.classic.groups["g"].member(ids[1]).awaiting_sync = f1.append
    leader = h.sync("g", ids[0], gen, {ids[0]: b"A", ids[1]: b"B"})  # forgets the new member
    assert leader.value["assignment"] == b"A"
    resp, log_len = seen[0]
    assert resp["assignment"] == b"B" and log_len == batches_before + 1  # record appended first
    assert f2.value["error_code"] == E.NONE and f2.value["assignment"] == b""  # empty, not null
    assert h.state() is S.STABLE


def test_sync_errors():
    h = Harness()
    ids = h.stable_group(2)
    assert h.sync("g", ids[1], 99).value["error_code"] == E.ILLEGAL_GENERATION
    assert h.sync("g", "ghost", 2).value["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.sync("nope", "ghost", 2).value["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", ids[1], 2, protocol_name="rr").value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", ids[1], 2, protocol_type="connect").value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    ok = h.sync("g", ids[1], 2, protocol_type="consumer", protocol_name="range").value
    assert ok["error_code"] == E.NONE and ok["assignment"] == b"a1" and ok["protocol_name"] == "range"
    h.join_new("g")
    assert h.sync("g", ids[1], 2).value["error_code"] == E.REBALANCE_IN_PROGRESS


def test_rebalance_during_completing_rebalance_answers_parked_syncs():
    h = Harness()
    ids = h.stable_group(2)
    h.join("g", ids[0])
    h.join("g", ids[1])
    parked = h.sync("g", ids[1], 3)
    h.join_new("g")  # a newcomer restarts the rebalance
    assert parked.value["error_code"] == E.REBALANCE_IN_PROGRESS and parked.value["assignment"] == b""


def test_heartbeat_per_state():
    h = Harness()
    ids = h.stable_group(2)
    assert h.heartbeat("g", ids[1], 2) == E.NONE  # Stable
    assert h.heartbeat("g", ids[1], 1) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", "ghost", 2) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", "ghost", 0) == E.UNKNOWN_MEMBER_ID
    h.join("g", ids[0])
    assert h.heartbeat("g", ids[1], 2) == E.REBALANCE_IN_PROGRESS  # PreparingRebalance
    h.join("g", ids[1])
    assert h.state() is S.COMPLETING_REBALANCE
    assert h.heartbeat("g", ids[1], 3) == E.NONE  # CompletingRebalance: NONE, as Kafka's code does
    h.leave("g", ids[0], ids[1])
    assert h.state() is S.EMPTY
    assert h.heartbeat("g", ids[1], 3) == E.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    ids = h.stable_group(2, session=6000)
    h.timer.advance(5000)
    assert h.heartbeat("g", ids[0], 2) == E.NONE
    h.timer.advance(999)
    assert h.group().has_member(ids[1])
    # ids[1]'s session restarted at its SyncGroup (t0), so it expires at exactly t0 + 6000.
    h.timer.advance(1)
    assert not h.group().has_member(ids[1])
    assert h.heartbeat("g", ids[0], 2) == E.REBALANCE_IN_PROGRESS
    box = h.join("g", ids[0], session=6000)
    assert box.value["generation_id"] == 3 and [m["member_id"] for m in box.value["members"]] == [ids[0]]


def test_session_expires_at_exactly_the_timeout():
    h = Harness()
    ids = h.stable_group(1, session=6000)
    h.timer.advance(5999)
    assert h.group().has_member(ids[0])
    h.timer.advance(1)
    assert not h.group().has_member(ids[0])


def test_pending_sync_timeout_removes_members_that_never_sync():
    h = Harness()
    ids = h.stable_group(2, rebalance=4000, session=30000)
    h.join("g", ids[0], rebalance=4000, session=30000)
    h.join("g", ids[1], rebalance=4000, session=30000)
    h.sync("g", ids[0], 3, {ids[0]: b"x", ids[1]: b"y"})
    assert h.state() is S.STABLE
    h.timer.advance(3999)
    assert h.group().has_member(ids[1])
    h.timer.advance(1)
    assert not h.group().has_member(ids[1]) and h.state() is S.PREPARING_REBALANCE


def test_leave_group_batched():
    h = Harness()
    ids = h.stable_group(3)
    r = h.leave("g", ids[1], ids[2], "ghost")
    assert [m["error_code"] for m in r["members"]] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert h.state() is S.PREPARING_REBALANCE
    assert h.group().members.keys() == {ids[0]}
    # The remaining member rejoins alone: completes at once.
    assert h.join("g", ids[0]).value["generation_id"] == 4


def test_leave_by_instance_id_and_pending_member():
    h = Harness()
    ids = stable_static(h)
    pending = h.join("g", "").value["member_id"]
    r = h.leave("g", {"member_id": "", "group_instance_id": "i1"}, pending,
                {"member_id": "", "group_instance_id": "nope"})
    assert [m["error_code"] for m in r["members"]] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert "i1" not in h.group().static_members and not h.group().pending_join_members
    assert h.leave("nope", "x")["members"][0]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_leave_answers_a_parked_join():
    h = Harness()
    ids = h.stable_group(1, session=30000)
    new = h.join_new("g")
    h.leave("g", new.value["member_id"] if new.done else h.group().all_members()[1].member_id)
    assert new.value["error_code"] == E.UNKNOWN_MEMBER_ID


def test_failed_persist_of_static_replacement_reverts_it():
    from minikafka.protocol.errors import KafkaError

    h = Harness()
    ids = stable_static(h)
    h.log.fail_with = KafkaError(E.NOT_LEADER_FOR_PARTITION)
    r = h.join("g", "", instance="i2").value
    assert r["error_code"] == E.NOT_COORDINATOR and r["member_id"] == ""
    assert h.group().static_members["i2"] == ids["i2"] and h.group().has_member(ids["i2"])
    h.log.fail_with = None
    assert h.heartbeat("g", ids["i2"], h.group().generation_id, instance="i2") == E.NONE


def test_failed_persist_of_the_leader_assignment_fails_the_sync_and_rebalances():
    from minikafka.protocol.errors import KafkaError

    h = Harness()
    ids = h.stable_group(2)
    h.join("g", ids[0])
    h.join("g", ids[1])
    follower = h.sync("g", ids[1], 3)
    h.log.fail_with = KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION)
    leader = h.sync("g", ids[0], 3, {ids[0]: b"x", ids[1]: b"y"})
    assert leader.value["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert follower.value["error_code"] == E.COORDINATOR_NOT_AVAILABLE and follower.value["assignment"] == b""
    assert h.state() is S.PREPARING_REBALANCE
