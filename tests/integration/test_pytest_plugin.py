"""The pytest plugin as users run it: a generated test project using the fixtures, run by pytest in
a subprocess (the plugin is found through its pytest11 entry point), under pytest-xdist with 2
workers, and with --kafka-bootstrap pointed at a separately started minikafka standing in for an
external Kafka."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import BrokerProcess

pytestmark = pytest.mark.minikafka_only(
    reason="minikafka's pytest plugin and embedded broker")

PROJECT_TESTS = '''
import json
import os
import time

import pytest
from confluent_kafka import Consumer, Producer


def _record(kafka_bootstrap):
    out = os.environ["PLUGIN_OUT"]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(out, f"{worker}.txt"), "a") as f:
        f.write(kafka_bootstrap + "\\n")


@pytest.mark.kafka_topic(partitions=3)
@pytest.mark.parametrize("n", range(4))
def test_roundtrip(kafka_bootstrap, kafka_topic, kafka_group_id, n):
    _record(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p in range(3):
        producer.produce(kafka_topic, value=f"{n}-{p}".encode(), partition=p)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": kafka_group_id,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    try:
        assert len(consumer.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions) == 3
        consumer.subscribe([kafka_topic])
        seen = set()
        deadline = time.monotonic() + 30
        while len(seen) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.add(msg.value().decode())
        assert seen == {f"{n}-{p}" for p in range(3)}
    finally:
        consumer.close()


def test_topics_and_groups_are_fresh(kafka_topic, kafka_topic_factory, kafka_group_id):
    other = kafka_topic_factory(partitions=2, configs={"retention.ms": "3600000"})
    assert other != kafka_topic and kafka_group_id.startswith("group-")


def test_control_moves_the_clock(kafka_control):
    before = kafka_control.now_ms()
    assert kafka_control.advance_clock(60_000) >= before + 60_000


async def test_async_with_control(kafka_bootstrap, kafka_topic, kafka_control):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(kafka_topic, b"x", partition=0)
    finally:
        await producer.stop()
    assert await kafka_control.aio.wait_for_hwm(kafka_topic, 0, 1, timeout=10) == 1
'''


def _project(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        asyncio_mode = auto
        asyncio_default_fixture_loop_scope = function
        """))
    (project / "test_user.py").write_text(PROJECT_TESTS)
    out = tmp_path / "out"
    out.mkdir()
    return project, out


def _run(project: Path, out: Path, *args: str) -> tuple[str, dict[str, set[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIKAFKA_", "PYTEST_"))}
    env["PLUGIN_OUT"] = str(out)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    seen = {f.stem: set(f.read_text().split()) for f in out.glob("*.txt")}
    return output, seen


def _counts(output: str) -> dict[str, int]:
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|failed|error)", output)}


def test_generated_project_runs_against_the_embedded_broker(tmp_path):
    project, out = _project(tmp_path)
    output, seen = _run(project, out)
    assert _counts(output) == {"passed": 7}, output
    assert list(seen) == ["main"] and len(seen["main"]) == 1  # one session broker for all tests


def test_generated_project_under_xdist_gets_one_broker_per_worker(tmp_path):
    project, out = _project(tmp_path)
    output, seen = _run(project, out, "-n", "2")
    assert _counts(output) == {"passed": 7}, output
    assert sorted(seen) == ["gw0", "gw1"], seen
    (first,), (second,) = seen["gw0"], seen["gw1"]
    assert first != second  # two brokers, each on its own free port


def test_generated_project_against_an_external_kafka(tmp_path):
    external = BrokerProcess(tmp_path / "external", {"group_initial_rebalance_delay_ms": 0})
    try:
        project, out = _project(tmp_path)
        output, seen = _run(project, out, f"--kafka-bootstrap={external.bootstrap}")
        assert _counts(output) == {"passed": 5, "skipped": 2}, output
        assert "kafka_control needs the embedded minikafka broker" in output
        assert seen == {"main": {external.bootstrap}}
        # The environment variable does the same.
        out2 = tmp_path / "out2"
        out2.mkdir()
        env_output = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-k", "roundtrip"], cwd=project,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
                 "MINIKAFKA_BOOTSTRAP": external.bootstrap, "PLUGIN_OUT": str(out2)},
            capture_output=True, text=True, timeout=300)
        assert env_output.returncode == 0, env_output.stdout + env_output.stderr
        assert set((out2 / "main.txt").read_text().split()) == {external.bootstrap}
    finally:
        external.stop()


@pytest.fixture
def no_plugin_fixture_is_autouse(request):
    return request.fixturenames


def test_the_plugin_starts_nothing_unless_asked(no_plugin_fixture_is_autouse, request):
    # This very suite has the plugin installed: no kafka fixture may be pulled in implicitly.
    assert request.config.pluginmanager.has_plugin("minikafka")
    assert not [name for name in no_plugin_fixture_is_autouse if name.startswith("kafka_")]
