"""JoinGroup: the join phase of the classic protocol, driven by a fake clock."""

import pytest

from group_harness import E, Harness, S, subscription


def test_member_id_required_two_step_join_v4_plus():
    h = Harness()
    first = h.join("g", "", client_id="app")
    r = first.value
    assert r["error_code"] == E.MEMBER_ID_REQUIRED
    assert r["member_id"].startswith("app-") and len(r["member_id"]) == len("app-") + 36
    group = h.group()
    assert group.is_pending_member(r["member_id"]) and group.num_members() == 0
    second = h.join("g", r["member_id"])
    assert not second.done and h.state() is S.PREPARING_REBALANCE
    h.timer.advance(0)  # group.initial.rebalance.delay.ms = 0
    j = second.value
    assert j["error_code"] == E.NONE and j["generation_id"] == 1 and j["leader"] == r["member_id"]
    assert j["protocol_name"] == "range" and j["protocol_type"] == "consumer"
    assert j["members"] == [{"member_id": r["member_id"], "group_instance_id": None,
                             "metadata": subscription("t")}]
    assert h.state() is S.COMPLETING_REBALANCE


def test_versions_before_4_join_directly():
    h = Harness()
    box = h.join("g", "", version=3)
    assert not box.done
    h.timer.advance(0)
    assert box.value["error_code"] == E.NONE and box.value["generation_id"] == 1


def test_pending_member_expires_after_session_timeout():
    h = Harness()
    r = h.join("g", "", session=5000).value
    h.timer.advance(4999)
    assert h.group().is_pending_member(r["member_id"])
    h.timer.advance(1)
    assert not h.group().is_pending_member(r["member_id"])
    assert h.join("g", r["member_id"]).value["error_code"] == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("session,ok", [(999, False), (1000, True), (60000, True), (60001, False)])
def test_session_timeout_bounds(session, ok):
    h = Harness(min_session_timeout_ms=1000, max_session_timeout_ms=60000)
    r = h.join("g", "", session=session).value
    assert r["error_code"] == (E.MEMBER_ID_REQUIRED if ok else E.INVALID_SESSION_TIMEOUT)


def test_unknown_member_id_for_unknown_group_or_member():
    h = Harness()
    assert h.join("nope", "someone").value["error_code"] == E.UNKNOWN_MEMBER_ID
    h.stable_group(1)
    assert h.join("g", "ghost").value["error_code"] == E.UNKNOWN_MEMBER_ID


def test_inconsistent_group_protocol():
    h = Harness()
    # An empty group needs a protocol type and at least one protocol.
    assert h.join("g", "", protocol_type="").value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", "", protocols=[]).value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    h.stable_group(1)
    assert h.join("g", "", protocol_type="connect").value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", "", protocols=[("roundrobin", b"x")]).value["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    # Sharing one protocol is enough.
    assert h.join("g", "", protocols=[("roundrobin", b"x"), ("range", b"y")]).value["error_code"] \
        == E.MEMBER_ID_REQUIRED


def test_protocol_chosen_by_vote_among_common_protocols():
    h = Harness()
    a = h.join_new("g", protocols=[("sticky", b"1"), ("range", b"1"), ("rr", b"1")])
    b = h.join("g", "", version=3, protocols=[("range", b"2"), ("sticky", b"2")])
    c = h.join("g", "", version=3, protocols=[("range", b"3"), ("sticky", b"3"), ("rr", b"3")])
    h.timer.advance(0)
    # Candidates: sticky, range (rr is not supported by b).  Votes: a sticky, b range, c range.
    assert a.value["protocol_name"] == "range" == b.value["protocol_name"] == c.value["protocol_name"]
    assert h.group().generation_id == 1


def test_first_member_is_leader_and_only_leader_gets_members():
    h = Harness()
    ids = h.stable_group(3)
    assert h.group().leader_id == ids[0]
    h.join("g", ids[0])  # the leader's rejoin starts a rebalance
    boxes = [h.join("g", mid) for mid in ids[1:]]
    for b in boxes:
        assert b.value["members"] == [] and b.value["leader"] == ids[0]
    assert h.group().generation_id == 4


def test_join_completes_when_all_known_members_rejoined_without_waiting():
    h = Harness()
    ids = h.stable_group(2)
    now = h.timer.clock.now_ms()
    new = h.join_new("g")
    assert h.state() is S.PREPARING_REBALANCE and not new.done
    assert h.heartbeat("g", ids[0], 2) == E.REBALANCE_IN_PROGRESS
    a = h.join("g", ids[0])
    assert not a.done
    b = h.join("g", ids[1])
    assert a.done and b.done and new.done and h.timer.clock.now_ms() == now
    assert h.state() is S.COMPLETING_REBALANCE and a.value["generation_id"] == 3


