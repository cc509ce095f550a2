"""Clean edges of the embedded broker (issue 24): nothing on stdout, nothing left pending at stop."""

from __future__ import annotations

import gc
import logging
import socket
import time

import pytest

from minikafka import Broker
from minikafka.protocol import codec

pytestmark = pytest.mark.minikafka_only(reason="minikafka's embedded broker and its stop")


def _long_poll(bootstrap: str, topic: str, wait_ms: int) -> socket.socket:
    """A Fetch v4 at the end of an empty partition with a long wait: the broker parks it."""
    host, _, port = bootstrap.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    body = {"replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                        "partition_max_bytes": 1 << 20}]}]}
    sock.sendall(codec.encode_request(1, 4, 1, "long-poll", body))
    return sock


def test_stopping_with_a_long_poll_in_flight_leaves_no_pending_task(caplog, capfd):
    # A consumer closed just before the broker stops: its connection is gone, but the Fetch it
    # sent is still parked (handlers of a lost connection finish on their own).  Stopping the
    # broker must cancel and await that handler too, or closing the loop destroys it pending.
    caplog.set_level(logging.ERROR, logger="asyncio")
    broker = Broker().start()
    try:
        broker.control.create_topic("edges", 1)
        polls = [_long_poll(broker.bootstrap_servers, "edges", 30_000) for _ in range(2)]
        deadline = time.monotonic() + 10
        while broker.server.append_waiters.waiting() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert broker.server.append_waiters.waiting() == 2, "the fetches did not park"
        handlers = {t for c in broker.server.connections for t in c._tasks}
        assert len(handlers) == 2
        polls[0].close()  # one consumer gone, the other still connected
        while len(broker.server.connections) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(broker.server.connections) == 1
    finally:
        broker.stop()
    polls[1].close()
    assert all(t.done() for t in handlers)
    del handlers
    gc.collect()
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
    out, err = capfd.readouterr()
    assert "destroyed but it is pending" not in err
    assert out == ""  # the embedded broker writes nothing to stdout


USER_PROJECT = '''
import gc
import socket
import time

from minikafka import Broker

from confluent_kafka import Consumer, Producer

from minikafka.protocol import codec


def test_roundtrip(kafka_bootstrap, kafka_topic, kafka_group_id):
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(kafka_topic, b"hello")
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": kafka_group_id,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 500})
    consumer.subscribe([kafka_topic])
    msg = None
    for _ in range(60):
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            break
    assert msg.value() == b"hello"
    consumer.close()


def _park_a_fetch_and_leave(bootstrap, topic):
    host, _, port = bootstrap.rpartition(":")
    sock = socket.create_connection((host, int(port)))
    body = {"replica_id": -1, "max_wait_ms": 30000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                        "partition_max_bytes": 1 << 20}]}]}
    sock.sendall(codec.encode_request(1, 4, 1, "user", body))
    time.sleep(0.3)  # parked by now
    sock.close()


def test_fixture_broker_with_a_long_poll_left_behind(kafka_bootstrap, kafka_topic):
    # The session ends (and the plugin stops the broker) while this Fetch is still parked.
    _park_a_fetch_and_leave(kafka_bootstrap, kafka_topic)


def test_own_broker_stopped_with_a_long_poll_in_flight():
    with Broker() as kafka:
        kafka.control.create_topic("mine", 1)
        _park_a_fetch_and_leave(kafka.bootstrap_servers, "mine")
    gc.collect()  # a task destroyed while pending would be reported now
'''


def test_a_user_project_runs_clean_under_warnings_as_errors(tmp_path):
    import os
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_user.py").write_text(USER_PROJECT)
    # pytest-asyncio (installed beside us) warns without this setting; a user's project sets it.
    (project / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIKAFKA_", "PYTEST_"))}
    env["PYTHONDEVMODE"] = "1"  # asyncio debug checks and every ResourceWarning shown
    # -s and no logging plugin: whatever the broker prints or logs (asyncio's "Task was destroyed
    # but it is pending!" is a log record) reaches the output checked below.
    out = subprocess.run([sys.executable, "-W", "error", "-m", "pytest", "-W", "error", "-p", "no:cacheprovider",
                          "-q", "-s", "-p", "no:logging"], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "3 passed" in out.stdout, text
    for unwanted in ("minikafka listener", "minikafka ready", "Task was destroyed", "Exception ignored",
                     "Warning", "Traceback", "Unclosed", "never awaited"):
        assert unwanted not in text, text


def test_child_process_broker_with_only_a_tls_listener_starts(tmp_path):
    # The child-process mode readies the group coordinator over plain Kafka when it can; with a
    # TLS listener first it must take the control API instead (a plaintext request to a TLS port
    # would be refused and fail the start).
    from minikafka.broker.security.certs import generate

    generate(tmp_path, ["localhost", "127.0.0.1"], [])
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tmp_path / "broker.pem")}
    with Broker(mode="process", config=config, ready_timeout=30) as kafka:
        assert kafka.bootstrap_servers
        assert kafka.control.call("coordinator.ready")["partitions"] == 5
