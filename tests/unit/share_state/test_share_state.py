"""The share coordinator over an in-memory ``__share_group_state``: records, replay, snapshot cadence,
epochs, pruning, and that a new coordinator over the same log (a restart) has the same states."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from minikafka.broker.clock import FakeClock
from minikafka.broker.share.persister import RecordState, ShareState, StateBatch
from minikafka.broker.share.state.batches import combine
from minikafka.broker.share.state.coordinator import (
    ShareCoordinator, ShareStateConfig, coordinator_key, parse_coordinator_key)
from minikafka.broker.share.state.persister import CoordinatorPersister, delivery_complete_count
from minikafka.broker.share.state.records import (
    SNAPSHOT, UPDATE, Batch, ShareValue, StateKey, decode_key, decode_value, encode_key, encode_value)
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.primitives import java_string_hash

TOPIC = uuid.UUID("6b1750ce-03cf-470d-9a8e-f1d9c62b1076")
OTHER = uuid.UUID(int=77)
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


class MemoryStateLog:
    """One partition: (offset, key bytes, value bytes) entries; the bytes go through the real codec."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes, bytes | None]] = []
        self.next_offset = 0
        self.appends = 0

    def append(self, records, now_ms: int) -> int:
        base = self.next_offset
        for i, (kind, key, value) in enumerate(records):
            self.entries.append((base + i, encode_key(kind, key), encode_value(kind, value)))
        self.next_offset += len(records)
        self.appends += 1
        return base

    def iter_records(self):
        return iter(list(self.entries))

    def delete_records(self, offset: int) -> None:
        self.entries = [e for e in self.entries if e[0] >= offset]

    def kinds(self) -> list[int]:
        return [int.from_bytes(k[:2], "big") for _, k, _ in self.entries]


def make(logs=None, *, per_snapshot=500, partitions=3, clock=None, topics=None):
    logs = logs if logs is not None else [MemoryStateLog() for _ in range(partitions)]
    topics = {TOPIC: 4} if topics is None else topics
    coordinator = ShareCoordinator(len(logs), lambda p: logs[p], clock or FakeClock(),
                                   ShareStateConfig(len(logs), per_snapshot), topics.get)
    coordinator.load()
    return coordinator, logs


def key(partition=0, group="g"):
    return StateKey(group, TOPIC, partition)


def states(coordinator):
    return {k: (v.state_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count, v.batches)
            for shard in coordinator.shards for k, v in shard.states.items()}


# == records ======================================================================================

def test_record_formats_are_kafkas():
    k = StateKey("g", TOPIC, 3)
    raw = encode_key(SNAPSHOT, k)
    # int16 record type 0, then group (int16 length + bytes), 16-byte uuid, int32 partition
    assert raw[:2] == b"\x00\x00" and raw[2:4] == b"\x00\x01" and raw[4:5] == b"g"
    assert raw[5:21] == TOPIC.bytes and raw[21:] == (3).to_bytes(4, "big")
    assert decode_key(raw) == (SNAPSHOT, k)
    assert decode_key(encode_key(UPDATE, k)) == (UPDATE, k)
    value = ShareValue(1, 2, 5, [Batch(5, 9, ACKED, 1)], state_epoch=3, delivery_complete_count=5,
                       create_timestamp=10, write_timestamp=11)
    raw_value = encode_value(SNAPSHOT, value)
    assert raw_value[:2] == b"\x00\x00"  # value version 0
    # flexible v0: snapshot epoch, state epoch, leader epoch, start offset, two timestamps,
    # a compact array of one batch, then one tagged field (tag 0: delivery complete count)
    assert raw_value[2:6] == (1).to_bytes(4, "big") and raw_value[6:10] == (3).to_bytes(4, "big")
    assert raw_value[-7:] == bytes([1, 0, 4]) + (5).to_bytes(4, "big")
    assert decode_value(SNAPSHOT, raw_value) == value
    assert encode_value(SNAPSHOT, None) is None and decode_value(SNAPSHOT, None) is None
    # -1 (unknown) is the default: not written at all
    plain = encode_value(UPDATE, ShareValue(0, 0, -1, []))
    assert plain[-1] == 0 and decode_value(UPDATE, plain).delivery_complete_count == -1
    assert decode_key((7).to_bytes(2, "big") + b"\x00\x01g") is None  # another record type: skipped


