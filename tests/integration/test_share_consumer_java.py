"""The Java ``KafkaShareConsumer`` (kafka-clients 4.2, the jars of tests/kafka) on minikafka and on
Apache Kafka 4.2: explicit acknowledgement (accept, release with redelivery at delivery count 2,
reject), the lock timeout the broker reports, and implicit acknowledgement
(``java/ShareConsume.java``)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from clienttools import require_tool
from conftest import SHARE_FAST, broker_for

ROOT = Path(__file__).resolve().parents[2]


def _kafka42_classpath() -> str | None:
    for folder in (os.environ.get("MINIKAFKA_KAFKA_CLIENT_LIBS"), ROOT / "tests" / "kafka" / "target" / "libs"):
        if folder and list(Path(folder).glob("kafka-clients-4.[2-9]*.jar")):
            return ":".join(str(j) for j in Path(folder).glob("*.jar")
                            if j.name.startswith(("kafka-clients-", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api")))
    return None


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    classpath = _kafka42_classpath()
    if classpath is None:
        pytest.skip("kafka-clients 4.2 jars not found (tests/kafka/target/libs or MINIKAFKA_KAFKA_CLIENT_LIBS)")
    out = tmp_path_factory.mktemp("share-java")
    javac = require_tool("javac")
    subprocess.run([javac, "-cp", classpath, "-d", str(out), str(ROOT / "tests" / "integration" / "java" / "ShareConsume.java")],
                   check=True, timeout=180)
    return f"{out}:{classpath}"


@pytest.fixture(scope="module")
def target(request, broker_kind, tmp_path_factory):
    broker = broker_for(request, broker_kind, tmp_path_factory.mktemp("share-java-broker"), **SHARE_FAST)
    yield broker
    broker.stop()


def test_java_share_consumer_acknowledgements(compiled, target):
    java = require_tool("java")
    proc = subprocess.run([java, "-cp", compiled, "ShareConsume", target.bootstrap, f"sj-{uuid.uuid4().hex[:8]}"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert [line for line in proc.stdout.splitlines() if line.startswith("OK ")] == ["OK explicit", "OK implicit"]
