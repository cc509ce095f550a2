"""OffsetCommit/OffsetFetch, retention, admin operations, and reload from __consumer_offsets."""

from minikafka.broker.group.records import GroupMetadataKey, OffsetCommitKey, decode_key
from minikafka.protocol.errors import KafkaError
from minikafka.protocol.records import iter_records, read_header

from group_harness import E, Harness, S, coordinator, subscription

MINUTE = 60_000


def records_in_log(h):
    out = []
    for batch in h.log.batches:
        for r in iter_records(batch):
            out.append((decode_key(r.key), r.value is None))
    return out


def test_standalone_commit_into_unknown_group_creates_a_simple_group():
    h = Harness()
    r = h.commit("solo", {("t", 0): (5, "meta-0"), ("t", 1): 7})
    assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [E.NONE, E.NONE]
    assert h.committed("solo", "t", 0) == (5, "meta-0")
    assert h.committed("solo", "t", 1) == (7, "")
    assert h.committed("solo", "t", 2) == (-1, "")
    assert h.state("solo") is S.EMPTY and h.group("solo").protocol_type is None
    assert records_in_log(h) == [(OffsetCommitKey("solo", "t", 0), False), (OffsetCommitKey("solo", "t", 1), False)]


def test_commit_member_and_generation_checks():
    h = Harness()
    ids = h.stable_group(2)
    ok = h.commit("g", {("t", 0): 10}, member_id=ids[1], generation=2)
    assert ok["topics"][0]["partitions"][0]["error_code"] == E.NONE
    assert h.commit("g", {("t", 0): 11}, member_id=ids[1], generation=1)["topics"][0]["partitions"][0][
        "error_code"] == E.ILLEGAL_GENERATION
    assert h.commit("g", {("t", 0): 11}, member_id="ghost", generation=2)["topics"][0]["partitions"][0][
        "error_code"] == E.UNKNOWN_MEMBER_ID
    # generation -1 without a member is only for Empty groups.
    assert h.commit("g", {("t", 0): 11})["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.committed("g", "t", 0) == (10, "")


def test_commit_to_unknown_group_with_a_generation():
    h = Harness()
    v8 = h.commit("nope", {("t", 0): 1}, member_id="m", generation=3, version=8)
    v9 = h.commit("nope", {("t", 0): 1}, member_id="m", generation=3, version=9)
    assert v8["topics"][0]["partitions"][0]["error_code"] == E.ILLEGAL_GENERATION
    assert v9["topics"][0]["partitions"][0]["error_code"] == E.GROUP_ID_NOT_FOUND
    assert "nope" not in h.shard.classic.groups


def test_commit_during_completing_rebalance_is_rebalance_in_progress():
    h = Harness()
    ids = h.stable_group(2)
    h.join("g", ids[0])
    h.join("g", ids[1])
    r = h.commit("g", {("t", 0): 1}, member_id=ids[1], generation=3)
    assert r["topics"][0]["partitions"][0]["error_code"] == E.REBALANCE_IN_PROGRESS
    # ...while in PreparingRebalance the previous generation may still commit.
    h.join_new("g")
    r = h.commit("g", {("t", 0): 2}, member_id=ids[1], generation=3)
    assert r["topics"][0]["partitions"][0]["error_code"] == E.NONE


def test_commit_keeps_the_member_session_alive():
    h = Harness()
    ids = h.stable_group(1, session=6000)
    for i in range(4):
        h.timer.advance(5000)
        h.commit("g", {("t", 0): i}, member_id=ids[0], generation=1)
    assert h.group().has_member(ids[0])


def test_commit_metadata_too_large_and_append_failure():
    h = Harness(offset_metadata_max_bytes=4)
    r = h.commit("s", {("t", 0): (1, "12345"), ("t", 1): (1, "1234")})
    assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    h.log.fail_with = KafkaError(E.NOT_LEADER_FOR_PARTITION)
    r = h.commit("s", {("t", 1): 99})
    assert r["topics"][0]["partitions"][0]["error_code"] == E.NOT_COORDINATOR
    assert h.committed("s", "t", 1) == (1, "1234")  # not acknowledged, not applied


def test_offset_fetch_all_topics():
    h = Harness()
    h.commit("s", {("a", 0): 1, ("a", 2): 3, ("b", 0): (4, "x")})
    r = h.shard.fetch_offsets("s", None)
    got = {(t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"])
           for t in r["topics"] for p in t["partitions"]}
    assert got == {("a", 0): (1, ""), ("a", 2): (3, ""), ("b", 0): (4, "x")}
    assert h.shard.fetch_offsets("none", None)["topics"] == []


def test_retention_of_standalone_offsets_counts_from_commit_time():
    h = Harness(offsets_retention_ms=10 * MINUTE, offsets_retention_check_interval_ms=MINUTE)
    h.commit("s", {("t", 0): 1})
    h.timer.advance(5 * MINUTE)
    h.commit("s", {("t", 1): 2})
    h.timer.advance(5 * MINUTE)  # partition 0 is now 10 minutes old: expired at this check
    assert h.committed("s", "t", 0) == (-1, "") and h.committed("s", "t", 1) == (2, "")
    h.timer.advance(5 * MINUTE)
    assert h.committed("s", "t", 1) == (-1, "")
    assert "s" not in h.shard.classic.groups  # no offsets left: the empty group is deleted
    assert records_in_log(h)[-1] == (GroupMetadataKey("s"), True)


def test_retention_time_of_v2_to_v4_commits_sets_an_absolute_expiry():
    h = Harness(offsets_retention_ms=100 * MINUTE, offsets_retention_check_interval_ms=MINUTE)
    h.commit("s", {("t", 0): 1}, version=2, retention=2 * MINUTE)
    h.timer.advance(MINUTE)
    assert h.committed("s", "t", 0) == (1, "")
    h.timer.advance(MINUTE)
    assert h.committed("s", "t", 0) == (-1, "")


def test_offsets_of_a_stable_group_expire_only_for_unsubscribed_topics():
    h = Harness(offsets_retention_ms=10 * MINUTE, offsets_retention_check_interval_ms=MINUTE,
                max_session_timeout_ms=3_600_000)
    ids = h.stable_group(1, session=3_600_000)  # subscribes to "t"
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, member_id=ids[0], generation=1)
    h.timer.advance(30 * MINUTE)
    assert h.committed("g", "t", 0) == (1, "")
    assert h.committed("g", "old", 0) == (-1, "")


def test_offsets_of_an_empty_consumer_group_expire_from_when_it_became_empty():
    h = Harness(offsets_retention_ms=10 * MINUTE, offsets_retention_check_interval_ms=MINUTE)
    ids = h.stable_group(1, session=60000)
    h.commit("g", {("t", 0): 1}, member_id=ids[0], generation=1)
    for _ in range(60):  # a live member for 30 minutes: its offsets stay although old
        h.timer.advance(30000)
        assert h.heartbeat("g", ids[0], 1) == E.NONE
    assert h.committed("g", "t", 0) == (1, "")
    h.leave("g", ids[0])
    assert h.state() is S.EMPTY
    empty_since = h.group().current_state_timestamp
    h.timer.advance(10 * MINUTE - 1)
    assert h.committed("g", "t", 0) == (1, "")
    h.timer.advance(MINUTE)
    assert h.timer.clock.now_ms() - empty_since >= 10 * MINUTE
    assert h.committed("g", "t", 0) == (-1, "") and "g" not in h.shard.classic.groups


def test_describe_list_groups():
    h = Harness()
    ids = h.stable_group(2)
    h.commit("solo", {("t", 0): 1})
    d = h.shard.describe_group("g")
    assert d["group_state"] == "Stable" and d["protocol_type"] == "consumer" and d["protocol_data"] == "range"
    assert [(m["member_id"], m["member_assignment"], m["member_metadata"]) for m in d["members"]] == [
        (ids[0], b"a0", subscription("t")), (ids[1], b"a1", subscription("t"))]
    assert d["members"][0]["client_id"] == "client" and d["members"][0]["client_host"] == "/127.0.0.1"
    assert h.shard.describe_group("nope")["group_state"] == "Dead"
    h.join("g", ids[0])
    d = h.shard.describe_group("g")
    # Kafka 4.2 (tests/conformance classic_rebalance): a rebalancing group still shows the last assignment.
    assert d["group_state"] == "PreparingRebalance" and d["members"][0]["member_assignment"] == b"a0"
    assert d["members"][0]["member_metadata"] == b""
    listed = {g["group_id"]: (g["group_state"], g["protocol_type"]) for g in h.shard.list_groups()}
    assert listed == {"g": ("PreparingRebalance", "consumer"), "solo": ("Empty", "")}
    assert [g["group_id"] for g in h.shard.list_groups(["empty"])] == ["solo"]
    assert h.shard.list_groups(["Stable"]) == []
    assert h.shard.list_groups([], ["consumer"]) == []


def test_delete_groups():
    h = Harness()
    h.stable_group(1)
    h.commit("solo", {("t", 0): 1, ("u", 1): 2})
    assert h.shard.delete_group("g") == E.NON_EMPTY_GROUP
    assert h.shard.delete_group("nope") == E.GROUP_ID_NOT_FOUND
    assert h.shard.delete_group("solo") == E.NONE
    assert "solo" not in h.shard.classic.groups and h.committed("solo", "t", 0) == (-1, "")
    tail = records_in_log(h)[-3:]
    assert sorted(map(str, tail)) == sorted(map(str, [(OffsetCommitKey("solo", "t", 0), True),
                                                      (OffsetCommitKey("solo", "u", 1), True),
                                                      (GroupMetadataKey("solo"), True)]))
    # Deleted for good: a restart does not bring it back.
    assert "solo" not in h.restart().shard.classic.groups


def test_offset_delete():
    h = Harness()
    ids = h.stable_group(1)
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, member_id=ids[0], generation=1)
    r = h.shard.delete_offsets({"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]},
        {"name": "old", "partitions": [{"partition_index": 0}, {"partition_index": 5}]}]})
    assert r["error_code"] == E.NONE
    assert [[p["error_code"] for p in t["partitions"]] for t in r["topics"]] == [
        [E.GROUP_SUBSCRIBED_TO_TOPIC], [E.NONE, E.NONE]]
    assert h.committed("g", "old", 0) == (-1, "") and h.committed("g", "t", 0) == (1, "")
    assert h.shard.delete_offsets({"group_id": "nope", "topics": []})["error_code"] == E.GROUP_ID_NOT_FOUND
    # A non-consumer protocol group with members cannot tell what it subscribes to.
    box = h.join("c", "", protocol_type="connect", protocols=[("default", b"")])
    h.join("c", box.value["member_id"], protocol_type="connect", protocols=[("default", b"")])
    assert h.shard.delete_offsets({"group_id": "c", "topics": []})["error_code"] == E.NON_EMPTY_GROUP