def test_coordinator_key_and_partition_are_kafkas():
    assert coordinator_key("g1", TOPIC, 0) == "g1:axdQzgPPRw2ajvHZxisQdg:0"
    assert parse_coordinator_key("a:b:axdQzgPPRw2ajvHZxisQdg:3") == ("a:b", TOPIC, 3)
    for bad in ("", "no-colons", "g:notauuid:0", ":axdQzgPPRw2ajvHZxisQdg:1", " :axdQzgPPRw2ajvHZxisQdg:1",
                "g:axdQzgPPRw2ajvHZxisQdg:x", "g:axdQzgPPRw2ajvHZxisQdg:99999999999"):
        assert parse_coordinator_key(bad) is None, bad
    coordinator, _ = make(partitions=50)
    text = coordinator_key("g1", TOPIC, 0)
    h = java_string_hash(text)
    assert coordinator.partition_for("g1", TOPIC, 0) == (0 if h == -2**31 else abs(h)) % 50


# == batches ======================================================================================

def per_offset(batches):
    return {o: (b.delivery_count, b.delivery_state) for b in batches
            for o in range(b.first_offset, b.last_offset + 1)}


batch_st = st.builds(lambda first, length, state, count: Batch(first, first + length, state, count),
                     st.integers(0, 40), st.integers(0, 8), st.sampled_from([AVAILABLE, ACKED, ARCHIVED]),
                     st.integers(0, 4))


@settings(max_examples=300, deadline=None)
@given(st.lists(batch_st, max_size=6), st.lists(batch_st, max_size=6), st.integers(-1, 30))
def test_combine_is_the_best_state_per_offset(so_far, new, start):
    out = combine(so_far, new, start)
    expected: dict[int, tuple[int, int]] = {}
    for b in so_far + new:
        for o in range(b.first_offset, b.last_offset + 1):
            if start == -1 or o >= start:
                expected[o] = max(expected.get(o, (-1, -1)), (b.delivery_count, b.delivery_state))
    assert per_offset(out) == expected
    for a, b in zip(out, out[1:]):
        assert a.last_offset < b.first_offset  # sorted, no overlap
        if a.last_offset + 1 == b.first_offset:
            assert (a.delivery_count, a.delivery_state) != (b.delivery_count, b.delivery_state)


@settings(max_examples=300, deadline=None)
@given(st.lists(batch_st, max_size=8), st.lists(batch_st, max_size=8), st.integers(-1, 30))
def test_combine_of_sorted_lists_takes_the_linear_path_with_the_same_answer(so_far, new, start):
    from minikafka.broker.share.state import batches as mod

    a, b = combine([], so_far, -1), combine([], new, -1)  # sorted, disjoint
    assert mod._ordered(a) and mod._ordered(b)
    expected = per_offset(mod._sweep(mod._pruned(a + b, start)))
    assert per_offset(combine(a, b, start)) == expected


def test_combine_examples():
    assert combine([Batch(0, 9, AVAILABLE, 1)], [Batch(3, 4, ACKED, 1)], -1) == [
        Batch(0, 2, AVAILABLE, 1), Batch(3, 4, ACKED, 1), Batch(5, 9, AVAILABLE, 1)]
    assert combine([Batch(0, 9, AVAILABLE, 1)], [Batch(3, 4, ACKED, 1)], 4) == [
        Batch(4, 4, ACKED, 1), Batch(5, 9, AVAILABLE, 1)]
    assert combine([Batch(0, 4, AVAILABLE, 2)], [Batch(0, 4, ACKED, 1)], 0) == [Batch(0, 4, AVAILABLE, 2)]
    assert combine([Batch(0, 4, ACKED, 1)], [Batch(5, 9, ACKED, 1)], -1) == [Batch(0, 9, ACKED, 1)]


# == operations and epochs ========================================================================

