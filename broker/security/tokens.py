"""Delegation tokens (KIP-48) as a KRaft broker/controller keeps them.

A token is a (token id, HMAC) pair the broker hands to an authenticated principal, its *owner*,
so that processes without the owner's password (a job's workers) can log in as the owner with
SASL/SCRAM: username = the token id, password = the base64 of the HMAC, and the SCRAM extension
``tokenauth=true``.  What Kafka 4.2 does, and so do we:

* the HMAC is HMAC-SHA512 keyed with ``delegation.token.secret.key`` (UTF-8) over the token id
  (UTF-8); it is never stored: every broker recomputes it from the secret when it replays a token;
* the token id is a random Kafka ``Uuid`` in its string form (22 characters of URL-safe base64);
* each token carries SCRAM-SHA-256 and SCRAM-SHA-512 credentials derived from the password
  ``base64(hmac)`` with a random salt and 4096 iterations (the mechanisms' minimum), as Kafka's
  ``DelegationTokenCache`` makes them (here at the first login with each mechanism, not at
  replay, so that many tokens do not slow start-up);
* lifetimes: ``maxTimestamp = now + min(delegation.token.max.lifetime.ms, requested max lifetime
  when > 0)``; ``expiryTimestamp = min(maxTimestamp, now + delegation.token.expiry.time.ms)``;
  a renewal moves the expiry to ``min(max, now + min(expiry.time, requested period when > 0))``;
  an expiry with a period >= 0 sets ``min(max, now + period)``, a negative period removes the
  token at once (and answers ``now``); sums saturate at the largest long;
* only the owner or a renewer may renew or expire a token (DELEGATION_TOKEN_OWNER_MISMATCH);
* a token whose max or expiry timestamp is before now is EXPIRED for a renewal and for an expiry
  with a period >= 0 (checked before the owner for a renewal, after it for an expiry, as in 4.2),
  and is removed by a sweep every ``delegation.token.expiry.check.interval.ms`` of broker time.

Records in the metadata log (``storage/metadata_log.py``, applied by ``SecurityStore.apply``),
KRaft's DelegationTokenRecord / RemoveDelegationTokenRecord:

* ``{"type": "delegation_token", "token_id", "owner", "requester", "renewers": [...],
  "issue_timestamp", "max_timestamp", "expiration_timestamp"}`` (principals as ``Type:name``);
* ``{"type": "remove_delegation_token", "token_id"}``.
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:  # scram (hashlib, hmac) is imported with the first token, not at start-up
    from .scram import ScramCredential

log = logging.getLogger("minikafka.tokens")

RECORD_TYPES = ("delegation_token", "remove_delegation_token")
LONG_MAX = 2 ** 63 - 1

# Kafka's error codes of the token APIs.

USER_TYPE = "User"


def kafka_uuid_string(raw: bytes | None = None) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding.  Like ``Uuid.randomUuid`` we
    never hand out an id whose string starts with '-' (it reads as a command-line flag)."""
    while True:
        text = base64.urlsafe_b64encode(raw or uuid.uuid4().bytes).rstrip(b"=").decode()
        if raw is not None or not text.startswith("-"):
            return text


def token_hmac(secret_key: str, token_id: str) -> bytes:
    import hashlib
    import hmac

    return hmac.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def split_principal(principal: str) -> tuple[str, str]:
    """``User:alice`` -> ("User", "alice") (Kafka's ``SecurityUtils.parseKafkaPrincipal``)."""
    kind, sep, name = principal.partition(":")
    return (kind, name) if sep else (USER_TYPE, principal)


def saturating_add(a: int, b: int) -> int:
    return LONG_MAX if a > LONG_MAX - b else a + b


