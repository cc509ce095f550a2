"""The test kit's sans-IO parts: fault matching and error responses, the broker clock and its
timer service, seed parsing.  (Real clients drive them in tests/integration/test_control_*.py.)"""

import asyncio

import pytest

from minikafka.broker.clock import BrokerClock, TimerService
from minikafka.broker.faults import (Fault, FaultEngine, FaultError, api_key_of, error_code_of, error_response,
                                     fill_errors, request_scope)
from minikafka.broker.seed import SeedError, parse_lines
from minikafka.protocol.codec import decode_response, encode_response

PRODUCE_BODY = {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
    {"name": "orders", "partition_data": [{"index": 0, "records": b""}, {"index": 2, "records": b""}]}]}
COMMIT_BODY = {"group_id": "g1", "generation_id_or_member_epoch": 3, "member_id": "m", "topics": [
    {"name": "orders", "partitions": [{"partition_index": 1, "committed_offset": 5}]}]}


# -- faults ---------------------------------------------------------------------------------

def test_api_and_error_names_and_codes():
    assert api_key_of("OffsetCommit") == 8 == api_key_of(8) == api_key_of("offsetcommit") == api_key_of("8")
    assert error_code_of("NOT_COORDINATOR") == 16 == error_code_of(16) == error_code_of("not_coordinator")
    for bad in ("Nope", 9999, True, None, 1.5):
        with pytest.raises(FaultError):
            api_key_of(bad)
    for bad in ("NOPE", 12345, True):
        with pytest.raises(FaultError):
            error_code_of(bad)


@pytest.mark.parametrize("spec, message", [
    ({"api": "Produce", "action": "explode"}, "unknown action"),
    ({"api": "Produce"}, "needs an error"),
    ({"api": "Produce", "error": "NONE"}, "not a fault"),
    ({"api": "Produce", "action": "delay"}, "delay_ms"),
    ({"api": "Produce", "action": "delay", "delay_ms": 10**9}, "delay_ms"),
    ({"api": "Produce", "error": 6, "count": 0}, "count"),
    ({"api": "Produce", "error": 6, "probability": 1.5}, "probability"),
    ({"api": "Produce", "error": 6, "partition": 1}, "needs a topic"),
    ({"api": "Produce", "error": 6, "min_version": 5, "max_version": 3}, "min_version"),
    ({"api": "Produce", "error": 6, "bogus": 1}, "unknown fault field"),
    ({"api": "Produce", "action": "hold", "error": 6}, "takes no error"),
])
def test_bad_fault_specs_are_refused(spec, message):
    with pytest.raises(FaultError, match=message):
        Fault(1, spec)


def test_request_scope_names_topics_partitions_groups_and_txn_ids():
    scope = request_scope(0, PRODUCE_BODY)
    assert scope.partitions == {("orders", 0), ("orders", 2)}
    assert request_scope(8, COMMIT_BODY).groups == {"g1"}
    assert request_scope(10, {"key_type": 1, "coordinator_keys": ["tx"]}).transactional_ids == {"tx"}
    assert request_scope(10, {"key_type": 0, "key": "g2"}).groups == {"g2"}
    fetch = request_scope(1, {"topics": [{"topic": "t", "partitions": [{"partition": 3}]}]})
    assert fetch.partitions == {("t", 3)}


def test_matching_by_scope_versions_client_and_count():
    engine = FaultEngine()
    engine.add({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "topic": "orders", "partition": 2,
                "min_version": 3, "client_id": "app", "count": 2})
    assert engine.match(0, 9, "other", PRODUCE_BODY) is None
    assert engine.match(0, 2, "app", PRODUCE_BODY) is None
    assert engine.match(8, 9, "app", COMMIT_BODY) is None
    assert engine.match(0, 9, "app", {"topic_data": [{"name": "orders", "partition_data": [{"index": 1}]}]}) is None
    assert engine.match(0, 9, "app", PRODUCE_BODY) is not None
    assert engine.match(0, 9, "app", PRODUCE_BODY) is not None
    assert engine.match(0, 9, "app", PRODUCE_BODY) is None  # count 2 used up
    assert engine.list()[0]["hits"] == 2


def test_probability_is_seeded_and_reproducible():
    def draws(seed):
        engine = FaultEngine()
        engine.add({"api": 18, "error": 7, "probability": 0.5, "seed": seed})
        return [engine.match(18, 3, None, {}) is not None for _ in range(40)]

    assert draws(7) == draws(7)
    assert 5 < sum(draws(7)) < 35


