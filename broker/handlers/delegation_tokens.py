"""Delegation tokens (KIP-48): CreateDelegationToken (38) v1-3, RenewDelegationToken (39) v1-2,
ExpireDelegationToken (40) v1-2, DescribeDelegationToken (41) v1-3, as Kafka 4.2 serves them.

The tokens and their lifetimes live in broker/security/tokens.py (kept in the metadata log);
logging in with one is SCRAM with ``tokenauth=true`` (broker/security/scram.py).  What the
broker checks before the controller's rules, in Kafka's order (``KafkaApis``):

- every token API: a connection that may not use them answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
  (a PLAINTEXT listener, an SSL listener without a client certificate, or a connection that
  itself logged in with a token), with -1 timestamps;
- Create: an owner other than the requester (v3 ``owner_principal_*``) needs CREATE_TOKENS on
  the USER resource ``User:<owner>``, else DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer
  whose type is not ``User`` is INVALID_PRINCIPAL_TYPE; then, without
  ``delegation.token.secret.key``, DELEGATION_TOKEN_AUTH_DISABLED;
- Renew/Expire: AUTH_DISABLED, DELEGATION_TOKEN_NOT_FOUND (unknown HMAC),
  DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH (neither owner nor renewer); the
  expiry timestamp of a refused one is 0 (-1 when refused as not allowed);
- Describe: AUTH_DISABLED; an empty owner list answers no tokens, null means every owner; a
  token is listed when a requested owner is its owner, requester or a renewer, and so is the
  principal asking, or that principal has DESCRIBE on the DELEGATION_TOKEN resource
  ``<token id>`` or DESCRIBE_TOKENS on the USER resource of the token's owner.

Left out: Kafka answers a Describe from its broker's token cache, which trails the controller
by a moment (a token created a millisecond earlier may be missing); here the cache is the
controller's, so a change is visible to the next request.  Versions: v0 of each was removed in
Kafka 4.0 (KIP-896); v2 is the first flexible one; v3 of Create/Describe adds the owner and
requester principals (KIP-373).
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az
from minikafka.broker.security import tokens as tk
from minikafka.protocol.errors import ErrorCode

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
SWEEP_TIMER = ("delegation-tokens", "sweep")


def _principal(ctx) -> str:
    return getattr(ctx.connection, "principal", "User:ANONYMOUS")


def allow_token_requests(ctx) -> bool:
    """Kafka's ``KafkaApis.allowTokenRequests``."""
    conn = ctx.connection
    session = getattr(conn, "sasl", None)
    if session is not None and getattr(session, "token_authenticated", False):
        return False
    listener = getattr(conn, "listener", None)
    protocol = getattr(listener, "security_protocol", "PLAINTEXT") if listener is not None else "PLAINTEXT"
    if protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and _principal(ctx) == "User:ANONYMOUS")


def _tokens(ctx) -> tk.DelegationTokens:
    return ctx.broker.controller.security.tokens


def _create_error(code: int, owner: str, requester: str, timestamps: int = -1) -> dict:
    owner_type, owner_name = tk.split_principal(owner)
    req_type, req_name = tk.split_principal(requester)
    return {"error_code": code, "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": req_type, "token_requester_principal_name": req_name,
            "issue_timestamp_ms": timestamps, "expiry_timestamp_ms": timestamps,
            "max_timestamp_ms": timestamps, "token_id": "", "hmac": b"", "throttle_time_ms": 0}


