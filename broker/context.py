"""What a handler gets besides the request body.

Handlers are ``async def handler(ctx: RequestContext, body: dict) -> dict | None``; ``ctx.broker``
is the running :class:`broker.server.Broker` (config, controller, clock, group coordinator, loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .server import Broker


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    broker: "Broker"
    # The connection the request came on (broker.connection.KafkaConnection) or None in tests.
    connection: Any = None
