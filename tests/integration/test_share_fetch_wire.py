"""ShareFetch/ShareAcknowledge on the wire (raw requests, protocol.codec) against a running minikafka:
long polls woken by an append and by a release, redelivery after a lock timeout on the steerable
clock and through the control API's ``share.expire_lock``, the delivery limit, several members on one
partition never holding the same record, release when a connection is lost, and the operator view.
The exchanges Kafka can be asked the same way are compared with Apache Kafka 4.2 in
tests/conformance/corpus/share_fetch.py."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from conftest import RawClient

from minikafka import Broker
from minikafka.protocol.records import build_batch

pytestmark = pytest.mark.minikafka_only(reason=(
    "raw share fetches without the group side's heartbeats, the steerable clock and the control API; "
    "the comparable exchanges are in tests/conformance/corpus/share_fetch.py"))

TS = int(time.time() * 1000)
LOCK_MS = 30000  # Kafka's default group.share.record.lock.duration.ms


@pytest.fixture(scope="module")
def kafka():
    with Broker(config={"offsets.topic.num.partitions": 3}) as broker:
        yield broker


def _port(kafka) -> int:
    return int(kafka.bootstrap_servers.rpartition(":")[2])


def _topic(c: RawClient, name: str, partitions: int = 1):
    r = c.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False})
    assert r["topics"][0]["error_code"] == 0
    return r["topics"][0]["topic_id"]


def _produce(c: RawClient, topic: str, *values: bytes, partition: int = 0):
    records = bytes(build_batch([(b"k", v, [], TS) for v in values]))
    r = c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    assert r["responses"][0]["partition_responses"][0]["error_code"] == 0


def _fetch(c, group, member, epoch, tid, acks=None, wait=0, max_records=500, partitions=(0,), version=2):
    r = c.request(78, version, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": wait, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records, "share_acquire_mode": 0,
        "is_renew_ack": False, "forgotten_topics_data": [],
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": p, "acknowledgement_batches": (acks or {}).get(p, [])}
                                                     for p in partitions]}] if tid else []})
    assert r["error_code"] == 0, r
    return r


def _acquired(r) -> list[tuple[int, int, int]]:
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for t in r["responses"] for p in t["partitions"] for a in p["acquired_records"]]


def _ack(first, last, *types):
    return {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}


def _names():
    suffix = uuid.uuid4().hex[:8]
    return f"sf-{suffix}", f"g-{suffix}"


def test_long_poll_is_woken_by_an_append(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c, RawClient(_port(kafka)) as p:
        tid = _topic(c, topic)
        _fetch(c, group, "m1", 0, tid)  # opens the session; the share partition starts at the end (latest)
        result = {}

        def poll():
            t0 = time.monotonic()
            result["r"] = _fetch(c, group, "m1", 1, None, wait=10000)
            result["s"] = time.monotonic() - t0

        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.3)
        _produce(p, topic, b"a", b"b")
        th.join(15)
        assert _acquired(result["r"]) == [(0, 1, 1)]
        assert 0.2 < result["s"] < 5
        assert result["r"]["acquisition_lock_timeout_ms"] == LOCK_MS


def test_members_never_share_a_record_and_a_release_wakes_a_waiting_member(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as a, RawClient(_port(kafka)) as b:
        tid = _topic(a, topic)
        _fetch(a, group, "a", 0, tid)
        _fetch(b, group, "b", 0, tid)
        _produce(a, topic, b"1", b"2", b"3")
        _produce(a, topic, b"4", b"5")
        assert _acquired(_fetch(a, group, "a", 1, None, max_records=3)) == [(0, 2, 1)]
        assert _acquired(_fetch(b, group, "b", 1, None)) == [(3, 4, 1)]
        result = {}

        def poll():
            result["r"] = _fetch(b, group, "b", 2, None, wait=10000)

        th = threading.Thread(target=poll)
        th.start()
        time.sleep(0.3)
        r = a.request(79, 2, {"group_id": group, "member_id": "a", "share_session_epoch": 2, "is_renew_ack": False,
                              "topics": [{"topic_id": tid, "partitions": [
                                  {"partition_index": 0, "acknowledgement_batches": [_ack(0, 2, 1, 2, 1)]}]}]})
        assert r["responses"][0]["partitions"][0]["error_code"] == 0
        th.join(15)
        assert _acquired(result["r"]) == [(1, 1, 2)]


def test_lock_timeout_on_the_clock_redelivers_with_the_delivery_count_and_the_limit_archives(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic)
        _fetch(c, group, "m", 0, tid)
        _produce(c, topic, b"x")
        epoch = 1
        for count in range(1, 6):  # share.delivery.count.limit 5
            assert _acquired(_fetch(c, group, "m", epoch, None, wait=2000)) == [(0, 0, count)]
            epoch += 1
            kafka.control.advance_clock(LOCK_MS)
        # Fifth lock expired at the limit: archived, never delivered again; the next record is.
        _produce(c, topic, b"y")
        assert _acquired(_fetch(c, group, "m", epoch, None, wait=2000)) == [(1, 1, 1)]
        # The late acknowledgement of the archived record is refused.
        r = _fetch(c, group, "m", epoch + 1, tid, acks={0: [_ack(0, 0, 1)]})
        assert r["responses"][0]["partitions"][0]["acknowledge_error_code"] == 0  # below the start offset: ignored


def test_control_api_expires_one_lock(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic)
        _fetch(c, group, "m", 0, tid)
        _produce(c, topic, b"1", b"2")
        assert _acquired(_fetch(c, group, "m", 1, None, wait=2000)) == [(0, 1, 1)]
        t0 = time.monotonic()
        kafka.control.call("share.expire_lock", {"group": group, "topic": topic, "partition": 0, "offset": 1})
        assert _acquired(_fetch(c, group, "m", 2, None, wait=2000)) == [(0, 1, 2)]
        assert time.monotonic() - t0 < 1.0
        with pytest.raises(Exception):
            kafka.control.call("share.expire_lock", {"group": group, "topic": topic, "partition": 0, "offset": 9})


def test_a_lost_connection_releases_its_records(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic)
        _fetch(c, group, "b", 0, tid)
        gone = RawClient(_port(kafka))
        _fetch(gone, group, "a", 0, tid)
        _produce(c, topic, b"1", b"2")
        assert _acquired(_fetch(gone, group, "a", 1, None, wait=2000)) == [(0, 1, 1)]
        assert _acquired(_fetch(c, group, "b", 1, None, wait=200)) == []
        gone.sock.close()
        assert _acquired(_fetch(c, group, "b", 2, None, wait=5000)) == [(0, 1, 2)]


def test_session_epochs_and_closing(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic)
        _fetch(c, group, "m", 0, tid)
        _produce(c, topic, b"1", b"2", b"3")
        assert _acquired(_fetch(c, group, "m", 1, None, wait=2000)) == [(0, 2, 1)]
        r = c.request(79, 2, {"group_id": group, "member_id": "m", "share_session_epoch": 7, "is_renew_ack": False,
                              "topics": []})
        assert (r["error_code"], r["acquisition_lock_timeout_ms"]) == (123, 0)
        r = c.request(79, 2, {"group_id": group, "member_id": "m", "share_session_epoch": -1, "is_renew_ack": False,
                              "topics": [{"topic_id": tid, "partitions": [
                                  {"partition_index": 0, "acknowledgement_batches": [_ack(0, 0, 1)]}]}]})
        assert r["error_code"] == 0 and r["responses"][0]["partitions"][0]["error_code"] == 0
        r = c.request(78, 2, {"group_id": group, "member_id": "m", "share_session_epoch": 2, "max_wait_ms": 0,
                              "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
                              "topics": [], "forgotten_topics_data": []})
        assert r["error_code"] == 122  # SHARE_SESSION_NOT_FOUND: the session was closed
        # Closing released 1-2 (0 was accepted): another member gets them.
        assert _acquired(_fetch(c, group, "n", 0, tid, wait=2000)) == [(1, 2, 2)]


def test_partition_summaries_for_the_operator_surface(kafka):
    from minikafka.broker.share import view

    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic)
        _fetch(c, group, "m", 0, tid)
        _produce(c, topic, b"1", b"2", b"3", b"4")
        _fetch(c, group, "m", 1, None, wait=2000)
        c.request(79, 2, {"group_id": group, "member_id": "m", "share_session_epoch": 2, "is_renew_ack": False,
                          "topics": [{"topic_id": tid, "partitions": [
                              {"partition_index": 0, "acknowledgement_batches": [_ack(0, 3, 1, 3, 2, 3)]}]}]})
        import asyncio

        broker = kafka.server  # the in-thread broker; its state is read on its loop

        async def read():
            return view.partition_summaries(broker, group)

        summary = asyncio.run_coroutine_threadsafe(read(), kafka._loop).result(10)
        # 0 accepted, 1 rejected: the start offset is 2; 2 released (available again), 3 rejected.
        assert summary == [{"topic": topic, "partition": 0, "start_offset": 2, "in_flight": 2, "acquired": 0,
                            "archived": 1, "lag": 1}]


def test_read_committed_never_acquires_open_transactions_and_archives_aborted_ones(kafka):
    """share.isolation.level read_committed through the GROUP-config seam the share side reads
    (``broker.group_configs``; IncrementalAlterConfigs on GROUP resources fills it once served):
    the share partition reads up to the last stable offset and archives aborted batches."""
    from confluent_kafka import Producer

    topic, group = _names()
    server = kafka.server
    previous = getattr(server, "group_configs", None)
    server.group_configs = lambda g: {"share.isolation.level": "read_committed"} if g == group else \
        (previous(g) if callable(previous) else {})
    try:
        with RawClient(_port(kafka)) as c:
            tid = _topic(c, topic)
            _fetch(c, group, "m", 0, tid)
            aborted = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"{topic}-a"})
            aborted.init_transactions(30)
            aborted.begin_transaction()
            aborted.produce(topic, b"aborted")
            aborted.flush(10)
            aborted.abort_transaction(30)  # offsets 0 (data) and 1 (abort marker)
            open_txn = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"{topic}-o"})
            open_txn.init_transactions(30)
            open_txn.begin_transaction()
            open_txn.produce(topic, b"open")  # offset 2
            open_txn.flush(10)
            _produce(c, topic, b"after")  # offset 3, behind the open transaction
            # Up to the last stable offset (2): the aborted record is archived, its marker acquired
            # (clients acknowledge control records as gaps).
            assert _acquired(_fetch(c, group, "m", 1, None, wait=500)) == [(1, 1, 1)]
            assert _acquired(_fetch(c, group, "m", 2, None, wait=300)) == []
            open_txn.commit_transaction(30)  # marker at 4
            assert _acquired(_fetch(c, group, "m", 3, None, wait=2000)) == [(2, 4, 1)]
    finally:
        server.group_configs = previous


def test_min_bytes_waits_for_enough_records_then_the_deadline_sends_what_there_is(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c, RawClient(_port(kafka)) as p:
        tid = _topic(c, topic)
        _fetch(c, group, "m", 0, tid)
        _produce(p, topic, b"small")
        body = {"group_id": group, "member_id": "m", "share_session_epoch": 1, "max_wait_ms": 600,
                "min_bytes": 100000, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
                "share_acquire_mode": 0, "is_renew_ack": False, "topics": [], "forgotten_topics_data": []}
        t0 = time.monotonic()
        r = c.request(78, 2, body)
        # Fewer than MinBytes until MaxWaitMs: then the record goes out anyway.
        assert time.monotonic() - t0 >= 0.5
        assert _acquired(r) == [(0, 0, 1)]


def test_member_leave_releases_at_once_only_without_a_live_session(kafka):
    """The group side's leave (view.on_member_leave) releases a member's records unless its share
    session is alive: then the session's final acknowledgements decide, and its end releases."""
    import asyncio

    from minikafka.broker.share import view

    topic, group = _names()
    server = kafka.server

    def leave(member):
        async def run():
            view.on_member_leave(server, group, member)
        asyncio.run_coroutine_threadsafe(run(), kafka._loop).result(10)

    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic)
        _fetch(c, group, "m", 0, tid)
        _produce(c, topic, b"1", b"2")
        assert _acquired(_fetch(c, group, "m", 1, None, wait=2000)) == [(0, 1, 1)]
        leave("m")  # session alive: nothing released yet
        r = c.request(79, 2, {"group_id": group, "member_id": "m", "share_session_epoch": -1, "is_renew_ack": False,
                              "topics": [{"topic_id": tid, "partitions": [
                                  {"partition_index": 0, "acknowledgement_batches": [_ack(0, 0, 1)]}]}]})
        assert r["responses"][0]["partitions"][0]["error_code"] == 0  # the final acknowledgement counts
        assert _acquired(_fetch(c, group, "n", 0, tid, wait=2000)) == [(1, 1, 2)]  # the rest was released
        # A member without a share session is released at once.
        _produce(c, topic, b"3")
        assert _acquired(_fetch(c, group, "n", 1, None, wait=2000)) == [(2, 2, 1)]  # n holds 1 (count 2) and 2

        async def drop_session():
            server.share_fetch.sessions.close(group, "n")
        asyncio.run_coroutine_threadsafe(drop_session(), kafka._loop).result(10)
        leave("n")
        assert _acquired(_fetch(c, group, "o", 0, tid, wait=2000)) == [(1, 1, 3), (2, 2, 2)]