async def create(ctx, body: dict) -> dict:
    requester = _principal(ctx)
    owner_name = body.get("owner_principal_name")
    owner = requester if not owner_name else f"{body.get('owner_principal_type')}:{owner_name}"
    renewers = [(r.get("principal_type"), r.get("principal_name")) for r in body.get("renewers") or ()]
    if not allow_token_requests(ctx):
        return _create_error(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    if owner != requester and not az.authorize(ctx, az.CREATE_TOKENS, az.USER, owner):
        return _create_error(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    if any(kind != tk.USER_TYPE for kind, _ in renewers):
        return _create_error(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    error, token = _tokens(ctx).create(requester, owner, renewers, body.get("max_lifetime_ms", -1),
                                       ctx.broker.now_ms())
    if error:
        # The controller's refusal: its response keeps the message's defaults (0, "", empty).
        return _create_error(error, owner, requester, timestamps=0)
    response = _create_error(ErrorCode.NONE, owner, requester)
    response.update(issue_timestamp_ms=token.issue_timestamp, expiry_timestamp_ms=token.expiry_timestamp,
                    max_timestamp_ms=token.max_timestamp, token_id=token.token_id, hmac=token.hmac)
    return response


async def renew(ctx, body: dict) -> dict:
    if not allow_token_requests(ctx):
        return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "expiry_timestamp_ms": -1,
                "throttle_time_ms": 0}
    error, expiry = _tokens(ctx).renew(bytes(body.get("hmac") or b""), _principal(ctx),
                                       body.get("renew_period_ms", 0), ctx.broker.now_ms())
    return {"error_code": error, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


async def expire(ctx, body: dict) -> dict:
    if not allow_token_requests(ctx):
        return {"error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "expiry_timestamp_ms": -1,
                "throttle_time_ms": 0}
    error, expiry = _tokens(ctx).expire(bytes(body.get("hmac") or b""), _principal(ctx),
                                        body.get("expiry_time_period_ms", 0), ctx.broker.now_ms())
    return {"error_code": error, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


def _described(token: tk.DelegationToken) -> dict:
    owner_type, owner_name = tk.split_principal(token.owner)
    req_type, req_name = tk.split_principal(token.requester)
    return {"principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": req_type, "token_requester_principal_name": req_name,
            "issue_timestamp": token.issue_timestamp, "expiry_timestamp": token.expiry_timestamp,
            "max_timestamp": token.max_timestamp, "token_id": token.token_id, "hmac": token.hmac,
            "renewers": [dict(zip(("principal_type", "principal_name"), tk.split_principal(r)))
                         for r in token.renewers]}


async def describe(ctx, body: dict) -> dict:
    def answer(code: int, tokens: list) -> dict:
        return {"error_code": code, "tokens": tokens, "throttle_time_ms": 0}

    if not allow_token_requests(ctx):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    store = _tokens(ctx)
    if not store.enabled:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
    owners = body.get("owners")
    if owners is not None and not owners:
        return answer(ErrorCode.NONE, [])
    wanted = None if owners is None else [f"{o.get('principal_type')}:{o.get('principal_name')}" for o in owners]
    requester = _principal(ctx)

    def eligible(token: tk.DelegationToken) -> bool:
        # Kafka's DelegationTokenManager.filterToken
        if wanted is not None and not any(token.owner_or_renewer(o) for o in wanted):
            return False
        if token.owner_or_renewer(requester):
            return True
        return (az.authorize(ctx, az.DESCRIBE, az.DELEGATION_TOKEN, token.token_id)
                or az.authorize(ctx, az.DESCRIBE_TOKENS, az.USER, token.owner))

    return answer(ErrorCode.NONE, [_described(t) for t in store.describe(eligible)])


def _schedule_sweep(broker) -> None:
    interval = int(broker.config.get("delegation.token.expiry.check.interval.ms"))

    def sweep() -> None:
        try:
            broker.controller.security.tokens.sweep(broker.now_ms())
        finally:
            broker.timers.schedule(SWEEP_TIMER, interval, sweep)

    broker.timers.schedule(SWEEP_TIMER, interval, sweep)


async def start(broker) -> None:
    """Expired tokens are removed every ``delegation.token.expiry.check.interval.ms`` of broker
    time (Kafka's controller sweep), so ``clock.advance`` removes them at once."""
    if broker.controller.security.tokens.enabled:
        _schedule_sweep(broker)


async def stop(broker) -> None:
    broker.timers.cancel(SWEEP_TIMER)


def register(registry, broker) -> None:
    registry.register(CREATE, 1, 3, create)
    registry.register(RENEW, 1, 2, renew)
    registry.register(EXPIRE, 1, 2, expire)
    registry.register(DESCRIBE, 1, 3, describe)