@dataclass
class DelegationToken:
    token_id: str
    owner: str
    requester: str
    renewers: list[str]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int
    hmac: bytes | None = None  # None when the broker has no secret key to compute it
    credentials: "dict[str, ScramCredential]" = field(default_factory=dict)

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``TokenInformation.ownerOrRenewer``: since KIP-373 the requester counts too
        (it decides what DescribeDelegationToken lists, not who may renew)."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: str) -> bool:
        """The controller's ``allowedToRenew``: the owner or a renewer."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def to_record(self) -> dict:
        return {"type": "delegation_token", "token_id": self.token_id, "owner": self.owner,
                "requester": self.requester, "renewers": list(self.renewers),
                "issue_timestamp": self.issue_timestamp, "max_timestamp": self.max_timestamp,
                "expiration_timestamp": self.expiry_timestamp}


class DelegationTokens:
    """The token cache (by id and by HMAC) and the controller's token operations.

    ``commit(record)`` makes a change durable in the metadata log and applies it (through
    :meth:`apply`), so the state after a restart is the replay of the same records."""

    def __init__(self, commit: Callable[[dict], None], secret_key: str | None = None, *,
                 max_lifetime_ms: int = 604800000, expiry_time_ms: int = 86400000,
                 iterations: int = 4096) -> None:  # SCRAM's minimum, as Kafka derives them
        self._commit = commit
        self.secret_key = secret_key or None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.iterations = iterations
        self.tokens: dict[str, DelegationToken] = {}
        self._by_hmac: dict[bytes, str] = {}

    @classmethod
    def from_config(cls, commit, config) -> "DelegationTokens":
        return cls(commit, config.get("delegation.token.secret.key") or None,
                   max_lifetime_ms=int(config.get("delegation.token.max.lifetime.ms")),
                   expiry_time_ms=int(config.get("delegation.token.expiry.time.ms")))

    @property
    def enabled(self) -> bool:
        return self.secret_key is not None

    # -- replay ----------------------------------------------------------------------------

    def apply(self, record: dict) -> bool:
        kind = record.get("type")
        if kind not in RECORD_TYPES:
            return False
        token_id = record["token_id"]
        old = self.tokens.pop(token_id, None)
        if old is not None and old.hmac is not None:
            self._by_hmac.pop(old.hmac, None)
        if kind == "delegation_token":
            token = DelegationToken(token_id, record["owner"], record["requester"],
                                    list(record.get("renewers") or ()), int(record["issue_timestamp"]),
                                    int(record["max_timestamp"]), int(record["expiration_timestamp"]))
            if old is not None and old.hmac is not None:
                token.hmac, token.credentials = old.hmac, old.credentials  # a renewal: same password
            elif self.secret_key is not None:
                token.hmac = token_hmac(self.secret_key, token_id)
            self.tokens[token_id] = token
            if token.hmac is not None:
                self._by_hmac[token.hmac] = token_id
        return True

    # -- look-ups --------------------------------------------------------------------------

    def by_hmac(self, value: bytes) -> DelegationToken | None:
        token_id = self._by_hmac.get(bytes(value))
        return None if token_id is None else self.tokens.get(token_id)

    def scram_login(self, token_id: str, mechanism: str):
        """(credential, owner name, expiry timestamp) for a SCRAM login with ``tokenauth=true``,
        or None for an unknown token (Kafka's ``DelegationTokenCache.credential/owner``)."""
        token = self.tokens.get(token_id)
        if token is None or token.hmac is None:
            return None
        credential = token.credentials.get(mechanism)
        if credential is None:
            # Derived at the first login with each mechanism rather than at replay (4 ms a token
            # would add up at start-up); a random salt either way, as Kafka's.
            from .scram import MECHANISMS, credential_from_password

            if mechanism not in MECHANISMS:
                return None
            credential = credential_from_password(mechanism, base64.b64encode(token.hmac).decode(), self.iterations)
            token.credentials[mechanism] = credential
        return credential, split_principal(token.owner)[1], token.expiry_timestamp

    def describe(self, eligible: Callable[[DelegationToken], bool]) -> list[DelegationToken]:
        return sorted((t for t in self.tokens.values() if eligible(t) and t.hmac is not None),
                      key=lambda t: (t.issue_timestamp, t.token_id))

    # -- the controller's operations (each returns (error, fields), committing on success) ----

    def create(self, requester: str, owner: str, renewers: list[tuple[str, str]], max_lifetime_ms: int,
               now_ms: int) -> tuple[int, DelegationToken | None]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_ts = saturating_add(now_ms, lifetime)
        expiry_ts = min(max_ts, saturating_add(now_ms, self.expiry_time_ms))
        if any(kind != USER_TYPE for kind, _ in renewers):
            return ErrorCode.INVALID_PRINCIPAL_TYPE, None
        token_id = kafka_uuid_string()
        while token_id in self.tokens:  # pragma: no cover - 122 random bits
            token_id = kafka_uuid_string()
        token = DelegationToken(token_id, owner, requester, [f"{k}:{n}" for k, n in renewers], now_ms,
                                max_ts, expiry_ts)
        self._commit(token.to_record())
        log.info("created delegation token %s for owner %s (requester %s), expires %d, max %d",
                 token_id, owner, requester, expiry_ts, max_ts)
        return ErrorCode.NONE, self.tokens[token_id]

    def _find(self, value: bytes) -> tuple[int, DelegationToken | None]:
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        token = self.by_hmac(value)
        return (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None) if token is None else (ErrorCode.NONE, token)

    def renew(self, value: bytes, principal: str, period_ms: int, now_ms: int) -> tuple[int, int]:
        """(error, new expiry timestamp); the timestamp is 0 on an error, as Kafka's controller."""
        error, token = self._find(value)
        if error:
            return error, 0
        if token.expired(now_ms):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        if not token.may_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        lifetime = self.expiry_time_ms
        if period_ms > 0:
            lifetime = min(lifetime, period_ms)
        expiry_ts = min(token.max_timestamp, saturating_add(now_ms, lifetime))
        self._commit({**token.to_record(), "expiration_timestamp": expiry_ts})
        return ErrorCode.NONE, expiry_ts

    def expire(self, value: bytes, principal: str, period_ms: int, now_ms: int) -> tuple[int, int]:
        """Kafka 4.2's order: the owner check comes before the expiry check, and a negative
        period removes even a token that has already expired."""
        error, token = self._find(value)
        if error:
            return error, 0
        if not token.may_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        if period_ms < 0:
            self._commit({"type": "remove_delegation_token", "token_id": token.token_id})
            return ErrorCode.NONE, now_ms
        if token.expired(now_ms):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        expiry_ts = min(token.max_timestamp, saturating_add(now_ms, period_ms))
        self._commit({**token.to_record(), "expiration_timestamp": expiry_ts})
        return ErrorCode.NONE, expiry_ts

    def sweep(self, now_ms: int) -> int:
        """Remove every token whose max or expiry timestamp has passed; returns how many."""
        expired = [t for t in self.tokens.values() if t.expired(now_ms)]
        for token in expired:
            log.info("delegation token %s of %s expired; removing it", token.token_id, token.owner)
            self._commit({"type": "remove_delegation_token", "token_id": token.token_id})
        return len(expired)

