"""Listeners, TLS, mutual TLS and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER unsecured) with real
clients, and the negative cases: each closes only its own connection with a log line while the
broker keeps serving everyone else.

One broker for the module with five listeners:
PLAINTEXT, SSL (client certificate requested), MTLS (an SSL listener requiring one),
SASL_SSL and SASL_PLAINTEXT (PLAIN users from JAAS settings, SCRAM users created with
AlterUserScramCredentials, OAUTHBEARER with Kafka's unsecured validator).  Certificates are
generated in the test session by ``minikafka certs``'s code; no key is committed.
"""

from __future__ import annotations

import re
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest

from clienttools import ROOT, require_java_jars, require_tool
from conftest import BrokerProcess, RawClient

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
        "a broker of its own with TLS/SASL listeners, minikafka's certificates and users"))]

LISTENER_LINE = re.compile(r"listener (\S+) \((\S+)\) on 127\.0\.0\.1:(\d+)")
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    from minikafka.broker.security.certs import generate

    out = tmp_path_factory.mktemp("certs")
    generate(out, ["localhost", "127.0.0.1"], ["alice", "mallory"])
    # A second, unrelated CA and a client it signed: the broker must not trust it.
    generate(out / "rogue", ["localhost"], ["eve"], ca_name="rogue-ca")
    return out


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, certs):
    tmp = tmp_path_factory.mktemp("secure-broker")
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,"
                     "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "MTLS:SSL",
        "ssl.keystore.location": str(certs / "broker.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";',
        "sasl.jaas.config": 'x required user_alice="alice-secret";',
        "connections.max.reauth.ms": "600000",
    }
    args = []
    for name, value in settings.items():
        args += ["--override", f"{name}={value}"]
    handle = BrokerProcess(tmp, {}, extra_args=tuple(args))
    ports = {}
    deadline = time.monotonic() + 5
    while len(ports) < 5 and time.monotonic() < deadline:
        ports = {m[0]: int(m[2]) for m in LISTENER_LINE.findall(handle.read_log())}
        time.sleep(0.02)
    assert len(ports) == 5, handle.read_log()
    handle.ports = ports
    _add_scram_users(ports["PLAINTEXT"])
    yield handle
    handle.stop()


def _add_scram_users(port):
    from kafka.admin import KafkaAdminClient
    from kafka.admin._users import ScramMechanism, UserScramCredentialUpsertion

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        # One request per mechanism: Kafka 4.2 refuses a user named twice in one request
        # (DUPLICATE_RESOURCE, conformance scenario scram_users_named_twice).
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            result = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", mechanism, "bob-secret")])
            assert result == {"bob": None}
        described = admin.describe_user_scram_credentials(["bob"])
        assert {c["mechanism"].name for c in described["bob"]["credential_infos"]} == {
            "SCRAM_SHA_256", "SCRAM_SHA_512"}
    finally:
        admin.close()


def _serving(broker) -> bool:
    """The PLAINTEXT listener still answers Metadata."""
    with RawClient(broker.ports["PLAINTEXT"]) as raw:
        return raw.request(3, 1, {"topics": []})["brokers"][0]["port"] == broker.ports["PLAINTEXT"]


def _wait_log(broker, pattern: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(pattern, broker.read_log())
        if match:
            return match.group(0)
        time.sleep(0.05)
    raise AssertionError(f"no log line matching {pattern!r}")


def _kp_round_trip(port, topic, **security):
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", **security)
    try:
        producer.send(topic, b"v1").get(timeout=15)
        producer.send(topic, b"v2").get(timeout=15)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", auto_offset_reset="earliest",
                             consumer_timeout_ms=8000, group_id=f"g-{topic}", **security)
    try:
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == 2:
                break
    finally:
        consumer.close()
    assert got == [b"v1", b"v2"]


# -- real clients -----------------------------------------------------------------------------


def test_kafka_python_ssl_with_client_certificate(secure_broker, certs):
    _kp_round_trip(secure_broker.ports["MTLS"], "kp-mtls", security_protocol="SSL",
                   ssl_cafile=str(certs / "ca.pem"), ssl_certfile=str(certs / "alice.crt"),
                   ssl_keyfile=str(certs / "alice.key"))


def test_kafka_python_ssl_server_only(secure_broker, certs):
    _kp_round_trip(secure_broker.ports["SSL"], "kp-ssl", security_protocol="SSL",
                   ssl_cafile=str(certs / "ca.pem"))