def test_restart_restores_groups_and_offsets():
    h = Harness()
    ids = h.stable_group(2)
    h.commit("g", {("t", 0): (42, "checkpoint")}, member_id=ids[0], generation=2)
    h.commit("solo", {("t", 3): 9})
    before = h.group()
    h2 = h.restart()
    g = h2.group()
    assert g.state is S.STABLE and g.generation_id == 2 and g.leader_id == ids[0]
    assert g.protocol_type == "consumer" and g.protocol_name == "range"
    assert list(g.members) == ids
    assert [m.assignment for m in g.all_members()] == [m.assignment for m in before.all_members()]
    assert g.subscribed_topics == {"t"}
    assert h2.committed("g", "t", 0) == (42, "checkpoint") and h2.committed("solo", "t", 3) == (9, "")
    # Members carry on with the same generation...
    assert h2.heartbeat("g", ids[0], 2) == E.NONE
    assert h2.sync("g", ids[1], 2).value["assignment"] == b"a1"
    # ...and sessions run again after the load: a silent member expires.
    for _ in range(3):
        h2.timer.advance(4000)
        h2.heartbeat("g", ids[0], 2)
    assert not h2.group().has_member(ids[1])


def test_restart_after_everyone_left_keeps_an_empty_group_with_its_generation():
    h = Harness()
    ids = h.stable_group(1)
    h.commit("g", {("t", 0): 3}, member_id=ids[0], generation=1)
    h.leave("g", ids[0])
    h2 = h.restart()
    assert h2.state() is S.EMPTY and h2.group().generation_id == 2 and h2.committed("g", "t", 0) == (3, "")


