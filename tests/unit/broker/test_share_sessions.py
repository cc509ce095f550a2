"""Share sessions (broker/share/fetch_sessions.py): epochs, replacement, the session limit."""

import uuid

import pytest

from minikafka.broker.share.fetch_sessions import (FINAL_EPOCH, INT_MAX, SHARE_SESSION_LIMIT_REACHED, SessionError,
                                                   ShareSessionCache, next_epoch)
from minikafka.protocol.errors import ErrorCode

T = uuid.UUID(int=1)


def test_epochs_advance_and_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(INT_MAX) == 1


def test_open_check_advance_and_close():
    cache = ShareSessionCache(2)
    s = cache.open("g", "m", [(T, 0)])
    assert s.epoch == 1 and list(s.partitions) == [(T, 0)]
    assert cache.check("g", "m", 1) is s
    with pytest.raises(SessionError) as err:
        cache.check("g", "m", 2)
    assert err.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    cache.advance(s, added=[(T, 1)], forgotten=[(T, 0)])
    assert s.epoch == 2 and list(s.partitions) == [(T, 1)]
    assert cache.check("g", "m", FINAL_EPOCH) is s  # closing takes any epoch
    assert cache.close("g", "m") is s
    with pytest.raises(SessionError) as err:
        cache.check("g", "m", 2)
    assert err.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_reopening_replaces_and_the_limit_refuses_new_sessions():
    cache = ShareSessionCache(2)
    first = cache.open("g", "a", [])
    cache.open("g", "b", [], connection="conn")
    again = cache.open("g", "a", [(T, 0)])  # the member's own session is replaced, not refused
    assert again is not first and len(cache) == 2
    with pytest.raises(SessionError) as err:
        cache.open("g", "c", [])
    assert err.value.code == SHARE_SESSION_LIMIT_REACHED == 133
    assert [s.member_id for s in cache.of_connection("conn")] == ["b"]
    assert sorted(s.member_id for s in cache.of_group("g")) == ["a", "b"]


def test_partitions_rotate_round_robin_by_session_epoch():
    from minikafka.broker.share.fetch import rotate

    parts = ["p0", "p1", "p2"]
    assert rotate(parts, 0) == parts and rotate(parts, -1) == parts  # opening and closing fetches
    assert rotate(parts, 1) == ["p1", "p2", "p0"]
    assert rotate(parts, 2) == ["p2", "p0", "p1"]
    assert rotate(parts, 3) == parts
    assert rotate(["only"], 7) == ["only"] and rotate([], 5) == []
