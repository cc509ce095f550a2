"""Share groups (KIP-932) on minikafka beside Apache Kafka 4.2 in the same run.

    .venv/bin/python bench/share.py [--records 100000] [--only minikafka|kafka]

A minikafka run consumes 100,000 records in 0.1-0.2 s, too short a window for a steady ratio of 4
consumers to 1: use ``--records 1000000`` (the producer waits whenever librdkafka's local queue is full).

For each broker (started afresh, one after the other, same settings where both have them):

* consume throughput on ONE partition: records/s for a share group of 1, 2 and 4 confluent-kafka
  ``ShareConsumer`` (implicit acknowledgement, librdkafka defaults), and for a classic group consumer
  (``Consumer``, earliest) of as many records, produced in batches of 100.  The share consumers join
  and are made ready (assigned, share partition started: a sentinel is produced until each got one),
  stop polling while ``--records`` records of 100 bytes are produced, then poll again; the clock runs
  from the first record any of them received to the last (records per consumer are reported);
* time from acquisition-lock expiry to redelivery: consumer A takes a record and keeps it, consumer B
  polls; the lock (``group.share.record.lock.duration.ms``, 1 s on both brokers: Kafka's minimum is
  lowered with ``group.share.min.record.lock.duration.ms``) expires and B receives the record.  The
  time reported is B's receipt minus (the moment the record was produced + the lock duration): an
  upper bound of expiry-to-redelivery, since the broker acquired the record after it was produced;
* broker RSS with 100,000 records in flight: 50 partitions of 2,000 records each
  (``group.share.partition.max.record.locks``' default), acquired by raw ShareFetch requests of one
  member and never acknowledged; RSS of the broker process before and after (``/proc/PID/status``).

Targets (issue 21): 4 share consumers >= 2x one; redelivery within 100 ms of expiry; at least Kafka's
throughput.  Results are printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "kafka"))

import kafka_runner  # noqa: E402
import produce_consume as pc  # noqa: E402

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

LOCK_MS = 1000
SETTINGS = {"group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.min.record.lock.duration.ms": str(LOCK_MS),
            "offsets.topic.num.partitions": "5", "group.initial.rebalance.delay.ms": "0"}
SENTINEL = b"sentinel"
VALUE = b"x" * 100
BATCH = 100  # records per produced batch (librdkafka batch.num.messages): share fetches acquire whole batches


# -- brokers -------------------------------------------------------------------------------------

class Minikafka:
    name = "minikafka"

    def __init__(self, workdir: Path):
        argv = pc.minikafka_argv(workdir / f"mk-{uuid.uuid4().hex[:6]}")
        overrides = [a for k, v in SETTINGS.items() for a in ("--override", f"{k}={v}")]
        self.proc = pc.BrokerProcess("minikafka", lambda port: argv(port) + overrides, workdir)
        self.bootstrap, self.port, self.pid = self.proc.bootstrap, self.proc.port, self.proc.proc.pid

    def stop(self) -> None:
        self.proc.stop()


class Kafka:
    name = "kafka"

    def __init__(self, workdir: Path):
        self.broker = kafka_runner.KafkaBroker(workdir / f"kafka-{uuid.uuid4().hex[:6]}", dict(SETTINGS)).start()
        self.bootstrap, self.port, self.pid = self.broker.bootstrap, self.broker.port, self.broker.pid

    def stop(self) -> None:
        self.broker.stop()


def rss_mb(pid: int) -> float:
    return pc.rss_kib(pid, "VmRSS") / 1024


def _topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    time.sleep(0.5)


def _ready(producer, topic: str, consumers: list, explicit: bool = False, timeout: float = 60.0) -> None:
    waiting = list(consumers)
    deadline = time.monotonic() + timeout
    while waiting:
        if time.monotonic() > deadline:
            raise RuntimeError("share consumers never assigned")
        producer.produce(topic, SENTINEL)
        producer.flush(10)
        for c in list(waiting):
            msgs = c.poll(0.3)
            if msgs:
                if explicit:
                    for m in msgs:
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    c.commit_sync()
                waiting.remove(c)


# -- throughput --------------------------------------------------------------------------------------

def _start_at_zero(port: int, group: str, topic: str, partitions: int = 1) -> None:
    """AlterShareGroupOffsets (91) on the not yet joined group: its share partitions start at offset 0."""
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from conftest import RawClient  # the project's raw protocol client (protocol.codec)

    with RawClient(port, timeout=30) as c:
        deadline = time.monotonic() + 30
        while True:
            c.request(10, 6, {"key_type": 0, "coordinator_keys": [group]})
            r = c.request(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
                {"partition_index": p, "start_offset": 0} for p in range(partitions)]}]})
            if r["error_code"] == 0 and all(p["error_code"] == 0 for t in r["responses"] for p in t["partitions"]):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"AlterShareGroupOffsets: {r}")
            time.sleep(0.2)


def _produce(producer, topic: str, n: int) -> None:
    """``n`` records; a full local queue (librdkafka's 100,000 messages by default) waits for the
    broker's answers, so ``--records`` may exceed it (a longer, steadier measuring window)."""
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)


