"""The share-group offsets admin APIs (Describe/Alter/DeleteShareGroupOffsets) with a real client, on
minikafka and on Apache Kafka 4.2: the Java Admin of kafka-clients 4.2 (``listShareGroupOffsets``,
``alterShareGroupOffsets``, ``deleteShareGroupOffsets``; ``java/ShareGroupOffsetsAdmin.java``), which
needs the oracle's 4.x jars (``tests/kafka/target/libs`` or ``MINIKAFKA_KAFKA_CLIENT_LIBS``).

confluent-kafka 2.16.1's AdminClient has no share-group offsets methods (librdkafka 2.16 does not
expose them to Python), so there is nothing of it to run here.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from clienttools import ROOT, require_tool

pytestmark = pytest.mark.integration


def _kafka4_client_classpath() -> str | None:
    for folder in (os.environ.get("MINIKAFKA_KAFKA_CLIENT_LIBS"), ROOT / "tests" / "kafka" / "target" / "libs"):
        if folder and list(Path(folder).glob("kafka-clients-4*.jar")):
            return ":".join(str(j) for j in Path(folder).glob("*.jar")
                            if j.name.startswith(("kafka-clients-", "lz4-java", "snappy-java", "zstd-jni", "slf4j-api")))
    return None


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    classpath = _kafka4_client_classpath()
    if classpath is None:
        pytest.skip("kafka-clients 4.x jars not found (tests/kafka/target/libs or MINIKAFKA_KAFKA_CLIENT_LIBS)")
    javac = require_tool("javac")
    out = tmp_path_factory.mktemp("java-share-offsets")
    src = ROOT / "tests" / "integration" / "java" / "ShareGroupOffsetsAdmin.java"
    subprocess.run([javac, "-cp", classpath, "-d", str(out), str(src)], check=True, timeout=180)
    return f"{out}:{classpath}"


def test_java_admin_share_group_offsets(any_broker, java_classes):
    java = require_tool("java")
    suffix = uuid.uuid4().hex[:8]
    proc = subprocess.run([java, "-cp", java_classes, "ShareGroupOffsetsAdmin", any_broker.bootstrap,
                           f"share-offsets-{suffix}", f"share-offsets-g-{suffix}"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert [line for line in proc.stdout.splitlines() if line.startswith("OK ")] == [
        "OK list-unknown", "OK alter", "OK list", "OK delete"]
