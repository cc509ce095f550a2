"""Start and stop the schema registry inside a running broker.

``Broker.start`` calls ``start(broker)`` only when ``schema.registry.listeners`` is set (and imports
this package only then).  The registry opens (creating ``_schemas`` on first start), replays the
topic, and serves the REST API of ``api.py`` on each listener (``http.py``), on the broker's event loop.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import urlsplit

from minikafka.broker.config import ConfigError

from .api import build_app
from .store import Registry
from .topic import BrokerSchemasLog

log = logging.getLogger("minikafka.schema_registry")


def parse_listeners(value) -> list[tuple[str, str, int]]:
    """``http://127.0.0.1:8081,https://0.0.0.0:8443`` -> [(scheme, host, port)]."""
    out = []
    for item in [p.strip() for p in str(value or "").split(",") if p.strip()]:
        parts = urlsplit(item if "://" in item else "http://" + item)
        if parts.scheme not in ("http", "https") or parts.port is None:
            raise ConfigError(f"schema.registry.listeners: {item!r} is not http(s)://host:port")
        out.append((parts.scheme, parts.hostname or "0.0.0.0", parts.port))
    return out


class SchemaRegistryServer:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.listeners = parse_listeners(broker.config.get("schema.registry.listeners"))
        self.registry: Registry | None = None
        self.api = None
        self.ports: list[int] = []
        self.urls: list[str] = []
        self._http = None
        self.started_in_s = 0.0

    async def start(self) -> None:
        from .http import HttpServer

        started = time.perf_counter()
        topic = self.broker.config.get("schema.registry.topic")
        self.registry = Registry(BrokerSchemasLog(self.broker, topic))
        middlewares = []
        if str(self.broker.config.get("schema.registry.authentication.method")).upper() == "BASIC":
            from .auth import basic_auth_middleware

            middlewares.append(basic_auth_middleware(self.broker))
        app, self.api = build_app(self.registry, middlewares=middlewares,
                                  max_body=self.broker.config.get("http.max.request.bytes"), broker=self.broker)
        from .console import setup as console_setup

        console_setup(app, self)
        self._http = HttpServer(app)
        for scheme, host, port in self.listeners:
            ssl_context = None
            if scheme == "https":
                from .auth import tls_context

                ssl_context = tls_context(self.broker.config)
            bound = await self._http.start(host, port, ssl_context)
            self.ports.append(bound)
            shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
            self.urls.append(f"{scheme}://{shown}:{bound}")
        if getattr(self.broker, "metrics", None) is not None:
            from .metrics import register_collector

            register_collector(self.broker.metrics.registry, self)
        self.started_in_s = time.perf_counter() - started
        log.info("schema registry on %s (%d subjects, started in %.1f ms)", ",".join(self.urls),
                 len(self.registry.state.subjects), self.started_in_s * 1000)

    @property
    def url(self) -> str | None:
        return self.urls[0] if self.urls else None

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None


async def start(broker) -> SchemaRegistryServer:
    server = SchemaRegistryServer(broker)
    await server.start()
    return server
