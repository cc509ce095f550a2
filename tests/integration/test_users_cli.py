"""``minikafka users`` against a running broker, as a user runs it (the installed script in a
subprocess, authenticating as a PLAIN admin over SASL_PLAINTEXT): add a SCRAM credential, list it,
authenticate with it from confluent-kafka, fail with a wrong password, delete it, and fail again."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason="minikafka's users CLI")]

SCRIPT = shutil.which("minikafka", path=str(Path(sys.executable).parent)) or "minikafka"
LISTENER_LINE = re.compile(r"listener (\S+) \((\S+)\) on 127\.0\.0\.1:(\d+)")
ADMIN = ["--client-config", "security_protocol=SASL_PLAINTEXT", "--client-config", "sasl_mechanism=PLAIN",
         "--client-config", "sasl_plain_username=admin", "--client-config", "sasl_plain_password=admin-pw"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    settings = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "sasl.jaas.config": 'x required user_admin="admin-pw";'}
    args = []
    for name, value in settings.items():
        args += ["--override", f"{name}={value}"]
    handle = BrokerProcess(tmp_path_factory.mktemp("users-cli"), {}, extra_args=tuple(args))
    deadline = time.monotonic() + 5
    ports = {}
    while not ports and time.monotonic() < deadline:
        ports = {m[0]: int(m[2]) for m in LISTENER_LINE.findall(handle.read_log())}
        time.sleep(0.02)
    assert ports, handle.read_log()
    handle.bootstrap_sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    yield handle
    handle.stop()


def users(broker, *args):
    cmd = [SCRIPT, "users", *args, "--bootstrap-server", broker.bootstrap_sasl, *ADMIN]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def round_trip(broker, user: str, password: str, mechanism: str) -> list[bytes]:
    """Produce one record and read it back as ``user``; raises KafkaException when refused."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    security = {"bootstrap.servers": broker.bootstrap_sasl, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    errors = []
    topic = "u-" + uuid.uuid4().hex[:8]
    producer = Producer({**security, "error_cb": errors.append, "message.timeout.ms": 5000,
                         "allow.auto.create.topics": True})
    producer.produce(topic, b"hello")
    deadline = time.monotonic() + 6
    left = 1
    while left and not errors and time.monotonic() < deadline:  # a refusal arrives as an error_cb
        left = producer.flush(0.1)
    if left or errors:
        raise KafkaException(errors[0] if errors else "not delivered")
    consumer = Consumer({**security, "group.id": "u", "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                return [m.value()]
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def test_add_list_authenticate_delete(broker):
    from confluent_kafka import KafkaError, KafkaException

    added = users(broker, "add", "carol", "--password", "carol-pw", "--mechanism", "SCRAM-SHA-512",
                  "--iterations", "8192")
    assert added.returncode == 0, added.stderr
    assert added.stdout == "added SCRAM-SHA-512 credential for carol\n"
    listed = users(broker, "list", "carol")
    assert (listed.returncode, listed.stdout) == (0, "carol SCRAM-SHA-512 iterations=8192\n"), listed.stderr

    assert round_trip(broker, "carol", "carol-pw", "SCRAM-SHA-512") == [b"hello"]
    with pytest.raises(KafkaException) as refused:
        round_trip(broker, "carol", "wrong-pw", "SCRAM-SHA-512")
    assert refused.value.args[0].code() == KafkaError._AUTHENTICATION
    with pytest.raises(KafkaException):  # only a SHA-512 credential was added
        round_trip(broker, "carol", "carol-pw", "SCRAM-SHA-256")
    assert "SASL SCRAM-SHA-512 authentication from" in broker.read_log()

    deleted = users(broker, "delete", "carol", "--mechanism", "SCRAM-SHA-512")
    assert (deleted.returncode, deleted.stdout) == (0, "deleted SCRAM-SHA-512 credential for carol\n")
    with pytest.raises(KafkaException) as refused:
        round_trip(broker, "carol", "carol-pw", "SCRAM-SHA-512")
    assert refused.value.args[0].code() == KafkaError._AUTHENTICATION
    gone = users(broker, "list", "carol")
    assert gone.returncode == 1 and gone.stdout == "" and "carol:" in gone.stderr
    again = users(broker, "delete", "carol", "--mechanism", "SCRAM-SHA-512")
    assert again.returncode == 1 and "carol:" in again.stderr


def test_add_needs_a_password(broker):
    proc = users(broker, "add", "dave")
    assert proc.returncode == 2 and "--password is required" in proc.stderr


def test_offline_add_before_the_broker_starts(tmp_path):
    """``--data-dir``: credentials written into a stopped broker's metadata log are there when it
    starts (Kafka: ``kafka-storage format --add-scram``)."""
    data = tmp_path / "data"
    data.mkdir()
    cmd = [SCRIPT, "users", "add", "erin", "--password", "erin-pw", "--data-dir", str(data)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "added SCRAM-SHA-256 credential for erin\nadded SCRAM-SHA-512 credential for erin\n"
    listed = subprocess.run([SCRIPT, "users", "list", "--data-dir", str(data)], capture_output=True, text=True,
                            timeout=60)
    assert listed.stdout == "erin SCRAM-SHA-256 iterations=4096\nerin SCRAM-SHA-512 iterations=4096\n"
    settings = ["--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "--override", "sasl.enabled.mechanisms=SCRAM-SHA-256"]
    handle = BrokerProcess(tmp_path, {}, data_dir=data, extra_args=tuple(settings))
    try:
        deadline = time.monotonic() + 5
        ports = {}
        while not ports and time.monotonic() < deadline:
            ports = {m[0]: int(m[2]) for m in LISTENER_LINE.findall(handle.read_log())}
            time.sleep(0.02)
        handle.bootstrap_sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
        assert round_trip(handle, "erin", "erin-pw", "SCRAM-SHA-256") == [b"hello"]
    finally:
        handle.stop()
