"""Client quotas: the metadata APIs (KIP-546) and the enforcement arithmetic (Kafka's Rate and
throttle time), with an injected clock."""

import asyncio

import pytest

from minikafka.protocol import codec

from minikafka.broker.handlers import client_quotas
from minikafka.broker.quotas import ClientQuotas, Rate, _Timed, resolve
from broker_fakes import Ctx, FakeBroker


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path))
    b.quotas = ClientQuotas(b)
    yield b
    b.logs.close()


async def call(broker, key, version, body):
    frame = codec.encode_request(key, version, 1, "test", body)[4:]
    handler = {48: client_quotas.describe_client_quotas, 49: client_quotas.alter_client_quotas}[key]
    response = await handler(Ctx(broker, key, version), codec.decode_request(frame).body)
    wire = b"".join(bytes(c) for c in codec.encode_response(key, version, 1, response))
    return codec.decode_response(key, version, wire[4:])[1]


def alter(entity, ops, validate_only=False):
    return {"validate_only": validate_only, "entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [{"key": k, "value": v if v is not None else 0.0, "remove": v is None} for k, v in ops]}]}


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_and_describe_client_quotas(broker, version):
    r = await call(broker, 49, version, alter([("client-id", "app")], [("producer_byte_rate", 1048576.0)]))
    assert r["entries"][0]["error_code"] == 0
    await call(broker, 49, version, alter([("user", None)], [("request_percentage", 50.0)]))
    await call(broker, 49, version, alter([("user", "alice"), ("client-id", "app")], [("consumer_byte_rate", 2000.0)]))
    d = await call(broker, 48, version, {"components": [{"entity_type": "client-id", "match_type": 0, "match": "app"}],
                                         "strict": False})
    assert d["error_code"] == 0
    found = sorted((tuple((e["entity_type"], e["entity_name"]) for e in x["entity"]),
                    tuple((v["key"], v["value"]) for v in x["values"])) for x in d["entries"])
    assert found == [((("client-id", "app"),), (("producer_byte_rate", 1048576.0),)),
                     ((("client-id", "app"), ("user", "alice")), (("consumer_byte_rate", 2000.0),))]
    strict = await call(broker, 48, version, {"components": [{"entity_type": "client-id", "match_type": 0,
                                                              "match": "app"}], "strict": True})
    assert len(strict["entries"]) == 1
    default_user = await call(broker, 48, version, {"components": [{"entity_type": "user", "match_type": 1,
                                                                    "match": None}], "strict": True})
    assert default_user["entries"][0]["values"] == [{"key": "request_percentage", "value": 50.0}]
    # remove: the entity disappears
    await call(broker, 49, version, alter([("user", None)], [("request_percentage", None)]))
    assert (await call(broker, 48, version, {"components": [{"entity_type": "user", "match_type": 1, "match": None}],
                                             "strict": True}))["entries"] == []


@pytest.mark.parametrize("entity,ops", [
    ([("client-id", "a")], [("producer_byte_rate", 1.5)]),  # not a whole number
    ([("client-id", "a")], [("connection_creation_rate", 1.0)]),  # ip-only key
    ([("ip", "1.2.3.4"), ("user", "u")], [("connection_creation_rate", 1.0)]),
    ([("ip", "not-an-ip")], [("connection_creation_rate", 1.0)]),
    ([("client-id", "a"), ("client-id", "b")], [("producer_byte_rate", 1.0)]),
    ([("group", "g")], [("producer_byte_rate", 1.0)]),
    ([("client-id", "a")], [("no_such_key", 1.0)]),
])
async def test_alter_refuses_invalid_entries_with_invalid_request(broker, entity, ops):
    r = await call(broker, 49, 1, alter(entity, ops))
    assert r["entries"][0]["error_code"] == 42 and r["entries"][0]["error_message"]
    assert broker.controller.client_quotas == {}


async def test_validate_only_and_persistence(broker):
    await call(broker, 49, 1, alter([("client-id", "a")], [("producer_byte_rate", 10.0)], validate_only=True))
    assert broker.controller.client_quotas == {}
    await call(broker, 49, 1, alter([("client-id", "a")], [("producer_byte_rate", 10.0)]))
    from minikafka.broker.controller import Controller

    again = Controller(broker.config, broker.meta, broker.logs)
    assert again.client_quotas == {(("client-id", "a"),): {"producer_byte_rate": 10.0}}


async def test_describe_filter_errors(broker):
    bad = await call(broker, 48, 1, {"components": [{"entity_type": "user", "match_type": 0, "match": None}],
                                     "strict": False})
    assert bad["error_code"] == 42 and bad["entries"] is None


def test_resolution_follows_kafkas_precedence():
    q = {(("client-id", None),): {"producer_byte_rate": 8.0},
         (("client-id", "c"),): {"producer_byte_rate": 7.0},
         (("user", None),): {"producer_byte_rate": 6.0},
         (("client-id", "c"), ("user", "u")): {"producer_byte_rate": 1.0}}
    assert resolve(q, "producer_byte_rate", "u", "c") == (1.0, ("u", "c"))
    assert resolve(q, "producer_byte_rate", "v", "c") == (6.0, ("v", ""))  # default user before client
    del q[(("user", None),)]
    assert resolve(q, "producer_byte_rate", "v", "c") == (7.0, ("", "c"))
    assert resolve(q, "producer_byte_rate", "v", "d") == (8.0, ("", "d"))  # per client id
    assert resolve(q, "consumer_byte_rate", "v", "d") is None


def test_rate_uses_at_least_num_minus_one_windows():
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    assert rate.measure(0) == pytest.approx(1000.0)  # 10 kB over the 10 s minimum window
    for t in range(1, 30):
        rate.record(1000, t * 1000)
    # steady 1000 B/s: the oldest samples have expired, the rate converges to 1000 B/s
    assert rate.measure(29_500) == pytest.approx(1000.0, rel=0.1)


def test_throttle_time_is_kafkas_formula(broker):
    broker.controller.alter_client_quota((("client-id", "c"),), "producer_byte_rate", 1000.0)
    q = broker.quotas
    assert q.record("producer_byte_rate", "ANONYMOUS", "c", 10_000, 0) == 0  # exactly the bound
    # 20 kB in the 10 s window: 2000 B/s against 1000 → (2000-1000)/1000 * 10 s = 10 s
    assert q.record("producer_byte_rate", "ANONYMOUS", "c", 10_000, 0) == 10_000
    # the request quota's throttle is capped at one window
    broker.controller.alter_client_quota((("client-id", "c"),), "request_percentage", 1.0)
    assert q.record("request_percentage", "ANONYMOUS", "c", 500.0, 0) == 1000


async def test_timed_counts_only_the_handlers_own_steps():
    import time

    async def handler():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.02:
            pass
        await asyncio.sleep(0.1)  # parked: not counted
        return 7

    timed = _Timed(handler())
    assert await timed == 7
    assert 0.02 <= timed.elapsed < 0.06


async def test_run_throttles_produce_and_empties_a_throttled_fetch(broker):
    broker.controller.alter_client_quota((("client-id", "c"),), "producer_byte_rate", 1000.0)
    broker.controller.alter_client_quota((("client-id", "c"),), "consumer_byte_rate", 1000.0)
    muted = []

    class Conn:
        principal = None

        def mute_for(self, seconds):
            muted.append(seconds)

    async def produce(ctx, body):
        return {"responses": [], "throttle_time_ms": 0}

    def ctx(key, version):
        c = Ctx(broker, key, version, client_id="c")
        c.connection = Conn()
        return c

    r = await broker.quotas.run(produce, ctx(0, 9), {}, 10_000)
    assert r["throttle_time_ms"] == 0
    r = await broker.quotas.run(produce, ctx(0, 9), {}, 10_000)
    assert r["throttle_time_ms"] == 10_000 and muted == [10.0]

    seen_max = []

    async def fetch(ctx, body):
        seen_max.append(body["max_bytes"])
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": "t", "partitions": [{"partition_index": 0, "records": [b"x" * 10_000]}]}]}

    r = await broker.quotas.run(fetch, ctx(1, 12), {"max_bytes": 50_000_000}, 100)
    assert seen_max == [10_000]  # capped at what the quota allows in num-1 windows
    assert r["responses"] and r["throttle_time_ms"] == 0
    r = await broker.quotas.run(fetch, ctx(1, 12), {"max_bytes": 50_000_000}, 100)
    assert r["responses"] == [] and r["throttle_time_ms"] == 10_000
