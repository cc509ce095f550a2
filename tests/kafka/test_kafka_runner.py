"""The Apache Kafka runner: the session broker answers, the CLI starts and stops one by PID."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kafka_runner

RUNNER = Path(kafka_runner.__file__)


def test_session_broker_answers_metadata_as_a_single_kraft_node(apache_kafka):
    nodes, controller = kafka_runner._metadata_probe("127.0.0.1", apache_kafka.port, timeout=5)
    assert nodes == [kafka_runner.NODE_ID] and controller == kafka_runner.NODE_ID
    assert apache_kafka.running and apache_kafka.pid == apache_kafka.proc.pid
    config = apache_kafka.config_path.read_text().splitlines()
    assert "process.roles=broker,controller" in config
    assert "group.initial.rebalance.delay.ms=0" in config
    assert f"listeners=PLAINTEXT://127.0.0.1:{apache_kafka.port},CONTROLLER://127.0.0.1:" \
           f"{apache_kafka.controller_port}" in config


def test_node_id_comes_from_an_override_or_the_default(tmp_path):
    assert kafka_runner.KafkaBroker(tmp_path / "a").node_id == kafka_runner.NODE_ID
    broker = kafka_runner.KafkaBroker(tmp_path / "b", {"node.id": 0})
    assert broker.node_id == 0 and broker.config()["node.id"] == "0"


def test_overrides_may_name_the_runner_ports(tmp_path):
    broker = kafka_runner.KafkaBroker(tmp_path, {
        "listeners": "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},"
                     "SASL_PLAINTEXT://127.0.0.1:7001"}, port=7000)
    broker.controller_port = 7002
    assert broker.config()["listeners"] == ("PLAINTEXT://127.0.0.1:7000,CONTROLLER://127.0.0.1:7002,"
                                            "SASL_PLAINTEXT://127.0.0.1:7001")


def test_cli_start_applies_overrides_and_stop_ends_the_pid(apache_kafka, tmp_path):
    # apache_kafka first: it installs the jars (or skips/fails) before the CLI needs them.
    run_dir = tmp_path / "cli"
    started = subprocess.run([sys.executable, str(RUNNER), "start", "--dir", str(run_dir),
                              "--override", "num.partitions=3", "--override", "node.id=0"],
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    words = started.stdout.split()
    pid, bootstrap = int(words[words.index("pid") + 1]), words[words.index("on") + 1]
    try:
        port = int(bootstrap.rsplit(":", 1)[1])
        # node.id=0 (client suites whose own brokers are node 0): ready means node 0 answers
        assert kafka_runner._metadata_probe("127.0.0.1", port, timeout=5) == ([0], 0)
        assert "num.partitions=3" in (run_dir / "server.properties").read_text().splitlines()
        again = subprocess.run([sys.executable, str(RUNNER), "start", "--dir", str(run_dir)],
                               capture_output=True, text=True, timeout=30)
        assert again.returncode == 1  # one broker per run directory
    finally:
        stopped = subprocess.run([sys.executable, str(RUNNER), "stop", "--dir", str(run_dir)],
                                 capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
    assert kafka_runner._metadata_probe("127.0.0.1", port, timeout=1) is None