def share_throughput(broker, n: int, consumers: int) -> dict:
    """The consumers join and are made ready (each got a sentinel: assigned, share partition
    started), stop polling while ``n`` records are produced, then poll again: records/s from the
    first record any of them received to the last."""
    bootstrap = broker.bootstrap
    topic, group = f"sb-{uuid.uuid4().hex[:8]}", f"sb-g-{uuid.uuid4().hex[:8]}"
    _topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": BATCH})
    cs = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(consumers)]
    for c in cs:
        c.subscribe([topic])
    _ready(producer, topic, cs)
    for c in cs:
        c.poll(0.1)  # accepts the sentinels (implicit acknowledgement)
    _produce(producer, topic, n)
    counts = [0] * consumers
    total = [0]
    first = [None]
    last = [None]
    lock = threading.Lock()
    done = threading.Event()

    def run(i, c):
        while not done.is_set():
            got = sum(1 for m in c.poll(0.2) if m.error() is None and m.value() != SENTINEL)
            if got:
                now = time.monotonic()
                with lock:
                    if first[0] is None:
                        first[0] = now
                    counts[i] += got
                    total[0] += got
                    if total[0] >= n:
                        last[0] = now
                        done.set()

    try:
        threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(cs)]
        for t in threads:
            t.start()
        done.wait(300)
        done.set()
        for t in threads:
            t.join(10)
        elapsed = (last[0] or time.monotonic()) - (first[0] or time.monotonic())
        return {"records_s": total[0] / elapsed if elapsed > 0 else 0.0, "received": total[0], "per_consumer": counts}
    finally:
        for c in cs:
            try:
                c.close()
            except Exception:
                pass


def classic_throughput(bootstrap: str, n: int) -> dict:
    topic = f"cb-{uuid.uuid4().hex[:8]}"
    _topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": BATCH})
    _produce(producer, topic, n)
    # fetch.queue.backoff.ms: librdkafka >= 2.2 stops fetching for 1 s (its default) once its local
    # queue holds queued.min.messages (100,000) records, which a broker that answers faster than the
    # application polls reaches: with 1,000,000 records that pause, not the broker, set the rate.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cb-g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": True, "fetch.queue.backoff.ms": 1})
    c.subscribe([topic])
    got = 0
    began = None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                if began is None:
                    began = time.monotonic()
                got += 1
    elapsed = time.monotonic() - (began or time.monotonic())
    c.close()
    return {"records_s": got / elapsed if elapsed > 0 else 0.0, "received": got}


# -- redelivery ------------------------------------------------------------------------------------

def redelivery_ms(bootstrap: str, samples: int = 3) -> list[float]:
    topic, group = f"rb-{uuid.uuid4().hex[:8]}", f"rb-g-{uuid.uuid4().hex[:8]}"
    _topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    a, b = ShareConsumer(conf), ShareConsumer(conf)
    a.subscribe([topic])
    b.subscribe([topic])
    out = []
    try:
        for c in (a, b):
            _ready(producer, topic, [c], explicit=True)
        for c in (a, b):  # sentinels the other one did not take
            msgs = c.poll(0.2)
            for m in msgs:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if msgs:
                c.commit_sync()
        for i in range(samples):
            value = b"held-%d" % i
            holder, other = a, b
            started = time.monotonic()  # the broker acquires the record after this: it is not produced yet
            producer.produce(topic, value)
            producer.flush(10)
            held = []
            deadline = started + 10
            while not held and time.monotonic() < deadline:
                held = [m for m in holder.poll(0.5) if m.value() == value]
                if not held:
                    extra = [m for m in other.poll(0.1) if m.value() == value]
                    if extra:  # the other consumer took it: it is the holder this time
                        holder, other, held = other, holder, extra
            if not held:
                raise RuntimeError("record not delivered")
            expiry = started + LOCK_MS / 1000.0
            again = []
            deadline = time.monotonic() + 10
            while not again and time.monotonic() < deadline:
                again = [m for m in other.poll(0.05) if m.value() == value]
            if not again:
                raise RuntimeError("record not redelivered")
            out.append((time.monotonic() - expiry) * 1000.0)
            other.acknowledge(again[0], AcknowledgeType.ACCEPT)
            other.commit_sync()
            try:
                holder.acknowledge(held[0], AcknowledgeType.ACCEPT)  # too late: refused by the broker
                holder.commit_sync()
            except Exception:
                pass
    finally:
        for c in (a, b):
            try:
                c.close()
            except Exception:
                pass
    return out


