"""An embeddable broker for tests: ``from minikafka import Broker``.

    from minikafka import Broker

    with Broker() as kafka:                       # a free port, a temporary data dir
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        kafka.control.fail("OffsetCommit", "NOT_COORDINATOR", count=1)
        kafka.control.advance_clock(45_000)

``mode="thread"`` (default) runs the broker in this process on a background thread with its own
event loop (uvloop when installed); ``mode="process"`` runs ``python -m minikafka serve --port 0``
as a child and drives its control API over HTTP.  Either way ``start()`` returns once the broker
listens and its group coordinator is loaded (``__consumer_offsets`` created), so the first
consumer group of a test does not wait, and ``stop()`` shuts it down cleanly and removes a
temporary data dir.

``control`` is the same API in both modes (broker/control.py lists the operations).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Iterable

# What Apache Kafka's own embedded test brokers set (EmbeddedKafkaCluster, TestUtils.createBrokerConfig):
# 5 partitions for the internal topics instead of 50, so creating __consumer_offsets at start costs
# a tenth, and no initial rebalance delay, so a test's first consumer group forms at once.
# ``config=`` overrides any of them.
TEST_DEFAULTS = {"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
                 "group.initial.rebalance.delay.ms": "0"}

READY = re.compile(r"minikafka ready on (\S+):(\d+)")
HTTP_READY = re.compile(r"minikafka http on (\S+):(\d+)")
REGISTRY_READY = re.compile(r"minikafka schema registry on (\S+)")


class ControlError(Exception):
    """A control request the broker refused (``status`` 400, 404 or 408) or could not run."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _as_control_error(exc: Exception) -> ControlError:
    return ControlError(str(exc), getattr(exc, "status", 400))


class AsyncControl:
    """The control handle's methods as coroutines (run on a worker thread), for asyncio tests
    whose own event loop must keep running while a call waits."""

    def __init__(self, control: "Control") -> None:
        self._control = control

    def __getattr__(self, name: str):
        method = getattr(self._control, name)

        @functools.wraps(method)
        async def call(*args, **kwargs):
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


