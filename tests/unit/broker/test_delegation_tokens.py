"""Delegation tokens (KIP-48) without sockets: the token handlers on a FakeBroker whose clock the
test moves, the metadata-log replay, the HMAC against a value recorded from Apache Kafka 4.2, and
SCRAM logins with ``tokenauth=true`` through the broker's ScramServer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import types

import pytest

from minikafka.broker.controller import Controller
from minikafka.broker.handlers import delegation_tokens as dt
from minikafka.broker.security import authorizer as az
from minikafka.broker.security import tokens as tk
from minikafka.broker.security.scram import ScramError, ScramServer
from minikafka.protocol.errors import ErrorCode

from broker_fakes import Ctx, FakeBroker

SECRET = "secret-key-for-tests"
DAY, WEEK = 86_400_000, 604_800_000


@pytest.fixture
def broker(tmp_path):
    b = FakeBroker(str(tmp_path), **{"delegation.token.secret.key": SECRET})
    yield b
    b.logs.close()


def conn(principal="User:alice", protocol="SASL_PLAINTEXT", token_authenticated=False):
    return types.SimpleNamespace(principal=principal,
                                 listener=types.SimpleNamespace(security_protocol=protocol),
                                 sasl=types.SimpleNamespace(token_authenticated=token_authenticated))


def ctx(broker, api_key, version, principal="User:alice", **kw):
    c = Ctx(broker, api_key, version)
    c.connection = conn(principal, **kw)
    return c


async def create(broker, version=3, principal="User:alice", owner=None, renewers=(), max_lifetime=-1, **kw):
    body = {"owner_principal_type": "User" if owner else None, "owner_principal_name": owner,
            "renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers],
            "max_lifetime_ms": max_lifetime}
    return await dt.create(ctx(broker, dt.CREATE, version, principal, **kw), body)


async def renew(broker, hmac_, period, principal="User:alice"):
    return await dt.renew(ctx(broker, dt.RENEW, 2, principal), {"hmac": hmac_, "renew_period_ms": period})


async def expire(broker, hmac_, period, principal="User:alice"):
    return await dt.expire(ctx(broker, dt.EXPIRE, 2, principal), {"hmac": hmac_, "expiry_time_period_ms": period})


async def describe(broker, owners=None, principal="User:alice"):
    return await dt.describe(ctx(broker, dt.DESCRIBE, 3, principal), {"owners": owners})


def test_hmac_is_kafkas():
    # Recorded from Apache Kafka 4.2.2 with delegation.token.secret.key=secret-key-for-tests: the
    # token id and HMAC its CreateDelegationToken answered.
    got = tk.token_hmac(SECRET, "RsuhzvyWQlyhxg3ziWvSQg")
    assert base64.b64encode(got).decode() == (
        "zMuBGnIAlY01G1qC1cehv63BQE9XWmec+WthbFDgdvaaQBgWQ11n2v9HSj5A1K9Onu1raSY22EQhktaJ3KfAbw==")


def test_token_ids_are_kafka_uuid_strings():
    ids = {tk.kafka_uuid_string() for _ in range(200)}
    assert len(ids) == 200
    for token_id in ids:
        assert len(token_id) == 22 and not token_id.startswith("-")
        assert len(base64.urlsafe_b64decode(token_id + "==")) == 16
    assert tk.kafka_uuid_string(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"


async def test_create_defaults_and_requested_lifetime(broker):
    now = broker.now_ms()
    r = await create(broker)
    assert r["error_code"] == 0
    assert (r["principal_type"], r["principal_name"]) == ("User", "alice")
    assert (r["token_requester_principal_type"], r["token_requester_principal_name"]) == ("User", "alice")
    assert (r["issue_timestamp_ms"], r["expiry_timestamp_ms"], r["max_timestamp_ms"]) == (now, now + DAY, now + WEEK)
    assert r["hmac"] == tk.token_hmac(SECRET, r["token_id"])
    short = await create(broker, max_lifetime=5000)
    assert (short["expiry_timestamp_ms"], short["max_timestamp_ms"]) == (now + 5000, now + 5000)
    longer = await create(broker, max_lifetime=10 * WEEK)  # capped by delegation.token.max.lifetime.ms
    assert longer["max_timestamp_ms"] == now + WEEK
    huge = await create(broker, max_lifetime=2 ** 63 - 1)
    assert huge["max_timestamp_ms"] == now + WEEK


async def test_requests_not_allowed(broker):
    for kw in ({"protocol": "PLAINTEXT"}, {"protocol": "SSL", "principal": "User:ANONYMOUS"},
               {"token_authenticated": True}):
        r = await create(broker, **kw)
        assert r["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert (r["issue_timestamp_ms"], r["token_id"], r["hmac"]) == (-1, "", b"")
    # mutual TLS is a real principal: allowed
    assert (await create(broker, protocol="SSL", principal="User:CN=alice"))["error_code"] == 0
    c = ctx(broker, dt.RENEW, 2, protocol="PLAINTEXT")
    assert await dt.renew(c, {"hmac": b"x", "renew_period_ms": 1}) == {
        "error_code": 64, "expiry_timestamp_ms": -1, "throttle_time_ms": 0}
    c = ctx(broker, dt.DESCRIBE, 3, token_authenticated=True)
    assert (await dt.describe(c, {"owners": None}))["error_code"] == 64


async def test_disabled_without_a_secret_key(tmp_path):
    b = FakeBroker(str(tmp_path))
    try:
        r = await create(b)
        assert r["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED and r["issue_timestamp_ms"] == 0
        assert (await renew(b, b"x", 1))["error_code"] == 61
        assert (await expire(b, b"x", 1))["error_code"] == 61
        assert (await describe(b))["error_code"] == 61
        # the broker's own checks come first
        assert (await create(b, renewers=[("Group", "g")]))["error_code"] == ErrorCode.INVALID_PRINCIPAL_TYPE
        assert (await create(b, protocol="PLAINTEXT"))["error_code"] == 64
    finally:
        b.logs.close()


async def test_renewers_must_be_users(broker):
    r = await create(broker, version=2, renewers=[("User", "bob"), ("Group", "g")])
    assert r["error_code"] == ErrorCode.INVALID_PRINCIPAL_TYPE and r["max_timestamp_ms"] == -1
    assert broker.controller.security.tokens.tokens == {}


async def test_renew_and_expire_rules(broker):
    t = await create(broker, renewers=[("User", "bob")])
    h, now = t["hmac"], broker.now_ms()
    assert await renew(broker, b"unknown", 1) == {"error_code": 62, "expiry_timestamp_ms": 0, "throttle_time_ms": 0}
    assert (await renew(broker, h, 1000, principal="User:carol"))["error_code"] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert (await expire(broker, h, 1000, principal="User:carol"))["error_code"] == 63
    assert (await renew(broker, h, 1000, principal="User:bob"))["expiry_timestamp_ms"] == now + 1000
    assert (await renew(broker, h, -1))["expiry_timestamp_ms"] == now + DAY  # <= 0: the default
    assert (await renew(broker, h, 10 * DAY))["expiry_timestamp_ms"] == now + DAY  # capped
    assert (await expire(broker, h, 10 * WEEK))["expiry_timestamp_ms"] == now + WEEK  # max timestamp
    assert (await expire(broker, h, 0))["expiry_timestamp_ms"] == now
    broker._now += 1
    # expired: a renewal and a non-negative expiry are refused, a negative expiry still removes it
    assert (await renew(broker, h, 1000))["error_code"] == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert (await expire(broker, h, 5))["error_code"] == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert (await renew(broker, h, 1000, principal="User:carol"))["error_code"] == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert (await expire(broker, h, 5, principal="User:carol"))["error_code"] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert await expire(broker, h, -5) == {"error_code": 0, "expiry_timestamp_ms": now + 1, "throttle_time_ms": 0}
    assert (await renew(broker, h, 1000))["error_code"] == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


async def test_owner_other_than_requester_needs_create_tokens(broker):
    broker.config.set("authorizer.class.name", "StandardAuthorizer")
    broker.config.set("super.users", "User:admin")
    broker.security = types.SimpleNamespace(authorizer=az.build(broker))
    r = await create(broker, owner="carol")
    assert r["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert (r["principal_name"], r["token_requester_principal_name"]) == ("carol", "alice")
    broker.controller.security.add_acl("a1", {
        "resource_type": az.USER, "resource_name": "User:carol", "pattern_type": az.LITERAL,
        "principal": "User:alice", "host": "*", "operation": az.CREATE_TOKENS, "permission_type": az.ALLOW})
    r = await create(broker, owner="carol")
    assert r["error_code"] == 0 and r["principal_name"] == "carol"
    # no authorization is needed for one's own tokens, even with ACLs on
    assert (await create(broker, principal="User:dave"))["error_code"] == 0
    assert (await create(broker, owner="", principal="User:dave"))["principal_name"] == "dave"


async def test_describe_filters_as_kafka(broker):
    broker.config.set("authorizer.class.name", "StandardAuthorizer")
    broker.security = types.SimpleNamespace(authorizer=az.build(broker))
    a = await create(broker, renewers=[("User", "bob")])
    c = await create(broker, principal="User:carol")
    ids = lambda r: sorted(t["token_id"] for t in r["tokens"])  # noqa: E731
    assert ids(await describe(broker)) == [a["token_id"]]
    assert ids(await describe(broker, principal="User:bob")) == [a["token_id"]]  # a renewer sees it
    assert ids(await describe(broker, principal="User:carol")) == [c["token_id"]]
    assert (await describe(broker, owners=[])) == {"error_code": 0, "tokens": [], "throttle_time_ms": 0}
    assert ids(await describe(broker, owners=[{"principal_type": "User", "principal_name": "carol"}])) == []
    # DESCRIBE on the token, or DESCRIBE_TOKENS on its owner, shows other people's tokens
    broker.controller.security.add_acl("d1", {
        "resource_type": az.DELEGATION_TOKEN, "resource_name": c["token_id"], "pattern_type": az.LITERAL,
        "principal": "User:alice", "host": "*", "operation": az.DESCRIBE, "permission_type": az.ALLOW})
    assert ids(await describe(broker)) == sorted([a["token_id"], c["token_id"]])
    assert ids(await describe(broker, principal="User:bob")) == [a["token_id"]]
    broker.controller.security.add_acl("d2", {
        "resource_type": az.USER, "resource_name": "User:alice", "pattern_type": az.LITERAL,
        "principal": "User:eve", "host": "*", "operation": az.DESCRIBE_TOKENS, "permission_type": az.ALLOW})
    assert ids(await describe(broker, principal="User:eve")) == [a["token_id"]]
    (entry,) = [t for t in (await describe(broker))["tokens"] if t["token_id"] == a["token_id"]]
    assert entry["renewers"] == [{"principal_type": "User", "principal_name": "bob"}]
    assert entry["hmac"] == a["hmac"] and entry["max_timestamp"] == a["max_timestamp_ms"]



async def test_describe_counts_the_requester_as_kafka_does(broker):
    """KIP-373: a token alice asked for on carol's behalf is listed to alice (its requester) and
    under the owner filter "alice", as Kafka 4.2.2 lists it; alice still may not renew it."""
    broker.config.set("authorizer.class.name", "StandardAuthorizer")
    broker.security = types.SimpleNamespace(authorizer=az.build(broker))
    broker.controller.security.add_acl("c1", {
        "resource_type": az.USER, "resource_name": "User:carol", "pattern_type": az.LITERAL,
        "principal": "User:alice", "host": "*", "operation": az.CREATE_TOKENS, "permission_type": az.ALLOW})
    mine = await create(broker)
    for_carol = await create(broker, owner="carol")
    assert for_carol["error_code"] == 0
    assert (await create(broker, owner="carol", principal="User:bob"))["error_code"] == 65
    ids = lambda r: sorted(t["token_id"] for t in r["tokens"])  # noqa: E731
    owner = lambda n: [{"principal_type": "User", "principal_name": n}]  # noqa: E731
    assert ids(await describe(broker)) == sorted([mine["token_id"], for_carol["token_id"]])
    assert ids(await describe(broker, owners=owner("alice"))) == sorted([mine["token_id"], for_carol["token_id"]])
    assert ids(await describe(broker, owners=owner("carol"))) == [for_carol["token_id"]]
    assert ids(await describe(broker, owners=owner("alice"), principal="User:carol")) == [for_carol["token_id"]]
    assert (await renew(broker, for_carol["hmac"], 1000))["error_code"] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert (await renew(broker, for_carol["hmac"], 1000, principal="User:carol"))["error_code"] == 0


async def test_tokens_survive_a_restart_and_the_sweep_removes_expired_ones(broker):
    a = await create(broker, max_lifetime=5000)
    b = await create(broker, renewers=[("User", "bob")])
    await renew(broker, b["hmac"], 60_000, principal="User:bob")
    replayed = Controller(broker.config, broker.meta, broker.logs)
    tokens = replayed.security.tokens
    assert sorted(tokens.tokens) == sorted([a["token_id"], b["token_id"]])
    again = tokens.by_hmac(b["hmac"])
    assert again.renewers == ["User:bob"] and again.expiry_timestamp == broker.now_ms() + 60_000
    store = broker.controller.security.tokens
    assert store.sweep(broker.now_ms() + 5000) == 0  # "before now" only: not at the instant itself
    assert store.sweep(broker.now_ms() + 5001) == 1
    assert list(store.tokens) == [b["token_id"]]
    assert broker.meta.saved[-1] == {"type": "remove_delegation_token", "token_id": a["token_id"]}
    assert store.by_hmac(a["hmac"]) is None
    assert store.sweep(broker.now_ms() + 60_001) == 1 and store.tokens == {}


def _scram_login(server: ScramServer, user: str, password: str, extensions: str = ""):
    """A SCRAM client (RFC 5802) that can send extensions, as Kafka's ScramSaslClient does."""
    digest = server.digest
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={nonce}{extensions}"
    first = server.step(("n,," + bare).encode()).decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(digest, client_key).digest(), auth, digest).digest()
    proof = base64.b64encode(bytes(x ^ y for x, y in zip(client_key, signature))).decode()
    return server.step(f"{without_proof},p={proof}".encode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_login_with_a_token(broker, mechanism):
    t = await create(broker, max_lifetime=5000)
    store = broker.controller.security.tokens
    password = base64.b64encode(t["hmac"]).decode()
    server = ScramServer(mechanism, lambda u, m: None, store.scram_login)
    assert _scram_login(server, t["token_id"], password, ",tokenauth=true").startswith(b"v=")
    assert server.complete and server.token_authenticated and server.user == "alice"
    assert server.expires_ms == t["expiry_timestamp_ms"]
    assert list(store.tokens[t["token_id"]].credentials) == [mechanism]  # derived at the first login
    assert store.tokens[t["token_id"]].credentials[mechanism].iterations == 4096
    # without the extension the token id is just an unknown user; a wrong HMAC is refused
    with pytest.raises(ScramError):
        _scram_login(ScramServer(mechanism, lambda u, m: None, store.scram_login), t["token_id"], password)
    with pytest.raises(ScramError, match="Invalid tokenId") as exc:
        _scram_login(ScramServer(mechanism, lambda u, m: None, store.scram_login), "nope", password,
                     ",tokenauth=TRUE")
    assert exc.value.client_message(mechanism) == (
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
    with pytest.raises(ScramError):
        _scram_login(ScramServer(mechanism, lambda u, m: None, store.scram_login), t["token_id"], "x" + password,
                     ",tokenauth=true")
    # an expired token is swept, and its credentials go with it
    store.sweep(broker.now_ms() + 5001)
    with pytest.raises(ScramError, match="Invalid tokenId"):
        _scram_login(ScramServer(mechanism, lambda u, m: None, store.scram_login), t["token_id"], password,
                     ",tokenauth=true")
