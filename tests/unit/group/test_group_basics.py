"""State table, partitioner, timers and record formats."""

import struct

import pytest

from minikafka.broker.group.classic import ClassicGroup
from minikafka.broker.group.partitioner import kafka_abs, partition_for
from minikafka.broker.share.records import ShareGroupKey
from minikafka.broker.streams.records import StreamsGroupKey
from minikafka.broker.group.records import (
    ConsumerGroupKey, GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey, OffsetCommitValue,
    decode_group_metadata_value, decode_key, decode_offset_commit_value, encode_key, encode_value)
from minikafka.broker.group.state import VALID_PREVIOUS, GroupState, IllegalStateTransition, parse_state
from minikafka.broker.clock import MockTimer
from minikafka.protocol.errors import CorruptRecordError

S = GroupState


def test_state_names_are_kafkas():
    assert [str(s) for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert parse_state("completingrebalance") is S.COMPLETING_REBALANCE
    assert parse_state("nope") is None


@pytest.mark.parametrize("source,target,allowed", [
    (S.EMPTY, S.PREPARING_REBALANCE, True),
    (S.STABLE, S.PREPARING_REBALANCE, True),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, True),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, True),
    (S.PREPARING_REBALANCE, S.EMPTY, True),
    (S.COMPLETING_REBALANCE, S.STABLE, True),
    (S.STABLE, S.DEAD, True),
    (S.EMPTY, S.STABLE, False),
    (S.EMPTY, S.COMPLETING_REBALANCE, False),
    (S.STABLE, S.COMPLETING_REBALANCE, False),
    (S.PREPARING_REBALANCE, S.STABLE, False),
    (S.STABLE, S.EMPTY, False),
    (S.DEAD, S.EMPTY, False),
])
def test_transition_table_is_enforced(source, target, allowed):
    assert (source in VALID_PREVIOUS[target]) is allowed
    group = ClassicGroup("g", lambda: 5, state=source)
    if allowed:
        group.transition_to(target)
        assert group.state is target and group.previous_state is source
        assert group.current_state_timestamp == 5
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target)
        assert group.state is source


# Expected values computed with Java 17 (String.hashCode, Utils.abs semantics).
@pytest.mark.parametrize("group_id,partition", [
    ("", 0),                          # hash 0
    ("a", 47),                        # hash 97
    ("my-group", 12),                 # hash -1906497762: Math.abs, not the 0x7fffffff mask (would be 36)
    ("console-consumer-12345", 6),    # hash 158455506
    ("\U0001F600", 49),               # U+1F600 is two UTF-16 code units: hash 1772899
    ("g\u00e9", 26),                  # hash 3426
    ("polygenelubricants", 0),        # hash Integer.MIN_VALUE: Utils.abs gives 0
])
def test_partition_matches_kafka(group_id, partition):
    assert partition_for(group_id, 50) == partition


def test_kafka_abs():
    assert kafka_abs(-2147483648) == 0
    assert kafka_abs(-1) == 1
    assert kafka_abs(7) == 7


def test_mock_timer_fires_in_deadline_order_and_replaces_by_key():
    timer = MockTimer()
    start = timer.clock.now_ms()
    fired = []
    timer.schedule("a", 30, lambda: fired.append(("a", timer.clock.now_ms() - start)))
    timer.schedule("b", 10, lambda: fired.append(("b", timer.clock.now_ms() - start)))
    timer.schedule("c", 20, lambda: fired.append(("c", timer.clock.now_ms() - start)))
    timer.schedule("b", 25, lambda: fired.append(("b2", timer.clock.now_ms() - start)))  # replaces b
    timer.cancel("c")
    assert timer.advance(24) == 0
    assert timer.advance(1) == 1
    assert fired == [("b2", 25)]
    # A callback may schedule another timeout that is already due within the same advance.
    timer.schedule("d", 1, lambda: timer.schedule("e", 1, lambda: fired.append(("e", timer.clock.now_ms() - start))))
    timer.advance(10)
    assert fired == [("b2", 25), ("e", 27), ("a", 30)]  # deadline order: e (27) before a (30)
    assert timer.clock.now_ms() - start == 35


def test_offset_commit_record_bytes():
    key = encode_key(OffsetCommitKey("g", "t", 3))
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    value = encode_value(OffsetCommitValue(offset=42, leader_epoch=7, metadata="m", commit_timestamp=1000))
    assert value == struct.pack(">hqih1sq", 3, 42, 7, 1, b"m", 1000)
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    assert decode_offset_commit_value(value) == OffsetCommitValue(42, 7, "m", 1000, -1)


