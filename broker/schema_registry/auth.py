"""Security of the registry's listeners: HTTP basic authentication against the broker's users,
and TLS from the broker's PEM key store settings.

``schema.registry.authentication.method=BASIC``: every request needs ``Authorization: Basic``
with a user the broker knows, a SCRAM user (``minikafka users add``, AlterUserScramCredentials;
the password is checked against the stored SCRAM-SHA-256/512 keys) or a PLAIN user of a
``sasl.jaas.config`` setting (``user_<name>="<password>"``).  Others get 401 with Confluent's body
and ``WWW-Authenticate: Basic``.  ``https://`` listeners use ``ssl.keystore.*`` (and
``ssl.truststore.*``/``ssl.client.auth`` for client certificates) as the broker's TLS listeners do.
"""

from __future__ import annotations

import base64
import hmac
import logging
import re

from . import errors

log = logging.getLogger("minikafka.schema_registry")

_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def plain_users(config) -> dict[str, str]:
    users: dict[str, str] = {}
    texts = [config.get("sasl.jaas.config") or ""]
    texts += [str(v) for k, v in config.overrides.items() if k.endswith("sasl.jaas.config")]
    for text in texts:
        for name, value in _JAAS_USER.findall(str(text)):
            users[name] = value.replace('\\"', '"')
    return users


def check_password(broker, user: str, password: str) -> bool:
    from minikafka.broker.security.scram import MECHANISMS, credential_from_password

    store = getattr(broker.controller, "scram_credentials", None) or {}
    for mechanism in MECHANISMS:
        stored = store.get((user, mechanism))
        if stored is not None:
            candidate = credential_from_password(mechanism, password, stored.iterations, stored.salt)
            if hmac.compare_digest(candidate.stored_key, stored.stored_key):
                return True
    expected = plain_users(broker.config).get(user)
    return expected is not None and hmac.compare_digest(expected.encode(), password.encode())


def basic_auth_middleware(broker):
    from .api import _error

    cache: dict[str, bool] = {}  # header -> verdict; SCRAM keys cost a PBKDF2 each

    async def authenticate(request, handler):
        header = request.headers.get("authorization", "")
        ok = cache.get(header)
        if ok is None:
            ok = False
            if header.startswith("Basic "):
                try:
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                    ok = check_password(broker, user, password)
                except (ValueError, UnicodeDecodeError):
                    ok = False
            if len(cache) > 1024:
                cache.clear()
            cache[header] = ok
        if not ok:
            response = _error(errors.unauthorized())
            response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
            return response
        return await handler(request)

    return authenticate


class _RegistryListener:
    """What broker.security.tls.build_context reads from a listener: its name and its settings."""

    name = "SCHEMA_REGISTRY"

    def setting(self, config, name):
        prefixed = f"listener.name.schema_registry.{name}"
        if prefixed in config.overrides:
            return config.overrides[prefixed]
        return config.get(name)


def tls_context(config):
    from minikafka.broker.security.tls import build_context

    return build_context(_RegistryListener(), config)
