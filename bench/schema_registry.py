"""Schema registry (issue 23): start cost on top of the broker, register/lookup latency, and produce +
consume throughput with confluent-kafka's Avro serializer against the registry beside plain bytes.

    .venv/bin/python bench/schema_registry.py [--rounds 5] [--records 20000]

(``PYTHONDONTWRITEBYTECODE=1`` in the environment makes every import compile its source: unset it,
as an installed package has its bytecode, or the start figures measure the compiler.)

1. start: ``python -m minikafka serve --port 0`` without and with ``schema.registry.listeners``,
   alternated, ``--rounds`` times each: time from spawn to the ready line, RSS (VmRSS) one second
   after it, and the registry's own start time as it logs it ("started in X ms").
2. latency: one keep-alive HTTP connection (http.client); register N new schemas (each an append to
   ``_schemas``), look each up (POST /subjects/{s}), fetch by id; p50/p99 per operation.
3. throughput: the same records (a 5-field Avro record, ~60 bytes encoded) produced and consumed
   with AvroSerializer/AvroDeserializer, and as pre-encoded bytes without a serializer.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = re.compile(rb"minikafka ready on (\S+):(\d+)")
STARTED = re.compile(rb"schema registry on \S+ \(\d+ subjects, started in ([0-9.]+) ms\)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Served:
    def __init__(self, registry: bool, http: bool = False):
        self.data = tempfile.mkdtemp(prefix="bench-sr-")
        self.sr_port = _free_port() if registry else None
        cmd = [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir", self.data]
        if http:
            cmd += ["--override", "http.port=0"]
        if registry:
            cmd += ["--override", f"schema.registry.listeners=http://127.0.0.1:{self.sr_port}"]
        self.log = open(os.path.join(self.data, "broker.log"), "wb+")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, cwd=REPO)
        buf = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("broker exited")
            buf += chunk
            m = READY.search(buf)
            if m:
                self.port = int(m.group(2))
                break
        self.ready_s = time.perf_counter() - t0

    def registry_start_ms(self) -> float | None:
        self.log.flush()
        with open(self.log.name, "rb") as f:
            m = STARTED.search(f.read())
        return float(m.group(1)) if m else None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


def bench_start(rounds: int, http: bool) -> None:
    print(f"-- broker {'with' if http else 'without'} its HTTP server (http.port={'0' if http else '-1'})")
    rows = {False: [], True: []}
    for _ in range(rounds):
        for registry in (False, True):
            served = Served(registry, http)
            time.sleep(1.0)
            rows[registry].append((served.ready_s, _rss_mb(served.proc.pid), served.registry_start_ms()))
            served.stop()
    med = lambda xs: statistics.median(xs)  # noqa: E731
    off_t, on_t = med([r[0] for r in rows[False]]), med([r[0] for r in rows[True]])
    off_m, on_m = med([r[1] for r in rows[False]]), med([r[1] for r in rows[True]])
    own = [r[2] for r in rows[True] if r[2] is not None]
    print(f"start to ready: off {off_t * 1000:.0f} ms, on {on_t * 1000:.0f} ms, difference "
          f"{(on_t - off_t) * 1000:+.0f} ms (medians of {rounds})")
    print(f"RSS 1 s after ready: off {off_m:.1f} MB, on {on_m:.1f} MB, difference {on_m - off_m:+.1f} MB")
    if own:
        print(f"registry start as logged (open _schemas, replay, bind): median {med(own):.1f} ms, "
              f"max {max(own):.1f} ms")


INPROCESS = r"""
import asyncio, gc, json, sys, tempfile, time
from minikafka.broker.config import BrokerConfig
from minikafka.broker.server import Broker
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024
async def main():
    http = sys.argv[1] == "1"
    data_dir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    fill = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    overrides = {"http.port": "0"} if http else {}
    config = BrokerConfig.load(environ={}, fields={"port": 0, "data_dir": data_dir}, overrides=overrides)
    broker = Broker(config)
    await broker.start()
    await asyncio.sleep(0.3)
    gc.collect()
    before = rss()
    config.set("schema.registry.listeners", "http://127.0.0.1:0")
    t0 = time.perf_counter()
    from minikafka.broker.schema_registry.server import start
    broker.schema_registry = await start(broker)
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(0.3)
    gc.collect()
    registry = broker.schema_registry.registry
    for i in range(fill):  # leave records for the next start to replay
        registry.register(f"fill-{i}", {"schema": json.dumps({"type": "record", "name": f"F{i}", "fields": []})})
    print(json.dumps({"ms": elapsed * 1000, "mb": rss() - before, "subjects": len(registry.state.subjects)}))
    await broker.stop()