def test_initialize_write_read_summary_delete():
    c, logs = make()
    k = key()
    assert c.read(k, 0).error is ErrorCode.INVALID_REQUEST
    assert c.write(k, 0, 0, 0, -1, []).error is ErrorCode.INVALID_REQUEST
    s = c.read_summary(k)
    assert s.error is ErrorCode.NONE and (s.state.start_offset, s.state.delivery_complete_count) == (-1, -1)
    assert c.initialize(k, 1, 5).error is ErrorCode.NONE
    s = c.read_summary(k).state
    assert (s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count) == (1, 0, 5, 0)
    assert c.write(k, 1, 0, 5, 2, [Batch(5, 6, ACKED, 1), Batch(7, 9, AVAILABLE, 1)]).error is ErrorCode.NONE
    r = c.read(k, 0)
    assert r.error is ErrorCode.NONE and r.state.batches == [Batch(5, 6, ACKED, 1), Batch(7, 9, AVAILABLE, 1)]
    assert c.write(k, 1, 0, 7, 0, [Batch(7, 7, ACKED, 2)]).error is ErrorCode.NONE
    assert c.read(k, 0).state.batches == [Batch(7, 7, ACKED, 2), Batch(8, 9, AVAILABLE, 1)]
    assert c.read(k, 0).state.start_offset == 7
    assert c.delete(k).error is ErrorCode.NONE
    assert c.read(k, 0).error is ErrorCode.INVALID_REQUEST
    assert c.delete(k).error is ErrorCode.NONE  # nothing to delete: no record
    shard = c.shard_for(k)
    assert logs[shard.partition].kinds() == [SNAPSHOT, UPDATE, UPDATE, SNAPSHOT]
    assert logs[shard.partition].entries[-1][2] is None  # the tombstone


def test_unknown_topics_partitions_and_negative_partitions():
    c, _ = make()
    for op in (lambda k: c.initialize(k, 0, 0), lambda k: c.read_summary(k), lambda k: c.delete(k)):
        assert op(StateKey("g", OTHER, 0)).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert op(key(4)).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        r = op(key(-1))
        assert r.error is ErrorCode.INVALID_REQUEST and r.message == "The partition id cannot be a negative number."


def test_state_epoch_fencing():
    c, _ = make()
    k = key()
    assert c.initialize(k, 3, 0).error is ErrorCode.NONE
    assert c.initialize(k, 2, 0).error is ErrorCode.FENCED_STATE_EPOCH
    assert c.write(k, 2, 0, 0, -1, []).error is ErrorCode.FENCED_STATE_EPOCH
    assert c.write(k, -1, 0, 0, -1, []).error is ErrorCode.NONE  # -1: not checked
    assert c.initialize(k, 4, 10).error is ErrorCode.NONE  # newer: a reset
    s = c.read(k, 0).state
    assert (s.state_epoch, s.start_offset, s.batches) == (4, 10, [])
    assert c.write(k, 3, 0, 0, -1, []).error is ErrorCode.FENCED_STATE_EPOCH


def test_leader_epoch_fencing_and_recording():
    c, logs = make()
    k = key()
    c.initialize(k, 0, 0)
    assert c.read(k, -1).error is ErrorCode.FENCED_LEADER_EPOCH  # stored 0 > -1, as Kafka
    before = logs[c.shard_for(k).partition].next_offset
    assert c.read(k, 0).error is ErrorCode.NONE
    assert logs[c.shard_for(k).partition].next_offset == before  # same epoch: nothing written
    assert c.read(k, 3).error is ErrorCode.NONE  # newer: recorded (an update record)
    assert logs[c.shard_for(k).partition].next_offset == before + 1
    assert c.read_summary(k).state.leader_epoch == 3
    assert c.read(k, 2).error is ErrorCode.FENCED_LEADER_EPOCH
    assert c.write(k, 0, 2, 0, -1, []).error is ErrorCode.FENCED_LEADER_EPOCH
    assert c.write(k, 0, -1, 0, -1, []).error is ErrorCode.NONE
    # a restart remembers the epochs
    again, _ = make(logs)
    assert again.read(k, 2).error is ErrorCode.FENCED_LEADER_EPOCH


