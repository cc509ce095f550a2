"""Crash safety of transactions: kill -9 the broker in each phase of a transaction, restart it, and
check that the coordinator finishes what was decided and that a read_committed consumer never sees
a partial or aborted transaction.

Phases: (1) the transaction is open (data written, no EndTxn); (2) EndTxn's Prepare record is
written but no marker (the broker kills itself there: MINIKAFKA_TXN_CRASH_AFTER=prepare, see
broker/txn/apis.py); (3) the marker reached one partition of the transaction only
(MINIKAFKA_TXN_CRASH_AFTER=marker).  Transactional offsets committed with the transaction survive.
"""

from __future__ import annotations

import time

import pytest

from conftest import start_broker
from test_txn_clients import describe, new_topic, read_all, wait_until

pytestmark = pytest.mark.minikafka_only(reason="kills the broker process (kill -9) mid-transaction")

OVERRIDES = dict(offsets_topic_num_partitions=3, transaction_state_log_num_partitions=3,
                 group_min_session_timeout_ms=1000)
WAIT_S = 30


def producer(bootstrap, tid, **extra):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0,
                  "reconnect.backoff.max.ms": 200, **extra})
    p.init_transactions(WAIT_S)
    return p


def committed_offset(bootstrap, group, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], 10)[0].offset
    finally:
        c.close()


@pytest.fixture
def crashing_broker(tmp_path, monkeypatch):
    started = []

    def start(crash_after=None):
        if crash_after:
            monkeypatch.setenv("MINIKAFKA_TXN_CRASH_AFTER", crash_after)
        else:
            monkeypatch.delenv("MINIKAFKA_TXN_CRASH_AFTER", raising=False)
        b = start_broker(tmp_path, **OVERRIDES)
        started.append(b)
        return b

    yield start
    for b in started:
        b.kill()


def restart_clean(b, monkeypatch):
    monkeypatch.delenv("MINIKAFKA_TXN_CRASH_AFTER", raising=False)
    b.proc.wait(timeout=WAIT_S)  # the broker killed itself (or was killed)
    b.restart(kill=True)


def test_kill_while_the_transaction_is_open(crashing_broker, monkeypatch):
    b = crashing_broker()
    topic = new_topic(b.bootstrap)
    p = producer(b.bootstrap, "open-" + topic, **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"open%d" % i)
    p.flush(WAIT_S)
    b.kill()
    restart_clean(b, monkeypatch)
    assert read_all(b.bootstrap, topic, "read_uncommitted") == [b"open%d" % i for i in range(5)]
    assert read_all(b.bootstrap, topic, "read_committed") == []  # blocked at the LSO
    assert describe(b.bootstrap, "open-" + topic)["transaction_state"] == "Ongoing"
    # the open transaction keeps its deadline across the restart and is aborted then
    wait_until(lambda: describe(b.bootstrap, "open-" + topic)["transaction_state"] == "CompleteAbort", "abort")
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic, b"after")
    plain.flush(10)
    assert read_all(b.bootstrap, topic, "read_committed") == [b"after"]


@pytest.mark.parametrize("phase", ["prepare", "marker"])
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_kill_while_ending_the_transaction(crashing_broker, monkeypatch, phase, commit):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    b = crashing_broker()
    src, dst = new_topic(b.bootstrap), new_topic(b.bootstrap, partitions=2)
    seed = producer(b.bootstrap, "seed-" + src)
    seed.begin_transaction()
    for i in range(4):
        seed.produce(src, b"s%d" % i)
    seed.commit_transaction(WAIT_S)
    monkeypatch.setenv("MINIKAFKA_TXN_CRASH_AFTER", phase)  # the next transaction to end kills the broker
    b.restart()

    group = "g-" + src
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([src])
    msgs = []
    deadline = time.monotonic() + WAIT_S
    while len(msgs) < 4 and time.monotonic() < deadline:
        msgs += [m for m in c.consume(10, 0.5) if not m.error()]
    assert len(msgs) == 4
    tid = "crash-" + src
    p = producer(b.bootstrap, tid)
    p.begin_transaction()
    for m in msgs:
        p.produce(dst, m.value().upper(), partition=0)
        p.produce(dst, m.value().upper(), partition=1)
    p.send_offsets_to_transaction([TopicPartition(src, 0, msgs[-1].offset() + 1)], c.consumer_group_metadata(),
                                  WAIT_S)
    p.flush(WAIT_S)
    with pytest.raises(KafkaException):
        (p.commit_transaction if commit else p.abort_transaction)(5)
    restart_clean(b, monkeypatch)

    final = "CompleteCommit" if commit else "CompleteAbort"
    wait_until(lambda: describe(b.bootstrap, tid)["transaction_state"] == final, final)
    expected = sorted(m.value().upper() for m in msgs) if commit else []
    got = read_all(b.bootstrap, dst, "read_committed", partitions=2)
    assert sorted(got[:len(got) // 2]) == sorted(got[len(got) // 2:]) or not commit
    assert sorted(got) == sorted(expected * 2)
    assert len(read_all(b.bootstrap, dst, "read_uncommitted", partitions=2)) == 8
    c.close()
    offset = committed_offset(b.bootstrap, group, src)
    assert offset == (msgs[-1].offset() + 1 if commit else -1001)
