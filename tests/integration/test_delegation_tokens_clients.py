"""Delegation tokens (KIP-48) and WriteTxnMarkers with real clients, on one embedded broker with a
PLAINTEXT listener (whose anonymous principal is a super user), a SASL_PLAINTEXT listener with
SCRAM, the StandardAuthorizer and ``delegation.token.secret.key``:

* the Java client (``java/DelegationTokens.java``): Admin create/describe/renew/expire with
  Kafka's error classes, a producer and a consumer that log in with the token
  (``ScramLoginModule ... tokenauth="true"``) and are authorized as its owner, and
  ``Admin.abortTransaction`` (WriteTxnMarkers) ending a transaction its producer left open.  The
  same program passes against Apache Kafka 4.2.2 with the same settings.  It runs with
  kafka-clients 4.x when the oracle's jars are there (``tests/kafka/target/libs``, or
  ``MINIKAFKA_KAFKA_CLIENT_LIBS``), else with the project's 3.9 jars;
* librdkafka (confluent-kafka) cannot send SCRAM extensions: a token id and HMAC as its username
  and password are refused, as Kafka refuses them;
* a raw SCRAM login with ``tokenauth=true``: the session lifetime is the token's, and the token
  is gone (its login refused) once the broker clock passes its expiry and the expiry check runs;
* a broker killed and started again still knows its tokens (metadata-log records).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import subprocess
import types
from pathlib import Path

import pytest

from clienttools import ROOT, require_java_jars, require_tool
from conftest import BrokerProcess, RawClient

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "needs delegation.token.secret.key and SASL listeners on a broker of its own; the answers were "
    "compared with Kafka 4.2.2 by hand and as recorded frames in tests/unit/protocol/test_issue20_specs.py"))]

SECRET = "integration-secret"
CHECK_INTERVAL_MS = 60_000


def _listener_ports(server) -> dict[str, int]:
    return {item.name: item.port for item in server.listeners}


def _start_broker():
    from minikafka import Broker

    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "delegation.token.secret.key": SECRET,
        "delegation.token.expiry.check.interval.ms": CHECK_INTERVAL_MS,
        "connection.failed.authentication.delay.ms": 0,
    }
    kafka = Broker(config=config).start()
    kafka.ports = _listener_ports(kafka.server)
    return kafka


@pytest.fixture(scope="module")
def token_broker():
    kafka = _start_broker()
    yield kafka
    kafka.stop()


@pytest.fixture
def clock_broker():
    """A broker of its own for a test that moves the broker clock (an hour ahead of the wall
    clock, which the Java client's checks of token lifetimes would notice)."""
    kafka = _start_broker()
    yield kafka
    kafka.stop()


def _client_jars() -> tuple[str, str]:
    """(classpath, description): kafka-clients 4.x if available, else the project's 3.9 jars."""
    for folder in (os.environ.get("MINIKAFKA_KAFKA_CLIENT_LIBS"), ROOT / "tests" / "kafka" / "target" / "libs"):
        if folder and list(Path(folder).glob("kafka-clients-4*.jar")):
            jars = [j for j in Path(folder).glob("*.jar")
                    if j.name.startswith(("kafka-clients-", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api"))]
            return ":".join(str(j) for j in jars), next(Path(folder).glob("kafka-clients-4*.jar")).name
    return f"{require_java_jars()}/*", "kafka-clients 3.9 (.venv/java)"


def test_java_admin_token_login_and_abort_transaction(token_broker, tmp_path):
    javac, java = require_tool("javac"), require_tool("java")
    classpath, version = _client_jars()
    src = ROOT / "tests" / "integration" / "java" / "DelegationTokens.java"
    subprocess.run([javac, "-cp", classpath, "-d", str(tmp_path), str(src)], check=True, timeout=180)
    ports = token_broker.ports
    proc = subprocess.run([java, "-cp", f"{tmp_path}:{classpath}", "DelegationTokens",
                           f"127.0.0.1:{ports['PLAINTEXT']}", f"127.0.0.1:{ports['SASL_PLAINTEXT']}", "java"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{version}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    steps = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("OK ")]
    assert steps == ["plaintext-refused", "create", "renew", "owner-mismatch", "token-login", "expire",
                     "abort-transaction"], proc.stdout
    token_id, hmac_b64 = next(line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("TOKEN "))
    # the HMAC the Java client got is HMAC-SHA512(secret, token id), as Kafka computes it
    assert base64.b64decode(hmac_b64) == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()


# -- raw SCRAM and librdkafka ------------------------------------------------------------------

def _scram(raw: RawClient, user: str, password: str, extensions: str = "") -> dict:
    """SaslHandshake v1 + SaslAuthenticate v2 with SCRAM-SHA-256 (RFC 5802), extensions allowed."""
    assert raw.request(17, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={nonce}{extensions}"
    first = raw.request(36, 2, {"auth_bytes": ("n,," + bare).encode()})
    if first["error_code"]:
        return first
    server_first = bytes(first["auth_bytes"]).decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(x ^ y for x, y in zip(client_key, signature))).decode()
    return raw.request(36, 2, {"auth_bytes": f"{without_proof},p={proof}".encode()})


def _add_user(kafka, name: str, password: str) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin._users import ScramMechanism, UserScramCredentialUpsertion

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{kafka.ports['PLAINTEXT']}")
    try:
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(name, ScramMechanism.SCRAM_SHA_256, password)]) == {name: None}
    finally:
        admin.close()


@pytest.fixture(scope="module")
def dave(token_broker):
    _add_user(token_broker, "dave", "dave-pw")
    return "dave"


def _create_token(token_broker, user: str, password: str, max_lifetime_ms: int) -> dict:
    with RawClient(token_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert _scram(raw, user, password)["error_code"] == 0
        token = raw.request(38, 3, {"owner_principal_type": None, "owner_principal_name": None, "renewers": [],
                                    "max_lifetime_ms": max_lifetime_ms})
    assert token["error_code"] == 0, token
    return token


def test_librdkafka_cannot_log_in_with_a_token_but_with_a_password(token_broker, dave):
    from confluent_kafka import KafkaError, Producer

    token = _create_token(token_broker, "dave", "dave-pw", 3_600_000)

    def login(username: str, password: str) -> tuple[str | None, list]:
        errors = []
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{token_broker.ports['SASL_PLAINTEXT']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                             "sasl.username": username, "sasl.password": password,
                             "error_cb": errors.append, "reconnect.backoff.ms": 1000})
        try:
            cluster = producer.list_topics(timeout=5).cluster_id
        except Exception:
            cluster = None
        producer.poll(1)  # error callbacks are served by poll
        producer.flush(1)
        return cluster, errors

    cluster_id, _ = login("dave", "dave-pw")
    assert cluster_id == token_broker.server.controller.cluster_id
    cluster_id, errors = login(token["token_id"], base64.b64encode(bytes(token["hmac"])).decode())
    assert cluster_id is None
    refused = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    # Kafka 4.2 answers librdkafka the same: "... SASL authentication error: Authentication failed
    # during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256 ..."
    assert refused and "invalid credentials with SASL mechanism SCRAM-SHA-256" in refused[0], errors


def test_token_session_lifetime_and_expiry_on_the_broker_clock(clock_broker):
    token_broker = clock_broker
    _add_user(token_broker, "dave", "dave-pw")
    token = _create_token(token_broker, "dave", "dave-pw", 3_600_000)
    password = base64.b64encode(bytes(token["hmac"])).decode()
    with RawClient(token_broker.ports["SASL_PLAINTEXT"]) as raw:
        done = _scram(raw, token["token_id"], password, ",tokenauth=true")
        assert done["error_code"] == 0
        left = token["expiry_timestamp_ms"] - token_broker.server.now_ms()
        assert 0 < done["session_lifetime_ms"] <= token["max_timestamp_ms"] - token["issue_timestamp_ms"]
        assert abs(done["session_lifetime_ms"] - left) < 5_000
        # the connection is dave's, and token logins may not manage tokens
        refused = raw.request(41, 3, {"owners": None})
        assert refused == {"error_code": 64, "tokens": [], "throttle_time_ms": 0}
    # past the max lifetime, the next expiry check removes the token and its credentials
    token_broker.control.advance_clock(3_600_000 + CHECK_INTERVAL_MS)
    with RawClient(token_broker.ports["SASL_PLAINTEXT"]) as raw:
        failed = _scram(raw, token["token_id"], password, ",tokenauth=true")
    assert failed["error_code"] == 58
    assert failed["error_message"] == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
    with RawClient(token_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert _scram(raw, "dave", "dave-pw")["error_code"] == 0
        remaining = raw.request(41, 3, {"owners": [{"principal_type": "User", "principal_name": "dave"}]})
    assert token["token_id"] not in {t["token_id"] for t in remaining["tokens"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tokens_survive_a_killed_broker(tmp_path):
    """Tokens are metadata-log records: after a kill -9 and a start, the same token id and HMAC
    log in again (the HMAC and SCRAM credentials are derived again from the secret key), and
    renewals made before the kill stand."""
    plain, sasl = _free_port(), _free_port()
    broker = BrokerProcess(tmp_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "delegation.token.secret.key": SECRET,
        "connection.failed.authentication.delay.ms": 0})
    try:
        with RawClient(plain) as raw:
            salt = os.urandom(16)
            upsert = {"name": "frank", "mechanism": 1, "iterations": 4096, "salt": salt,
                      "salted_password": hashlib.pbkdf2_hmac("sha256", b"frank-pw", salt, 4096)}
            assert raw.request(51, 0, {"deletions": [], "upsertions": [upsert]})["results"][0]["error_code"] == 0
        ports = types.SimpleNamespace(ports={"PLAINTEXT": plain, "SASL_PLAINTEXT": sasl})
        token = _create_token(ports, "frank", "frank-pw", 3_600_000)
        with RawClient(sasl) as raw:
            assert _scram(raw, "frank", "frank-pw")["error_code"] == 0
            renewed = raw.request(39, 2, {"hmac": bytes(token["hmac"]), "renew_period_ms": 120_000})
        assert renewed["error_code"] == 0
        broker.restart(kill=True)
        password = base64.b64encode(bytes(token["hmac"])).decode()
        with RawClient(sasl) as raw:
            assert _scram(raw, token["token_id"], password, ",tokenauth=true")["error_code"] == 0
        with RawClient(sasl) as raw:
            assert _scram(raw, "frank", "frank-pw")["error_code"] == 0
            (described,) = raw.request(41, 3, {"owners": None})["tokens"]
        assert described["token_id"] == token["token_id"] and bytes(described["hmac"]) == bytes(token["hmac"])
        assert described["expiry_timestamp"] == renewed["expiry_timestamp_ms"]
    finally:
        broker.stop()
