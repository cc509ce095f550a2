"""Issue 24's latency path: handlers run at once (a task only for those that wait), a produce that
wakes a parked fetch is answered after it, a long poll woken by a request is resumed at the end of
that request's first step (no loop iteration), Produce validation rules kept per topic until a
setting they depend on changes."""

import asyncio
import json
import struct

from minikafka.protocol.records import build_batch

from minikafka.broker.config import BrokerConfig
from minikafka.broker.connection import KafkaConnection
from minikafka.broker.handlers import produce
from minikafka.broker.server import AppendWaiters
from broker_fakes import Ctx, FakeBroker


# -- a connection over an in-memory transport with a JSON codec --------------------------------


class Req:
    def __init__(self, msg):
        self.api_key, self.api_version, self.correlation_id = msg["k"], msg.get("v", 0), msg["c"]
        self.client_id, self.body = "test", msg


def decode(frame):
    return Req(json.loads(bytes(frame)))


def encode(api_key, api_version, correlation_id, body):
    payload = json.dumps({"c": correlation_id, "body": body}).encode()
    return [struct.pack(">i", len(payload)), payload]


def frame(**msg):
    payload = json.dumps(msg).encode()
    return struct.pack(">i", len(payload)) + payload


class Transport(asyncio.Transport):
    def __init__(self, name, log):
        super().__init__()
        self.name, self.log = name, log
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def writelines(self, chunks):
        data = b"".join(bytes(c) for c in chunks)
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack_from(">i", data, pos)
            self.log.append((self.name, json.loads(data[pos + 4:pos + 4 + n])))
            pos += 4 + n

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed

    def set_write_buffer_limits(self, high=None, low=None):
        pass


class Registry:
    def __init__(self, handlers):
        self.handlers = handlers

    def lookup(self, key, version):
        return self.handlers[key]


class MiniBroker:
    def __init__(self, handlers):
        self.config = BrokerConfig()
        self.loop = asyncio.get_running_loop()
        self.registry = Registry(handlers)
        self.connections = set()
        self.handler_tasks = set()
        self.append_waiters = AppendWaiters()


def connect(broker, name, log):
    conn = KafkaConnection(broker, decode_request=decode, encode_response=encode)
    conn.connection_made(Transport(name, log))
    return conn


async def test_a_handler_that_does_not_wait_is_answered_at_once_without_a_task():
    async def answer(ctx, body):
        return {"n": body["n"]}

    broker = MiniBroker({1: answer})
    log = []
    conn = connect(broker, "c", log)
    conn.data_received(frame(k=1, c=7, n=1) + frame(k=1, c=8, n=2))
    # answered inside data_received: no loop iteration, no task
    assert log == [("c", {"c": 7, "body": {"n": 1}}), ("c", {"c": 8, "body": {"n": 2}})]
    assert not conn._tasks and not broker.handler_tasks


async def test_a_handler_that_waits_continues_in_a_task_and_answers_stay_in_order():
    gate = asyncio.Event()

    async def slow(ctx, body):
        await asyncio.sleep(0)  # a bare yield first, then a real wait
        await gate.wait()
        return {"slow": True}

    async def fast(ctx, body):
        return {"fast": True}

    broker = MiniBroker({1: slow, 2: fast})
    log = []
    conn = connect(broker, "c", log)
    conn.data_received(frame(k=1, c=1) + frame(k=2, c=2))
    assert log == [] and len(conn._tasks) == 1 and len(broker.handler_tasks) == 1
    for _ in range(3):
        await asyncio.sleep(0)
    assert log == []  # the fast answer waits for the slow one ahead of it
    gate.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert [m["c"] for _, m in log] == [1, 2]
    assert not conn._tasks and not broker.handler_tasks


