"""Share-partition state machine (broker/share/partition.py) on an injected clock: every transition
of KIP-932 as Kafka 4.2's SharePartition makes it, and restarts over the same MemoryPersister."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from minikafka.broker.clock import MockTimer
from minikafka.broker.share.partition import (
    ACCEPT, GAP, RECORD_LIMIT, REJECT, RELEASE, RENEW, LogBatch, SharePartition, ShareSettings,
    aborted_batches, parse_duration_ms,
)
from minikafka.broker.share.persister import MemoryPersister, RecordState
from minikafka.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)


class FakeLog:
    def __init__(self, start=0, end=0, times=None):
        self.start, self.end, self.times = start, end, times or {}

    def earliest(self):
        return self.start

    def latest(self):
        return self.end

    def offset_for_timestamp(self, ts):
        for off in sorted(self.times):
            if self.times[off] >= ts:
                return off, self.times[off]
        return None


def make(persister=None, timer=None, log=None, **cfg):
    base = dict(record_lock_duration_ms=1000, delivery_count_limit=5, max_record_locks=2000,
                auto_offset_reset="earliest")
    base.update(cfg)
    s = ShareSettings(**base)
    sp = SharePartition("g", "t", TOPIC_ID, 0, persister=persister or MemoryPersister(),
                        timer=timer or MockTimer(), log_view=log or FakeLog(0, 100), settings=lambda: s)
    sp.maybe_load()
    return sp


def batches(*ranges):
    return [LogBatch(a, b) for a, b in ranges]


def states(sp):
    out = {}
    for b in sp.batches:
        for lo, hi, s in b.states():
            for o in range(lo, hi + 1):
                out[o] = (s.state, s.delivery_count)
    return out


def test_acquire_whole_batches_and_accept_moves_the_start_offset():
    sp = make()
    got = sp.acquire("m1", batches((0, 4), (5, 9)), max_records=500, batch_size=500, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 9, 1)]
    assert sp.next_fetch_offset() == 10 and sp.in_flight() == 10
    assert sp.acknowledge("m1", [(0, 9, [ACCEPT])]) == ErrorCode.NONE
    assert sp.start_offset == 10 and sp.batches == [] and sp.in_flight() == 0


def test_batch_size_splits_on_log_batch_boundaries():
    sp = make()
    got = sp.acquire("m1", batches((0, 4), (5, 9), (10, 14)), max_records=500, batch_size=5, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 4, 1), (5, 9, 1), (10, 14, 1)]


def test_max_records_is_soft_and_ends_on_a_batch_boundary():
    sp = make()
    got = sp.acquire("m1", batches((0, 4), (5, 9)), max_records=3, batch_size=500, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 4, 1)]
    assert sp.next_fetch_offset() == 5


def test_record_limit_mode_acquires_exactly_max_records():
    sp = make()
    got = sp.acquire("m1", batches((0, 9)), max_records=3, batch_size=500, fetch_offset=0, mode=RECORD_LIMIT)
    assert [tuple(a) for a in got] == [(0, 2, 1)]
    assert sp.next_fetch_offset() == 3
    got = sp.acquire("m2", batches((0, 9)), max_records=3, batch_size=500, fetch_offset=3, mode=RECORD_LIMIT)
    assert [tuple(a) for a in got] == [(3, 5, 1)]  # one range, as Kafka 4.2 answers


def test_acquired_records_are_not_acquired_again():
    sp = make()
    sp.acquire("m1", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    assert sp.acquire("m2", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0) == []


def test_release_redelivers_with_a_higher_delivery_count():
    sp = make()
    sp.acquire("m1", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    assert sp.acknowledge("m1", [(0, 9, [RELEASE])]) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 0
    got = sp.acquire("m2", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 9, 2)]


def test_per_offset_acknowledgement_splits_the_batch():
    sp = make()
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=0)
    code = sp.acknowledge("m1", [(0, 4, [ACCEPT, RELEASE, REJECT, GAP, ACCEPT])])
    assert code == ErrorCode.NONE
    assert sp.start_offset == 1
    s = states(sp)
    assert s[1] == (RecordState.AVAILABLE, 1)
    assert s[2][0] == s[3][0] == RecordState.ARCHIVED and s[4][0] == RecordState.ACKNOWLEDGED
    got = sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=sp.next_fetch_offset())
    assert [tuple(a) for a in got] == [(1, 1, 2)]
    assert sp.acknowledge("m1", [(1, 1, [ACCEPT])]) == ErrorCode.NONE
    assert sp.start_offset == 5 and sp.in_flight() == 0


def test_reject_archives():
    sp = make()
    sp.acquire("m1", batches((0, 2)), max_records=500, batch_size=500, fetch_offset=0)
    assert sp.acknowledge("m1", [(0, 2, [REJECT])]) == ErrorCode.NONE
    assert sp.start_offset == 3
    assert sp.acquire("m1", batches((0, 2)), max_records=500, batch_size=500, fetch_offset=0) == []


def test_lock_timeout_makes_records_available_and_notifies():
    timer = MockTimer()
    woken = []
    sp = make(timer=timer)
    sp.on_available = lambda: woken.append(1)
    sp.acquire("m1", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    timer.advance(999)
    assert states(sp)[0] == (RecordState.ACQUIRED, 1) and not woken
    timer.advance(1)
    assert states(sp)[0] == (RecordState.AVAILABLE, 1) and woken
    # The old owner's acknowledgement is refused now.
    assert sp.acknowledge("m1", [(0, 9, [ACCEPT])]) == ErrorCode.INVALID_RECORD_STATE
    got = sp.acquire("m2", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 9, 2)]


def test_delivery_limit_archives_on_timeout_and_release():
    timer = MockTimer()
    sp = make(timer=timer, delivery_count_limit=2)
    for expected in (1, 2):
        got = sp.acquire("m", batches((0, 0)), max_records=500, batch_size=500, fetch_offset=sp.next_fetch_offset())
        assert [tuple(a) for a in got] == [(0, 0, expected)]
        if expected == 1:
            timer.advance(1000)
    assert sp.acknowledge("m", [(0, 0, [RELEASE])]) == ErrorCode.NONE
    assert sp.start_offset == 1 and sp.batches == []


def test_member_leave_releases_its_records_only():
    sp = make(delivery_count_limit=2)
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=0)
    sp.acquire("m2", batches((5, 9)), max_records=500, batch_size=500, fetch_offset=5)
    assert sp.release_member("m1") == ErrorCode.NONE
    s = states(sp)
    assert s[0] == (RecordState.AVAILABLE, 1) and s[5] == (RecordState.ACQUIRED, 1)
    got = sp.acquire("m3", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=sp.next_fetch_offset())
    assert [tuple(a) for a in got] == [(0, 4, 2)]
    # At the delivery limit a release archives, as Kafka 4.2 does on session close.
    assert sp.release_member("m3") == ErrorCode.NONE
    assert 0 not in states(sp) and sp.start_offset == 5  # archived, and the start offset moved past
    assert sp.release_member("m2") == ErrorCode.NONE
    assert sp.next_fetch_offset() == 5 and states(sp)[5] == (RecordState.AVAILABLE, 1)


def test_acknowledge_errors_roll_back_the_whole_request():
    sp = make()
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=0)
    sp.acquire("m2", batches((5, 9)), max_records=500, batch_size=500, fetch_offset=5)
    # The second range belongs to another member: nothing of the request is applied.
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT]), (5, 9, [ACCEPT])]) == ErrorCode.INVALID_RECORD_STATE
    assert states(sp)[0] == (RecordState.ACQUIRED, 1)
    assert sp.acknowledge("m1", [(0, 12, [ACCEPT])]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("m1", [(0, 4, [9])]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("m1", [(20, 22, [ACCEPT])]) == ErrorCode.INVALID_REQUEST


def test_renew_restarts_the_lock():
    timer = MockTimer()
    sp = make(timer=timer)
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=0)
    timer.advance(800)
    assert sp.acknowledge("m1", [(0, 4, [RENEW])]) == ErrorCode.NONE
    timer.advance(800)
    assert states(sp)[0] == (RecordState.ACQUIRED, 1)
    timer.advance(200)
    assert states(sp)[0] == (RecordState.AVAILABLE, 1)


def test_max_record_locks_caps_new_acquisitions():
    sp = make(max_record_locks=10)
    got = sp.acquire("m1", batches((0, 7)), max_records=500, batch_size=500, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 7, 1)]
    # Only 2 more fit; the whole next batch (8-11) is taken as batches are acquired whole.
    got = sp.acquire("m1", batches((8, 11)), max_records=500, batch_size=500, fetch_offset=8)
    assert [tuple(a) for a in got] == [(8, 11, 1)]
    assert not sp.can_acquire()
    assert sp.acquire("m1", batches((12, 15)), max_records=500, batch_size=500, fetch_offset=12) == []
    assert sp.acknowledge("m1", [(0, 7, [ACCEPT])]) == ErrorCode.NONE
    assert sp.can_acquire()


def test_restart_redelivers_exactly_what_was_not_acknowledged():
    persister, timer = MemoryPersister(), MockTimer()
    sp = make(persister, timer)
    sp.acquire("m1", batches((0, 4), (5, 9), (10, 14)), max_records=500, batch_size=5, fetch_offset=0)
    assert sp.acknowledge("m1", [(0, 4, [ACCEPT]), (5, 9, [ACCEPT, ACCEPT, RELEASE, ACCEPT, ACCEPT])]) == ErrorCode.NONE
    timer.advance(1000)  # 10-14 time out: AVAILABLE with one delivery, 7 was released
    sp.acquire("m2", batches((5, 9), (10, 14)), max_records=500, batch_size=500, fetch_offset=sp.next_fetch_offset())
    sp.close()
    again = make(persister, MockTimer())
    assert again.start_offset == 7
    got = again.acquire("m3", batches((5, 9), (10, 14)), max_records=500, batch_size=500,
                        fetch_offset=again.next_fetch_offset())
    # 7 and 10-14 were delivered once before the second (lost) acquisition: count 2 again.
    assert [tuple(a) for a in got] == [(7, 7, 2), (10, 14, 2)]
    assert again.acknowledge("m3", [(7, 7, [ACCEPT]), (10, 14, [ACCEPT])]) == ErrorCode.NONE
    assert again.start_offset == 15


def test_restart_before_anything_was_written_redelivers_from_the_start():
    persister = MemoryPersister()
    sp = make(persister)
    sp.acquire("m1", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    again = make(persister)
    assert again.next_fetch_offset() == 0
    got = again.acquire("m1", batches((0, 9)), max_records=500, batch_size=500, fetch_offset=0)
    assert [tuple(a) for a in got] == [(0, 9, 1)]


def test_auto_offset_reset_latest_earliest_and_by_duration():
    assert make(log=FakeLog(3, 50), auto_offset_reset="latest").start_offset == 50
    assert make(log=FakeLog(3, 50), auto_offset_reset="earliest").start_offset == 3
    timer = MockTimer()
    now = timer.now_ms()
    log = FakeLog(0, 50, {10: now - 7200_000, 20: now - 1800_000, 30: now})
    assert make(timer=timer, log=log, auto_offset_reset="by_duration:PT1H").start_offset == 20
    assert parse_duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 3600 + 3 * 60 + 4) * 1000 + 500
    with pytest.raises(ValueError):
        parse_duration_ms("PT")


def test_read_committed_archives_aborted_batches():
    sp = make(isolation_level="read_committed")
    read = [LogBatch(0, 1, 5, True), LogBatch(2, 3, 6, True), LogBatch(4, 4, 5, True, True, True),
            LogBatch(5, 5, 6, True, True, False), LogBatch(6, 7)]
    assert [b.base_offset for b in aborted_batches(read, [(5, 0)])] == [0]
    got = sp.acquire("m", read, max_records=500, batch_size=500, fetch_offset=0, aborted=[(5, 0)])
    assert [tuple(a) for a in got] == [(2, 7, 1)]
    assert states(sp)[0][0] == RecordState.ARCHIVED
    assert sp.start_offset == 2


def test_throttling_isolates_records_near_the_delivery_limit():
    timer = MockTimer()
    sp = make(timer=timer, delivery_count_limit=4)
    for _ in range(2):
        sp.acquire("m", batches((0, 7)), max_records=500, batch_size=500, fetch_offset=sp.next_fetch_offset())
        timer.advance(1000)
    # Delivered twice = the throttle limit (ceil(4/2)): half the batch goes out at a time.
    got = sp.acquire("m", batches((0, 7)), max_records=500, batch_size=500, fetch_offset=0)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(0, 3, 3)]
    assert sp.next_fetch_offset() == 4


def test_expire_lock_from_the_control_api():
    timer = MockTimer()
    sp = make(timer=timer)
    sp.acquire("m", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=0)
    assert sp.expire_lock(2)
    assert states(sp)[2] == (RecordState.AVAILABLE, 1)
    assert not sp.expire_lock(2)


ACK_TYPES = st.sampled_from([ACCEPT, RELEASE, REJECT, GAP])


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 19), st.integers(0, 19), st.lists(ACK_TYPES, min_size=1, max_size=20),
                          st.booleans()), max_size=25))
def test_any_sequence_of_acks_keeps_the_invariants(ops):
    persister, timer = MemoryPersister(), MockTimer()
    sp = make(persister, timer, delivery_count_limit=3)
    members = ["a", "b", "c", "d"]
    done = set()
    for who, x, y, types, expire in ops:
        member = members[who]
        fetch = sp.next_fetch_offset()
        read = [b for b in batches((0, 4), (5, 9), (10, 14), (15, 19)) if b.last_offset >= fetch]
        sp.acquire(member, read, max_records=7, batch_size=5, fetch_offset=fetch)
        lo, hi = min(x, y), max(x, y)
        types = types[: hi - lo + 1]
        if len(types) not in (1, hi - lo + 1):
            types = types[:1]
        before = states(sp)
        code = sp.acknowledge(member, [(lo, hi, types)])
        if code != ErrorCode.NONE:
            assert states(sp) == before  # all or nothing
        if expire:
            timer.advance(1000)
        s = states(sp)
        for o, (state, count) in s.items():
            assert 0 <= count <= 3 or state == RecordState.ARCHIVED
            if o < sp.start_offset:
                assert state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        # A record that reached a terminal state never comes back.
        for o in done:
            assert o < sp.start_offset or s.get(o, (RecordState.ARCHIVED,))[0] in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        done |= {o for o, (state, _) in s.items() if state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)}
        # The durable state reloads to the same non-acquired view.
        again = make(persister, MockTimer())
        assert again.start_offset == sp.start_offset
        for o, (state, count) in states(again).items():
            mine = s.get(o)
            if mine is None:
                continue
            if mine[0] == RecordState.ACQUIRED:
                assert (state, count) == (RecordState.AVAILABLE, mine[1] - 1)
            else:
                assert (state, count) == mine


def test_an_accept_that_moves_the_start_offset_wakes_waiting_fetches():
    """Room under share.partition.max.record.locks is news for a fetch waiting at the cap."""
    woken = []
    sp = make(max_record_locks=5)
    sp.on_available = lambda: woken.append(sp.start_offset)
    sp.acquire("m1", batches((0, 4)), max_records=500, batch_size=500, fetch_offset=0)
    assert not sp.can_acquire()
    assert sp.acknowledge("m1", [(1, 1, [ACCEPT])]) == ErrorCode.NONE
    assert woken == []  # the head is still in flight: no room yet
    assert sp.acknowledge("m1", [(0, 0, [ACCEPT])]) == ErrorCode.NONE
    assert woken == [2] and sp.can_acquire()