def test_snapshot_every_n_updates():
    c, logs = make(per_snapshot=3)
    k = key()
    c.initialize(k, 0, 0)
    for i in range(8):
        assert c.write(k, 0, 0, -1, -1, [Batch(i, i, ACKED, 1)]).error is ErrorCode.NONE
    kinds = logs[c.shard_for(k).partition].kinds()
    # the initial snapshot, 3 updates, a snapshot of the whole state, 3 updates, a snapshot
    assert kinds == [SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT]
    assert c.read(k, 0).state.batches == [Batch(0, 7, ACKED, 1)]
    snapshots = [decode_value(SNAPSHOT, v) for _, kb, v in logs[c.shard_for(k).partition].entries
                 if kb[:2] == b"\x00\x00"]
    assert [s.snapshot_epoch for s in snapshots] == [0, 1, 2]
    assert snapshots[1].batches == [Batch(0, 3, ACKED, 1)]


def test_zero_updates_per_snapshot_writes_only_snapshots():
    c, logs = make(per_snapshot=0)
    k = key()
    c.initialize(k, 0, 0)
    c.write(k, 0, 0, 0, -1, [Batch(0, 1, ACKED, 1)])
    c.write(k, 0, 0, 0, -1, [Batch(2, 2, ARCHIVED, 1)])
    assert logs[c.shard_for(k).partition].kinds() == [SNAPSHOT] * 3
    assert c.read(k, 0).state.batches == [Batch(0, 1, ACKED, 1), Batch(2, 2, ARCHIVED, 1)]


def test_restart_gives_the_same_states():
    clock = FakeClock()
    c, logs = make(per_snapshot=2, clock=clock)
    for p in range(4):
        c.initialize(key(p), 1, 0)
        for i in range(5):
            c.write(key(p), 1, 0, i, -1, [Batch(i, i + 2, ACKED if i % 2 else AVAILABLE, i)])
    c.delete(key(3))
    again, _ = make(logs, per_snapshot=2, clock=clock)
    assert states(again) == states(c) and key(3) not in states(again)
    assert [s.update_counts for s in again.shards] == [s.update_counts for s in c.shards]


def test_coordinator_not_available_and_loading():
    c, logs = make()
    c.unload()
    assert c.read(key(), 0).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    c.active = True
    assert c.read(key(), 0).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_pruning_keeps_everything_a_load_needs():
    c, logs = make(per_snapshot=1, partitions=1)
    c.initialize(key(0), 0, 0)                       # 0 snapshot k0
    c.initialize(key(1), 0, 0)                       # 1 snapshot k1
    c.write(key(0), 0, 0, 0, -1, [Batch(0, 0, ACKED, 1)])  # 2 update k0
    c.write(key(0), 0, 0, 0, -1, [Batch(1, 1, ACKED, 1)])  # 3 snapshot k0
    assert c.prune_points() == [(0, 1)]  # k1's only snapshot is at 1
    c.write(key(1), 0, 0, 0, -1, [Batch(0, 0, ACKED, 1)])  # 4 update k1
    c.write(key(1), 0, 0, 0, -1, [Batch(5, 5, ACKED, 1)])  # 5 snapshot k1
    assert c.prune_points() == [(0, 3)]
    logs[0].delete_records(3)
    again, _ = make(logs, per_snapshot=1)
    assert states(again) == states(c)


def test_cold_partitions_get_a_fresh_snapshot():
    clock = FakeClock()
    c, logs = make(clock=clock, partitions=1)
    c.initialize(key(0), 0, 0)
    c.write(key(0), 0, 0, 0, -1, [Batch(0, 3, ACKED, 1)])
    assert c.snapshot_cold_partitions() == 0  # create == write timestamp: only just snapshotted
    clock._now += 300000
    assert c.snapshot_cold_partitions() == 1
    assert logs[0].kinds()[-1] == SNAPSHOT
    assert c.prune_points() == [(0, 2)]
    assert c.read(key(0), 0).state.batches == [Batch(0, 3, ACKED, 1)]


