"""The Java client, Kafka's reference implementation, against minikafka and Apache Kafka.

A small program (java/RoundTrip.java) is compiled in the test run against the official
kafka-clients jar: a default producer (idempotent, acks=all) and an assign/seek consumer.
"""

import subprocess
import uuid

import pytest

from clienttools import ROOT, require_java_jars, require_tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def round_trip_classes(tmp_path_factory):
    javac = require_tool("javac")
    jars = require_java_jars()
    out = tmp_path_factory.mktemp("java")
    subprocess.run(
        [javac, "-cp", f"{jars}/*", "-d", str(out), str(ROOT / "tests/integration/java/RoundTrip.java")],
        check=True,
        timeout=120,
    )
    return f"{out}:{jars}/*"


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_java_default_producer_and_assign_seek_consumer(any_broker, round_trip_classes, compression):
    broker = any_broker
    java = require_tool("java")
    topic = f"java-{compression}-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [java, "-cp", round_trip_classes, "RoundTrip", broker.bootstrap, topic, "50", compression],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"