def test_error_response_mirrors_the_request_and_encodes():
    produce = error_response(0, 9, PRODUCE_BODY, 6)
    parts = produce["responses"][0]["partition_responses"]
    assert [(p["index"], p["error_code"], p["base_offset"]) for p in parts] == [(0, 6, -1), (2, 6, -1)]
    commit = error_response(8, 8, COMMIT_BODY, 16)
    assert commit["topics"] == [{"name": "orders", "partitions": [{"partition_index": 1, "error_code": 16}]}]
    find = error_response(10, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]}, 15)
    assert [(c["key"], c["error_code"], c["node_id"]) for c in find["coordinators"]] == [("a", 15, -1), ("b", 15, -1)]
    # Every shape encodes with the real codec and decodes back.
    for api, version, body, code in ((0, 9, PRODUCE_BODY, 6), (8, 8, COMMIT_BODY, 16), (11, 7, {"group_id": "g"}, 16),
                                     (1, 12, {"topics": [{"topic": "t", "partitions": [{"partition": 0}]}]}, 6),
                                     (3, 12, {"topics": [{"name": "t"}]}, 3), (18, 3, {}, 7)):
        wire = b"".join(bytes(c) for c in encode_response(api, version, 1, error_response(api, version, body, code)))
        _, decoded = decode_response(api, version, wire[4:])
        assert code in _codes(decoded)


def _codes(obj):
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == "error_code"] + [c for v in obj.values() for c in _codes(v)]
    if isinstance(obj, list):
        return [c for v in obj for c in _codes(v)]
    return []


def test_fill_errors_sets_every_error_code_after_handling():
    response = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 7}]}]}
    fill_errors(response, 6)
    assert response["responses"][0]["partition_responses"][0] == {"index": 0, "error_code": 6, "base_offset": 7}


async def test_engine_hold_release_and_reset():
    engine = FaultEngine()
    fault = engine.add({"api": 18, "action": "hold"})
    with pytest.raises(FaultError):
        engine.release(999)
    calls = []

    async def handler(ctx, body):
        calls.append(body)
        return {"error_code": 0}

    class Ctx:
        api_key, api_version, client_id, connection = 18, 3, "c", None

    task = asyncio.ensure_future(engine.intercept(handler, Ctx, {}))
    await asyncio.sleep(0.01)
    assert not task.done() and calls == []
    engine.release(fault.id)
    assert await asyncio.wait_for(task, 1) == {"error_code": 0}
    engine.add({"api": 18, "action": "hold"})
    task = asyncio.ensure_future(engine.intercept(handler, Ctx, {}))
    await asyncio.sleep(0.01)
    engine.reset()  # reset lets held requests go on
    await asyncio.wait_for(task, 1)
    assert not engine.active


# -- clock and timers ---------------------------------------------------------------------------

def test_clock_advances_and_never_goes_back():
    clock = BrokerClock()
    t0 = clock.now_ms()
    assert clock.advance(60_000) >= t0 + 60_000
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_timer_service_fires_due_timeouts_in_deadline_order_on_advance():
    clock = BrokerClock()
    timers = TimerService(clock)  # no loop: only advance() fires
    fired = []
    timers.schedule("a", 30_000, lambda: fired.append("a"))
    timers.schedule("b", 10_000, lambda: fired.append("b"))
    timers.schedule("c", 20_000, lambda: fired.append("c"))
    timers.schedule("b", 25_000, lambda: fired.append("b2"))  # replaces b
    timers.schedule("far", 10**9, lambda: fired.append("far"))
    clock.advance(26_000)
    assert fired == ["c", "b2"]
    scope = timers.scope("group")
    scope.schedule("x", 1000, lambda: fired.append("x"))
    assert scope.is_scheduled("x") and not timers.is_scheduled("x")
    scope.cancel_all()
    clock.advance(10_000)
    assert fired == ["c", "b2", "a"]


async def test_timer_service_fires_on_the_loop_without_advance():
    clock = BrokerClock()
    timers = TimerService(clock, asyncio.get_running_loop())
    done = asyncio.Event()
    timers.schedule("soon", 20, done.set)
    await asyncio.wait_for(done.wait(), 2)
    timers.close()


# -- seeding ------------------------------------------------------------------------------------

def test_seed_lines_parse_topics_and_records():
    items = parse_lines([
        '{"topic": "t", "partitions": 3, "configs": {"cleanup.policy": "compact"}}',
        "# a comment", "",
        '{"topic": "t", "partition": 2, "key": "k", "value": {"n": 1}, "headers": {"h": "x"}, "timestamp": 5}',
        '{"topic": "t", "value": {"base64": "AAE="}}',
    ])
    assert items[0]["kind"] == "topic" and items[0]["configs"] == {"cleanup.policy": "compact"}
    assert (items[1]["partition"], items[1]["key"], items[1]["value"], items[1]["headers"], items[1]["timestamp"]) \
        == (2, b"k", b'{"n":1}', [("h", b"x")], 5)
    assert items[2]["value"] == b"\x00\x01" and items[2]["partition"] == 0


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"), ('{"value": "x"}', "topic"), ('{"topic": "t", "partition": -1}', "partition"),
    ('{"topic": "t", "partitions": 0}', "partitions"), ('{"topic": "t", "value": "v", "extra": 1}', "unknown"),
    ('{"topic": "t", "timestamp": "now"}', "timestamp"), ('{"topic": "t", "headers": [1]}', "header"),
])
def test_bad_seed_lines_name_the_line(line, message):
    with pytest.raises(SeedError, match=message) as info:
        parse_lines(["", line], source="seed.jsonl")
    assert "seed.jsonl:2" in str(info.value)
