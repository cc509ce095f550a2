"""The HTTP server of broker.http: off by default, on the broker's loop when http.port is set."""

import aiohttp
from aiohttp import web

from minikafka.broker.config import BrokerConfig
from minikafka.broker.http.server import HttpServer, broker_key
from minikafka.broker.server import Broker

from test_server import CountingController


def setup(app, broker):
    async def hello(request):
        return web.json_response({"port": request.app[broker_key()].bound_port})

    app.router.add_get("/hello", hello)


def _config(**overrides):
    return BrokerConfig.load(environ={}, fields={"port": 0}, overrides=overrides)


async def test_off_unless_a_port_is_set():
    broker = Broker(_config(), controller=CountingController(), handler_modules=[])
    await broker.start()
    try:
        assert broker.http is None
    finally:
        await broker.stop()


async def test_routes_of_listed_modules_answer_on_a_free_loopback_port(monkeypatch):
    monkeypatch.setattr(HttpServer, "__init__", _with_modules(HttpServer.__init__, [__name__]))
    broker = Broker(_config(**{"http.port": "0"}), controller=CountingController(), handler_modules=[])
    await broker.start()
    try:
        assert broker.http.host == "127.0.0.1" and broker.http.port
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{broker.http.port}/hello") as resp:
                assert await resp.json() == {"port": broker.bound_port}
            async with session.get(f"http://127.0.0.1:{broker.http.port}/nothing") as resp:
                assert resp.status == 404
    finally:
        await broker.stop()
    assert broker.http._runner is None


def _with_modules(init, modules):
    def patched(self, broker, route_modules=None):
        init(self, broker, modules)
    return patched


async def test_the_application_starts_with_the_first_connection(monkeypatch):
    # The port is bound (and reported) at start; aiohttp and the route modules load only when a
    # client connects, and that first request is answered.
    monkeypatch.setattr(HttpServer, "__init__", _with_modules(HttpServer.__init__, [__name__]))
    broker = Broker(_config(**{"http.port": "0"}), controller=CountingController(), handler_modules=[])
    await broker.start()
    try:
        assert broker.http.port and not broker.http.running
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{broker.http.port}/hello") as resp:
                assert await resp.json() == {"port": broker.bound_port}
        assert broker.http.running
    finally:
        await broker.stop()
    assert broker.http._runner is None and broker.http._sock is None


async def test_stop_before_any_connection_frees_the_port(monkeypatch):
    import socket

    broker = Broker(_config(**{"http.port": "0"}), controller=CountingController(), handler_modules=[])
    await broker.start()
    port = broker.http.port
    await broker.stop()
    assert not broker.http.running
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # nothing listens there any more
        s.listen(1)
