"""Locating the non-Python clients (kcat, the Java client) that tests/tools/system-deps.sh installs,
and small client helpers several test modules share.

In CI a missing tool is a failure, not a skip: a green run must mean the client really ran.
"""

import os
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / ".venv" / "java"


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (make test installs it with tests/tools/system-deps.sh)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_java_jars() -> Path:
    if (JARS / "kafka-clients.jar").exists():
        return JARS
    message = f"Java client jars missing in {JARS} (make test unpacks them)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def read_committed_to_end(bootstrap: str, topic: str, partition: int = 0,
                          timeout: float = 15.0) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record a read_committed confluent-kafka consumer gets from the start
    of ``topic``/``partition`` up to its end (the LSO)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-committed-to-end",
                  "isolation.level": "read_committed", "enable.partition.eof": True,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                return out
            out.append((m.key(), m.value()))
        raise AssertionError(f"no end of {topic}-{partition} within {timeout} s")
    finally:
        c.close()
