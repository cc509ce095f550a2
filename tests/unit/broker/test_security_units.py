"""broker/security pieces without sockets: SCRAM against kafka-python's client, PLAIN, the
unsecured OAUTHBEARER validator, listener parsing, certificate principals, and the metadata-log
store of credentials."""

from __future__ import annotations

import base64
import json

import pytest

from minikafka.broker.config import BrokerConfig, ConfigError
from minikafka.broker.security.listeners import parse_listeners
from minikafka.broker.security.scram import ScramError, ScramServer, credential_from_password
from minikafka.broker.security.session import AuthenticationFailed, PlainServer
from minikafka.broker.security.tls import PrincipalMapper, subject_dn


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_kafka_python_client(mechanism):
    from kafka.net.sasl.scram import ScramClient

    stored = {("bob", mechanism): credential_from_password(mechanism, "pw", 4096)}
    server = ScramServer(mechanism, lambda user, mech: stored.get((user, mech)))
    client = ScramClient("bob", "pw", mechanism)
    server_first = server.step(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.step(client.final_message())
    client.process_server_final_message(server_final)  # raises if the signature is wrong
    assert server.complete and server.user == "bob"


def test_scram_wrong_password_and_unknown_user():
    from kafka.net.sasl.scram import ScramClient

    stored = {("bob", "SCRAM-SHA-256"): credential_from_password("SCRAM-SHA-256", "pw", 4096)}
    lookup = lambda user, mech: stored.get((user, mech))  # noqa: E731
    server = ScramServer("SCRAM-SHA-256", lookup)
    client = ScramClient("bob", "not-pw", "SCRAM-SHA-256")
    client.process_server_first_message(server.step(client.first_message()))
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.step(client.final_message())
    with pytest.raises(ScramError, match="Invalid user credentials"):
        ScramServer("SCRAM-SHA-256", lookup).step(ScramClient("eve", "x", "SCRAM-SHA-256").first_message())


def test_stored_credential_does_not_reveal_the_password():
    cred = credential_from_password("SCRAM-SHA-512", "hunter2", 4096)
    record = json.dumps(cred.to_record())
    assert "hunter2" not in record
    assert set(cred.to_record()) == {"salt", "stored_key", "server_key", "iterations"}


def test_plain():
    server = PlainServer({"alice": "secret"})
    assert server.step(b"\0alice\0secret") == b"" and server.user == "alice"
    for token in (b"\0alice\0wrong", b"\0nobody\0secret", b"bob\0alice\0secret", b"garbage"):
        with pytest.raises(AuthenticationFailed):
            PlainServer({"alice": "secret"}).step(token)


def _jwt(claims: dict) -> bytes:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    token = f"{enc({'alg': 'none'})}.{enc(claims)}."
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_unsecured_oauthbearer():
    from types import SimpleNamespace

    from minikafka.broker.security.listeners import Listener
    from minikafka.broker.security.session import UnsecuredOAuthBearerServer

    now_ms = 1_700_000_000_000
    security = SimpleNamespace(config=BrokerConfig(), broker=SimpleNamespace(now_ms=lambda: now_ms))
    listener = Listener("SASL_SSL", "SASL_SSL", "127.0.0.1", 0)
    server = UnsecuredOAuthBearerServer(security, listener)
    server.step(_jwt({"sub": "carol", "iat": now_ms // 1000, "exp": now_ms // 1000 + 60}))
    assert server.user == "carol" and server.expires_ms == now_ms + 60_000
    for claims in ({"sub": "carol", "exp": now_ms // 1000 - 1}, {"exp": now_ms // 1000 + 60}):
        with pytest.raises(AuthenticationFailed):
            UnsecuredOAuthBearerServer(security, listener).step(_jwt(claims))


def test_failed_authentication_delay_kip_306():
    from types import MethodType, SimpleNamespace

    from minikafka.broker.security.listeners import Listener
    from minikafka.broker.security.session import SaslSession, Security

    listener = Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 0)
    for overrides, expected in (
            ({}, 0.1),  # Kafka's default, 100 ms
            ({"connection.failed.authentication.delay.ms": "0"}, 0.0),
            ({"listener.name.sasl_plaintext.connection.failed.authentication.delay.ms": "250"}, 0.25)):
        security = SimpleNamespace(config=BrokerConfig.load(environ={}, overrides=overrides))
        security.failed_auth_delay_s = MethodType(Security.failed_auth_delay_s, security)
        muted: list[float] = []
        conn = SimpleNamespace(close_when_flushed=False, mute_for=muted.append)
        session = SaslSession(security, listener)
        assert session.fail(conn) == expected
        assert session.state == "FAILED" and conn.close_when_flushed and muted == [expected]


def test_listeners_parse_and_map():
    config = BrokerConfig.load(environ={}, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:9092,CLIENT://0.0.0.0:9094",
        "listener.security.protocol.map": "CLIENT:SASL_SSL",
        "advertised.listeners": "CLIENT://kafka.local:19094",
        "listener.name.client.ssl.client.auth": "required"})
    plain, client = parse_listeners(config)
    assert (plain.name, plain.security_protocol, plain.advertised) == ("PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 9092))
    assert (client.security_protocol, client.advertised) == ("SASL_SSL", ("kafka.local", 19094))
    assert client.setting(config, "ssl.client.auth") == "required"
    assert plain.setting(config, "ssl.client.auth") == "none"
    default = parse_listeners(BrokerConfig(host="127.0.0.1", port=1234))
    assert [(x.name, x.port) for x in default] == [("PLAINTEXT", 1234)]
    with pytest.raises(ConfigError):
        parse_listeners(BrokerConfig.load(environ={}, overrides={"listeners": "NOPE://:1"}))


def test_certificate_subject_and_mapping_rules():
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
                        (("commonName", "alice"),))}
    dn = subject_dn(cert)
    assert dn == "CN=alice,O=Acme\\, Inc,C=US"
    assert PrincipalMapper(None).name(dn) == dn
    mapper = PrincipalMapper("RULE:^CN=(.*?),O=(.*)$/$1/U, DEFAULT")
    assert mapper.name(dn) == "ALICE"
    assert mapper.name("OU=x") == "OU=x"
    assert PrincipalMapper("RULE:^CN=bob$/bob/").name(dn) is None


def test_scram_records_replay_from_the_metadata_log(tmp_path):
    from minikafka.broker.security.store import SecurityStore
    from minikafka.storage.metadata_log import MetadataLog

    log = MetadataLog(str(tmp_path / "metadata.log"))
    store = SecurityStore(lambda record: (log.append(record), store.apply(record)))
    store.upsert_scram("bob", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "pw", 4096))
    store.upsert_scram("ann", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "pw", 4096))
    store.remove_scram("ann", "SCRAM-SHA-512")
    log.close()
    reopened = MetadataLog(str(tmp_path / "metadata.log"))
    replayed = SecurityStore(lambda record: None)
    for record in reopened.records():
        assert replayed.apply(record)
    assert set(replayed.scram_credentials) == {("bob", "SCRAM-SHA-256")}
    assert replayed.scram_credentials == {k: v for k, v in store.scram_credentials.items()}
    reopened.close()


def test_certs_command_writes_private_keys_0600(tmp_path):
    import stat

    from minikafka.broker.security.certs import generate

    paths = generate(tmp_path, ["localhost"], ["alice"])
    assert stat.S_IMODE((tmp_path / "alice.key").stat().st_mode) == 0o600
    assert stat.S_IMODE(paths["broker"].stat().st_mode) == 0o600
    assert b"BEGIN CERTIFICATE" in (tmp_path / "ca.pem").read_bytes()