def test_deleted_topics_get_tombstones():
    topics = {TOPIC: 4, OTHER: 1}
    c, logs = make(topics=topics)
    c.initialize(key(0), 0, 0)
    c.initialize(key(1, group="h"), 0, 0)
    c.initialize(StateKey("g", OTHER, 0), 0, 0)
    assert c.forget_deleted_topics() == 0
    del topics[TOPIC]
    assert c.forget_deleted_topics() == 2
    assert list(states(c)) == [StateKey("g", OTHER, 0)]
    again, _ = make(logs, topics=topics)
    assert states(again) == states(c)


def test_rpc_bodies_answer_per_partition():
    c, _ = make()
    body = {"group_id": "g", "topics": [{"topic_id": TOPIC, "partitions": [
        {"partition": 0, "state_epoch": 0, "start_offset": 3}, {"partition": 9, "state_epoch": 0, "start_offset": 3}]}]}
    out = c.initialize_state(body)
    assert out == {"results": [{"topic_id": TOPIC, "partitions": [
        {"partition": 0, "error_code": ErrorCode.NONE, "error_message": None},
        {"partition": 9, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         "error_message": "This server does not host this topic-partition."}]}]}
    assert c.write_state({"group_id": "g", "topics": []}) == {"results": []}
    assert c.read_state({"group_id": "", "topics": body["topics"]}) == {"results": []}
    read = c.read_state({"group_id": "g", "topics": [{"topic_id": TOPIC, "partitions": [
        {"partition": 0, "leader_epoch": 0}]}]})
    assert read["results"][0]["partitions"][0]["start_offset"] == 3


# == the persister ===============================================================================

def test_persister_contract():
    c, logs = make()
    p = CoordinatorPersister(c)
    assert p.read("g", TOPIC, 0, 0).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert p.read_summary("g", TOPIC, 0).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert p.initialize("g", TOPIC, 0, 1, 10) is ErrorCode.NONE
    state = ShareState(1, 0, 10, [StateBatch(10, 12, RecordState.ACKNOWLEDGED, 1),
                                  StateBatch(13, 14, RecordState.AVAILABLE, 2),
                                  StateBatch(15, 15, RecordState.ARCHIVED, 5)])
    assert p.write("g", TOPIC, 0, state) is ErrorCode.NONE
    got = p.read("g", TOPIC, 0, 0)
    assert got.error is ErrorCode.NONE and got.state == state
    assert c.read_summary(key()).state.delivery_complete_count == 4
    assert p.write("g", TOPIC, 0, ShareState(0, 0, 10, [])) is ErrorCode.FENCED_STATE_EPOCH
    assert p.delete("g", TOPIC, 0) is ErrorCode.NONE
    assert p.read("g", TOPIC, 0, 0).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delivery_complete_count():
    assert delivery_complete_count(-1, []) == -1
    assert delivery_complete_count(5, [Batch(3, 7, ACKED, 1), Batch(8, 8, AVAILABLE, 1), Batch(9, 10, ARCHIVED, 2)]) == 5


# == sequences of writes: the log replays to what the coordinator answered ======================

op_st = st.one_of(
    st.tuples(st.just("init"), st.integers(0, 2), st.integers(0, 3), st.integers(-1, 20)),
    st.tuples(st.just("write"), st.integers(0, 2), st.integers(-1, 3), st.integers(-1, 20),
              st.lists(batch_st, max_size=4)),
    st.tuples(st.just("read"), st.integers(0, 2), st.integers(-1, 3)),
    st.tuples(st.just("delete"), st.integers(0, 2)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op_st, max_size=25), st.integers(0, 3))