def test_offset_commit_value_with_expiry_is_version_1():
    value = encode_value(OffsetCommitValue(offset=1, metadata="", commit_timestamp=10, expire_timestamp=99))
    assert value == struct.pack(">hqhqq", 1, 1, 0, 10, 99)
    decoded = decode_offset_commit_value(value)
    assert decoded.expire_timestamp == 99 and decoded.leader_epoch == -1


def test_group_metadata_round_trip_and_layout():
    value = GroupMetadataValue(protocol_type="consumer", generation=5, protocol="range", leader="m1",
                               current_state_timestamp=123, members=[MemberMetadata(
                                   member_id="m1", client_id="c", client_host="/h", rebalance_timeout=300,
                                   session_timeout=100, subscription=b"S", assignment=b"", group_instance_id="i")])
    raw = encode_value(value)
    expected = (struct.pack(">h", 3) + struct.pack(">h8s", 8, b"consumer") + struct.pack(">i", 5)
                + struct.pack(">h5s", 5, b"range") + struct.pack(">h2s", 2, b"m1") + struct.pack(">q", 123)
                + struct.pack(">i", 1) + struct.pack(">h2s", 2, b"m1") + struct.pack(">h1s", 1, b"i")
                + struct.pack(">h1s", 1, b"c") + struct.pack(">h2s", 2, b"/h") + struct.pack(">ii", 300, 100)
                + struct.pack(">i1s", 1, b"S") + struct.pack(">i", 0))
    assert raw == expected
    assert decode_group_metadata_value(raw) == value
    assert encode_key(GroupMetadataKey("g")) == struct.pack(">hh1s", 2, 1, b"g")
    assert decode_key(encode_key(GroupMetadataKey("g"))) == GroupMetadataKey("g")


def test_empty_group_metadata_has_null_protocol_and_leader():
    raw = encode_value(GroupMetadataValue("consumer", 3, None, None, -1, []))
    assert decode_group_metadata_value(raw) == GroupMetadataValue("consumer", 3, None, None, -1, [])


def test_other_record_types_are_skipped_and_garbage_rejected():
    # KIP-848 consumer group records (key versions 3-8), share groups' (10-15) and streams groups'
    # (KIP-1071, broker/streams) are ours now.
    assert decode_key(struct.pack(">hh1s", 3, 1, b"g")) == ConsumerGroupKey("ConsumerGroupMetadata", "g")
    assert decode_key(struct.pack(">hh1s", 11, 1, b"g")) == ShareGroupKey("ShareGroupMetadata", "g")
    assert decode_key(struct.pack(">hh1s", 17, 1, b"g")) == StreamsGroupKey("StreamsGroupMetadata", "g")
    with pytest.raises(CorruptRecordError):
        decode_key(struct.pack(">hh1s", 10, 1, b"g"))  # a share member key without its member id
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(struct.pack(">hq", 3, 1))  # truncated
    assert encode_value(None) is None


async def test_a_coordinator_timer_on_a_stand_in_broker_replaces_cancels_and_reports_errors(caplog):
    # A broker object without the timer service (tests' stand-ins) gets a service of its own on its
    # loop: the same Timer the broker's coordinators get (broker/clock.py's one notion of time).
    import asyncio
    import logging
    import types

    from minikafka.broker.clock import timer_scope

    timer = timer_scope(types.SimpleNamespace(loop=asyncio.get_running_loop()), "group")
    fired = []
    timer.schedule("a", 50, lambda: fired.append("a-old"))
    timer.schedule("a", 1, lambda: fired.append("a"))  # replaces the first
    timer.schedule("b", 1, lambda: fired.append("b"))
    timer.cancel("b")
    timer.schedule("c", 0, lambda: 1 / 0)
    assert timer.is_scheduled("a") and not timer.is_scheduled("b")
    with caplog.at_level(logging.ERROR, logger="minikafka.clock"):
        await asyncio.sleep(0.08)
    assert fired == ["a"] and not timer.is_scheduled("a")
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [ZeroDivisionError]
    timer.schedule("d", 1000, lambda: fired.append("d"))
    timer.cancel_all()
    assert not timer.is_scheduled("d")
