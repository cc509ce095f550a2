"""Authentication state of a connection, and the broker-wide security state it consults.

``Security`` (one per broker) knows the listeners' SASL mechanisms, the PLAIN users (from the
listener's JAAS setting, as Kafka's ``PlainLoginModule`` takes them: ``user_<name>="<password>"``),
the SCRAM credentials (kept by the controller in the metadata log) and, when configured, the
authorizer.

``SaslSession`` (one per connection on a SASL listener) is Kafka's ``SaslServerAuthenticator``
state machine, with its state names:

- HANDSHAKE_OR_VERSIONS_REQUEST: ApiVersions and SaslHandshake are served; anything else closes
  the connection (Kafka: "Unexpected Kafka request ... during SASL handshake").
- AUTHENTICATE: after a SaslHandshake v1, only SaslAuthenticate requests are served.
- RAW_AUTHENTICATE (Kafka handles it in AUTHENTICATE): after a SaslHandshake v0 the tokens come as
  bare size-prefixed frames without a Kafka header, and are answered the same way.
- COMPLETE: authenticated; with ``connections.max.reauth.ms`` the session expires and any request
  other than a re-authentication (KIP-368: SaslHandshake + SaslAuthenticate again, same
  mechanism) then closes the connection.
- FAILED: the failure answer is sent and the connection closed.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time

log = logging.getLogger("minikafka.sasl")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


def _scram():
    """The SCRAM module (hashlib, hmac), imported with the first SCRAM handshake, not at start-up."""
    from . import scram

    return scram


SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
ANONYMOUS = "User:ANONYMOUS"

_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class AuthenticationFailed(Exception):
    pass


class Security:
    def __init__(self, broker, listeners) -> None:
        self.broker = broker
        self.config = broker.config
        self.listeners = listeners
        self.scram_lookup = self._scram_lookup
        from .authorizer import build

        self.authorizer = build(broker)
        for item in listeners:
            if item.uses_sasl:
                mechanisms = self.mechanisms(item)
                unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
                if unknown:
                    log.warning("listener %s: SASL mechanisms %s are not served", item.name, unknown)

    def mechanisms(self, listener) -> list[str]:
        text = listener.setting(self.config, "sasl.enabled.mechanisms") or ""
        return [m.strip().upper() for m in str(text).split(",") if m.strip()]

    def served_mechanisms(self, listener) -> list[str]:
        return [m for m in self.mechanisms(listener) if m in SUPPORTED_MECHANISMS]

    def plain_users(self, listener) -> dict[str, str]:
        prefixed = f"listener.name.{listener.name.lower()}.plain.sasl.jaas.config"
        text = self.config.overrides.get(prefixed) or listener.setting(self.config, "sasl.jaas.config") or ""
        return {name: value.replace('\\"', '"') for name, value in _JAAS_USER.findall(str(text))}

    def _scram_lookup(self, user: str, mechanism: str):
        store = getattr(self.broker.controller, "scram_credentials", None)
        return store.get((user, mechanism)) if store is not None else None

    def token_lookup(self, token_id: str, mechanism: str):
        """A delegation token's SCRAM login (broker/security/tokens.py), or None."""
        security = getattr(self.broker.controller, "security", None)
        tokens = getattr(security, "tokens", None)
        return tokens.scram_login(token_id, mechanism) if tokens is not None else None

    def reauth_ms(self, listener) -> int:
        value = listener.setting(self.config, "connections.max.reauth.ms")
        return int(value or 0)

    def failed_auth_delay_s(self, listener) -> float:
        value = listener.setting(self.config, "connection.failed.authentication.delay.ms")
        return max(int(value or 0), 0) / 1000


def attach(conn, transport) -> None:
    """Called when a connection is made on a listener: principal of a TLS client certificate,
    SASL state on a SASL listener."""
    listener = conn.listener
    if listener.uses_tls:
        from .tls import peer_principal

        principal = peer_principal(transport, listener, conn.broker.config)
        if principal is not None:
            conn.principal = principal
    if listener.uses_sasl:
        conn.sasl = SaslSession(conn.broker.security, listener)


# -- mechanisms -----------------------------------------------------------------------------


