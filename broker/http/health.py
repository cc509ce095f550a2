"""``GET /health/live`` (the process answers) and ``GET /health/ready`` (the Kafka listener is
bound and every coordinator has loaded its shards, so requests get answers rather than
COORDINATOR_LOAD_IN_PROGRESS).  200 or 503 with a small JSON body saying why."""

from __future__ import annotations

from . import views


def readiness(broker) -> tuple[bool, dict]:
    listening = broker.bound_port is not None and broker.controller is not None
    loaded = views.coordinators_loaded(broker)
    return listening and loaded, {"listening": listening, "coordinators_loaded": loaded}


async def _live(request):
    from aiohttp import web

    return web.json_response({"status": "live"})


async def _ready(request):
    from aiohttp import web

    from .server import broker_key

    ok, detail = readiness(request.app[broker_key()])
    return web.json_response({"status": "ready" if ok else "not ready", **detail}, status=200 if ok else 503)


def setup(app, broker) -> None:
    app.router.add_get("/health/live", _live)
    app.router.add_get("/health/ready", _ready)