# -- in-flight memory --------------------------------------------------------------------------------

def in_flight_rss(broker, partitions: int = 50, per_partition: int = 2000) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from conftest import RawClient  # the project's raw protocol client (protocol.codec)

    topic, group = f"mb-{uuid.uuid4().hex[:8]}", f"mb-g-{uuid.uuid4().hex[:8]}"
    _topic(broker.bootstrap, topic, partitions)
    member = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    c = RawClient(broker.port, timeout=60)
    # Join and wait for the assignment of every partition.
    c.request(10, 6, {"key_type": 0, "coordinator_keys": [group]})
    epoch, deadline = 0, time.monotonic() + 60
    while True:
        hb = c.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                               "subscribed_topic_names": [topic] if epoch == 0 else None})
        if hb["error_code"] == 0:
            epoch = hb["member_epoch"]
            a = hb.get("assignment")
            if a and sum(len(t["partitions"]) for t in a["topic_partitions"]) == partitions:
                topic_id = a["topic_partitions"][0]["topic_id"]
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"not assigned: {hb}")
        time.sleep(0.2)

    def fetch(epoch_, wait=500, tid=topic_id):
        return c.request(78, 2, {
            "group_id": group, "member_id": member, "share_session_epoch": epoch_, "max_wait_ms": wait,
            "min_bytes": 1, "max_bytes": 50 << 20, "max_records": 2000, "batch_size": 2000, "share_acquire_mode": 0,
            "is_renew_ack": False, "forgotten_topics_data": [],
            "topics": [{"topic_id": tid, "partitions": [{"partition_index": p, "acknowledgement_batches": []}
                                                        for p in range(partitions)]}] if tid else []})

    fetch(0, wait=100)
    time.sleep(1.0)  # Kafka loads share partitions in the background
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 1000})
    for p in range(partitions):
        for _ in range(per_partition):
            producer.produce(topic, VALUE, partition=p)
            producer.poll(0)
    producer.flush(120)
    time.sleep(1.0)
    before = rss_mb(broker.pid)
    acquired, ep = 0, 1
    deadline = time.monotonic() + 120
    while acquired < partitions * per_partition and time.monotonic() < deadline:
        r = fetch(ep, wait=500, tid=None)
        ep += 1
        acquired += sum(a["last_offset"] - a["first_offset"] + 1
                        for t in r["responses"] for p in t["partitions"] for a in p["acquired_records"])
    time.sleep(1.0)
    after = rss_mb(broker.pid)
    c.sock.close()
    return {"in_flight": acquired, "rss_before_mb": before, "rss_after_mb": after}


# -- main --------------------------------------------------------------------------------------------

def one_broker(kind, workdir: Path, n: int) -> dict:
    broker = (Minikafka if kind == "minikafka" else Kafka)(workdir)
    try:
        out = {"broker": kind, "idle_rss_mb": rss_mb(broker.pid)}
        out["classic"] = classic_throughput(broker.bootstrap, n)
        for k in (1, 2, 4):
            out[f"share{k}"] = share_throughput(broker, n, k)
        out["redelivery_ms"] = redelivery_ms(broker.bootstrap)
        out["memory"] = in_flight_rss(broker)
        return out
    finally:
        broker.stop()


def table(results: list[dict], n: int) -> str:
    lines = ["| broker | classic consumer | share x1 | share x2 | share x4 | x4 / x1 | lock expiry -> redelivery "
             "(ms, median of 3; max) | RSS idle / before / with 100k in flight (MB) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        red = r["redelivery_ms"]
        mem = r["memory"]
        s1, s4 = r["share1"]["records_s"], r["share4"]["records_s"]
        lines.append(
            f"| {r['broker']} | {r['classic']['records_s']:,.0f}/s | {s1:,.0f}/s | {r['share2']['records_s']:,.0f}/s | "
            f"{s4:,.0f}/s {r['share4']['per_consumer']} | {s4 / s1:.2f} | {statistics.median(red):.0f}; {max(red):.0f} | "
            f"{r['idle_rss_mb']:.0f} / {mem['rss_before_mb']:.0f} / {mem['rss_after_mb']:.0f} ({mem['in_flight']:,} in flight) |")
    return "\n".join(lines) + f"\n\n{n:,} records of 100 bytes on one partition; records/s from the first record received to the last.\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--only", choices=("minikafka", "kafka"))
    args = parser.parse_args()
    kinds = [args.only] if args.only else ["minikafka", "kafka"]
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
        results = []
        for kind in kinds:
            r = one_broker(kind, Path(tmp), args.records)
            print(kind, r, flush=True)
            results.append(r)
    print(table(results, args.records))


if __name__ == "__main__":
    main()