async def test_a_waiting_handler_is_cancelled_and_a_failing_one_closes_the_connection():
    entered = []

    async def parked(ctx, body):
        entered.append(1)
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            entered.append("cancelled")
            raise

    async def broken(ctx, body):
        raise RuntimeError("boom")

    broker = MiniBroker({1: parked, 2: broken})
    log = []
    conn = connect(broker, "c", log)
    conn.data_received(frame(k=1, c=1))
    (task,) = conn._tasks
    conn.close()
    conn.cancel_tasks()
    await asyncio.gather(task, return_exceptions=True)
    assert entered == [1, "cancelled"] and task.cancelled()
    other = connect(broker, "d", log)
    other.data_received(frame(k=2, c=1))
    assert other.closed and log == []


async def test_a_produce_that_wakes_a_parked_fetch_is_answered_after_the_fetch():
    waiters = None

    async def fetch(ctx, body):
        await waiters.until([("t", 0)], asyncio.get_running_loop(), 30)
        return {"fetched": True}

    async def produce_(ctx, body):
        waiters.notify(("t", 0))
        return {"produced": True}

    async def other(ctx, body):
        return {"other": True}

    broker = MiniBroker({1: fetch, 0: produce_, 3: other})
    waiters = broker.append_waiters
    log = []
    consumer = connect(broker, "consumer", log)
    producer = connect(broker, "producer", log)
    consumer.data_received(frame(k=1, c=1))
    await asyncio.sleep(0)
    # from a loop callback, as the loop calls data_received: the woken fetch answers inside it,
    # the produce's answer waits one loop step
    def produce_in_a_callback():
        producer.data_received(frame(k=0, c=1))
        return [name for name, _ in log]

    assert await _in_a_callback(produce_in_a_callback) == ["consumer"]
    for _ in range(3):
        await asyncio.sleep(0)
    assert [name for name, _ in log] == ["consumer", "producer"]
    # a request that wakes nothing is answered at once
    producer.data_received(frame(k=3, c=2))
    assert log[-1] == ("producer", {"c": 2, "body": {"other": True}})


# -- long polls resumed without a loop iteration (server.LongPoll) ------------------------------


