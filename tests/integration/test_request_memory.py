"""queued.max.request.bytes: a client pipelining large produces that the broker cannot answer
yet (a long-poll Fetch holds the head of its response queue) cannot make the broker buffer
more than the configured bytes of requests; the rest stays in the client's socket.  Nothing is
lost: once the Fetch returns, every produce is answered, in order, and appended."""

from __future__ import annotations

import socket
import time

import pytest

from conftest import RawClient, start_broker
from minikafka.protocol.records import build_batch

pytestmark = pytest.mark.minikafka_only(reason="minikafka's request-memory bounds and settings")

PER_CONNECTION = 8 * 1024 * 1024
VALUE = b"x" * (1024 * 1024 - 200)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("request-memory"), message_max_bytes=2 * 1024 * 1024,
                          queued_max_request_bytes=4 * PER_CONNECTION,
                          queued_max_request_bytes_per_connection=PER_CONNECTION)
    yield handle
    handle.stop()


def _create(c: RawClient, topic: str) -> None:
    body = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False}
    assert c.request(3, 12, body)["topics"][0]["error_code"] == 0


def test_pipelined_large_produces_stop_at_the_byte_bound(broker):
    c = RawClient(broker.port, timeout=20.0)
    _create(c, "parked")
    _create(c, "big")
    rss_before = _rss_kb(broker.proc.pid)
    # A Fetch that parks for 4 s on an empty partition: every later response waits behind it.
    fetch_cid, fetch = c.encode(1, 12, {
        "replica_id": -1, "max_wait_ms": 4000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": "parked", "partitions": [{"partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                                                       "partition_max_bytes": 1 << 20}]}]})
    c.send_bytes(fetch)
    batch = bytes(build_batch([(b"k", VALUE, [], 1_700_000_000_000)]))
    wanted = 96
    frames = []
    for _ in range(wanted):
        frames.append(c.encode(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "big", "partition_data": [{"index": 0, "records": batch}]}]}))
    # Push without reading until the socket stops taking bytes for 0.5 s.
    c.sock.settimeout(0.5)
    sent = 0
    data = b"".join(f for _, f in frames)
    view = memoryview(data)
    while sent < len(data):
        try:
            sent += c.sock.send(view[sent:sent + (1 << 20)])
        except socket.timeout:
            break
    rss_blocked = _rss_kb(broker.proc.pid)
    # The broker took at most its bound (+ one frame) and the kernel buffers hold a few MB more;
    # without the bound it would have read all 96 MB (queued.max.requests is 500).
    assert sent < len(data) // 2, f"the broker read {sent >> 20} MB of {len(data) >> 20} MB"
    assert rss_blocked - rss_before < 3 * PER_CONNECTION // 1024, (rss_before, rss_blocked)
    # Once the Fetch answers, the rest goes through: everything is acknowledged in order.
    c.sock.settimeout(20.0)
    while sent < len(data):
        sent += c.sock.send(view[sent:sent + (1 << 20)])
    cid, _ = c.read_response(1, 12)
    assert cid == fetch_cid
    offsets = []
    for want_cid, _ in frames:
        cid, resp = c.read_response(0, 9)
        assert cid == want_cid
        part = resp["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0
        offsets.append(part["base_offset"])
    assert offsets == list(range(wanted))
    c.close()


def test_half_received_frames_of_many_clients_stay_within_the_bound(tmp_path):
    """Twenty clients each send the first 6 MB of a 10 MB frame and stop.  The broker reserves a
    frame's declared size from its first bytes (as Kafka's memory pool does): with a 24 MB bound
    at most two frames are taken in, the other clients are not read and their bytes stay in
    their sockets.  Without the bound the broker would hold 20 x 6 MB = 120 MB."""
    handle = start_broker(tmp_path, socket_request_max_bytes=16 * 1024 * 1024,
                          queued_max_request_bytes=24 * 1024 * 1024)
    try:
        rss_before = _rss_kb(handle.proc.pid)
        sockets = []
        frame_size = 10 * 1024 * 1024
        chunk = b"\x00" * (1 << 20)
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", handle.port), timeout=5)
            s.settimeout(0.3)
            s.sendall(frame_size.to_bytes(4, "big"))
            for _ in range(6):
                try:
                    s.sendall(chunk)
                except socket.timeout:
                    break  # the broker stopped reading us: the bytes stay here
            sockets.append(s)
        time.sleep(0.5)  # let the broker read whatever it will read (an absence needs a window)
        grown_mb = (_rss_kb(handle.proc.pid) - rss_before) / 1024
        assert grown_mb < 60, f"broker RSS grew by {grown_mb:.0f} MB for half-received frames"
        # The broker still serves a new client at once.
        with RawClient(handle.port) as c:
            assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0
        for s in sockets:
            s.close()
    finally:
        handle.stop()
