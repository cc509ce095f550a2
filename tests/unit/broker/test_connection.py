"""KafkaConnection over an in-memory transport with a toy codec: ordering, acks=0, back-pressure,
protocol violations."""

import asyncio
import json
import struct

import pytest

from minikafka.protocol.errors import ProtocolError, UnsupportedVersionError

from minikafka.broker.config import BrokerConfig
from minikafka.broker.connection import KafkaConnection


class Req:
    def __init__(self, api_key, api_version, correlation_id, client_id, body):
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id
        self.client_id, self.body = client_id, body


def decode(frame):
    try:
        msg = json.loads(bytes(frame))
    except ValueError:
        raise ProtocolError("not json") from None
    if msg.get("unsupported"):
        exc = UnsupportedVersionError(msg["k"], msg["v"])
        exc.correlation_id = msg["c"]
        raise exc
    return Req(msg["k"], msg["v"], msg["c"], "test-client", msg)


def encode(api_key, api_version, correlation_id, body):
    payload = json.dumps({"c": correlation_id, "k": api_key, "v": api_version, "body": body}).encode()
    return [struct.pack(">i", len(payload)), payload]


def frame(**msg):
    payload = json.dumps(msg).encode()
    return struct.pack(">i", len(payload)) + payload


class Transport(asyncio.Transport):
    def __init__(self):
        super().__init__()
        self.out = bytearray()
        self.paused = False
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def write(self, data):
        self.out += data

    def writelines(self, chunks):
        for c in chunks:
            self.out += c

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed

    def set_write_buffer_limits(self, high=None, low=None):
        pass

    def responses(self):
        out, pos, res = bytes(self.out), 0, []
        while pos < len(out):
            (n,) = struct.unpack_from(">i", out, pos)
            res.append(json.loads(out[pos + 4:pos + 4 + n]))
            pos += 4 + n
        return res


class Registry:
    def __init__(self, handlers):
        self.handlers = handlers

    def lookup(self, key, version):
        return self.handlers.get(key)


class FakeBroker:
    def __init__(self, handlers, **overrides):
        self.config = BrokerConfig.load(environ={}, overrides=overrides)
        self.registry = Registry(handlers)
        self.loop = asyncio.get_running_loop()
        self.connections = set()

    def registry_range(self, key):
        return (0, 4)


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def make(handlers, **kw):
    broker = FakeBroker(handlers)
    conn = KafkaConnection(broker, decode_request=decode, encode_response=encode, **kw)
    transport = Transport()
    conn.connection_made(transport)
    return broker, conn, transport


async def test_responses_leave_in_request_order_even_when_handlers_finish_out_of_order():
    gates = {}

    async def slow(ctx, body):
        gates[ctx.correlation_id] = asyncio.Event()
        await gates[ctx.correlation_id].wait()
        return {"n": ctx.correlation_id}

    _, conn, transport = make({1: slow})
    conn.data_received(frame(k=1, v=0, c=1) + frame(k=1, v=0, c=2) + frame(k=1, v=0, c=3))
    await settle()
    gates[3].set()
    gates[2].set()
    await settle()
    assert transport.responses() == []  # 1 is still running: 2 and 3 are held back
    gates[1].set()
    await settle()
    assert [r["c"] for r in transport.responses()] == [1, 2, 3]


async def test_none_response_sends_nothing_but_advances_the_queue():
    async def handler(ctx, body):
        return None if body.get("acks0") else {"ok": True}

    _, conn, transport = make({0: handler})
    # Split one frame across two chunks to exercise the frame decoder.
    data = frame(k=0, v=3, c=1, acks0=True) + frame(k=0, v=3, c=2)
    conn.data_received(data[:7])
    conn.data_received(data[7:])
    await settle()
    assert [r["c"] for r in transport.responses()] == [2]


async def test_reading_pauses_at_max_in_flight_and_resumes():
    gate = asyncio.Event()

    async def park(ctx, body):
        await gate.wait()
        return {}

    _, conn, transport = make({1: park}, max_in_flight=2)
    conn.data_received(frame(k=1, v=0, c=1))
    await settle()
    assert not transport.paused
    conn.data_received(frame(k=1, v=0, c=2))
    await settle()
    assert transport.paused and conn.in_flight == 2
    gate.set()
    await settle()
    assert not transport.paused and conn.in_flight == 0