def test_coordinator_routes_and_reports_loading():
    coord, timer = coordinator(num_partitions=50)
    shard, error = coord.check("my-group")
    assert shard is None and error == E.COORDINATOR_NOT_AVAILABLE
    coord.active = True
    assert coord.check("my-group")[1] == E.COORDINATOR_LOAD_IN_PROGRESS
    coord.load()
    shard, error = coord.check("my-group")
    assert error == E.NONE and shard.partition == 12


def test_cleanup_removes_empty_groups_without_offsets_but_spares_pending_joins():
    h = Harness(offsets_retention_check_interval_ms=MINUTE, max_session_timeout_ms=10 * MINUTE)
    h.join("lonely", "", protocol_type="")  # rejected join: leaves an Empty group behind
    pending = h.join("pending", "", session=2 * MINUTE).value["member_id"]
    h.timer.advance(MINUTE - 1)
    assert "lonely" in h.shard.classic.groups
    h.timer.advance(1)
    assert "lonely" not in h.shard.classic.groups
    assert records_in_log(h)[-1] == (GroupMetadataKey("lonely"), True)
    box = h.join("pending", pending, session=2 * MINUTE)
    h.timer.advance(0)
    assert box.value["error_code"] == E.NONE


def txn_commit(h, group, offsets, producer_id, *, member_id="", generation=-1, epoch=0):
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": "txn"})
    return h.shard.txn_commit_offsets({
        "transactional_id": "tx", "group_id": group, "producer_id": producer_id, "producer_epoch": epoch,
        "generation_id": generation, "member_id": member_id, "group_instance_id": None,
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}, 3)


