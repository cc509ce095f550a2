"""Seeding (``minikafka serve --seed``, the embedded broker, the plugin's ``minikafka_seed``) and
the embedded broker in child-process mode, read back with real clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BrokerProcess, _python

pytestmark = pytest.mark.minikafka_only(reason="minikafka's seeding, embedding and serve command")

SEED = [
    {"topic": "orders", "partitions": 3, "configs": {"cleanup.policy": "compact", "retention.ms": 3600000}},
    {"topic": "orders", "partition": 2, "key": "k1", "value": "first", "headers": {"source": "seed"},
     "timestamp": 1700000000000},
    {"topic": "orders", "partition": 2, "key": "k2", "value": {"n": 2}, "timestamp": 1700000000001},
    {"topic": "events", "value": {"base64": "AAEC"}},
]


def _write_seed(path) -> str:
    path.write_text("# topics first\n" + "\n".join(json.dumps(item) for item in SEED) + "\n")
    return str(path)


def _read(bootstrap: str, topic: str, partition: int):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        records = []
        for record in consumer:
            records.append(record)
            if record.offset + 1 >= end:
                break
        return records
    finally:
        consumer.close()


def _check_seeded(bootstrap: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    first, second = _read(bootstrap, "orders", 2)
    assert (first.key, first.value, first.headers, first.timestamp) == (b"k1", b"first", [("source", b"seed")],
                                                                         1700000000000)
    assert (second.key, second.value, second.timestamp) == (b"k2", b'{"n":2}', 1700000000001)
    assert [r.value for r in _read(bootstrap, "events", 0)] == [b"\x00\x01\x02"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert len(admin.describe_topics(["orders"])[0]["partitions"]) == 3
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "orders")])["topic"]["orders"]
        assert configs["cleanup.policy"]["value"] == "compact" and configs["retention.ms"]["value"] == "3600000"
    finally:
        admin.close()


def test_serve_seed_creates_topics_and_preloads_records(tmp_path):
    broker = BrokerProcess(tmp_path, {}, extra_args=("--seed", _write_seed(tmp_path / "seed.jsonl")))
    try:
        _check_seeded(broker.bootstrap)
    finally:
        broker.stop()


def test_serve_refuses_a_bad_seed_file_naming_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic": "t", "partitions": 1}\n{"topic": "t", "partition": 5, "value": "x"}\n')
    out = subprocess.run([_python(), "-m", "minikafka", "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
                          "--seed", str(bad)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "bad.jsonl:2" in out.stderr and "no partition 5" in out.stderr
    unparsable = tmp_path / "unparsable.jsonl"
    unparsable.write_text("{oops\n")
    out = subprocess.run([_python(), "-m", "minikafka", "serve", "--port", "0", "--data-dir", str(tmp_path / "e"),
                          "--seed", str(unparsable)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unparsable.jsonl:1: not JSON" in out.stderr


def test_embedded_child_process_seeds_and_is_controlled_over_http(tmp_path):
    from minikafka import Broker, ControlError

    with Broker(mode="process", seed=_write_seed(tmp_path / "seed.jsonl")) as kafka:
        assert kafka.http_port and kafka.bootstrap_servers.startswith("127.0.0.1:")
        _check_seeded(kafka.bootstrap_servers)
        offset = kafka.control.advance_clock(5000)
        assert kafka.control.now_ms() >= offset
        fault = kafka.control.fail("Metadata", "UNKNOWN_SERVER_ERROR", count=1, client_id="nobody")
        assert [f["id"] for f in kafka.control.faults()] == [fault]
        try:
            kafka.control.stall("no-such-topic", 0)
        except ControlError as exc:
            assert exc.status == 404
        else:
            raise AssertionError("stalling a missing topic must fail")
        pid_alive = kafka._proc.pid
    # Stopped cleanly: the child is gone and the temporary data dir removed.
    assert kafka.data_dir is None
    try:
        os.kill(pid_alive, 0)
    except ProcessLookupError:
        pass
    else:
        raise AssertionError("the child broker is still running")


def test_plugin_seeds_from_the_ini(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    _write_seed(project / "seed.jsonl")
    (project / "pytest.ini").write_text("[pytest]\nminikafka_seed = seed.jsonl\n")
    (project / "test_seeded.py").write_text(textwrap.dedent("""
        from kafka import KafkaConsumer, TopicPartition

        def test_seeded(kafka_bootstrap, kafka_control):
            assert kafka_control.wait_for_hwm("orders", 2, 2, timeout=5) == 2
            kafka_control.seed([{"topic": "orders", "partition": 2, "key": "k3", "value": "third"}])
            consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, consumer_timeout_ms=3000)
            consumer.assign([TopicPartition("orders", 2)])
            consumer.seek_to_beginning()
            assert [r.value for r in consumer][:3] == [b"first", b'{"n":2}', b"third"]
            consumer.close()
        """))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIKAFKA_", "PYTEST_"))}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr


def test_embedded_broker_that_cannot_start_says_why():
    import pytest

    from minikafka import Broker
    from minikafka.broker.config import ConfigError

    with pytest.raises(RuntimeError, match="no.such.setting"):
        Broker(mode="process", config={"no.such.setting": 1}).start()
    with pytest.raises(ConfigError, match="no.such.setting"):
        Broker(config={"no.such.setting": 1}).start()
