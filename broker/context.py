"""What a handler gets besides the request body.

Handlers are ``async def handler(ctx: RequestContext, body: dict) -> dict | None``; ``ctx.broker``
is the running broker (broker/server.py's ``Broker``: config, controller, clock, group coordinator,
loop).  This module imports neither the server nor the connection: both import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    broker: Any  # broker.server.Broker
    # The connection the request came on (broker.connection.KafkaConnection) or None in tests.
    connection: Any = None