def test_kafka_python_sasl_plaintext_scram(secure_broker):
    _kp_round_trip(secure_broker.ports["SASL_PLAINTEXT"], "kp-scram", security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    _wait_log(secure_broker, r"SASL SCRAM-SHA-256 authenticated User:bob .* on listener SASL_PLAINTEXT")


def _confluent_round_trip(port, topic, conf):
    from confluent_kafka import Consumer, Producer

    base = {"bootstrap.servers": f"127.0.0.1:{port}", **conf}
    producer = Producer(base)
    errors = []
    producer.produce(topic, b"c1", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(20) == 0
    assert errors == [None]
    md = producer.list_topics(timeout=10)
    assert [b.port for b in md.brokers.values()] == [port]  # the listener we came in on
    consumer = Consumer({**base, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                assert msg.value() == b"c1"
                return
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
])
def test_confluent_sasl_ssl(secure_broker, certs, mechanism, user, password):
    _confluent_round_trip(secure_broker.ports["SASL_SSL"], f"ck-{mechanism.lower()}", {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
        "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})


def test_confluent_oauthbearer_unsecured(secure_broker, certs):
    _confluent_round_trip(secure_broker.ports["SASL_SSL"], "ck-oauth", {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
        "sasl.mechanisms": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=carol lifeSeconds=3600"})
    _wait_log(secure_broker, r"SASL OAUTHBEARER authenticated User:carol")


async def test_aiokafka_sasl_ssl_plain(secure_broker, certs):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    context = create_ssl_context(cafile=str(certs / "ca.pem"))
    security = dict(security_protocol="SASL_SSL", ssl_context=context, sasl_mechanism="PLAIN",
                    sasl_plain_username="alice", sasl_plain_password="alice-secret")
    bootstrap = f"127.0.0.1:{secure_broker.ports['SASL_SSL']}"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **security)
    await producer.start()
    try:
        await producer.send_and_wait("aio-plain", b"a1")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("aio-plain", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                **security)
    await consumer.start()
    try:
        message = await consumer.getone()
        assert message.value == b"a1"
    finally:
        await consumer.stop()


def test_kcat_over_ssl(secure_broker, certs):
    kcat = require_tool("kcat")
    bootstrap = f"127.0.0.1:{secure_broker.ports['SSL']}"
    ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs / 'ca.pem'}"]
    produced = subprocess.run([kcat, "-b", bootstrap, *ssl_args, "-P", "-t", "kcat-ssl"], input=b"k1\nk2\n",
                              capture_output=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([kcat, "-b", bootstrap, *ssl_args, "-C", "-t", "kcat-ssl", "-o", "beginning",
                               "-e", "-q"], capture_output=True, timeout=30)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [b"k1", b"k2"]


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    javac = require_tool("javac")
    jars = require_java_jars()
    out = tmp_path_factory.mktemp("java-secure")
    subprocess.run([javac, "-cp", f"{jars}/*", "-d", str(out),
                    str(ROOT / "tests/integration/java/SecureRoundTrip.java")], check=True, timeout=120)
    return f"{out}:{jars}/*"


def _java(classes, bootstrap, topic, props: dict, tmp_path):
    java = require_tool("java")
    path = tmp_path / f"{topic}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return subprocess.run([java, "-cp", classes, "SecureRoundTrip", bootstrap, topic, "20", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_java_sasl_ssl_scram_sha_512(secure_broker, certs, java_classes, tmp_path):
    proc = _java(java_classes, f"127.0.0.1:{secure_broker.ports['SASL_SSL']}", "java-scram", {
        "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs / "ca.pem", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="bob" password="bob-secret";'}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"


def test_java_mutual_tls(secure_broker, certs, java_classes, tmp_path):
    proc = _java(java_classes, f"127.0.0.1:{secure_broker.ports['MTLS']}", "java-mtls", {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs / "ca.pem", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs / "alice.pem"}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"


# -- negative cases: only that connection closes, with a log line ---------------------------


def _sasl(raw: RawClient, mechanism: str, version: int = 1) -> dict:
    return raw.request(17, version, {"mechanism": mechanism})


def test_wrong_password_fails_and_closes(secure_broker):
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert _sasl(raw, "PLAIN")["error_code"] == 0
        started = time.monotonic()
        reply = raw.request(36, 2, {"auth_bytes": b"\0alice\0wrong"})
        # KIP-306: the answer waits connection.failed.authentication.delay.ms (100 ms by default)
        assert time.monotonic() - started >= 0.095
        assert reply["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
        assert "Invalid username or password" in reply["error_message"]
        assert raw.is_closed_by_peer()
    _wait_log(secure_broker, r"SASL PLAIN authentication from .* failed: .*closing")
    assert _serving(secure_broker)


def test_scram_wrong_password(secure_broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    # kafka-python 3.0.12 drops an answer that arrives together with the close (its read loop
    # aborts on the EOF), so it sees a disconnect and retries until its bootstrap timeout.
    with pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{secure_broker.ports['SASL_PLAINTEXT']}",
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                                 sasl_plain_username="bob", sasl_plain_password="nope",
                                 request_timeout_ms=3000, max_block_ms=3000, bootstrap_timeout_ms=5000)
        try:
            producer.send("never", b"x").get(timeout=5)
        finally:
            producer.close(timeout=1)
    _wait_log(secure_broker, r"SASL SCRAM-SHA-512 authentication from .* failed: Authentication failed")
    assert _serving(secure_broker)


def test_unknown_mechanism_answers_and_closes(secure_broker):
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        reply = _sasl(raw, "GSSAPI")
        assert reply["error_code"] == 33  # UNSUPPORTED_SASL_MECHANISM
        assert reply["mechanisms"] == MECHANISMS.split(",")
        assert raw.is_closed_by_peer()
    _wait_log(secure_broker, r"mechanism GSSAPI not enabled")
    assert _serving(secure_broker)


def test_request_before_authentication_closes(secure_broker):
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert raw.request(18, 0, {})["error_code"] == 0  # ApiVersions is allowed
        correlation_id, data = raw.encode(3, 1, {"topics": []})
        raw.send_bytes(data)
        assert raw.is_closed_by_peer()
    _wait_log(secure_broker, r"unexpected request api 3 in SASL state HANDSHAKE_OR_VERSIONS_REQUEST")
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert _sasl(raw, "PLAIN")["error_code"] == 0
        _, data = raw.encode(3, 1, {"topics": []})  # Metadata instead of SaslAuthenticate
        raw.send_bytes(data)
        assert raw.is_closed_by_peer()
    assert _serving(secure_broker)


def test_handshake_v0_raw_token_framing(secure_broker):
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert _sasl(raw, "PLAIN", version=0)["error_code"] == 0
        token = b"\0alice\0alice-secret"
        raw.send_bytes(struct.pack(">i", len(token)) + token)
        assert raw.read_frame() == b""  # PLAIN's empty server token, framed without a header
        assert raw.request(3, 1, {"topics": []})["brokers"][0]["port"] == secure_broker.ports["SASL_PLAINTEXT"]
    with RawClient(secure_broker.ports["SASL_PLAINTEXT"]) as raw:
        assert _sasl(raw, "PLAIN", version=0)["error_code"] == 0
        token = b"\0alice\0bad"
        started = time.monotonic()
        raw.send_bytes(struct.pack(">i", len(token)) + token)
        assert raw.is_closed_by_peer()
        assert time.monotonic() - started >= 0.095  # KIP-306 delay before the close


def test_plaintext_client_on_tls_port(secure_broker):
    with RawClient(secure_broker.ports["SSL"]) as raw:
        _, data = raw.encode(18, 0, {})
        raw.send_bytes(data)
        assert raw.is_closed_by_peer()
    _wait_log(secure_broker, r"TLS handshake from .* on listener SSL failed: .*closing the connection")
    assert _serving(secure_broker)


def test_garbage_instead_of_tls_handshake(secure_broker):
    with socket.create_connection(("127.0.0.1", secure_broker.ports["SASL_SSL"]), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05garbage-garbage-garbage" * 10)
        sock.settimeout(5)
        try:
            data = sock.recv(100)
            while data and b"" != data:  # an alert may come first, then EOF
                data = sock.recv(100)
        except ConnectionResetError:
            pass
    _wait_log(secure_broker, r"TLS handshake from .* on listener SASL_SSL failed")
    assert _serving(secure_broker)


def _tls_connect(port, ca, cert=None, key=None):
    context = ssl.create_default_context(cafile=str(ca))
    if cert:
        context.load_cert_chain(str(cert), str(key))
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
    # TLS 1.3 reports a rejected client certificate on the first read, not in the handshake.
    frame_body = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00"
    tls.sendall(struct.pack(">i", len(frame_body)) + frame_body)
    data = tls.recv(4)
    tls.close()
    return data


def test_untrusted_client_certificate_rejected(secure_broker, certs):
    rogue = certs / "rogue"
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)) as info:
        if not _tls_connect(secure_broker.ports["MTLS"], certs / "ca.pem", rogue / "eve.crt", rogue / "eve.key"):
            raise ConnectionError("closed")
    assert info.value is not None
    _wait_log(secure_broker, r"TLS handshake from .* on listener MTLS failed: .*(CERTIFICATE|certificate)")
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        if not _tls_connect(secure_broker.ports["MTLS"], certs / "ca.pem"):  # no certificate at all
            raise ConnectionError("closed")
    # A trusted certificate still works on the same listener.
    assert len(_tls_connect(secure_broker.ports["MTLS"], certs / "ca.pem", certs / "alice.crt",
                            certs / "alice.key")) == 4
    assert _serving(secure_broker)


def test_metadata_advertises_the_listener_used(secure_broker, certs):
    from kafka.admin import KafkaAdminClient

    for name, security in (("SSL", dict(security_protocol="SSL", ssl_cafile=str(certs / "ca.pem"))),
                           ("PLAINTEXT", {})):
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{secure_broker.ports[name]}", **security)
        try:
            ports = {b["port"] for b in admin.describe_cluster()["brokers"]}
        finally:
            admin.close()
        assert ports == {secure_broker.ports[name]}


def test_scram_credentials_admin_errors(secure_broker):
    with RawClient(secure_broker.ports["PLAINTEXT"]) as raw:
        reply = raw.request(51, 0, {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": [
            {"name": "weak", "mechanism": 1, "iterations": 10, "salt": b"s" * 16, "salted_password": b"p" * 32},
            {"name": "odd", "mechanism": 7, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}]})
        codes = {r["user"]: r["error_code"] for r in reply["results"]}
        assert codes == {"nobody": 91, "weak": 93, "odd": 33}
        described = raw.request(50, 0, {"users": [{"name": "nobody"}, {"name": "bob"}]})
        by_user = {r["user"]: r for r in described["results"]}
        assert by_user["nobody"]["error_code"] == 91
        assert sorted(c["mechanism"] for c in by_user["bob"]["credential_infos"]) == [1, 2]


# -- session lifetime and re-authentication (KIP-368) ----------------------------------------


def _unsecured_jwt(sub: str, lifetime_s: float) -> bytes:
    import base64
    import json

    def enc(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()

    now = time.time()
    token = f"{enc({'alg': 'none'})}.{enc({'sub': sub, 'iat': int(now), 'exp': now + lifetime_s})}."
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_session_lifetime_and_reauthentication(secure_broker):
    port = secure_broker.ports["SASL_PLAINTEXT"]
    with RawClient(port) as raw:
        assert _sasl(raw, "PLAIN")["error_code"] == 0
        reply = raw.request(36, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert reply["error_code"] == 0
        assert reply["session_lifetime_ms"] == 600000  # connections.max.reauth.ms
        # Re-authentication on the same connection, same mechanism and principal.
        assert _sasl(raw, "PLAIN")["error_code"] == 0
        assert raw.request(36, 1, {"auth_bytes": b"\0alice\0alice-secret"})["error_code"] == 0
        assert raw.request(3, 1, {"topics": []})["brokers"][0]["port"] == port
    with RawClient(port) as raw:
        # An OAUTHBEARER token expiring in 1.5 s bounds the session below the configured 10 min.
        assert _sasl(raw, "OAUTHBEARER")["error_code"] == 0
        reply = raw.request(36, 1, {"auth_bytes": _unsecured_jwt("dave", 1.5)})
        assert reply["error_code"] == 0
        # The broker's clock runs off the monotonic clock from its start: it may trail the
        # test's wall clock by a few ms.
        assert 0 < reply["session_lifetime_ms"] <= 1500 + 50
        assert raw.request(3, 1, {"topics": []})["brokers"]
        time.sleep(reply["session_lifetime_ms"] / 1000 + 0.2)  # bounded: the token's own lifetime
        _, data = raw.encode(3, 1, {"topics": []})
        raw.send_bytes(data)
        assert raw.is_closed_by_peer()
    _wait_log(secure_broker, r"SASL session expired without re-authentication")
    assert _serving(secure_broker)


def test_cli_commands_over_sasl_ssl(secure_broker, certs):
    # The client commands take the security settings of any Kafka client (-X, librdkafka's names),
    # so the same command line works against a production-like listener.
    import json
    import shutil
    import sys
    from pathlib import Path

    script = shutil.which("minikafka", path=str(Path(sys.executable).parent)) or "minikafka"
    port = secure_broker.ports["SASL_SSL"]
    security = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={certs / 'ca.pem'}",
                "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=bob"]

    def run(*args, password="bob-secret", stdin=None):
        cmd = [script, *args, "-b", f"127.0.0.1:{port}", *security, "-X", f"sasl.password={password}",
               "--timeout", "10"]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)

    topic = f"cli-sec-{uuid.uuid4().hex[:8]}"
    created = run("topic", "create", topic, "-p", "1")
    assert created.returncode == 0, created.stderr
    produced = run("produce", topic, stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = run("consume", topic, "--count", "2", "--format", "json")
    assert consumed.returncode == 0, consumed.stderr
    assert [json.loads(line)["value"] for line in consumed.stdout.splitlines()] == ["one", "two"]
    # A wrong password is one line that says so and exit 1 (the operation failed), not "unreachable".
    denied = run("topic", "list", password="wrong")
    assert denied.returncode == 1 and "authentication failed" in denied.stderr, (denied.returncode, denied.stderr)
    assert denied.stderr.strip() and "Traceback" not in denied.stderr and len(denied.stderr.strip().splitlines()) == 1
