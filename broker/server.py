"""The running broker: one asyncio event loop (uvloop when installed) owning all state.

``Broker`` ties together the configuration, the controller (topics over storage), the API
registry filled from ``broker.handlers.HANDLER_MODULES``, the listening socket, the connections
and a periodic maintenance task (``LogManager.tick()``: retention, segment rolling, flushing).
Everything runs on the loop without locks (STYLE principle 7); long polls are futures woken by
``notify_append``.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import logging
from typing import Any, Callable, Iterable

from .clock import BrokerClock, CallableClock, TimerService
from .config import BrokerConfig
from .connection import ConnectionStats, KafkaConnection, RequestBytes, new_read_buffer
from .faults import FaultEngine

log = logging.getLogger("minikafka.broker")


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


_current_task = asyncio.current_task


class LongPoll:
    """What a long poll (``AppendWaiters.until``) waits on: a future whose waiting task is
    resumed at once when it is resolved, not one loop iteration later.

    An asyncio future hands its callbacks to ``loop.call_soon``, so a fetch woken by an append
    ran only after the rest of the produce's ``data_received``, the loop's turn through its
    other ready callbacks and a task step scheduled for it (issue 24's latency).  This one calls
    them itself, right where it is resolved (or where ``AppendWaiters.release`` lets resolved
    polls go), when no task is running; inside a running task (which another task cannot enter)
    it schedules them as an asyncio future does.  Cancellation goes through the loop as usual.
    It implements the part of the Future protocol that a Task uses for what it awaits
    (``_asyncio_future_blocking``, ``get_loop``, ``add_done_callback``, ``result``, ``cancel``)."""

    __slots__ = ("_loop", "_owner", "_callbacks", "_done", "_cancelled", "_cancel_message", "_result",
                 "_asyncio_future_blocking")

    def __init__(self, loop: asyncio.AbstractEventLoop, owner: "AppendWaiters") -> None:
        self._loop = loop
        self._owner = owner
        self._callbacks: list = []
        self._done = self._cancelled = False
        self._cancel_message = None
        self._result = None
        self._asyncio_future_blocking = False

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self):
        if self._cancelled:
            raise asyncio.CancelledError() if self._cancel_message is None else asyncio.CancelledError(
                self._cancel_message)
        if not self._done:
            raise asyncio.InvalidStateError("Result is not ready.")
        return self._result

    def exception(self):
        self.result()
        return None

    def add_done_callback(self, fn, *, context=None) -> None:
        if context is None:
            context = contextvars.copy_context()
        if self._done:
            self._loop.call_soon(fn, self, context=context)
        else:
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn) -> int:
        kept = [(f, c) for f, c in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def set_result(self, result) -> None:
        if self._done:
            raise asyncio.InvalidStateError("the long poll is already resolved")
        self._done = True
        self._result = result
        self._owner._resolved(self)

    def cancel(self, msg=None) -> bool:
        if self._done:
            return False
        self._done = self._cancelled = True
        self._cancel_message = msg
        self._schedule()
        return True

    def _schedule(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)

    def _run_now(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            try:
                context.run(fn, self)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._loop.call_exception_handler({"message": "long poll wake-up failed", "exception": exc,
                                                   "future": self})

    def __await__(self):
        if not self._done:
            self._asyncio_future_blocking = True
            yield self
        if not self._done:
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__


class AppendWaiters:
    """Long polls (``until``) waiting for an append to any of a set of (topic, partition) keys."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, int], set[asyncio.Future]] = {}
        # Appends that woke at least one wait: a connection compares it before and after a
        # request to learn that the request woke fetches (broker/connection.py, _run).
        self.woken = 0
        # Long polls resolved while a request is being handled (hold): resumed at its end.
        self._held: list[LongPoll] | None = None

    def discard(self, keys: Iterable[tuple[str, int]], fut: asyncio.Future) -> None:
        for key in keys:
            waiting = self._by_key.get(key)
            if waiting is not None:
                waiting.discard(fut)
                if not waiting:
                    del self._by_key[key]

    async def until(self, keys: Iterable[tuple[str, int]], loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        """Wait until an append to one of ``keys`` (or a ``notify`` of one) or ``timeout`` seconds pass:
        the long poll of Fetch and ShareFetch.  The waiting task goes on at once when woken
        (``LongPoll``): inside ``notify``, or at the end of the request being handled (``hold``)."""
        fut = LongPoll(loop, self)
        for key in keys:
            self._by_key.setdefault(key, set()).add(fut)
        timer = loop.call_later(timeout, _resolve, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self.discard(keys, fut)

    def notify(self, key: tuple[str, int]) -> None:
        waiting = self._by_key.pop(key, None)
        if waiting:
            self.woken += 1
            for fut in waiting:
                if not fut.done():
                    fut.set_result(key)

    def hold(self) -> bool:
        """Keep long polls resolved from now on until ``release``: a connection holds them while
        a request's handler takes its first step, so that a Produce to several partitions wakes
        a fetch once, after all its appends (Kafka completes delayed fetches after the request's
        appends, not between them).  False when already held (the outer holder releases)."""
        if self._held is not None:
            return False
        self._held = []
        return True

    def release(self) -> None:
        """Resume the long polls resolved since ``hold``, now (see ``LongPoll``)."""
        held, self._held = self._held, None
        for fut in held or ():
            self._resolved(fut)

    def _resolved(self, fut: LongPoll) -> None:
        if self._held is not None:
            self._held.append(fut)
        elif _current_task(fut._loop) is None:
            fut._run_now()
        else:
            fut._schedule()  # a task runs: another cannot be entered from inside it

    def __len__(self) -> int:
        return len(self._by_key)

    def waiting(self) -> int:
        """How many waits (parked fetches) are outstanding."""
        return len(set().union(*self._by_key.values())) if self._by_key else 0


class HandlerModuleError(RuntimeError):
    """A handler module listed in HANDLER_MODULES could not be imported or registered.

    The broker refuses to start rather than run without some of its APIs: a client would see
    a broker that advertises less than it should, or closes connections on APIs it expects."""


def _load_handler_modules(names: Iterable[str]) -> list[Any]:
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except Exception as exc:
            raise HandlerModuleError(f"handler module {name} failed to import: {exc!r}") from exc
    return modules


class Broker:
    def __init__(self, config: BrokerConfig, *, clock: "BrokerClock | Callable[[], float] | None" = None,
                 handler_modules: Iterable[str] | None = None, controller=None):
        self.config = config
        # One steerable clock for the whole broker (broker/clock.py); a plain ``() -> seconds``
        # function is still accepted.
        if clock is None:
            clock = BrokerClock()
        elif not isinstance(clock, BrokerClock):
            clock = CallableClock(clock)
        self.clock: BrokerClock = clock
        self.timers = TimerService(clock, on_error=lambda exc: log.error("timer failed", exc_info=exc))
        self.faults = FaultEngine(self)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.controller = controller
        self.group_coordinator = None  # set by broker.group's register()
        self.txn_coordinator = None  # set by a transaction coordinator module if present
        self.registry = None
        self.connections: set[KafkaConnection] = set()
        # Every request handler still running, also those of connections already lost; stop()
        # cancels and awaits them (broker/connection.py adds and removes them).
        self.handler_tasks: set[asyncio.Task] = set()
        # Every connection's reads land here first (broker/connection.py, "Reading"); allocated
        # with the first connection, so an idle broker does not hold it.
        self._read_buffer: memoryview | None = None
        self.request_bytes = RequestBytes(config.get("queued.max.request.bytes"))
        self.connection_stats = ConnectionStats()
        self.quotas = None  # broker.quotas.ClientQuotas, once the controller is open
        self.telemetry = None  # handlers.client_telemetry.ClientTelemetry when client.telemetry.enable
        self.append_waiters = AppendWaiters()
        # Set by UnregisterBroker of this node: fenced until restart (Metadata lists no broker and no
        # leader, FindCoordinator and Produce refuse), as a one-node Kafka 4.2 answers.
        self.unregistered = False
        # Per topic: the Produce validation rules and what they were built from
        # (handlers/produce.py, validation_rules).
        self._validation_rules: dict = {}
        self.modules: list[Any] = []
        self._handler_module_names = handler_modules
        self._server: asyncio.base_events.Server | None = None
        self._servers: list = []
        self.listeners: list = []  # broker.security.listeners.Listener, bound ports filled in
        self.security = None  # broker.security.server.Security: SASL users/mechanisms, authorizer
        self._maintenance: asyncio.Task | None = None
        self.bound_port: int | None = None
        self.http = None  # broker.http.server.HttpServer when http.port is set
        self.metrics = None  # broker.http.metrics.BrokerMetrics when the HTTP server runs
        self.schema_registry = None  # broker.schema_registry.server, when schema.registry.listeners is set
        self.started_at = clock()

    @property
    def read_buffer(self) -> memoryview:
        if self._read_buffer is None:
            self._read_buffer = new_read_buffer()
        return self._read_buffer

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def advance_clock(self, ms: int) -> int:
        """Move broker time forward (on the broker's loop): due timeouts fire and a full
        maintenance tick (retention, producer-id expiry) runs at the new time."""
        return self.clock.advance(ms)

    def _tick_after_advance(self, now_ms: int) -> None:
        if self.controller is not None:
            self.controller.tick(now_ms)

    # -- API registry ------------------------------------------------------------------------

    def build_registry(self) -> None:
        from minikafka.protocol.apis import ApiRegistry

        from .handlers import HANDLER_MODULES

        names = self._handler_module_names if self._handler_module_names is not None else HANDLER_MODULES
        self.registry = ApiRegistry()
        self.modules = _load_handler_modules(names)
        for module in self.modules:
            register = getattr(module, "register", None)
            if register is None:
                raise HandlerModuleError(f"handler module {module.__name__} has no register()")
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
        self.timers.bind(self.loop)
        self.clock.on_advance(self._tick_after_advance)
        if self.controller is None:
            from .controller import Controller

            self.controller = Controller.open(self.config, now_ms=self.now_ms)
        from .quotas import ClientQuotas

        self.quotas = ClientQuotas(self)
        try:
            self.build_registry()
        except HandlerModuleError:
            self.controller.close()
            raise
        for module in self.modules:
            start = getattr(module, "start", None)
            if start is not None:
                await start(self)
        from .security.server import open_listeners

        # One asyncio server per listener (broker.security.server); the first is the one the
        # --port flag and the readiness line report.
        self.listeners, self._servers = await open_listeners(self, KafkaConnection)
        self._server = self._servers[0]
        self.bound_port = self.listeners[0].port
        if self.config.port == 0 and not self.config.get("listeners"):
            # Advertise the port actually bound: clients reconnect to what Metadata says.
            self.config.port = self.bound_port
        if self.config.get("http.port") >= 0:
            from .http.server import HttpServer

            self.http = HttpServer(self)
            await self.http.start()
        if self.config.get("schema.registry.listeners"):
            from .schema_registry.server import start as start_schema_registry  # imported only when on

            self.schema_registry = await start_schema_registry(self)
        interval = self.config.get("maintenance.interval.ms") / 1000.0
        self._maintenance = self.loop.create_task(self._maintenance_loop(interval))

    async def _maintenance_loop(self, interval: float) -> None:
        """Roll and flush every ``maintenance.interval.ms``; the full LogManager.tick (retention,
        compaction) every ``log.retention.check.interval.ms``, first after at most 30 s as in
        Kafka (its retention task starts 30 s after boot), so data with old CreateTime
        timestamps is not deleted the moment a producer writes it."""
        retention_every = self.config.get("log.retention.check.interval.ms") / 1000.0
        summary_every = self.config.get("connections.summary.interval.ms") / 1000.0
        loop = self.loop
        next_full = loop.time() + min(30.0, retention_every)
        next_summary = loop.time() + summary_every
        # The cleaner, as Kafka's cleaner threads: look for a log to compact every
        # log.cleaner.backoff.ms (read each time: it is a dynamic setting), again at once after
        # one was compacted; independent of the (much slower) retention check.
        next_clean = loop.time()
        last = (0, 0, 0)
        while True:
            await asyncio.sleep(interval)
            if summary_every > 0 and loop.time() >= next_summary:
                next_summary = loop.time() + summary_every
                last = self._log_connection_summary(last, summary_every)
            try:
                self.close_idle_connections()
                if loop.time() >= next_full:
                    next_full = loop.time() + retention_every
                    self.controller.tick(self.now_ms())
                else:
                    self.controller.light_tick(self.now_ms())
                if self.config.get("log.cleaner.enable") and loop.time() >= next_clean:
                    busy = self.controller.clean()
                    next_clean = loop.time() + (0 if busy else self.config.get("log.cleaner.backoff.ms") / 1000.0)
            except Exception:
                log.error("maintenance tick failed", exc_info=True)

    def close_idle_connections(self) -> int:
        """Close connections idle longer than ``connections.max.idle.ms``, as Kafka's selector does
        (a connection waiting for a long poll or a parked join is not idle)."""
        limit = self.config.get("connections.max.idle.ms") / 1000.0
        if limit < 0:
            return 0
        now = self.loop.time()
        closed = 0
        for conn in list(self.connections):
            if conn.idle_for(now) > limit:
                log.debug("closing connection from %s client_id=%s idle for more than %d ms",
                          conn.peer, conn.client_id, limit * 1000)
                conn.close()
                closed += 1
        return closed
    def _log_connection_summary(self, last: tuple, period_s: float) -> tuple:
        """One INFO line per period in which connections were opened or closed (Kafka logs each
        at DEBUG; an operator wants the rate and the count, not 10,000 lines)."""
        stats = self.connection_stats
        now = (stats.opened, stats.closed, stats.violations)
        if now != last:
            log.info("connections: %d open; in the last %.0f s %d opened, %d closed, %d closed for "
                     "protocol violations; %d request bytes queued", len(self.connections), period_s,
                     now[0] - last[0], now[1] - last[1], now[2] - last[2], self.request_bytes.used)
        return now

    async def stop(self) -> None:
        """Stop accepting, end connections, stop modules, flush and mark the logs clean."""
        for server in self._servers:
            server.close()
        if self.schema_registry is not None:
            try:
                await asyncio.wait_for(self.schema_registry.stop(), timeout=1.0)
            except Exception:
                log.error("stopping the schema registry failed", exc_info=True)
        if self.http is not None:
            try:
                await asyncio.wait_for(self.http.stop(), timeout=1.0)
            except Exception:
                log.error("stopping the HTTP server failed", exc_info=True)
        if self._maintenance is not None:
            self._maintenance.cancel()
        self.faults.reset()
        for conn in list(self.connections):
            conn.cancel_tasks()
            conn.close()
        # Handlers still running (long polls, parked joins, those of connections already lost)
        # are cancelled and awaited, so none is left pending when the loop closes.
        tasks = [t for t in self.handler_tasks if not t.done()]
        if self._maintenance is not None:
            tasks.append(self._maintenance)
        for task in tasks:
            task.cancel()
        if tasks:
            _, still = await asyncio.wait(tasks, timeout=1.0)
            if still:
                log.error("%d request handlers did not stop within 1 s of being cancelled", len(still))
        for module in reversed(self.modules):
            stop = getattr(module, "stop", None)
            if stop is not None:
                try:
                    await asyncio.wait_for(stop(self), timeout=1.0)
                except Exception:
                    log.error("stopping %s failed", module.__name__, exc_info=True)
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=0.5)
            except (asyncio.TimeoutError, Exception):
                pass
        self.timers.close()
        if self.controller is not None:
            self.controller.close()