def test_rebalance_ends_at_exactly_the_rebalance_timeout_and_drops_silent_members():
    """Seed 002: a consumer stops polling; the rebalance waits max.poll.interval.ms, then goes on."""
    h = Harness()
    ids = h.stable_group(2, rebalance=20000, session=10000)
    # Member 1 keeps heartbeating (its background thread) but never rejoins: poll() is not called.
    new = h.join_new("g", rebalance=3000, session=10000)
    leader = h.join("g", ids[0], rebalance=20000, session=10000)
    for _ in range(3):
        h.timer.advance(6000)
        assert h.heartbeat("g", ids[1], 2) == E.REBALANCE_IN_PROGRESS
    # The rebalance timeout is the largest member rebalance_timeout_ms: 20000 ms after it started.
    h.timer.advance(20000 - 18000 - 1)
    assert not leader.done and h.group().has_member(ids[1])
    h.timer.advance(1)
    assert leader.done and new.done
    assert not h.group().has_member(ids[1])
    assert leader.value["generation_id"] == 3 and len(leader.value["members"]) == 2
    assert h.heartbeat("g", ids[1], 2) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", ids[0], 3) == E.NONE


def test_leader_reelected_when_it_does_not_rejoin():
    h = Harness()
    ids = h.stable_group(2, rebalance=5000)
    h.join_new("g", rebalance=5000)
    follower = h.join("g", ids[1], rebalance=5000)
    h.timer.advance(5000)
    assert not h.group().has_member(ids[0])
    assert follower.value["leader"] == ids[1] and len(follower.value["members"]) == 2


def test_initial_rebalance_delay_is_extended_per_new_joiner_up_to_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.join_new("g", rebalance=10000)
    h.timer.advance(2000)
    b = h.join_new("g", rebalance=10000)
    h.timer.advance(1000)  # t=3000: a new member arrived during the delay, so wait 3000 more
    assert not a.done and not b.done
    h.timer.advance(2999)
    assert not a.done
    h.timer.advance(1)  # t=6000
    assert a.value["generation_id"] == b.value["generation_id"] == 1
    assert len(a.value["members"]) == 2


def test_initial_rebalance_delay_capped_by_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.join_new("g", rebalance=4000)
    h.timer.advance(1000)
    h.join_new("g", rebalance=4000)
    h.timer.advance(2000)  # t=3000: extend by min(3000, remaining 1000)
    assert not a.done
    h.timer.advance(1000)
    assert a.done


def test_rejoin_in_completing_rebalance_with_same_metadata_returns_current_generation():
    h = Harness()
    first = h.join_new("g")
    h.timer.advance(0)
    mid = first.value["member_id"]
    again = h.join("g", mid)
    assert again.value["generation_id"] == 1 and again.value["members"]  # leader gets members again
    assert h.state() is S.COMPLETING_REBALANCE


def test_rejoin_in_completing_rebalance_with_new_metadata_rebalances():
    h = Harness()
    first = h.join_new("g")
    h.timer.advance(0)
    mid = first.value["member_id"]
    again = h.join("g", mid, protocols=[("range", subscription("t", "u"))])
    assert again.value["generation_id"] == 2  # sole member rejoined: completes at once
    assert h.group().subscribed_topics == {"t", "u"}


def test_follower_rejoin_in_stable_with_same_metadata_gets_current_generation():
    h = Harness()
    ids = h.stable_group(2)
    r = h.join("g", ids[1]).value
    assert r["generation_id"] == 2 and r["members"] == [] and h.state() is S.STABLE


def test_join_of_existing_member_into_empty_group_is_unknown():
    h = Harness()
    ids = h.stable_group(1)
    h.leave("g", ids[0])
    assert h.state() is S.EMPTY
    assert h.join("g", ids[0]).value["error_code"] == E.UNKNOWN_MEMBER_ID


def test_new_member_join_times_out_after_five_minutes():
    h = Harness(max_session_timeout_ms=1_800_000)
    # The existing member's session outlives the new member's join timeout; it never rejoins.
    ids = h.stable_group(1, rebalance=600_000, session=400_000)
    new = h.join_new("g", rebalance=600_000)
    h.timer.advance(300_000 - 1)
    assert not new.done
    h.timer.advance(1)
    assert new.value["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.group().members.keys() == {ids[0]}


def test_group_max_size():
    h = Harness(max_size=1)
    h.stable_group(1)
    r = h.join("g", "").value
    assert r["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_empty_group_after_everyone_is_gone_writes_a_generation():
    h = Harness()
    ids = h.stable_group(1, session=5000)
    h.timer.advance(5000)  # no heartbeat: removed, rebalance, nobody left
    assert h.state() is S.EMPTY and h.group().generation_id == 2 and not h.group().members
