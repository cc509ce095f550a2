"""The running broker: one asyncio event loop (uvloop when installed) owning all state.

``Broker`` ties together the configuration, the controller (topics over storage), the API
registry filled from ``broker.handlers.HANDLER_MODULES``, the listening socket, the connections
and a periodic maintenance task (``LogManager.tick()``: retention, segment rolling, flushing).
Everything runs on the loop without locks (STYLE principle 7); long polls are futures woken by
``notify_append``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from typing import Any, Callable, Iterable

from .config import BrokerConfig
from .connection import KafkaConnection

log = logging.getLogger("minikafka.broker")


class AppendWaiters:
    """Futures waiting for an append to any of a set of (topic, partition) keys."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, int], set[asyncio.Future]] = {}

    def wait(self, keys: Iterable[tuple[str, int]], loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        fut = loop.create_future()
        for key in keys:
            self._by_key.setdefault(key, set()).add(fut)
        return fut

    def discard(self, keys: Iterable[tuple[str, int]], fut: asyncio.Future) -> None:
        for key in keys:
            waiting = self._by_key.get(key)
            if waiting is not None:
                waiting.discard(fut)
                if not waiting:
                    del self._by_key[key]

    def notify(self, key: tuple[str, int]) -> None:
        waiting = self._by_key.pop(key, None)
        if waiting:
            for fut in waiting:
                if not fut.done():
                    fut.set_result(key)

    def __len__(self) -> int:
        return len(self._by_key)

    def waiting(self) -> int:
        """How many waits (parked fetches) are outstanding."""
        return len(set().union(*self._by_key.values())) if self._by_key else 0


def _load_handler_modules(names: Iterable[str]) -> list[Any]:
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                log.info("handler module %s not present; its APIs are not served", name)
            else:
                log.error("handler module %s failed to import; its APIs are not served", name,
                          exc_info=True)
        except Exception:
            log.error("handler module %s failed to import; its APIs are not served", name,
                      exc_info=True)
    return modules


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time,
                 handler_modules: Iterable[str] | None = None, controller=None):
        self.config = config
        self.clock = clock
        self.loop: asyncio.AbstractEventLoop | None = None
        self.controller = controller
        self.group_coordinator = None  # set by broker.group's register()
        self.txn_coordinator = None  # set by a transaction coordinator module if present
        self.registry = None
        self.connections: set[KafkaConnection] = set()
        self.append_waiters = AppendWaiters()
        self.modules: list[Any] = []
        self._handler_module_names = handler_modules
        self._server: asyncio.base_events.Server | None = None
        self._maintenance: asyncio.Task | None = None
        self.bound_port: int | None = None
        self.http = None  # broker.http.server.HttpServer when http.port is set
        self.metrics = None  # broker.http.metrics.BrokerMetrics when the HTTP server runs
        self.started_at = clock()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- API registry ------------------------------------------------------------------------

    def build_registry(self) -> None:
        from minikafka.protocol.apis import ApiRegistry

        from .handlers import HANDLER_MODULES

        names = self._handler_module_names if self._handler_module_names is not None else HANDLER_MODULES
        self.registry = ApiRegistry()
        self.modules = _load_handler_modules(names)
        for module in self.modules:
            register = getattr(module, "register", None)
            if register is not None:
                register(self.registry, self)

    def registry_range(self, api_key: int) -> tuple[int, int]:
        from minikafka.protocol.apis import SERVE

        return self.registry.version_range(api_key) or SERVE[api_key]

    # -- appends and long polls ---------------------------------------------------------------

    def notify_append(self, topic: str, partition: int) -> None:
        """Called after every append to a partition: wakes Fetch long polls waiting on it."""
        self.append_waiters.notify((topic, partition))

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.controller is None:
            from .controller import Controller

            self.controller = Controller.open(self.config, now_ms=self.now_ms)
        self.build_registry()
        for module in self.modules:
            start = getattr(module, "start", None)
            if start is not None:
                await start(self)
        self._server = await self.loop.create_server(
            lambda: KafkaConnection(self), host=self.config.host, port=self.config.port,
            reuse_address=True, backlog=1024)
        sockets = self._server.sockets or ()
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.config.port
        if self.config.port == 0:
            # Advertise the port actually bound: clients reconnect to what Metadata says.
            self.config.port = self.bound_port
        if self.config.get("http.port") >= 0:
            from .http.server import HttpServer

            self.http = HttpServer(self)
            await self.http.start()
        interval = self.config.get("maintenance.interval.ms") / 1000.0
        self._maintenance = self.loop.create_task(self._maintenance_loop(interval))

    async def _maintenance_loop(self, interval: float) -> None:
        """Roll and flush every ``maintenance.interval.ms``; the full LogManager.tick (retention,
        compaction) every ``log.retention.check.interval.ms``, first after at most 30 s as in
        Kafka (its retention task starts 30 s after boot), so data with old CreateTime
        timestamps is not deleted the moment a producer writes it."""
        retention_every = self.config.get("log.retention.check.interval.ms") / 1000.0
        loop = self.loop
        next_full = loop.time() + min(30.0, retention_every)
        while True:
            await asyncio.sleep(interval)
            try:
                if loop.time() >= next_full:
                    next_full = loop.time() + retention_every
                    self.controller.tick(self.now_ms())
                else:
                    self.controller.light_tick(self.now_ms())
            except Exception:
                log.error("maintenance tick failed", exc_info=True)

    async def stop(self) -> None:
        """Stop accepting, end connections, stop modules, flush and mark the logs clean."""
        if self._server is not None:
            self._server.close()
        if self.http is not None:
            try:
                await asyncio.wait_for(self.http.stop(), timeout=1.0)
            except Exception:
                log.error("stopping the HTTP server failed", exc_info=True)
        if self._maintenance is not None:
            self._maintenance.cancel()
        for conn in list(self.connections):
            conn.cancel_tasks()
            conn.close()
        for module in reversed(self.modules):
            stop = getattr(module, "stop", None)
            if stop is not None:
                try:
                    await asyncio.wait_for(stop(self), timeout=1.0)
                except Exception:
                    log.error("stopping %s failed", module.__name__, exc_info=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), timeout=0.5)
            except (asyncio.TimeoutError, Exception):
                pass
        if self.controller is not None:
            self.controller.close()
