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
