"""ApiVersions (key 18), versions 0-4.

The answer is computed from the registry: every (api_key, min, max) some handler registered,
so nothing is advertised that is not served (PROTOCOL.md: "never advertise an API/version you
don't implement").  v1+ adds throttle_time_ms; v3+ (flexible) adds the tagged feature fields from
``broker.features`` (supported and finalized levels; ``transaction.version`` 2, transactions V2, as Kafka 4.2).  An ApiVersions request at a version above 4 never reaches this handler:
the connection answers it with UNSUPPORTED_VERSION and a v0 body (see broker.connection).
"""

from __future__ import annotations

import re

from minikafka.protocol.errors import ErrorCode

from .. import features

API_KEY = 18
# KIP-511: what a client software name and version may look like (Kafka refuses anything else).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _valid_software(body: dict) -> bool:
    return all(_SOFTWARE.fullmatch(body.get(k) or "")
               for k in ("client_software_name", "client_software_version"))


def register(registry, broker) -> None:
    async def handle_api_versions(ctx, body: dict) -> dict:
        if ctx.api_version >= 3 and not _valid_software(body):
            # Kafka 4.2: INVALID_REQUEST and nothing else (no api keys, no features).
            return {"error_code": ErrorCode.INVALID_REQUEST, "throttle_time_ms": 0, "api_keys": []}
        response = dict(registry.api_versions_body())
        response.setdefault("error_code", 0)
        response.setdefault("throttle_time_ms", 0)
        if ctx.api_version >= 3:
            response.update(features.api_versions_fields(ctx.broker, ctx.api_version))
        return response

    registry.register(API_KEY, 0, 4, handle_api_versions)