async def test_write_buffer_high_water_pauses_reading():
    async def ok(ctx, body):
        return {}

    _, conn, transport = make({1: ok})
    conn.pause_writing()
    assert transport.paused
    conn.resume_writing()
    assert not transport.paused


async def test_garbage_closes_only_this_connection():
    async def ok(ctx, body):
        return {}

    broker, conn, transport = make({1: ok})
    other = KafkaConnection(broker, decode_request=decode, encode_response=encode)
    other_t = Transport()
    other.connection_made(other_t)
    conn.data_received(struct.pack(">i", 5) + b"nope!")
    other.data_received(frame(k=1, v=0, c=9))
    await settle()
    assert transport.closed and not other_t.closed
    assert [r["c"] for r in other_t.responses()] == [9]


async def test_negative_frame_size_closes():
    _, conn, transport = make({})
    conn.data_received(struct.pack(">i", -1))
    assert transport.closed


async def test_unsupported_api_versions_gets_error_35_with_v0_body():
    _, conn, transport = make({})
    conn.data_received(frame(k=18, v=9, c=77, unsupported=True))
    (resp,) = transport.responses()
    assert resp["c"] == 77 and resp["v"] == 0
    assert resp["body"]["error_code"] == 35
    assert resp["body"]["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]
    assert not transport.closed


async def test_unsupported_version_of_other_api_closes():
    _, conn, transport = make({})
    conn.data_received(frame(k=1, v=99, c=5, unsupported=True))
    assert transport.closed and transport.responses() == []


async def test_handler_exception_closes_connection():
    async def boom(ctx, body):
        raise RuntimeError("bug")

    _, conn, transport = make({1: boom})
    conn.data_received(frame(k=1, v=0, c=1))
    await settle()
    assert transport.closed


async def test_unknown_api_closes():
    _, conn, transport = make({})
    conn.data_received(frame(k=42, v=0, c=1))
    assert transport.closed


async def test_real_codec_api_versions_metadata_and_v0_fallback(tmp_path):
    from minikafka.protocol.apis import ApiRegistry
    from minikafka.protocol.codec import decode_response, encode_request

    from minikafka.broker.handlers import api_versions, metadata
    from broker_fakes import FakeBroker

    broker = FakeBroker(str(tmp_path))
    broker.registry = ApiRegistry()
    api_versions.register(broker.registry, broker)
    metadata.register(broker.registry, broker)
    broker.connections = set()
    broker.registry_range = lambda key: broker.registry.version_range(key)
    broker.controller.create_topic("t", 3)
    conn = KafkaConnection(broker)
    transport = Transport()
    conn.connection_made(transport)
    conn.data_received(encode_request(18, 4, 1, "cid", {"client_software_name": "x", "client_software_version": "1"})
                       + encode_request(3, 12, 2, "cid", {"topics": None, "allow_auto_topic_creation": False})
                       + struct.pack(">i", 13) + struct.pack(">hhih", 18, 9, 3, 3) + b"cid")
    await settle()
    out, frames, pos = bytes(transport.out), [], 0
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        frames.append(out[pos + 4:pos + 4 + n])
        pos += 4 + n
    assert len(frames) == 3
    cid, versions = decode_response(18, 4, frames[0])
    assert cid == 1 and {(k["api_key"], k["min_version"], k["max_version"]) for k in versions["api_keys"]} == {
        (18, 0, 4), (3, 0, 13)}
    cid, md = decode_response(3, 12, frames[1])
    assert cid == 2 and md["topics"][0]["name"] == "t" and len(md["topics"][0]["partitions"]) == 3
    cid, fallback = decode_response(18, 0, frames[2])
    assert cid == 3 and fallback["error_code"] == 35
    assert conn.client_id == "cid" and not transport.closed
    broker.logs.close()


def _real_broker(tmp_path):
    from minikafka.protocol.apis import ApiRegistry

    from minikafka.broker.handlers import api_versions, fetch, list_offsets, metadata, produce
    from broker_fakes import FakeBroker

    broker = FakeBroker(str(tmp_path))
    broker.loop = asyncio.get_running_loop()
    broker.registry = ApiRegistry()
    for module in (api_versions, metadata, produce, fetch, list_offsets):
        module.register(broker.registry, broker)
    broker.connections = set()
    broker.registry_range = lambda key: broker.registry.version_range(key)
    broker.controller.create_topic("t", 1)
    return broker


async def test_mutated_requests_never_escape_the_connection(tmp_path):
    """Random corruptions of valid requests: each either gets answered or closes its own
    connection; nothing raises out of data_received and the broker keeps serving."""
    import random

    from minikafka.protocol.codec import encode_request

    broker = _real_broker(tmp_path)
    valid = [
        encode_request(18, 3, 1, "c", {"client_software_name": "x", "client_software_version": "1"}),
        encode_request(3, 12, 2, "c", {"topics": [{"name": "t", "topic_id": None}],
                                       "allow_auto_topic_creation": False}),
        encode_request(0, 9, 3, "c", {"transactional_id": None, "acks": -1, "timeout_ms": 100, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": bytes(
                __import__("minikafka.protocol.records", fromlist=["build_batch"]).build_batch([(b"k", b"v", [], 1)]))}]}]}),
        encode_request(1, 12, 4, "c", {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1000,
                                       "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                           {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                          "partition_max_bytes": 1000}]}]}),
    ]
    rng = random.Random(1234)
    closed = answered = 0
    for _ in range(400):
        data = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(4, len(data))  # keep the size prefix: corrupt the request itself
            data[pos] = rng.randrange(256)
        conn = KafkaConnection(broker)
        transport = Transport()
        conn.connection_made(transport)
        conn.data_received(bytes(data))
        await settle()
        closed += transport.closed
        answered += bool(transport.out)
    assert closed and answered
    # The broker still answers a clean request afterwards.
    conn = KafkaConnection(broker)
    transport = Transport()
    conn.connection_made(transport)
    conn.data_received(valid[1])
    await settle()
    assert transport.out and not transport.closed
    broker.logs.close()


async def test_pending_request_bytes_pause_reading_per_connection():
    """A client pipelining large requests without the broker answering them (a slow handler,
    or a client not reading) stops being read once its unanswered bytes reach the bound, not
    only at queued.max.requests."""
    gate = asyncio.Event()

    async def park(ctx, body):
        await gate.wait()
        return {}

    broker = FakeBroker({1: park}, **{"queued.max.request.bytes.per.connection": "10000"})
    conn = KafkaConnection(broker, decode_request=decode, encode_response=encode)
    transport = Transport()
    conn.connection_made(transport)
    big = "x" * 4000
    conn.data_received(frame(k=1, v=0, c=1, pad=big) + frame(k=1, v=0, c=2, pad=big))
    await settle()
    assert not transport.paused and conn.in_flight == 2
    conn.data_received(frame(k=1, v=0, c=3, pad=big))
    await settle()
    assert transport.paused and conn.queued_bytes >= 10000
    gate.set()
    await settle()
    assert not transport.paused and conn.queued_bytes == 0 and conn.in_flight == 0


async def test_pending_request_bytes_are_bounded_across_connections():
    gate = asyncio.Event()

    async def park(ctx, body):
        await gate.wait()
        return {}

    from minikafka.broker.connection import RequestBytes

    broker = FakeBroker({1: park}, **{"queued.max.request.bytes": "9000"})
    broker.request_bytes = RequestBytes(9000)
    conns = []
    for _ in range(3):
        conn = KafkaConnection(broker, decode_request=decode, encode_response=encode)
        transport = Transport()
        conn.connection_made(transport)
        conns.append((conn, transport))
    big = "x" * 4000
    conns[0][0].data_received(frame(k=1, v=0, c=1, pad=big))
    conns[1][0].data_received(frame(k=1, v=0, c=1, pad=big))
    await settle()
    assert broker.request_bytes.used >= 8000
    assert not any(t.paused for _, t in conns)
    conns[1][0].data_received(frame(k=1, v=0, c=2, pad=big))
    await settle()
    # The total is reached: connections holding requests stop being read; an idle one may still
    # send its first request (so a connection is never starved by the others).
    assert conns[0][1].paused and conns[1][1].paused and not conns[2][1].paused
    gate.set()
    await settle()
    assert broker.request_bytes.used == 0
    assert not any(t.paused for _, t in conns)


async def test_closing_releases_the_pending_bytes():
    gate = asyncio.Event()

    async def park(ctx, body):
        await gate.wait()
        return {}

    broker, conn, transport = make({1: park})
    conn.data_received(frame(k=1, v=0, c=1, pad="y" * 1000))
    await settle()
    assert conn._budget.used > 1000
    conn.connection_lost(None)
    assert conn._budget.used == 0
    gate.set()
    await settle()


async def test_open_and_close_are_debug_not_info(caplog):
    import logging

    async def ok(ctx, body):
        return {}

    caplog.set_level(logging.INFO, logger="minikafka.connection")
    for _ in range(20):
        _, conn, transport = make({1: ok})
        conn.data_received(frame(k=1, v=0, c=1))
        await settle()
        conn.connection_lost(None)
    assert [r for r in caplog.records if r.name == "minikafka.connection"] == []


def feed_buffered(conn, data: bytes, step: int) -> None:
    """What a BufferedProtocol transport does: copy into get_buffer()'s memory, then report."""
    for pos in range(0, len(data), step):
        piece = data[pos:pos + step]
        buf = conn.get_buffer(len(piece))
        buf[:len(piece)] = piece
        conn.buffer_updated(len(piece))


async def test_buffered_reads_share_the_brokers_buffer_and_keep_no_reference_to_it():
    from minikafka.broker.connection import new_read_buffer

    async def echo(ctx, body):
        return {"pad": body.get("pad", "")}

    broker = FakeBroker({1: echo})
    broker.read_buffer = new_read_buffer()
    conns = []
    for _ in range(2):
        conn = KafkaConnection(broker, decode_request=decode, encode_response=encode)
        transport = Transport()
        conn.connection_made(transport)
        conns.append((conn, transport))
    assert conns[0][0].get_buffer(10) is conns[1][0].get_buffer(10) is broker.read_buffer
    # Frames split across reads, the two connections' reads interleaved: each frame is whole
    # and intact although the same memory carried the other connection's bytes in between.
    a = frame(k=1, v=0, c=1, pad="a" * 3000) + frame(k=1, v=0, c=2, pad="b" * 10)
    b = frame(k=1, v=0, c=7, pad="z" * 5000)
    for pos in range(0, max(len(a), len(b)), 1000):
        feed_buffered(conns[0][0], a[pos:pos + 1000], 333)
        feed_buffered(conns[1][0], b[pos:pos + 1000], 1000)
    await settle()
    assert [(r["c"], r["body"]["pad"]) for r in conns[0][1].responses()] == [(1, "a" * 3000), (2, "b" * 10)]
    assert [(r["c"], r["body"]["pad"]) for r in conns[1][1].responses()] == [(7, "z" * 5000)]


def test_small_chunks_are_coalesced_into_tls_records_large_ones_pass_through():
    from minikafka.broker.connection import TLS_RECORD_BYTES, coalesce_small

    big = memoryview(bytes(TLS_RECORD_BYTES * 3))
    chunks = [b"\x00\x00\x00\x10", b"head", big, b"tail", b"x" * 100]
    out = coalesce_small(chunks)
    assert [len(c) for c in out] == [8, len(big), 104]
    assert out[1] is big
    assert b"".join(out) == b"".join(chunks)
    many = [b"y" * 1000] * 40  # 40,000 bytes: full records, then the rest
    assert [len(c) for c in coalesce_small(many)] == [17000, 17000, 6000]
    assert b"".join(coalesce_small(many)) == b"".join(many)


async def test_ready_responses_leave_in_one_write():
    writes = []
    gate = asyncio.Event()

    async def handler(ctx, body):
        if ctx.correlation_id == 1:
            await gate.wait()
        return {"n": ctx.correlation_id}

    _, conn, transport = make({1: handler})
    original = transport.writelines
    transport.writelines = lambda chunks: (writes.append(len(chunks)), original(chunks))
    conn.data_received(frame(k=1, v=0, c=1) + frame(k=1, v=0, c=2) + frame(k=1, v=0, c=3))
    await settle()
    assert writes == []  # 2 and 3 are ready, held behind 1
    gate.set()
    await settle()
    assert writes == [6]  # three responses of two chunks each, in one writelines
    assert [r["c"] for r in transport.responses()] == [1, 2, 3]
