"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side.

A credential is what KRaft's ``UserScramCredentialRecord`` keeps: salt, StoredKey = H(ClientKey),
ServerKey and the iteration count; the password and the salted password are never stored.  Both
AlterUserScramCredentials (the client sends the salted password) and the CLI (which has the
password) end up in :func:`credential_from_salted`.

The exchange (``ScramServer.step``): client-first ``n,,n=user,r=cnonce`` -> server-first
``r=cnonce+snonce,s=salt,i=iterations`` -> client-final ``c=...,r=...,p=proof`` -> server-final
``v=signature``.  The proof is checked by recomputing StoredKey and comparing in constant time.

Delegation tokens (KIP-48): a client-first message whose extensions (``key=value`` after the
nonce, RFC 5802 section 5.1) carry ``tokenauth=true`` names a token id as its user; the
credential is the token's (``token_lookup``), the authenticated user is the token's owner and
the session ends no later than the token's expiry (Kafka's ``ScramSaslServer`` with a
``DelegationTokenCredentialCallback``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
BY_TYPE = {code: name for name, (_, code) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's limit for AlterUserScramCredentials


class ScramError(Exception):
    """Authentication failed.  As Kafka's ``SaslServerAuthenticator``, the client is told only
    that its credentials were refused (``client_message``), except for the failures Kafka raises
    as ``SaslAuthenticationException`` (``public=True``), whose own message is sent; the log gets
    the detail either way."""

    def __init__(self, message: str, public: bool = False) -> None:
        super().__init__(message)
        self.public = public

    def client_message(self, mechanism: str) -> str:
        if self.public:
            return str(self)
        return ("Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {mechanism}")


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_record(self) -> dict:
        enc = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return {"salt": enc(self.salt), "stored_key": enc(self.stored_key),
                "server_key": enc(self.server_key), "iterations": self.iterations}

    @classmethod
    def from_record(cls, record: dict) -> "ScramCredential":
        dec = base64.b64decode
        return cls(dec(record["salt"]), dec(record["stored_key"]), dec(record["server_key"]),
                   int(record["iterations"]))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    digest = MECHANISMS[mechanism][0]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(), server_key, iterations)


def credential_from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt or os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations),
                                  salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


def _extensions(client_first_bare: str) -> dict[str, str]:
    """The SCRAM extensions of a client-first message: attributes after ``r=`` (Kafka's
    ``ScramExtensions``; ``tokenauth`` is the one it knows)."""
    parts = client_first_bare.split(",")
    out = {}
    for part in parts[2:]:
        key, sep, value = part.partition("=")
        if sep and key:
            out.setdefault(key, value)
    return out


def _saslname(value: str) -> str:
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username encoding")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange.  ``lookup(user, mechanism)`` returns a credential or None."""

    def __init__(self, mechanism: str, lookup, token_lookup=None) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism][0]
        self.lookup = lookup
        # token id, mechanism -> (credential, owner name, expiry timestamp) or None
        self.token_lookup = token_lookup
        self.state = "RECEIVE_CLIENT_FIRST_MESSAGE"  # Kafka's ScramSaslServer.State names
        self.user: str | None = None  # the authenticated user: a token's owner for a token login
        self.complete = False
        self.token_authenticated = False
        self.expires_ms: int | None = None  # a token's expiry bounds the session (KIP-368)

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message encoding") from None
        if self.state == "RECEIVE_CLIENT_FIRST_MESSAGE":
            return self._client_first(text)
        if self.state == "RECEIVE_CLIENT_FINAL_MESSAGE":
            return self._client_final(text)
        raise ScramError(f"Unexpected SCRAM message in state {self.state}")

    def _client_first(self, text: str) -> bytes:
        self.state = "FAILED"
        # gs2 header: "n,," or "y,," (no channel binding), optionally "n,a=authzid,".
        parts = text.split(",", 2)
        if len(parts) < 3 or parts[0] not in ("n", "y"):
            raise ScramError("Invalid SCRAM client first message")
        self.gs2_header = f"{parts[0]},{parts[1]},"
        self.client_first_bare = parts[2]
        attrs = _attributes(self.client_first_bare)
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("Invalid SCRAM client first message")
        user = _saslname(attrs["n"])
        authzid = parts[1][2:] if parts[1].startswith("a=") else ""
        if authzid and _saslname(authzid) != user:
            raise ScramError("Authentication failed: Client requested an authorization id that is "
                             "different from username", public=True)
        if _extensions(self.client_first_bare).get("tokenauth", "").lower() == "true":
            found = self.token_lookup(user, self.mechanism) if self.token_lookup else None
            if found is None:
                raise ScramError(f"Token Authentication failed: Invalid tokenId : {user}")
            credential, owner, self.expires_ms = found
            self.token_authenticated = True
            self.user, self.credential = owner, credential
        else:
            credential = self.lookup(user, self.mechanism)
            if credential is None:
                raise ScramError("Authentication failed: Invalid user credentials")
            self.user, self.credential = user, credential
        self.nonce = attrs["r"] + base64.b64encode(os.urandom(24)).decode().rstrip("=")
        self.server_first = (f"r={self.nonce},s={base64.b64encode(credential.salt).decode()},"
                             f"i={credential.iterations}")
        self.state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self.server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self.state = "FAILED"
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = _attributes(without_proof)
        if not sep or attrs.get("r") != self.nonce:
            raise ScramError("Invalid SCRAM client final message")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
            binding = base64.b64decode(attrs.get("c", ""), validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message") from None
        if binding != self.gs2_header.encode():
            raise ScramError("Invalid channel binding")
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        stored_key = self.credential.stored_key
        client_signature = hmac.new(stored_key, auth_message, self.digest).digest()
        if len(proof) != len(client_signature):
            raise ScramError("Authentication failed: Invalid client final message")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        server_signature = hmac.new(self.credential.server_key, auth_message, self.digest).digest()
        self.state = "COMPLETE"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
