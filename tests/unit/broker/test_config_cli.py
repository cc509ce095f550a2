import subprocess
import sys
from pathlib import Path

import pytest

from minikafka.broker.cli import build_parser, config_from_args
from minikafka.broker.config import BrokerConfig, ConfigError, env_name

REPO = Path(__file__).resolve().parents[3]


def test_defaults_follow_the_contract():
    c = BrokerConfig.load(environ={})
    assert (c.node_id, c.host, c.port) == (1, "127.0.0.1", 9092)
    expected = {"auto.create.topics.enable": True, "num.partitions": 1, "default.replication.factor": 1,
                "message.max.bytes": 1048588, "socket.request.max.bytes": 104857600,
                "log.segment.bytes": 1073741824, "log.retention.ms": 604800000, "log.retention.bytes": -1,
                "log.cleanup.policy": "delete", "offsets.topic.num.partitions": 50,
                "offsets.retention.minutes": 10080, "offsets.retention.check.interval.ms": 600000,
                "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 6000,
                "group.max.session.timeout.ms": 1800000, "group.max.size": 2147483647,
                "transactional.id.expiration.ms": 604800000}
    for name, value in expected.items():
        assert c.get(name) == value, name


def test_precedence_file_then_env_then_command_line(tmp_path):
    toml = tmp_path / "broker.toml"
    toml.write_text('port = 1111\n"num.partitions" = 3\n"message.max.bytes" = 10\n[log.retention]\nms = 5\n')
    env = {"MINIKAFKA_NUM_PARTITIONS": "4", "MINIKAFKA_PORT": "2222", "UNRELATED": "x"}
    c = BrokerConfig.load(config_file=str(toml), environ=env, overrides={"num.partitions": "5"})
    assert c.port == 2222
    assert c.get("num.partitions") == 5
    assert c.get("message.max.bytes") == 10
    assert c.get("log.retention.ms") == 5


def test_env_name_rule():
    assert env_name("auto.create.topics.enable") == "MINIKAFKA_AUTO_CREATE_TOPICS_ENABLE"
    c = BrokerConfig.load(environ={"MINIKAFKA_AUTO_CREATE_TOPICS_ENABLE": "false"})
    assert c.get("auto.create.topics.enable") is False


@pytest.mark.parametrize("overrides", [{"nope.setting": "1"}, {"num.partitions": "many"},
                                       {"log.cleanup.policy": "shred"}, {"port": "70000"}])
def test_bad_settings_are_rejected(overrides):
    with pytest.raises(ConfigError):
        BrokerConfig.load(environ={}, overrides=overrides)


def test_advertised_defaults_to_bind_and_replaces_wildcard():
    c = BrokerConfig.load(environ={}, fields={"host": "0.0.0.0", "port": 9999})
    assert c.advertised == ("127.0.0.1", 9999)
    c = BrokerConfig.load(environ={}, fields={"advertised_host": "kafka.local", "advertised_port": 19092})
    assert c.advertised == ("kafka.local", 19092) and c.advertised() == ("kafka.local", 19092)


def test_cli_flags_make_run_uses():
    args = build_parser().parse_args(["serve", "--host", "127.0.0.1", "--port", "9092", "--data-dir", "./data",
                                      "--override", "num.partitions=2"])
    c = config_from_args(args, environ={})
    assert (c.host, c.port, c.data_dir, c.get("num.partitions")) == ("127.0.0.1", 9092, "./data", 2)


def test_serve_help_lists_every_flag_and_setting():
    out = subprocess.run([sys.executable, "-m", "minikafka", "serve", "--help"], cwd=REPO, capture_output=True,
                         text=True, timeout=30).stdout
    for flag in ("--host", "--port", "--advertised-host", "--advertised-port", "--data-dir", "--node-id",
                 "--config-file", "--override", "--log-level", "MINIKAFKA_", "message.max.bytes",
                 "auto.create.topics.enable"):
        assert flag in out, flag


def test_serve_parses_the_same_without_the_other_commands():
    # A broker start builds only the serve parser (issue 24: no client or security tools loaded);
    # the arguments come out the same as with the whole command line, and the other commands
    # are still there for `minikafka --help`.
    argv = ["serve", "--port", "0", "--override", "num.partitions=3", "--seed", "a.jsonl"]
    assert vars(build_parser(serve_only=True).parse_args(argv)) == vars(build_parser().parse_args(argv))
    out = subprocess.run([sys.executable, "-m", "minikafka", "--help"], cwd=REPO, capture_output=True,
                         text=True, timeout=30).stdout
    for command in ("serve", "certs", "users", "topic", "produce", "consume", "group"):
        assert command in out, command