def _in_a_callback(fn):
    """Run ``fn`` from a loop callback, as uvloop calls data_received (no task running); its result."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.call_soon(lambda: done.set_result(fn()))
    return done


def _long_poll_broker(state):
    async def fetch(ctx, body):
        await waiters.until(body.get("keys") and [tuple(k) for k in body["keys"]] or [("t", 0)],
                            asyncio.get_running_loop(), body.get("wait", 5.0))
        return {"seen": list(state)}

    async def produce_(ctx, body):
        for key in body.get("keys") or [["t", 0]]:
            state.append(key)
            waiters.notify(tuple(key))
        return {"produced": True}

    broker = MiniBroker({1: fetch, 0: produce_})
    waiters = broker.append_waiters
    return broker, waiters


async def test_a_long_poll_woken_by_a_produce_is_answered_before_its_data_received_returns():
    state = []
    broker, waiters = _long_poll_broker(state)
    log = []
    consumer = connect(broker, "consumer", log)
    producer = connect(broker, "producer", log)
    await _in_a_callback(lambda: consumer.data_received(frame(k=1, c=1)))
    await asyncio.sleep(0)  # the parked fetch's task takes its first step
    assert waiters.waiting() == 1
    seen = await _in_a_callback(lambda: producer.data_received(frame(k=0, c=1)) or list(log))
    # the fetch's answer was written inside the produce's data_received; the produce's follows
    assert seen == [("consumer", {"c": 1, "body": {"seen": [["t", 0]]}})]
    await asyncio.sleep(0)
    assert [name for name, _ in log] == ["consumer", "producer"]
    assert not consumer._tasks and len(waiters) == 0


async def test_a_produce_to_two_partitions_wakes_the_fetch_once_after_both_appends():
    state = []
    broker, waiters = _long_poll_broker(state)
    log = []
    consumer = connect(broker, "consumer", log)
    producer = connect(broker, "producer", log)
    keys = [["t", 0], ["t", 1]]
    await _in_a_callback(lambda: consumer.data_received(frame(k=1, c=1, keys=keys)))
    await asyncio.sleep(0)
    await _in_a_callback(lambda: producer.data_received(frame(k=0, c=1, keys=keys)))
    # as Kafka completes delayed fetches after the request's appends: both appends seen
    assert log[0] == ("consumer", {"c": 1, "body": {"seen": keys}})


async def test_a_long_poll_resolved_inside_a_running_task_resumes_through_the_loop():
    loop = asyncio.get_running_loop()
    waiters = AppendWaiters()
    resumed = []

    async def poll():
        await waiters.until([("t", 0)], loop, 5.0)
        resumed.append(True)

    task = loop.create_task(poll())
    await asyncio.sleep(0)
    waiters.notify(("t", 0))  # from this test's own task: the poll's task cannot be entered now
    assert resumed == []
    await task
    assert resumed == [True] and len(waiters) == 0


async def test_a_long_poll_times_out_and_is_cancelled_as_a_future_wait_is():
    loop = asyncio.get_running_loop()
    waiters = AppendWaiters()
    started = loop.time()
    await waiters.until([("t", 0)], loop, 0.01)  # nothing appended: back after the timeout
    assert loop.time() - started >= 0.005 and len(waiters) == 0
    task = loop.create_task(waiters.until([("t", 0), ("t", 1)], loop, 5.0))
    await asyncio.sleep(0)
    assert waiters.waiting() == 1
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert task.cancelled() and len(waiters) == 0
    waiters.notify(("t", 0))  # nobody waiting any more: nothing happens


# -- Produce validation rules --------------------------------------------------------------------


def _produce(broker, records):
    return produce.handle_produce_sync(broker, 9, {"acks": -1, "transactional_id": None, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]})["responses"][0]["partition_responses"][0]


def test_validation_rules_follow_topic_and_broker_setting_changes(tmp_path):
    broker = FakeBroker(str(tmp_path))
    broker._validation_rules = {}
    broker.controller.create_topic("t", 1)
    big = build_batch([(b"k", b"x" * 2000, [], 1000)])
    assert _produce(broker, bytearray(big))["error_code"] == 0
    first = produce.validation_rules(broker, "t")
    assert produce.validation_rules(broker, "t") is first  # kept while nothing changed
    broker.controller.set_topic_configs("t", {"max.message.bytes": "1000"})
    assert _produce(broker, bytearray(big))["error_code"] == 10  # MESSAGE_TOO_LARGE
    broker.controller.set_topic_configs("t", {"max.message.bytes": None})
    assert _produce(broker, bytearray(big))["error_code"] == 0
    # a broker-level setting the topic falls back to
    broker.config.set("message.max.bytes", "1500")
    assert _produce(broker, bytearray(big))["error_code"] == 10
    broker.config.set("log.cleanup.policy", "compact")
    assert produce.validation_rules(broker, "t").compact
    unkeyed = build_batch([(None, b"v", [], 1000)])
    assert _produce(broker, bytearray(unkeyed))["error_code"] == 87  # INVALID_RECORD: compacted, no key
    # a topic deleted and created again starts from its own settings
    broker.controller.delete_topic("t")
    broker.config.set("log.cleanup.policy", "delete")
    broker.controller.create_topic("t", 1, configs={"max.message.bytes": "100"})
    assert produce.validation_rules(broker, "t").max_message_bytes == 100
    broker.logs.close()


def test_validation_rules_without_the_cache_are_the_same(tmp_path):
    broker = FakeBroker(str(tmp_path))
    broker.controller.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
    plain = produce.validation_rules(broker, "t")
    broker._validation_rules = {}
    assert produce.validation_rules(broker, "t") == plain
    assert not plain.create_time
    broker.logs.close()


def test_ctx_fake_is_still_usable():
    # broker_fakes.Ctx is shared with other tests: the hot path must not need more of it
    assert Ctx(None, 0, 9).connection is None
