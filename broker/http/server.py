"""Start and stop the aiohttp application of ``broker.http`` on the broker's running loop.

The port is bound at start (so ``port`` is known and reported at once), but aiohttp and the route
modules (the console's templates, the metrics) are imported only when the first connection
arrives: importing them costs more than the rest of a broker start, and most brokers that have
an HTTP port (the embedded broker in a child process, say) rarely or never use it.  The waiting
connection stays in the socket's backlog meanwhile and is served as soon as the application
runs.  The metrics' counters are the exception: they record from the start (broker/http/metrics.py
keeps them without prometheus_client, which loads with the first scrape).  ``open()`` does the same at once, for callers that want the application up front.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import socket

from . import ROUTE_MODULES

log = logging.getLogger("minikafka.http")

_METRICS = "minikafka.broker.http.metrics"


def _broker_key():
    from .appkey import BROKER_KEY

    return BROKER_KEY


BROKER_KEY = None  # web.AppKey for the Broker; set on first use so aiohttp loads only when needed


def broker_key():
    """The key under which every route finds the broker: ``request.app[broker_key()]``."""
    global BROKER_KEY
    if BROKER_KEY is None:
        BROKER_KEY = _broker_key()
    return BROKER_KEY


class HttpServer:
    """``await start()`` binds ``http.host:http.port`` (0 picks a free port, see ``port``)."""

    def __init__(self, broker, route_modules: list[str] | None = None):
        self.broker = broker
        self.route_modules = ROUTE_MODULES if route_modules is None else route_modules
        self.port: int | None = None
        self.host: str = broker.config.get("http.host")
        self._runner = None
        self._sock: socket.socket | None = None
        self._opening: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def build_app(self):
        from aiohttp import web

        app = web.Application(client_max_size=self.broker.config.get("http.max.request.bytes"))
        app[broker_key()] = self.broker
        for name in self.route_modules:
            # A route module that fails to import is a broken install: the server does not serve.
            importlib.import_module(name).setup(app, self.broker)
        return app

    @property
    def running(self) -> bool:
        """True once aiohttp serves the port (after the first connection or ``open()``)."""
        return self._runner is not None

    async def start(self) -> None:
        """Bind the port; the application itself starts with the first connection."""
        self._loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.broker.config.get("http.port")))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.port = sock.getsockname()[1]
        if _METRICS in self.route_modules:
            # The counters run from now, not from the first scrape (no prometheus_client yet).
            importlib.import_module(_METRICS).start(self.broker)
        self._loop.add_reader(sock.fileno(), self._first_connection)
        log.info("http on %s:%s", self.host, self.port)

    def _first_connection(self) -> None:
        self._loop.remove_reader(self._sock.fileno())
        self._opening = self._loop.create_task(self._open_logged())

    async def _open_logged(self) -> None:
        try:
            await self.open()
        except Exception:
            log.error("the HTTP server could not start; closing %s:%s", self.host, self.port, exc_info=True)
            self._close_socket()

    async def open(self) -> None:
        """Start the application on the bound port now (idempotent)."""
        if self._runner is not None or self._sock is None:
            return
        if self._opening is None:  # called directly: no first connection will open it
            self._loop.remove_reader(self._sock.fileno())
        from aiohttp import web

        runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner  # from here stop() cleans it up, whatever happens next
        await web.SockSite(runner, self._sock).start()
        log.debug("http application started on %s:%s", self.host, self.port)

    def _close_socket(self) -> None:
        if self._sock is not None:
            if self._runner is None and self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None

    async def stop(self) -> None:
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
            try:
                await self._opening
            except (asyncio.CancelledError, Exception):
                pass
        if self._runner is not None:
            await self._runner.cleanup()  # closes the socket too
            self._runner = None
            self._sock = None
        self._close_socket()
        if _METRICS in self.route_modules:
            importlib.import_module(_METRICS).stop(self.broker)
