"""Start the real broker as a subprocess for integration tests.

``start_broker(tmp_path, **overrides)`` runs ``python -m minikafka serve --port 0 --data-dir ...``
with the venv's Python, waits (at most 15 s) for the readiness line carrying the real port and
returns a :class:`BrokerProcess`.  Override names use underscores for dots
(``group_min_session_timeout_ms=100`` becomes ``--override group.min.session.timeout.ms=100``).
The broker's stdout/stderr go to ``tmp_path/broker.log``, printed when a test fails.
Every test in this directory is marked ``integration``.
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


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.integration)


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
