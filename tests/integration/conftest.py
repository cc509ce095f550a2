"""Start the real broker as a subprocess for integration tests.

``start_broker(tmp_path, **overrides)`` runs ``python -m minikafka serve --port 0 --data-dir ...``
with the venv's Python, waits (at most 15 s) for the readiness line carrying the real port and
returns a :class:`BrokerProcess`.  Override names use underscores for dots
(``group_min_session_timeout_ms=100`` becomes ``--override group.min.session.timeout.ms=100``).
The broker's stdout/stderr go to ``tmp_path/broker.log``, printed when a test fails.
Every test in this directory is marked ``integration``.

**Both brokers.**  A test (or its fixtures) that asks for ``broker_kind`` runs twice: on minikafka
(``[minikafka]``) and on the real Apache Kafka 4.2 (``[apache-kafka]``, one KRaft broker for the
whole session, tests/kafka/kafka_runner.py, with :data:`KAFKA_SETTINGS`).  Such tests get their
broker from :func:`broker_for` (``broker_for(request, broker_kind, tmp_path, **overrides)``): on
minikafka a fresh broker with the overrides, on Kafka the shared broker, after checking that every
override is one the shared broker already has (:data:`KAFKA_SETTINGS`) or one that changes nothing
a client can see (:data:`KAFKA_IGNORED_OVERRIDES`).  Tests on the shared broker use unique topic,
group and transactional ids.  ``@pytest.mark.minikafka_only(reason=...)`` keeps a test on
minikafka only; every other integration test that does not ask for ``broker_kind`` carries that
mark too (at module level where a whole module needs minikafka), and the terminal summary counts
both kinds and names any test that is neither.  ``-k apache-kafka`` runs only the Kafka side.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"minikafka ready on (\S+):(\d+)")
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0

_ALL_BROKERS: list["BrokerProcess"] = []


def _python() -> str:
    venv = REPO_ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


class BrokerProcess:
    """A running ``python -m minikafka serve``; ``restart()`` keeps its data dir and port."""

    def __init__(self, tmp_path: Path, overrides: dict, *, data_dir: Path | None = None,
                 port: int = 0, extra_args: tuple[str, ...] = (), python: str | None = None,
                 cwd: Path | None = None):
        self.tmp_path = Path(tmp_path)
        self.data_dir = Path(data_dir) if data_dir else self.tmp_path / "data"
        self.log_path = self.tmp_path / "broker.log"
        self.overrides = dict(overrides)
        self.extra_args = tuple(extra_args)
        # Another interpreter (a clean venv) runs from another folder: from the repository root,
        # `python -m minikafka` would import the source tree instead of what that venv installed.
        self.python = python or _python()
        self.cwd = Path(cwd) if cwd else REPO_ROOT
        self.port = port
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._start()
        _ALL_BROKERS.append(self)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _command(self) -> list[str]:
        cmd = [self.python, "-m", "minikafka", "serve", "--host", "127.0.0.1", "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        for name, value in self.overrides.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cmd += ["--override", f"{name.replace('_', '.')}={value}"]
        return cmd + list(self.extra_args)

    def _start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts}: {' '.join(self._command())}\n".encode())
        log.flush()
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(self._command(), cwd=str(self.cwd), env=env,
                                     stdout=subprocess.PIPE, stderr=log)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        # Read stdout line by line until the ready line; bounded by the deadline through select.
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf = b""
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise RuntimeError(f"broker not ready within {START_TIMEOUT_S}s\n{self.read_log()}")
                if not sel.select(timeout=remaining):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    self.proc.wait(timeout=5)
                    raise RuntimeError(f"broker exited with {self.proc.returncode}\n{self.read_log()}")
                buf += chunk
                match = READY.search(buf.decode(errors="replace"))
                if match:
                    self.port = int(match.group(2))
                    break
        finally:
            sel.close()
        # Keep draining stdout into the log so the broker never blocks on a full pipe.
        import threading

        def drain(stream, path):
            with open(path, "ab") as out:
                out.write(buf)
                for chunk in iter(lambda: stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096), b""):
                    out.write(chunk)
                    out.flush()

        threading.Thread(target=drain, args=(self.proc.stdout, self.log_path), daemon=True).start()

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def restart(self, *, kill: bool = False) -> "BrokerProcess":
        """Stop (or kill) and start again on the same data dir and port."""
        if kill:
            self.kill()
        else:
            self.stop()
        self._start()
        return self

    def wait_port_free(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.05)


def start_broker(tmp_path, **overrides) -> BrokerProcess:
    return BrokerProcess(tmp_path, overrides)


# -- the same tests on Apache Kafka -------------------------------------------------------------

BROKER_KINDS = ("minikafka", "kafka")
BROKER_KIND_IDS = {"minikafka": "minikafka", "kafka": "apache-kafka"}

# The session's Apache Kafka: the runner's defaults (those of minikafka's embedded test broker) plus
# the broker-wide settings our integration tests give minikafka, so that one Kafka serves them all.
KAFKA_SETTINGS = {
    "group.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "6000",
    # The bounds that must allow the two values above (both brokers refuse to start otherwise).
    "group.consumer.min.heartbeat.interval.ms": "300",
    "group.consumer.min.session.timeout.ms": "6000",
    # Streams groups (test_streams_java.py): members heartbeat every 500 ms and a new application gets
    # its tasks at once, so that reconciliation takes seconds, not Kafka's 5 s per step.
    "group.streams.heartbeat.interval.ms": "500",
    "group.streams.min.heartbeat.interval.ms": "500",
    "group.streams.initial.rebalance.delay.ms": "0",
    # Share groups (the share tests, SHARE_FAST): a member gets its partitions on the heartbeat after
    # the share state is initialized, so 500 ms instead of Kafka's 5 s per step.
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    # Kafka looks for timed-out transactions every 10 s; minikafka aborts one at its deadline.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}

# The share tests' brokers: the shared Kafka has the same (KAFKA_SETTINGS).
SHARE_FAST = {"group_share_heartbeat_interval_ms": 500, "group_share_min_heartbeat_interval_ms": 500}

# Overrides our tests give minikafka that change nothing a client observes on a one-node cluster.
KAFKA_IGNORED_OVERRIDES = {
    "offsets.topic.num.partitions": "how many partitions __consumer_offsets has",
    "transaction.state.log.num.partitions": "how many partitions __transaction_state has",
}


class KafkaTarget:
    """The session's Apache Kafka with the attributes tests read from a :class:`BrokerProcess`;
    ``stop()`` does nothing (the session fixture stops the broker)."""

    kind = "kafka"

    def __init__(self, runner_broker):
        self.runner = runner_broker
        self.host = runner_broker.host
        self.port = runner_broker.port
        self.data_dir = runner_broker.data_dir  # log.dirs: <topic>-<partition>/*.log as in minikafka
        self.pid = runner_broker.pid

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.runner.running

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        return None

    def read_log(self) -> str:
        return self.runner.tail_logs(200)


BrokerProcess.kind = "minikafka"
_KAFKA_TARGETS: list[KafkaTarget] = []


def _kafka_unavailable(reason: str):
    if os.environ.get("MINIKAFKA_KAFKA_ORACLE") == "required":
        pytest.fail(f"Apache Kafka is required (MINIKAFKA_KAFKA_ORACLE=required): {reason}")
    pytest.skip(f"Apache Kafka not available: {reason}")


@pytest.fixture(scope="session")
def integration_kafka(tmp_path_factory):
    """One Apache Kafka 4.2 for every integration test that runs on both brokers."""
    sys.path.insert(0, str(REPO_ROOT / "tests" / "kafka"))
    import kafka_runner

    try:
        kafka_runner.ensure_installed()
    except Exception as exc:  # mvn or java missing, no network
        _kafka_unavailable(str(exc))
    runner_broker = kafka_runner.KafkaBroker(tmp_path_factory.mktemp("integration-kafka"), KAFKA_SETTINGS)
    try:
        runner_broker.start()
    except kafka_runner.KafkaError as exc:
        _kafka_unavailable(str(exc))
    target = KafkaTarget(runner_broker)
    _KAFKA_TARGETS.append(target)
    yield target
    runner_broker.stop()


def _setting_name(name: str) -> str:
    return name if "." in name else name.replace("_", ".")


def broker_for(request, kind: str, tmp_path, **overrides):
    """minikafka: ``start_broker(tmp_path, **overrides)``; kafka: the session's Apache Kafka, whose
    settings must already match every override (else the test is minikafka-only)."""
    if kind == "minikafka":
        return start_broker(tmp_path, **overrides)
    for name, value in overrides.items():
        key = _setting_name(name)
        if key in KAFKA_IGNORED_OVERRIDES:
            continue
        value = str(value).lower() if isinstance(value, bool) else str(value)
        if KAFKA_SETTINGS.get(key) != value:
            raise AssertionError(f"override {key}={value} is not a setting of the shared Apache Kafka "
                                 f"(KAFKA_SETTINGS): add it there or mark the test minikafka_only")
    return request.getfixturevalue("integration_kafka")


@pytest.fixture(scope="module")
def broker_kind(request):
    """"minikafka" or "kafka"; parametrised by pytest_generate_tests."""
    return request.param


def pytest_generate_tests(metafunc):
    if "broker_kind" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("minikafka_only")
    kinds = ["minikafka"] if only else list(BROKER_KINDS)
    metafunc.parametrize("broker_kind", kinds, indirect=True, scope="module",
                         ids=[BROKER_KIND_IDS[k] for k in kinds])


@pytest.fixture
def any_broker(request, broker_kind, tmp_path):
    """A broker of ``broker_kind`` with minikafka's defaults (function scope on minikafka)."""
    handle = broker_for(request, broker_kind, tmp_path)
    yield handle
    handle.stop()