def test_any_sequence_replays_to_the_same_state(ops, per_snapshot):
    c, logs = make(per_snapshot=per_snapshot, partitions=2)
    model: dict[int, tuple[int, int, list]] = {}  # partition -> (state epoch, start, batches)
    for op in ops:
        k = key(op[1])
        if op[0] == "init":
            r = c.initialize(k, op[2], op[3])
            if r.error is ErrorCode.NONE:
                model[op[1]] = (op[2], op[3], [])
        elif op[0] == "write":
            r = c.write(k, op[2], -1, op[3], -1, op[4])
            if r.error is ErrorCode.NONE:
                epoch, start, batches = model[op[1]]
                new_start = start if op[3] == -1 else op[3]
                model[op[1]] = (epoch, new_start, combine(batches, combine([], op[4], op[3]), new_start))
            else:
                assert op[1] not in model or r.error is ErrorCode.FENCED_STATE_EPOCH
        elif op[0] == "read":
            c.read(k, op[2])
        else:
            c.delete(k)
            model.pop(op[1], None)
    got = {p: (s.state_epoch, s.start_offset, s.batches) for p in range(3)
           for s in [c.shard_for(key(p)).states.get(key(p))] if s is not None}
    assert got == model
    again, _ = make(logs, per_snapshot=per_snapshot)
    assert states(again) == states(c)
    for a, b in zip(again.shards, c.shards):  # the epochs and update counts a restart remembers
        assert (a.leader_epochs, a.state_epochs, a.update_counts) == (b.leader_epochs, b.state_epochs, b.update_counts)


# Records Apache Kafka 4.2.2 wrote to __share_group_state for one share partition (read back with Fetch):
# Initialize (state epoch 1, start offset 5), Read with the new leader epoch 3, Write v1 (two batches,
# delivery complete count 2), Delete.  (key hex, value hex or None)
KAFKA_RECORDS = [
    ("00000004676f6c6444a46efca9644bb7ad839808d16f4d5300000000",
     "00000000000000000001000000000000000000000005000001a215cab1bb000001a215cab1bb0101000400000000"),
    ("00010004676f6c6444a46efca9644bb7ad839808d16f4d5300000000",
     "0000000000000000000300000000000000050101000400000000"),
    ("00010004676f6c6444a46efca9644bb7ad839808d16f4d5300000000",
     "000000000000000000030000000000000005030000000000000005000000000000000602000100000000000000000700000000000000"
     "090000010001000400000002"),
    ("00000004676f6c6444a46efca9644bb7ad839808d16f4d5300000000", None),
]


def test_records_written_by_kafka_decode_and_encode_byte_for_byte():
    decoded = []
    for key_hex, value_hex in KAFKA_RECORDS:
        raw_key = bytes.fromhex(key_hex)
        raw_value = bytes.fromhex(value_hex) if value_hex else None
        kind, k = decode_key(raw_key)
        value = decode_value(kind, raw_value)
        assert encode_key(kind, k) == raw_key and encode_value(kind, value) == raw_value
        decoded.append((kind, k, value))
    assert [kind for kind, _, _ in decoded] == [SNAPSHOT, UPDATE, UPDATE, SNAPSHOT]
    k = decoded[0][1]
    assert (k.group_id, k.partition) == ("gold", 0)
    snap = decoded[0][2]
    assert (snap.snapshot_epoch, snap.state_epoch, snap.leader_epoch, snap.start_offset,
            snap.delivery_complete_count, snap.batches) == (0, 1, 0, 5, 0, [])
    assert (decoded[1][2].leader_epoch, decoded[1][2].start_offset, decoded[1][2].batches) == (3, 5, [])
    assert decoded[2][2].batches == [Batch(5, 6, ACKED, 1), Batch(7, 9, AVAILABLE, 1)]
    assert decoded[2][2].delivery_complete_count == 2 and decoded[3][2] is None
    # replayed, they give what Kafka answered to ReadShareGroupState before the delete
    log = MemoryStateLog()
    for offset, (kind, key_, value) in enumerate(decoded[:3]):
        log.entries.append((offset, encode_key(kind, key_), encode_value(kind, value)))
    c, _ = make([log], topics={k.topic_id: 1})
    state = c.shards[0].states[k]
    assert (state.state_epoch, state.start_offset, state.batches) == (1, 5, [Batch(5, 6, ACKED, 1), Batch(7, 9, AVAILABLE, 1)])
    assert c.shards[0].leader_epochs[k] == 3
