"""SaslHandshake (key 17) v0-1 and SaslAuthenticate (key 36) v0-2.

The state lives in the connection's ``broker.security.session.SaslSession``; these handlers only
translate.  Both change state before their first ``await`` (there is none), so a client's next
request is judged against the new state.

- SaslHandshake v0: after it the client sends bare tokens (no Kafka header), handled by the
  connection; v1: tokens travel in SaslAuthenticate.  An unknown mechanism is answered with
  UNSUPPORTED_SASL_MECHANISM and the enabled list, then the connection is closed, as Kafka does.
- SaslAuthenticate v1+: ``session_lifetime_ms`` (KIP-368) is ``connections.max.reauth.ms``, or
  less when an OAUTHBEARER token expires sooner; 0 means no limit.  A failure is answered with
  SASL_AUTHENTICATION_FAILED and a message, then the connection is closed.
- Every authentication failure (an unknown mechanism, a bad state, bad credentials) is answered
  ``connection.failed.authentication.delay.ms`` late (KIP-306, 100 ms by default) with the
  connection muted meanwhile, then closed, as Kafka's Selector delays it.
- On a listener without SASL both answer ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import asyncio

from minikafka.protocol.errors import ErrorCode

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


async def _after_failure(session, conn) -> None:
    delay = session.fail(conn)
    if delay:
        await asyncio.sleep(delay)


def register(registry, broker) -> None:
    async def handle_handshake(ctx, body: dict) -> dict:
        conn = ctx.connection
        session = getattr(conn, "sasl", None)
        if session is None:
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        code = session.handshake(conn, ctx.api_version, body.get("mechanism") or "")
        if code:
            await _after_failure(session, conn)
        return {"error_code": code, "mechanisms": session.security.served_mechanisms(session.listener)}

    async def handle_authenticate(ctx, body: dict) -> dict:
        conn = ctx.connection
        session = getattr(conn, "sasl", None)
        if session is None:
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "Unexpected SaslAuthenticate",
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        if session.state != "AUTHENTICATE":
            await _after_failure(session, conn)
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "Unexpected SaslAuthenticate",
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        reply, error, lifetime = session.authenticate(conn, body.get("auth_bytes") or b"")
        if error is not None:
            await _after_failure(session, conn)
            return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": error,
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        return {"error_code": ErrorCode.NONE, "error_message": "", "auth_bytes": reply,  # "" as Kafka sends it
                "session_lifetime_ms": lifetime}

    registry.register(SASL_HANDSHAKE, 0, 1, handle_handshake)
    registry.register(SASL_AUTHENTICATE, 0, 2, handle_authenticate)