class Control:
    """The control handle: faults, stalls, group sessions, the clock, waits and seeding."""

    def __init__(self, call) -> None:
        self._call = call

    @property
    def aio(self) -> AsyncControl:
        return AsyncControl(self)

    def call(self, op: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        return self._call(op, params or {}, timeout)

    # -- faults ------------------------------------------------------------------------------
    def add_fault(self, **spec) -> int:
        """Add a fault (fields of broker/faults.py); returns its id."""
        return self.call("faults.add", {k: v for k, v in spec.items() if v is not None})["id"]

    def fail(self, api, error, *, after: bool = False, count: int | None = None, **scope) -> int:
        """Answer matching requests with ``error`` instead of handling them, or after handling
        them with ``after=True``."""
        return self.add_fault(api=api, error=error, action="error_after" if after else "error",
                              count=count, **scope)

    def delay(self, api, ms: int, *, count: int | None = None, **scope) -> int:
        return self.add_fault(api=api, action="delay", delay_ms=ms, count=count, **scope)

    def hold(self, api, *, count: int | None = None, **scope) -> int:
        return self.add_fault(api=api, action="hold", count=count, **scope)

    def close_connection(self, api, *, after: bool = False, count: int | None = None, **scope) -> int:
        return self.add_fault(api=api, action="close_after" if after else "close", count=count, **scope)

    def release(self, fault_id: int) -> dict:
        return self.call("faults.release", {"id": fault_id})

    def remove_fault(self, fault_id: int) -> dict:
        return self.call("faults.remove", {"id": fault_id})

    def faults(self) -> list[dict]:
        return self.call("faults.list")["faults"]

    def reset(self) -> None:
        self.call("reset")

    # -- partitions, groups, clock -----------------------------------------------------------
    def stall(self, topic: str, partition: int) -> None:
        self.call("partitions.stall", {"topic": topic, "partition": partition})

    def release_partition(self, topic: str, partition: int) -> None:
        self.call("partitions.release", {"topic": topic, "partition": partition})

    def expire_member(self, group: str, member_id: str | None = None) -> list[str]:
        return self.call("groups.expire", {"group": group, "member_id": member_id})["expired"]

    def rebalance(self, group: str) -> None:
        self.call("groups.rebalance", {"group": group})

    def describe_group(self, group: str) -> dict:
        return self.call("groups.describe", {"group": group})

    def advance_clock(self, ms: int) -> int:
        return self.call("clock.advance", {"ms": int(ms)})["now_ms"]

    def now_ms(self) -> int:
        return self.call("clock.now")["now_ms"]

    # -- waits --------------------------------------------------------------------------------
    def wait_for_group(self, group: str, state: str | None = None, members: int | None = None,
                       timeout: float = 10.0) -> dict:
        return self.call("wait.group", {"group": group, "state": state, "members": members,
                                        "timeout_ms": int(timeout * 1000)}, timeout + 10)

    def wait_for_hwm(self, topic: str, partition: int, offset: int, timeout: float = 10.0) -> int:
        return self.call("wait.hwm", {"topic": topic, "partition": partition, "offset": offset,
                                      "timeout_ms": int(timeout * 1000)}, timeout + 10)["high_watermark"]

    def wait_for_topic(self, topic: str, timeout: float = 10.0) -> dict:
        return self.call("wait.topic", {"topic": topic, "timeout_ms": int(timeout * 1000)}, timeout + 10)

    # -- topics and data ----------------------------------------------------------------------
    def create_topic(self, topic: str, partitions: int | None = None, configs: dict | None = None) -> dict:
        return self.call("topics.create", {"topic": topic, "partitions": partitions, "configs": configs})

    def seed(self, items: Iterable[dict] | str | os.PathLike) -> dict:
        """Create topics and append records: seed objects, or a JSON-lines file."""
        if isinstance(items, (str, os.PathLike)):
            with open(items, encoding="utf-8") as f:
                items = [json.loads(line) for line in f if line.strip() and not line.lstrip().startswith("#")]
        return self.call("seed", {"items": list(items)})


class Broker:
    def __init__(self, *, mode: str = "thread", data_dir: str | os.PathLike | None = None,
                 host: str = "127.0.0.1", port: int = 0, config: dict[str, Any] | None = None,
                 seed: Iterable[dict] | str | os.PathLike | None = None, http_port: int | None = None,
                 ready_timeout: float = 30.0, log_level: str | None = None,
                 schema_registry: bool = False) -> None:
        if mode not in ("thread", "process"):
            raise ValueError("mode is 'thread' or 'process'")
        self.mode = mode
        self.host = host
        self.port = port
        self._data_dir = os.fspath(data_dir) if data_dir is not None else None
        self._temp_dir: str | None = None
        self.settings = dict(TEST_DEFAULTS)
        self.settings.update({k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (config or {}).items()})
        if schema_registry:
            # Confluent's Schema Registry API on a free port (issue 23): ``schema_registry_url``.
            self.settings.setdefault("schema.registry.listeners", "http://127.0.0.1:0")
        self.schema_registry_url: str | None = None
        self._seed = seed
        self._http_port = http_port
        self.ready_timeout = ready_timeout
        self.log_level = log_level
        self.bootstrap_servers: str | None = None
        self.http_port: int | None = None
        self.control = Control(self._control_call)
        self._loop = None
        self._thread: threading.Thread | None = None
        self._broker = None  # the in-thread minikafka.broker.server.Broker
        self._proc: subprocess.Popen | None = None
        self.started_s: float | None = None

    @property
    def data_dir(self) -> str | None:
        return self._data_dir or self._temp_dir

    @property
    def server(self):
        """The running ``minikafka.broker.server.Broker`` (thread mode only; its state is owned
        by the broker's loop: read it, or use ``control``)."""
        return self._broker

    # -- life cycle -----------------------------------------------------------------------------

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Broker":
        if self.bootstrap_servers is not None:
            return self
        t0 = time.monotonic()
        if self._data_dir is None:
            self._temp_dir = tempfile.mkdtemp(prefix="minikafka-")
        try:
            if self.mode == "thread":
                self._start_thread()
            else:
                self._start_process()
            if self.mode == "process" and self._data_dir is None and self._plaintext():
                # A fresh data dir: the first FindCoordinator creates and loads the (empty) group
                # coordinator, over Kafka itself, so the child need not start its HTTP
                # application (aiohttp) just for this.
                _find_coordinator(self.bootstrap_servers, self.ready_timeout)
            else:
                self.control.call("coordinator.ready", {"timeout_ms": int(self.ready_timeout * 1000)},
                                  self.ready_timeout + 5)
            if self._seed is not None:
                self.control.seed(self._seed)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0
        return self

    def _plaintext(self) -> bool:
        """The first listener is plain Kafka (no listeners, TLS or SASL settings given)."""
        return not any(name == "listeners" or name.startswith(("listener.", "ssl.", "sasl."))
                       for name in self.settings)

    def stop(self) -> None:
        if self._thread is not None:
            self._stop_thread()
        if self._proc is not None:
            self._stop_process()
        self.bootstrap_servers = None
        self.schema_registry_url = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    # -- thread mode ----------------------------------------------------------------------------

    def _config(self):
        from minikafka.broker.config import BrokerConfig

        overrides = dict(self.settings)
        if self._http_port is not None:
            overrides.setdefault("http.port", str(self._http_port))
            overrides.setdefault("http.control.enable", "true")
        # environ={}: the user's MINIKAFKA_* variables are for the CLI, not for test brokers.
        return BrokerConfig.load(environ={}, fields={"host": self.host, "port": self.port,
                                                     "data_dir": self.data_dir}, overrides=overrides)

    def _start_thread(self) -> None:
        from minikafka.broker.server import Broker as ServerBroker

        config = self._config()
        try:
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self._loop = loop
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="minikafka-broker", daemon=True)
        self._thread.start()
        started.wait()
        broker = ServerBroker(config)
        self._broker = broker
        asyncio.run_coroutine_threadsafe(broker.start(), loop).result(self.ready_timeout)
        self.port = broker.bound_port
        self.bootstrap_servers = f"{config.advertised[0]}:{broker.bound_port}"
        if broker.http is not None:
            self.http_port = broker.http.port
        if broker.schema_registry is not None:
            self.schema_registry_url = broker.schema_registry.url

    def _stop_thread(self) -> None:
        loop, broker = self._loop, self._broker
        if broker is not None and broker.loop is not None:
            try:
                asyncio.run_coroutine_threadsafe(_stop_on_loop(broker), loop).result(10)
            except Exception:
                pass
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            loop.close()
        self._thread = None
        self._broker = None
        self._loop = None

    # -- process mode ---------------------------------------------------------------------------

    def _start_process(self) -> None:
        cmd = [sys.executable, "-m", "minikafka", "serve", "--host", self.host, "--port", str(self.port),
               "--data-dir", self.data_dir, "--override", f"http.port={self._http_port or 0}",
               "--override", "http.control.enable=true"]
        if self.log_level:
            cmd += ["--log-level", self.log_level]
        for name, value in self.settings.items():
            cmd += ["--override", f"{name}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_")}
        env["PYTHONUNBUFFERED"] = "1"
        log_path = os.path.join(self.data_dir, "broker.log")
        with open(log_path, "ab") as log_file:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, env=env)
        self.log_path = log_path
        deadline = time.monotonic() + self.ready_timeout
        buf = b""
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"minikafka did not start in {self.ready_timeout} s; its log:\n"
                                       f"{_tail(log_path)}")
                if not sel.select(remaining):
                    continue
                chunk = os.read(self._proc.stdout.fileno(), 4096)
                if not chunk:
                    # The temporary data dir (and the log in it) goes away on stop: quote the log.
                    raise RuntimeError(f"minikafka exited with {self._proc.wait()} before it was ready; "
                                       f"its log:\n{_tail(log_path)}")
                buf += chunk
                text = buf.decode(errors="replace")
                m = HTTP_READY.search(text)
                if m:
                    self.http_port = int(m.group(2))
                m = REGISTRY_READY.search(text)
                if m:
                    self.schema_registry_url = m.group(1)
                m = READY.search(text)
                if m:
                    self.port = int(m.group(2))
                    self.bootstrap_servers = f"{m.group(1)}:{m.group(2)}"
                    return
        finally:
            sel.close()

    def _stop_process(self) -> None:
        proc = self._proc
        self._proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()

    # -- control transport ----------------------------------------------------------------------

    def _control_call(self, op: str, params: dict, timeout: float) -> dict:
        if self._thread is not None:
            from minikafka.broker import control
            from minikafka.broker.faults import FaultError

            if threading.current_thread() is self._thread:
                raise RuntimeError("the control API is called from the broker's own thread; "
                                   "use minikafka.broker.control.call there")
            future = asyncio.run_coroutine_threadsafe(control.call(self._broker, op, params), self._loop)
            try:
                return future.result(timeout)
            except FaultError as exc:  # control.ControlError and fault validation errors
                raise _as_control_error(exc) from None
        if self._proc is not None and self.http_port is not None:
            return http_control(f"http://127.0.0.1:{self.http_port}", op, params, timeout)
        raise RuntimeError("the broker is not running")