@pytest.fixture
def broker(tmp_path):
    handle = start_broker(tmp_path)
    yield handle
    handle.stop()


@pytest.fixture
def broker_factory(tmp_path):
    """Start brokers with overrides: ``broker_factory(auto_create_topics_enable=False)``."""
    started = []

    def factory(**overrides):
        sub = tmp_path / f"b{len(started)}"
        sub.mkdir()
        handle = start_broker(sub, **overrides)
        started.append(handle)
        return handle

    yield factory
    for handle in started:
        handle.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "minikafka_only(reason): an integration test that runs on minikafka "
                                       "only (not on Apache Kafka), with the reason")


_KIND_COUNTS: dict[str, list[str]] = {}


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    counts: dict[str, list[str]] = {"both": [], "minikafka_only": [], "unmarked": []}
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.integration)
            callspec = getattr(item, "callspec", None)
            kind = callspec.params.get("broker_kind") if callspec else None
            if kind == "kafka":
                counts["both"].append(item.nodeid)
            elif kind is None:
                only = item.get_closest_marker("minikafka_only")
                if only is None:
                    counts["unmarked"].append(item.nodeid)
                else:
                    assert only.kwargs.get("reason"), f"{item.nodeid}: minikafka_only needs a reason"
                    counts["minikafka_only"].append(item.nodeid)
            elif item.get_closest_marker("minikafka_only") is not None:
                counts["minikafka_only"].append(item.nodeid)
    if any(counts.values()):
        _KIND_COUNTS.update(counts)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _KIND_COUNTS:
        return
    terminalreporter.write_line(
        f"integration tests: {len(_KIND_COUNTS['both'])} collected on Apache Kafka as well as minikafka, "
        f"{len(_KIND_COUNTS['minikafka_only'])} marked minikafka_only, "
        f"{len(_KIND_COUNTS['unmarked'])} unmarked")
    for nodeid in _KIND_COUNTS["unmarked"]:
        terminalreporter.write_line(f"  unmarked (runs on minikafka only, no reason given): {nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        logs = []
        funcargs = getattr(item, "funcargs", {})
        tmp = funcargs.get("tmp_path")
        for handle in _ALL_BROKERS:
            if handle.running or (tmp is not None and Path(handle.tmp_path).is_relative_to(tmp)):
                logs.append(f"--- broker log {handle.log_path} ---\n{handle.read_log()[-20000:]}")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("broker_kind") == "kafka" and _KAFKA_TARGETS:
            logs.append(f"--- Apache Kafka log (tail) ---\n{_KAFKA_TARGETS[-1].read_log()}")
        if logs:
            report.sections.append(("broker log", "\n".join(logs)))


def pytest_sessionfinish(session, exitstatus):
    for handle in _ALL_BROKERS:
        handle.kill()


class RawClient:
    """A blocking Kafka connection speaking through protocol.codec (error cases, exact bytes)."""

    def __init__(self, port: int, client_id: str = "raw-test", timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def encode(self, api_key: int, version: int, body: dict) -> tuple[int, bytes]:
        from minikafka.protocol.codec import encode_request

        self.correlation_id += 1
        return self.correlation_id, encode_request(api_key, version, self.correlation_id, self.client_id, body)

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = int.from_bytes(self._read_exact(4), "big", signed=True)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def read_response(self, api_key: int, version: int) -> tuple[int, dict]:
        from minikafka.protocol.codec import decode_response

        return decode_response(api_key, version, self.read_frame())

    def request(self, api_key: int, version: int, body: dict) -> dict:
        correlation_id, data = self.encode(api_key, version, body)
        self.send_bytes(data)
        got, response = self.read_response(api_key, version)
        assert got == correlation_id
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