asyncio.run(main())
"""


def bench_inprocess(rounds: int, fill: int = 200) -> None:
    """The registry's own cost inside a started broker: import + start, on a first start (creates
    ``_schemas``) and on a restart that replays ``fill`` registrations."""
    for http in (False, True):
        first, again = [], []
        for _ in range(rounds):
            data = tempfile.mkdtemp(prefix="bench-sr-")
            run = lambda *extra: json.loads(subprocess.run(  # noqa: E731
                [sys.executable, "-c", INPROCESS, "1" if http else "0", data, *extra], capture_output=True,
                text=True, timeout=300, cwd=REPO).stdout.strip().splitlines()[-1])
            first.append(run(str(fill)))
            again.append(run())
        label = "HTTP server on" if http else "no HTTP server"
        for name, results in (("first start (creates _schemas)", first),
                              (f"restart (replays {fill} registrations)", again)):
            ms = statistics.median(r["ms"] for r in results)
            mb = statistics.median(r["mb"] for r in results)
            print(f"in a started broker, {label}, {name}: import + start median {ms:.1f} ms "
                  f"(min {min(r['ms'] for r in results):.1f}), RSS +{mb:.1f} MB (median of {rounds})")


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def bench_latency(n: int) -> None:
    served = Served(True)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", served.sr_port)
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}

        def call(method, path, body=None):
            t0 = time.perf_counter()
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            response = conn.getresponse()
            data = response.read()
            elapsed = time.perf_counter() - t0
            assert response.status == 200, data
            return elapsed, json.loads(data)

        schemas = [{"type": "record", "name": f"R{i}", "namespace": "bench",
                    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                               {"name": f"f{i}", "type": ["null", "int"], "default": None}]} for i in range(n)]
        for i in range(20):  # warm-up: parsers imported, connection open
            call("POST", f"/subjects/warm{i}/versions", {"schema": json.dumps({**schemas[0], "name": f"W{i}"})})
        register, lookup, by_id, ids = [], [], [], []
        for i, schema in enumerate(schemas):
            t, body = call("POST", f"/subjects/bench-{i}/versions", {"schema": json.dumps(schema)})
            register.append(t)
            ids.append(body["id"])
        for i, schema in enumerate(schemas):
            lookup.append(call("POST", f"/subjects/bench-{i}", {"schema": json.dumps(schema)})[0])
        for schema_id in ids:
            by_id.append(call("GET", f"/schemas/ids/{schema_id}")[0])
        for name, values in (("register (new id, append to _schemas)", register),
                             ("lookup POST /subjects/{s}", lookup), ("GET /schemas/ids/{id}", by_id)):
            print(f"{name}: p50 {_pct(values, 0.5) * 1000:.2f} ms, p99 {_pct(values, 0.99) * 1000:.2f} ms "
                  f"({len(values)} calls)")
    finally:
        served.stop()


def bench_throughput(records: int) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
        {"name": "id", "type": "long"}, {"name": "user", "type": "string"}, {"name": "amount", "type": "double"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
        {"name": "note", "type": ["null", "string"], "default": None}]}
    values = [{"id": i, "user": f"user-{i % 1000}", "amount": i * 0.5, "kind": "ABC"[i % 3],
               "note": None if i % 2 else "some note"} for i in range(records)]
    served = Served(True)
    try:
        sr = SchemaRegistryClient({"url": f"http://127.0.0.1:{served.sr_port}"})
        bootstrap = f"127.0.0.1:{served.port}"
        results = {}
        for mode in ("bytes", "avro", "bytes", "avro"):
            topic = f"{mode}-{time.monotonic_ns()}"
            ctx = SerializationContext(topic, MessageField.VALUE)
            serializer = AvroSerializer(sr, json.dumps(schema))
            plain = [serializer(v, ctx) for v in values] if mode == "bytes" else None
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            t0 = time.perf_counter()
            for i, v in enumerate(values):
                payload = plain[i] if plain is not None else serializer(v, ctx)
                while True:
                    try:
                        producer.produce(topic, payload)
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.flush(60)
            produce_s = time.perf_counter() - t0
            deserializer = AvroDeserializer(sr)
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
            consumer.subscribe([topic])
            got = 0
            t0 = time.perf_counter()
            deadline = time.monotonic() + 120
            while got < records and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 0.5):
                    if msg.error():
                        continue
                    if mode == "avro":
                        deserializer(msg.value(), ctx)
                    got += 1
            consume_s = time.perf_counter() - t0
            consumer.close()
            results.setdefault(mode, []).append((records / produce_s, got / consume_s))
        for mode in ("bytes", "avro"):
            p = statistics.median(r[0] for r in results[mode])
            c = statistics.median(r[1] for r in results[mode])
            print(f"{mode:5s}: produce {p:,.0f} records/s, consume {c:,.0f} records/s")
        pb = statistics.median(r[0] for r in results["bytes"])
        pa = statistics.median(r[0] for r in results["avro"])
        cb = statistics.median(r[1] for r in results["bytes"])
        ca = statistics.median(r[1] for r in results["avro"])
        print(f"avro / bytes: produce {pa / pb:.2f}, consume {ca / cb:.2f}")
    finally:
        served.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--schemas", type=int, default=500)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--only", choices=("start", "latency", "throughput"), default=None)
    args = parser.parse_args()
    print(f"nproc={os.cpu_count()} load={os.getloadavg()[0]:.1f} python={sys.version.split()[0]}")
    if args.only in (None, "start"):
        bench_inprocess(args.rounds)
        bench_start(args.rounds, http=False)
        bench_start(args.rounds, http=True)  # as `make run` serves: aiohttp is loaded either way
    if args.only in (None, "latency"):
        bench_latency(args.schemas)
    if args.only in (None, "throughput"):
        bench_throughput(args.records)


if __name__ == "__main__":
    main()