async def _stop_on_loop(broker) -> None:
    """Stop the broker, then cancel and await whatever else still runs on its loop (the loop is
    the embedded broker's own), so that closing the loop leaves no task pending."""
    await broker.stop()
    current = asyncio.current_task()
    rest = [t for t in asyncio.all_tasks() if t is not current]
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=1.0)
    await asyncio.get_running_loop().shutdown_asyncgens()


def _find_coordinator(bootstrap: str, timeout: float) -> None:
    """Ask the broker for a group coordinator (FindCoordinator v1) until it names one: that
    creates ``__consumer_offsets`` and loads it, as the control operation ``coordinator.ready``
    does for a new data dir."""
    import socket

    from minikafka.protocol import codec

    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    request = codec.encode_request(10, 1, 1, "minikafka-embedded", {"key": "minikafka-ready", "key_type": 0})
    while True:
        with socket.create_connection((host, int(port)), timeout=max(deadline - time.monotonic(), 0.1)) as sock:
            sock.sendall(request)
            frame = _read_frame(sock)
        _, body = codec.decode_response(10, 1, frame)
        if body["error_code"] == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the group coordinator was not ready in {timeout} s (error {body['error_code']})")
        time.sleep(0.01)


def _read_frame(sock) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    return exactly(int.from_bytes(exactly(4), "big", signed=True))


def _tail(path: str, size: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - size, 0))
            return f.read().decode(errors="replace")
    except OSError:
        return "(no log)"


def http_control(base_url: str, op: str, params: dict, timeout: float = 30.0) -> dict:
    """POST one control operation to a broker's HTTP control API."""
    request = urllib.request.Request(f"{base_url}/control/{op}", data=json.dumps(params).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except ValueError:
            message = str(exc)
        raise ControlError(message, exc.code) from None