def fetch_stable(h, group, topic, partition):
    r = h.shard.fetch_offsets(group, [{"name": topic, "partition_indexes": [partition]}], require_stable=True)
    p = r["topics"][0]["partitions"][0]
    return p["error_code"], p["committed_offset"]


def test_transactional_offsets_are_pending_until_commit_marker():
    h = Harness()
    h.commit("g", {("t", 0): 3})
    r = txn_commit(h, "g", {("t", 0): 10, ("t", 1): 11}, producer_id=77)
    assert [p["error_code"] for p in r["topics"][0]["partitions"]] == [E.NONE, E.NONE]
    assert h.committed("g", "t", 0) == (3, "")  # not visible yet
    assert fetch_stable(h, "g", "t", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert fetch_stable(h, "g", "t", 5) == (E.NONE, -1)
    header = read_header(h.log.batches[-1])
    assert header.is_transactional and header.producer_id == 77
    h.shard.complete_transaction(77, 0, commit=True)
    assert read_header(h.log.batches[-1]).is_control
    assert h.committed("g", "t", 0) == (10, "txn") and h.committed("g", "t", 1) == (11, "txn")
    assert fetch_stable(h, "g", "t", 0) == (E.NONE, 10)


def test_aborted_transactional_offsets_vanish_and_state_survives_reload():
    h = Harness()
    txn_commit(h, "g", {("t", 0): 10}, producer_id=5)
    h.shard.complete_transaction(5, 0, commit=False)
    assert h.committed("g", "t", 0) == (-1, "")
    txn_commit(h, "g", {("t", 0): 20}, producer_id=6)  # still open at "restart"
    txn_commit(h, "g", {("t", 1): 30}, producer_id=7)
    h.shard.complete_transaction(7, 0, commit=True)
    h2 = h.restart()
    assert h2.committed("g", "t", 0) == (-1, "") and h2.committed("g", "t", 1) == (30, "txn")
    assert h2.shard.has_pending_transaction(6) and not h2.shard.has_pending_transaction(5)
    h2.shard.complete_transaction(6, 0, commit=True)
    assert h2.committed("g", "t", 0) == (20, "txn")


def test_plain_commit_after_transactional_one_wins():
    h = Harness()
    txn_commit(h, "g", {("t", 0): 10}, producer_id=9)
    h.commit("g", {("t", 0): 15})
    h.shard.complete_transaction(9, 0, commit=True)
    assert h.committed("g", "t", 0) == (15, "")


def test_transactional_commit_member_checks():
    h = Harness()
    ids = h.stable_group(1)
    bad = txn_commit(h, "g", {("t", 0): 1}, producer_id=1, member_id=ids[0], generation=7)
    assert bad["topics"][0]["partitions"][0]["error_code"] == E.ILLEGAL_GENERATION
    ok = txn_commit(h, "g", {("t", 0): 1}, producer_id=1, member_id=ids[0], generation=1)
    assert ok["topics"][0]["partitions"][0]["error_code"] == E.NONE
    # Without member information (TxnOffsetCommit v0-2) the commit is accepted in any state.
    assert txn_commit(h, "g", {("t", 1): 1}, producer_id=2)["topics"][0]["partitions"][0]["error_code"] == E.NONE
    assert txn_commit(h, "x", {("t", 0): 1}, producer_id=3, generation=4)["topics"][0]["partitions"][0][
        "error_code"] == E.ILLEGAL_GENERATION


def test_open_transaction_keeps_offsets_and_group_from_expiring():
    h = Harness(offsets_retention_ms=10 * MINUTE, offsets_retention_check_interval_ms=MINUTE)
    h.commit("s", {("t", 0): 1})
    txn_commit(h, "s", {("t", 0): 2}, producer_id=4)
    h.timer.advance(30 * MINUTE)
    assert h.committed("s", "t", 0) == (1, "") and "s" in h.shard.classic.groups
    h.shard.complete_transaction(4, 0, commit=False)
    h.timer.advance(MINUTE)
    assert h.committed("s", "t", 0) == (-1, "") and "s" not in h.shard.classic.groups


def test_coordinator_completes_transactions_in_every_shard_that_holds_them():
    coord, timer = coordinator(num_partitions=5)
    coord.load()
    groups = ["a", "b", "c", "d", "e", "f"]
    for g in groups:
        coord.shard_for(g).txn_commit_offsets({
            "transactional_id": "tx", "group_id": g, "producer_id": 42, "producer_epoch": 1, "generation_id": -1,
            "member_id": "", "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 8, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]}, 3)
    touched = coord.complete_transaction(42, 1, commit=True)
    assert sorted(touched) == sorted({coord.partition_for(g) for g in groups})
    for g in groups:
        r = coord.shard_for(g).fetch_offsets(g, [{"name": "t", "partition_indexes": [0]}], True)
        assert r["topics"][0]["partitions"][0]["committed_offset"] == 8


def test_an_undecodable_batch_is_skipped_on_load_and_the_rest_loads():
    """A flipped bit in one stored batch must not keep the shard's other groups unavailable."""
    from minikafka.protocol.records import set_crc

    h = Harness()
    h.commit("a", {("t", 0): 5})
    h.commit("b", {("t", 0): 7})
    broken = bytearray(h.log.batches[0])
    broken[70:] = b"\xff" * (len(broken) - 70)  # the records no longer parse (CRC fixed up)
    set_crc(broken)
    h.log.batches[0] = broken
    h2 = h.restart()
    assert h2.shard.loaded
    assert h2.committed("a", "t", 0) == (-1, "")  # lost with its batch, and logged
    assert h2.committed("b", "t", 0) == (7, "")