class PlainServer:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd`` in one message."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.user = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        expected = self.users.get(user)
        # Compare even for unknown users so timing does not tell which users exist.
        import hmac

        ok = hmac.compare_digest((expected or "\0unknown").encode(), password.encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.user, self.complete = user, True
        return b""


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class UnsecuredOAuthBearerServer:
    """KIP-255 OAUTHBEARER with Kafka's unsecured validator (``OAuthBearerUnsecuredValidatorCallbackHandler``):
    the token is an unsigned JWS (``alg: none``), whose principal claim (``sub`` by default)
    names the user and whose ``exp`` bounds the session.  For development only, as in Kafka."""

    def __init__(self, security, listener) -> None:
        get = lambda name: listener.setting(security.config, name)  # noqa: E731
        self.sub_claim = get("sasl.oauthbearer.sub.claim.name") or "sub"
        self.audience = [a for a in str(get("sasl.oauthbearer.expected.audience") or "").split(",") if a]
        self.skew_ms = int(get("sasl.oauthbearer.allowable.clock.skew.ms") or 0)
        self.now_ms = security.broker.now_ms
        self.user = None
        self.complete = False
        self.expires_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid OAUTHBEARER client response") from None
        header, sep, rest = text.partition("\x01")
        if not sep or not header.startswith(("n,", "y,")):
            raise AuthenticationFailed("Invalid OAUTHBEARER client response")
        fields = dict(item.split("=", 1) for item in rest.split("\x01") if "=" in item)
        auth = fields.get("auth", "")
        if not auth.startswith("Bearer "):
            raise AuthenticationFailed("Invalid OAUTHBEARER client response: no bearer token")
        parts = auth[len("Bearer "):].strip().split(".")
        try:
            if len(parts) != 3:
                raise ValueError("not a JWS compact serialization")
            jose, claims = json.loads(_b64url(parts[0])), json.loads(_b64url(parts[1]))
        except (ValueError, TypeError) as exc:
            raise AuthenticationFailed(f"invalid_token: {exc}") from None
        if jose.get("alg") != "none":
            raise AuthenticationFailed("invalid_token: unsecured tokens must have alg none")
        now = self.now_ms()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            raise AuthenticationFailed("invalid_token: no exp claim")
        if exp * 1000 + self.skew_ms < now:
            raise AuthenticationFailed("invalid_token: the token has expired")
        iat = claims.get("iat")
        if isinstance(iat, (int, float)) and iat * 1000 - self.skew_ms > now:
            raise AuthenticationFailed("invalid_token: the token was issued in the future")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise AuthenticationFailed(f"invalid_token: no {self.sub_claim} claim")
        if self.audience:
            aud = claims.get("aud")
            auds = aud if isinstance(aud, list) else [aud]
            if not any(a in self.audience for a in auds):
                raise AuthenticationFailed("invalid_token: audience not accepted")
        self.user, self.complete, self.expires_ms = sub, True, int(exp * 1000)
        return b""


# -- the per-connection state machine -------------------------------------------------------


class SaslSession:
    def __init__(self, security: Security, listener) -> None:
        self.security = security
        self.listener = listener
        self.state = "HANDSHAKE_OR_VERSIONS_REQUEST"
        self.mechanism: str | None = None
        self.server = None
        self.expires_at_ms: int | None = None
        self.reauthenticating = False
        # Logged in with a delegation token (Kafka's KafkaPrincipal.tokenAuthenticated): such a
        # connection may not create, renew, expire or describe tokens.
        self.token_authenticated = False

    @property
    def raw_expected(self) -> bool:
        return self.state == "RAW_AUTHENTICATE"

    def admits(self, conn, api_key: int) -> bool:
        """Whether a request may be served now; closes the connection when it may not."""
        state = self.state
        if state == "COMPLETE":
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) or self.expires_at_ms is None:
                return True
            if self.security.broker.now_ms() < self.expires_at_ms:
                return True
            conn._violation("SASL session expired without re-authentication (connections.max.reauth.ms)")
            return False
        if state == "HANDSHAKE_OR_VERSIONS_REQUEST" and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return True
        if state == "AUTHENTICATE" and api_key == SASL_AUTHENTICATE:
            return True
        conn._violation(f"unexpected request api {api_key} in SASL state {state} "
                        "(requests before authentication are not served)")
        return False

    def handshake(self, conn, version: int, mechanism: str) -> int:
        """SaslHandshake: returns the error code (0, 33 UNSUPPORTED_SASL_MECHANISM, 34 ILLEGAL_SASL_STATE)."""
        served = self.security.served_mechanisms(self.listener)
        if self.state == "COMPLETE":
            if mechanism != self.mechanism:
                log.warning("re-authentication from %s with %s after %s; closing", conn.peer, mechanism,
                            self.mechanism)
                self.state = "FAILED"
                return 34
            self.reauthenticating = True
        elif self.state != "HANDSHAKE_OR_VERSIONS_REQUEST":
            self.state = "FAILED"
            return 34
        if mechanism not in served:
            log.warning("SASL handshake from %s client_id=%s on listener %s: mechanism %s not enabled "
                        "(enabled: %s); closing", conn.peer, conn.client_id, self.listener.name,
                        mechanism, ",".join(served))
            self.state = "FAILED"
            return 33
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self.server = PlainServer(self.security.plain_users(self.listener))
        elif mechanism in _scram().MECHANISMS:
            self.server = _scram().ScramServer(mechanism, self.security.scram_lookup, self.security.token_lookup)
        else:
            self.server = UnsecuredOAuthBearerServer(self.security, self.listener)
        self.state = "AUTHENTICATE" if version >= 1 else "RAW_AUTHENTICATE"
        return 0

    def authenticate(self, conn, token: bytes) -> tuple[bytes, str | None, int]:
        """One token: (response token, error message or None, session lifetime ms)."""
        server = self.server
        try:
            reply = server.step(bytes(token))
        except (AuthenticationFailed, _scram().ScramError) as exc:  # evaluated only on an exception
            self.state = "FAILED"
            log.warning("SASL %s authentication from %s client_id=%s on listener %s failed: %s; "
                        "closing", self.mechanism, conn.peer, conn.client_id, self.listener.name, exc)
            # SCRAM failures carry the message Kafka sends instead of their detail (scram.ScramError)
            client_message = getattr(exc, "client_message", None)
            message = client_message(self.mechanism) if client_message else str(exc)
            return b"", message, 0
        if not server.complete:
            return reply, None, 0
        principal = f"User:{server.user}"
        if self.reauthenticating and principal != conn.principal:
            self.state = "FAILED"
            message = "Re-authentication changed the principal"
            log.warning("SASL re-authentication from %s: principal %s -> %s; closing", conn.peer,
                        conn.principal, principal)
            return b"", message, 0
        conn.principal = principal
        self.token_authenticated = bool(getattr(server, "token_authenticated", False))
        self.state = "COMPLETE"
        self.reauthenticating = False
        now = self.security.broker.now_ms()
        lifetime = self.security.reauth_ms(self.listener)
        token_expiry = getattr(server, "expires_ms", None)
        if token_expiry is not None:
            lifetime = min(lifetime, token_expiry - now) if lifetime else token_expiry - now
            lifetime = max(lifetime, 1)
        self.expires_at_ms = now + lifetime if lifetime else None
        log.info("SASL %s authenticated %s from %s on listener %s", self.mechanism, principal, conn.peer,
                 self.listener.name)
        return reply, None, lifetime

    def fail(self, conn) -> float:
        """After a failed authentication (KIP-306): FAILED, stop reading, close once the answer is out,
        and return the delay (``connection.failed.authentication.delay.ms``, seconds) the answer
        waits first, so that a client retrying bad credentials in a loop cannot keep the broker
        busy authenticating."""
        self.state = "FAILED"
        delay = self.security.failed_auth_delay_s(self.listener)
        conn.close_when_flushed = True
        conn.mute_for(delay)
        return delay

    def raw_frame(self, conn, frame) -> None:
        """A v0-handshake token: answered as a bare size-prefixed frame; a failure just closes
        (after the failed-authentication delay)."""
        reply, error, _ = self.authenticate(conn, frame)
        if error is not None:
            delay = self.fail(conn)
            if delay:
                conn.broker.loop.call_later(delay, conn.close)
            else:
                conn.close()
            return
        conn.send_raw_frame(reply)
