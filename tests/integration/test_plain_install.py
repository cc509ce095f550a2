"""The broker as users install it: the wheel in a clean venv, no extras, nothing from the dev venv.

The development venv holds the test extra's packages, so a serving path that imports an optional
package passes every other test and fails for users: that is how every snappy, lz4 and zstd batch
came to be refused on a plain install.  Here the wheel is built from this tree and installed with
its declared dependencies only (`pip install minikafka-*.whl`) into a fresh venv; the broker runs
from that venv, outside the source tree, and clients installed by the same wheel (confluent-kafka
and kafka-python are dependencies) produce and consume every codec and the smallest records.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clienttools import ROOT
from conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason=(
    "installs minikafka's wheel into a clean venv and runs its broker from there"))]

PIP_TIMEOUT_S = 600
LISTENER_LINE = re.compile(r"listener (\S+) \((\S+)\) on 127\.0\.0\.1:(\d+)")


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("plain-install")
    wheels = base / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, timeout=PIP_TIMEOUT_S, cwd=base)
    (wheel,) = wheels.glob("minikafka-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=PIP_TIMEOUT_S, cwd=base, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv


def run_in(venv: Path, code: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(venv / "bin" / "python"), "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


def test_the_venv_is_plain(plain_venv, tmp_path):
    """No test extra leaked in: the wheel's dependencies only, and minikafka from site-packages."""
    proc = run_in(plain_venv, """
        import importlib.util, json, minikafka
        print(json.dumps({"file": minikafka.__file__,
                          "extras": [m for m in ("pytest", "hypothesis", "aiokafka", "pyspark", "selenium")
                                     if importlib.util.find_spec(m)]}))
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["extras"] == []
    assert "site-packages" in found["file"] and not found["file"].startswith(str(ROOT) + "/minikafka")


ROUND_TRIP = r"""
import json, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP

bootstrap = sys.argv[1]
codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
# The smallest records too: null and empty keys and values.
records = [(b"k1", b"v" * 300), (None, None), (b"", b""), (None, b""), (b"", None), (b"k2", b"x")]
result = {}
for codec in codecs:
    topic = f"plain-confluent-{codec}"
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 10,
                  "message.timeout.ms": 15000})
    for k, v in records:
        p.produce(topic, key=k, value=v, partition=0,
                  on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
    left = p.flush(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "plain", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    while len(got) < len(records) and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append([m.key(), m.value()])
    c.close()
    result[f"confluent-kafka {codec}"] = {"errors": errors, "unflushed": left,
                                          "same": got == [list(r) for r in records]}

    topic = f"plain-kafka-python-{codec}"
    sent = [r for r in records if r != (None, None)]  # kafka-python refuses a record with neither
    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                       request_timeout_ms=10000)
    futures = [kp.send(topic, key=k, value=v, partition=0) for k, v in sent]
    kp.flush(30)
    errors = []
    for f in futures:
        try:
            f.get(timeout=15)
        except Exception as exc:
            errors.append(repr(exc))
    kp.close(timeout=5)
    kc = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = KTP(topic, 0)
    kc.assign([tp])
    kc.seek(tp, 0)
    got, deadline = [], time.monotonic() + 20
    while len(got) < len(sent) and time.monotonic() < deadline:
        for batch in kc.poll(timeout_ms=200).values():
            got.extend([r.key, r.value] for r in batch)
    kc.close()
    result[f"kafka-python {codec}"] = {"errors": errors, "unflushed": 0, "same": got == [list(r) for r in sent]}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def plain_broker(plain_venv, tmp_path_factory):
    """The plain install's broker with a PLAINTEXT and an SSL listener, its certificates made by
    the plain install's own `minikafka certs`."""
    home = tmp_path_factory.mktemp("plain-broker")
    certs = home / "certs"
    made = subprocess.run([str(plain_venv / "bin" / "minikafka"), "certs", "--out", str(certs)],
                          capture_output=True, text=True, timeout=60, cwd=home)
    assert made.returncode == 0, made.stdout + made.stderr
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                "ssl.keystore.location": str(certs / "broker.pem"),
                "ssl.truststore.location": str(certs / "ca.pem")}
    args = [a for name, value in settings.items() for a in ("--override", f"{name}={value}")]
    handle = BrokerProcess(home, {}, python=str(plain_venv / "bin" / "python"), cwd=home, extra_args=tuple(args))
    deadline = time.monotonic() + 5
    ports = {}
    while len(ports) < 2 and time.monotonic() < deadline:
        ports = {m[0]: int(m[2]) for m in LISTENER_LINE.findall(handle.read_log())}
        time.sleep(0.02)
    assert set(ports) == {"PLAINTEXT", "SSL"}, handle.read_log()
    handle.ssl_port, handle.certs = ports["SSL"], certs
    yield handle
    handle.stop()


def test_every_codec_and_the_smallest_records_round_trip_on_a_plain_install(plain_venv, plain_broker, tmp_path):
    script = tmp_path / "round_trip.py"
    script.write_text(ROUND_TRIP)
    proc = subprocess.run([str(plain_venv / "bin" / "python"), str(script), plain_broker.bootstrap],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = {"errors": [], "unflushed": 0, "same": True}
    assert {name: outcome for name, outcome in result.items() if outcome != expected} == {}
    assert len(result) == 10
    log = plain_broker.read_log()
    assert "no library" not in log and "CORRUPT_MESSAGE" not in log and "INVALID_RECORD" not in log


def test_the_pipeline_command_says_what_it_needs_without_pyspark(plain_venv, tmp_path):
    """The Spark job is an extra: without it the command explains itself instead of a traceback."""
    proc = subprocess.run([str(plain_venv / "bin" / "minikafka-pipeline"), "--bootstrap", "127.0.0.1:1",
                           "--checkpoint", str(tmp_path / "checkpoint")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert "minikafka[spark]" in proc.stderr and "Traceback" not in proc.stderr


def test_tls_and_compression_on_a_plain_install(plain_venv, plain_broker, tmp_path):
    """The SSL listener (Python's ssl, certificates from the plain install) with compressed batches."""
    proc = run_in(plain_venv, f"""
        import json
        from confluent_kafka import Consumer, Producer, TopicPartition
        ssl = {{"bootstrap.servers": "127.0.0.1:{plain_broker.ssl_port}", "security.protocol": "SSL",
               "ssl.ca.location": "{plain_broker.certs / 'ca.pem'}"}}
        out = {{}}
        for codec in ("lz4", "zstd", "snappy"):
            topic = "plain-ssl-" + codec
            p = Producer(dict(ssl, **{{"compression.type": codec, "message.timeout.ms": 15000}}))
            for i in range(20):
                p.produce(topic, key=b"k%d" % i, value=b"v" * i, partition=0)
            left = p.flush(30)
            c = Consumer(dict(ssl, **{{"group.id": "plain-ssl", "enable.auto.commit": False}}))
            c.assign([TopicPartition(topic, 0, 0)])
            got = []
            for _ in range(100):
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(len(m.value()))
                if len(got) == 20:
                    break
            c.close()
            out[codec] = [left, got == list(range(20))]
        print(json.dumps(out))
    """, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {c: [0, True] for c in ("lz4", "zstd", "snappy")}
