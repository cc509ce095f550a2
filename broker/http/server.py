"""Start and stop the aiohttp application of ``broker.http`` on the broker's running loop."""

from __future__ import annotations

import importlib
import logging

from . import ROUTE_MODULES

log = logging.getLogger("minikafka.http")


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

    def build_app(self):
        from aiohttp import web

        app = web.Application(client_max_size=self.broker.config.get("http.max.request.bytes"))
        app[broker_key()] = self.broker
        for name in self.route_modules:
            # A route module that fails to import is a broken install: let it stop the broker.
            importlib.import_module(name).setup(app, self.broker)
        return app

    async def start(self) -> None:
        from aiohttp import web

        self._runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host=self.host, port=self.broker.config.get("http.port"),
                           reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        log.info("http on %s:%s", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