def _earliest(c: RawClient, group: str) -> None:
    r = c.request(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    assert r["responses"][0]["error_code"] == 0


def _by_partition(r) -> dict[int, list[tuple[int, int, int]]]:
    return {p["partition_index"]: [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]
            for t in r["responses"] for p in t["partitions"]}


def test_a_fetch_that_loads_share_partitions_acquires_from_the_first_with_records(kafka):
    """As Kafka 4.2 (its share partitions load in the background, the fetch completes with the first
    one loaded): the first fetch over two partitions that hold records answers the first only, the
    next fetch the other (librdkafka's test 0179 relies on it); conformance: share_fetch_rotation."""
    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic, partitions=3)
        _produce(c, topic, b"a", b"b", b"c", partition=1)
        _produce(c, topic, b"d", b"e", partition=2)
        _earliest(c, group)
        first = _fetch(c, group, "m1", 0, tid, partitions=(0, 1, 2), wait=2000)
        # Partition 0 (empty) and 1 were loaded when the fetch completed; partition 2 is not in the answer.
        assert _by_partition(first) == {0: [], 1: [(0, 2, 1)]}
        assert _by_partition(_fetch(c, group, "m1", 1, None, wait=2000)) == {2: [(0, 1, 1)]}
        # Loaded partitions answer together from now on.
        _produce(c, topic, b"f", partition=1)
        _produce(c, topic, b"g", partition=2)
        assert _by_partition(_fetch(c, group, "m1", 2, None, wait=2000)) == {1: [(3, 3, 1)], 2: [(2, 2, 1)]}


def test_max_records_goes_to_the_partitions_in_turn_by_session_epoch(kafka):
    topic, group = _names()
    with RawClient(_port(kafka)) as c:
        tid = _topic(c, topic, partitions=3)
        _fetch(c, group, "m1", 0, tid, partitions=(0, 1, 2))  # loads the three share partitions (latest: 0)
        for p in range(3):
            for _ in range(2):
                _produce(c, topic, b"x", b"y", partition=p)
        got = [_by_partition(_fetch(c, group, "m1", epoch, None, max_records=2)) for epoch in (1, 2, 3)]
        assert got == [{1: [(0, 1, 1)]}, {2: [(0, 1, 1)]}, {0: [(0, 1, 1)]}]
