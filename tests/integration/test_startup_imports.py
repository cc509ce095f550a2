"""What a broker start imports: only what serving needs (issue 24).

A child process runs ``minikafka serve`` (default configuration, empty data dir) and writes the
names in ``sys.modules`` when it exits; the test asks it for Metadata once it prints its ready
line, then stops it with SIGTERM.  The HTTP server (aiohttp), the console (jinja2), the metrics
(prometheus_client), the security tools (cryptography), the client commands (confluent_kafka),
Spark and the OTLP decoder must not be among the modules, nor what only made an idle broker larger
(shutil for argparse's terminal width, the IDNA codec for resolving 127.0.0.1, random).  With an HTTP port configured the port
is bound at start but aiohttp loads with the first HTTP connection, which the second test checks
both ways.
"""

from __future__ import annotations

import re
import selectors
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from minikafka.protocol import codec

from conftest import _python

pytestmark = pytest.mark.minikafka_only(reason="which modules minikafka's own broker imports")

READY = re.compile(r"minikafka ready on (\S+):(\d+)")
HTTP = re.compile(r"minikafka http on (\S+):(\d+)")
# Runs the command line in-process and writes sys.modules at exit (after a clean SIGTERM stop).
CHILD = """
import atexit, sys
atexit.register(lambda: open(sys.argv[1], "w").write("\\n".join(sorted(sys.modules))))
from minikafka.broker.cli import main
sys.exit(main(sys.argv[2:]))
"""

# Modules a default broker must not import before (or while) answering its first requests.
NOT_FOR_SERVING = (
    "aiohttp", "jinja2", "prometheus_client", "cryptography", "confluent_kafka", "pyspark", "pyarrow",
    "pandas", "kafka", "tomllib",
    "minikafka.broker.http.server", "minikafka.broker.http.console", "minikafka.broker.http.metrics",
    "minikafka.broker.http.control", "minikafka.broker.cli_tools", "minikafka.broker.security.cli",
    "minikafka.broker.security.certs", "minikafka.broker.security.users", "minikafka.broker.security.scram",
    "minikafka.broker.seed", "minikafka.pipeline", "minikafka.protocol.otlp",
    # The group and transaction coordinators load with their first use (an empty data dir here).
    "minikafka.broker.group.shard", "minikafka.broker.txn.coordinator",
    # Idle memory (issue 24): argparse's terminal width (shutil, with bz2 and lzma), the loop's
    # resolving of an IP-literal listener host (the IDNA codec), random (test faults, the first
    # fetch session), the TLS listener thread (no TLS listener here).
    "shutil", "bz2", "lzma", "encodings.idna", "stringprep", "random",
    "minikafka.broker.security.tls_thread",
    # Kafka's broker config table loads with the first DescribeConfigs (issue 20).
    "minikafka.broker.kafka_configs", "minikafka.broker.group_configs",
    # The share-group and streams-group managers load with their groups' first request; a start only
    # validates their settings (broker/share/settings.py, broker/streams/settings.py).
    "minikafka.broker.share.group_manager", "minikafka.broker.share.group", "minikafka.broker.streams.manager",
    "minikafka.broker.streams.topology", "minikafka.broker.streams.assignor",
    # The share partitions and sessions load with the first ShareFetch/ShareAcknowledge.
    "minikafka.broker.share.fetch", "minikafka.broker.share.partition", "minikafka.broker.share.fetch_sessions",
)


def _wait_for(proc, pattern, deadline: float) -> tuple[re.Match, str]:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    text = ""
    try:
        while time.monotonic() < deadline:
            if not sel.select(max(deadline - time.monotonic(), 0)):
                continue
            chunk = proc.stdout.read1(4096).decode()
            if not chunk:
                break
            text += chunk
            m = pattern.search(text)
            if m:
                return m, text
    finally:
        sel.close()
    raise AssertionError(f"no {pattern.pattern!r} in the broker's output: {text!r}")


def _metadata(host: str, port: int) -> dict:
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(codec.encode_request(3, 1, 7, "imports-test", {"topics": None}))
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        frame = sock.recv(size, socket.MSG_WAITALL)
    return codec.decode_response(3, 1, frame)[1]


def _start(tmp_path, *extra):
    log = open(tmp_path / "broker.log", "wb")
    proc = subprocess.Popen([_python(), "-c", CHILD, str(tmp_path / "modules.txt"), "serve", "--port", "0",
                             "--data-dir", str(tmp_path / "data"), *extra],
                            stdout=subprocess.PIPE, stderr=log)
    return proc, log


def _modules_at_exit(proc, log, tmp_path) -> set[str]:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(15) == 0
    finally:
        proc.stdout.close()
        log.close()
    return set((tmp_path / "modules.txt").read_text().split())


def _loaded(imported: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in imported)


def test_a_default_broker_imports_only_what_serving_needs(tmp_path):
    proc, log = _start(tmp_path)
    try:
        m, _ = _wait_for(proc, READY, time.monotonic() + 30)
        body = _metadata(m.group(1), int(m.group(2)))
        assert body["brokers"][0]["port"] == int(m.group(2))
    finally:
        imported = _modules_at_exit(proc, log, tmp_path)
    # The list is the broker's: the modules serving needs are in it.
    assert {"minikafka.broker.server", "minikafka.broker.handlers.metadata", "minikafka.protocol.codec",
            "asyncio"} <= imported
    assert [name for name in NOT_FOR_SERVING if _loaded(imported, name)] == []


def test_the_http_application_loads_with_its_first_connection(tmp_path):
    # Bound but never asked: nothing of the HTTP application loads.
    (tmp_path / "a").mkdir()
    proc, log = _start(tmp_path / "a", "--override", "http.port=0")
    try:
        m, text = _wait_for(proc, READY, time.monotonic() + 30)
        assert HTTP.search(text), text
        _metadata(m.group(1), int(m.group(2)))
    finally:
        idle = _modules_at_exit(proc, log, tmp_path / "a")
    assert not _loaded(idle, "aiohttp") and not _loaded(idle, "minikafka.broker.http.health")
    # One request: it is answered, by the application loaded for it.
    (tmp_path / "b").mkdir()
    proc, log = _start(tmp_path / "b", "--override", "http.port=0")
    try:
        m, text = _wait_for(proc, READY, time.monotonic() + 30)
        http = HTTP.search(text)
        with urllib.request.urlopen(f"http://{http.group(1)}:{http.group(2)}/health/live", timeout=30) as resp:
            assert resp.status == 200
    finally:
        used = _modules_at_exit(proc, log, tmp_path / "b")
    assert _loaded(used, "aiohttp") and _loaded(used, "minikafka.broker.http.health")


def test_counters_run_before_the_http_application_loads():
    # The application (and prometheus_client) loads with the first HTTP request, but what the
    # broker did before it is counted: the metrics record from the start.
    from confluent_kafka import Producer

    from minikafka import Broker

    with Broker(http_port=0) as kafka:
        assert not kafka.server.http.running
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for i in range(5):
            producer.produce("early", f"v{i}".encode(), partition=0)
        assert producer.flush(15) == 0
        assert not kafka.server.http.running
        with urllib.request.urlopen(f"http://127.0.0.1:{kafka.http_port}/metrics", timeout=30) as resp:
            text = resp.read().decode()
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="early"} 5.0' in text
