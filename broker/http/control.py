"""The control API over HTTP as JSON, for tests in any language (enabled by
``http.control.enable=true`` next to ``http.port``; loopback by default).

``POST /control/<operation>`` with a JSON object body runs one operation of
``broker/control.py`` (``faults.add``, ``clock.advance``, ``wait.group`` ...) and answers its JSON
result.  Shortcuts: ``GET /control/faults`` (``faults.list``), ``GET /control/clock``
(``clock.now``), ``GET /control`` (the operation names).  A body that is not a JSON object, an
unknown operation or an out-of-range value answers 4xx ``{"error": message}`` and changes nothing;
a wait that times out answers 408.

    curl -s -XPOST localhost:$HTTP/control/faults.add \\
         -d '{"api": "OffsetCommit", "error": "NOT_COORDINATOR", "count": 1}'
"""

from __future__ import annotations

import json
import logging

from minikafka.broker import control
from minikafka.broker.faults import FaultError

from .server import broker_key

log = logging.getLogger("minikafka.http.control")


def _json(data, status: int = 200):
    from aiohttp import web

    return web.json_response(data, status=status)


async def _run(request, op: str, params) -> "object":
    broker = request.app[broker_key()]
    try:
        return _json(await control.call(broker, op, params))
    except FaultError as exc:  # control.ControlError (with its status) or a fault that is not valid
        status = getattr(exc, "status", 400)
        log.info("control %s refused (%d): %s", op, status, exc)
        return _json({"error": str(exc)}, status)


async def post_operation(request):
    op = request.match_info["op"]
    if op not in control.OPERATIONS:
        return _json({"error": f"unknown control operation {op!r}",
                      "operations": sorted(control.OPERATIONS)}, 404)
    raw = await request.read()
    if raw.strip():
        try:
            params = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return _json({"error": f"body is not JSON: {exc}"}, 400)
    else:
        params = {}
    if not isinstance(params, dict):
        return _json({"error": "body must be a JSON object"}, 400)
    return await _run(request, op, params)


async def get_faults(request):
    return await _run(request, "faults.list", {})


async def get_clock(request):
    return await _run(request, "clock.now", {})


async def get_index(request):
    return _json({"operations": sorted(control.OPERATIONS)})


def setup(app, broker) -> None:
    if not broker.config.get("http.control.enable"):
        return
    app.router.add_get("/control", get_index)
    app.router.add_get("/control/faults", get_faults)
    app.router.add_get("/control/clock", get_clock)
    app.router.add_post("/control/{op}", post_operation)
    log.warning("control API enabled on the HTTP server: tests can inject faults and move the clock")
