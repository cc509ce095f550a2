"""Kafka 4.2's broker config table and update modes, group configs, and the SCRAM duplicate rule
(issue 20, helper "configs"); every expected message below is Kafka 4.2's answer (tests/conformance
corpus/configs.py compares them with a running Kafka)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from minikafka.broker import configs as cfg, group_configs, kafka_configs
from minikafka.broker.config import BrokerConfig, ConfigError
from minikafka.broker.context import RequestContext
from minikafka.broker.controller import Controller
from minikafka.broker.handlers import admin_configs, scram_credentials
from broker_fakes import MemoryMetadataLog, RecordingLogManager

TABLE = cfg.broker_configs()
KAFKA_NAMES = sorted(row[0] for row in kafka_configs.BROKER)
BY_MODE = {mode: sorted(r[0] for r in kafka_configs.BROKER if r[4] == mode)
           for mode in ("read-only", "per-broker", "cluster-wide")}


class FakeBroker:
    def __init__(self, **overrides):
        self.config = BrokerConfig.load(environ={}, overrides=overrides)
        self.config.data_dir = None
        self.metadata_log = MemoryMetadataLog()
        self.controller = Controller(self.config, self.metadata_log, RecordingLogManager())


def ctx(broker, api_key, version):
    return RequestContext(api_key, version, 1, "unit", "127.0.0.1", broker)


# -- the table -------------------------------------------------------------------------------

def test_the_table_has_every_config_kafka_describes_with_its_mode():
    assert len(KAFKA_NAMES) >= 300
    for name, type_name, default, _, mode in kafka_configs.BROKER:
        key = TABLE[name]
        assert key.type is cfg.ConfigType[type_name] and key.mode == mode
        assert key.dynamic == (mode != "read-only")
    assert TABLE["sasl.kerberos.min.time.before.relogin"].mode == "per-broker"
    assert TABLE["log.cleaner.threads"].mode == "cluster-wide"
    assert TABLE["num.partitions"].mode == "read-only"


def test_configs_minikafka_ignores_say_so_in_their_documentation():
    assert not TABLE["log.cleaner.io.buffer.size"].acted
    assert "does not act on" in TABLE["log.cleaner.io.buffer.size"].doc
    assert TABLE["message.max.bytes"].acted and "does not act on" not in TABLE["message.max.bytes"].doc


def test_the_not_acted_on_list_in_the_docs_is_the_tables():
    from pathlib import Path

    doc = (Path(cfg.__file__).resolve().parent / "CONFIGS.md").read_text()
    listed = {line[1:-1] for line in doc.splitlines() if re.fullmatch(r"`[^`]+`", line)}
    assert listed == {n for n in KAFKA_NAMES if not TABLE[n].acted}


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_doubles_print_as_java_does(value):
    text = cfg._double_str(value)
    assert float(text) == value
    mantissa, _, exponent = text.partition("E")
    assert "." in mantissa
    if exponent:
        assert not 1e-3 <= abs(value) < 1e7
    else:
        assert value == 0 or 1e-3 <= abs(value) < 1e7


@pytest.mark.parametrize("name", [n for n in KAFKA_NAMES if TABLE[n].default is not None])
def test_every_default_parses_and_passes_its_validator(name):
    key = TABLE[name]
    if key.type in (cfg.ConfigType.CLASS, cfg.ConfigType.PASSWORD):
        return
    assert key.canonical(key.default_string) == key.default_string


def test_importing_the_config_module_does_not_load_kafkas_table():
    code = ("import sys, minikafka.broker.configs, minikafka.broker.handlers.admin_configs; "
            "print('minikafka.broker.kafka_configs' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- update modes ----------------------------------------------------------------------------

@given(st.sampled_from(BY_MODE["read-only"]), st.booleans())
def test_read_only_names_are_refused_at_both_levels(name, per_broker):
    with pytest.raises(cfg.BrokerConfigRefused) as refused:
        cfg.validate_broker_changes({name: "1"}, per_broker)
    assert str(refused.value) == f"Cannot update these configs dynamically: Set({name})"
    assert refused.value.code == 42


@given(st.sampled_from([n for n in BY_MODE["per-broker"] if n not in cfg.SSL_PER_LISTENER]))
def test_per_broker_names_are_refused_at_the_cluster_default(name):
    with pytest.raises(cfg.BrokerConfigRefused) as refused:
        cfg.validate_broker_changes({name: TABLE[name].default_string or "x"}, per_broker=False)
    assert str(refused.value) == ("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: Set({name})")


@given(st.sampled_from(sorted(cfg.SSL_PER_LISTENER)), st.booleans())
def test_ssl_stores_only_with_a_listener_prefix(name, per_broker):
    with pytest.raises(cfg.BrokerConfigRefused, match=r"only per-listener using the listener prefix: HashSet\("):
        cfg.validate_broker_changes({name: "x"}, per_broker)
    assert cfg.validate_broker_changes({f"listener.name.ssl.{name}": "x"}, True) == {f"listener.name.ssl.{name}": "x"}


@given(st.sampled_from([n for n in BY_MODE["cluster-wide"]
                        if TABLE[n].default is not None and TABLE[n].type is not cfg.ConfigType.CLASS]),
       st.booleans())
def test_cluster_wide_names_take_their_default_at_both_levels(name, per_broker):
    value = TABLE[name].default_string
    assert cfg.validate_broker_changes({name: value}, per_broker, lambda n: None) == {name: value}


@given(st.from_regex(r"[a-z]{1,8}(\.[a-z]{1,8}){1,3}", fullmatch=True), st.text(max_size=20), st.booleans())
def test_names_kafka_does_not_know_are_kept(name, value, per_broker):
    if name in TABLE or name.startswith("listener.name."):
        return
    assert cfg.validate_broker_changes({name: value}, per_broker) == {name: value}


@given(st.integers(min_value=-2**31, max_value=2**31 - 1))
def test_thread_pools_at_most_double_or_half(value):
    props = {"num.io.threads": str(value)}
    if value < 1:
        with pytest.raises(cfg.ConfigError, match="Value must be at least 1"):
            cfg.validate_broker_changes(props, False, lambda n: "8")
    elif value > 16:
        with pytest.raises(cfg.BrokerConfigRefused, match="not be greater than double the current value 8"):
            cfg.validate_broker_changes(props, False, lambda n: "8")
    elif value < 4:
        with pytest.raises(cfg.BrokerConfigRefused, match="at least half the current value 8"):
            cfg.validate_broker_changes(props, False, lambda n: "8")
    else:
        assert cfg.validate_broker_changes(props, False, lambda n: "8") == {"num.io.threads": str(value)}


def test_types_are_checked_before_ranges():
    with pytest.raises(cfg.ConfigError) as refused:
        cfg.validate_broker_changes({"log.segment.bytes": "1", "message.max.bytes": "x"}, False)
    assert str(refused.value) == "Invalid value x for configuration message.max.bytes: Not a number of type INT"


def test_a_listener_with_its_own_values_freezes_the_unprefixed_ones():
    old = {"listener.name.plaintext.sasl.kerberos.ticket.renew.jitter": "0.1"}
    with pytest.raises(cfg.BrokerConfigRefused, match=r"existing listener ListenerName\(PLAINTEXT\)"):
        cfg.check_listener_update(old, {**old, "sasl.kerberos.min.time.before.relogin": "1"}, ["PLAINTEXT"])
    cfg.check_listener_update({}, {"sasl.kerberos.min.time.before.relogin": "1"}, ["PLAINTEXT"])
    cfg.check_listener_update(old, {**old, "message.max.bytes": "5"}, ["PLAINTEXT"])


# -- static settings Kafka has and minikafka does not act on -----------------------------------

def test_kafka_settings_are_accepted_at_start_with_kafkas_validation():
    config = BrokerConfig.load(environ={}, overrides={"log.cleaner.threads": "2", "transaction.state.log.min.isr": "1"})
    assert config.get("log.cleaner.threads") == 2 and config.get("sasl.kerberos.min.time.before.relogin") == 60000
    with pytest.raises(ConfigError, match="Value must be at least 0"):
        BrokerConfig.load(environ={}, overrides={"log.cleaner.threads": "-1"})
    with pytest.raises(ConfigError, match="unknown broker setting"):
        BrokerConfig.load(environ={}, overrides={"no.such.setting": "1"})


async def test_a_static_kafka_setting_is_described_as_static():
    broker = FakeBroker(**{"log.cleaner.threads": "2"})
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": ["log.cleaner.threads"]}],
            "include_synonyms": True}
    entry = (await admin_configs.describe_configs(ctx(broker, 32, 4), body))["results"][0]["configs"][0]
    assert (entry["value"], entry["config_source"]) == ("2", 4)
    assert [(s["value"], s["source"]) for s in entry["synonyms"]] == [("2", 4), ("1", 5)]


# -- KIP-966 -----------------------------------------------------------------------------------

def test_the_cluster_default_gets_min_insync_replicas_once():
    broker = FakeBroker(**{"min.insync.replicas": "1"})
    records = [r for r in broker.metadata_log.saved if r["type"] == "config"]
    assert records == [{"type": "config", "resource_type": 4, "resource_name": "", "configs": {"min.insync.replicas": "1"}}]
    again = Controller(broker.config, broker.metadata_log, RecordingLogManager())
    assert [r for r in broker.metadata_log.saved if r["type"] == "config"] == records
    assert again.resource_configs[(4, "")] == {"min.insync.replicas": "1"}


def test_without_elr_there_is_no_cluster_level_record():
    log = MemoryMetadataLog([{"type": "cluster", "cluster_id": "c"},
                             {"type": "feature_level", "name": "eligible.leader.replicas.version", "level": 0}])
    controller = Controller(BrokerConfig(), log, RecordingLogManager())
    assert (4, "") not in controller.resource_configs
    controller.set_feature_level("eligible.leader.replicas.version", 1)  # turning ELR on writes it
    assert controller.resource_configs[(4, "")] == {"min.insync.replicas": "1"}


# -- group configs -----------------------------------------------------------------------------

@given(st.integers(min_value=1, max_value=200000))
@settings(max_examples=60)
def test_group_session_timeout_within_the_broker_bounds(value):
    broker = FakeBroker()
    props = {"consumer.session.timeout.ms": str(value)}
    if value < 45000:
        expected = "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
    elif value > 60000:
        expected = "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"
    else:
        assert group_configs.validate(broker, props) == props
        return
    with pytest.raises(cfg.ConfigRefused) as refused:
        group_configs.validate(broker, props)
    assert (refused.value.code, str(refused.value)) == (40, expected)


@given(st.text(min_size=1, max_size=30))
def test_unknown_group_config_names(name):
    if name in group_configs.table():
        return
    with pytest.raises(cfg.ConfigRefused, match="Unknown group config name: "):
        group_configs.validate(FakeBroker(), {name: "1"})


@pytest.mark.parametrize("value, ok", [("latest", True), ("earliest", True), ("by_duration:PT1H", True),
                                       ("by_duration:P2DT3H4M5.5S", True), ("by_duration:", False),
                                       ("by_duration:PT", False), ("nope", False), ("by_duration:1h", False)])
def test_share_auto_offset_reset(value, ok):
    if ok:
        assert group_configs.validate(FakeBroker(), {"share.auto.offset.reset": value})
    else:
        with pytest.raises(cfg.ConfigRefused, match="The value must be either 'earliest', 'latest'"):
            group_configs.validate(FakeBroker(), {"share.auto.offset.reset": value})


async def test_group_configs_stored_in_the_metadata_log_and_effective():
    broker = FakeBroker(**{"group.consumer.session.timeout.ms": "50000"})
    assert group_configs.effective(broker, "g")["consumer.session.timeout.ms"] == 50000  # the broker's
    body = {"resources": [{"resource_type": 32, "resource_name": "g", "configs": [
        {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "7000"}]}], "validate_only": False}
    res = (await admin_configs.incremental_alter_configs(ctx(broker, 44, 1), body))["responses"][0]
    assert res["error_code"] == 0
    again = Controller(broker.config, broker.metadata_log, RecordingLogManager())
    assert again.resource_configs[(32, "g")] == {"consumer.heartbeat.interval.ms": "7000"}
    values = group_configs.effective(broker, "g")
    assert values["consumer.heartbeat.interval.ms"] == 7000 and values["share.isolation.level"] == "read_uncommitted"
    assert group_configs.effective(broker, "other")["consumer.heartbeat.interval.ms"] == 5000

    from minikafka.broker.group.consumer import ConsumerConfig

    consumer = ConsumerConfig(session_timeout_ms=50000, heartbeat_interval_ms=5000,
                              group_configs=lambda gid: group_configs.effective(broker, gid))
    assert consumer.heartbeat_interval_for("g") == 7000 and consumer.heartbeat_interval_for("other") == 5000
    assert consumer.session_timeout_for("g") == 50000


# -- AlterUserScramCredentials -------------------------------------------------------------------

def _up(name, mechanism=1, iterations=8192):
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": b"salt",
            "salted_password": b"x" * 32}


async def _alter_scram(broker, deletions=(), upsertions=()):
    body = {"deletions": list(deletions), "upsertions": list(upsertions)}
    return [(r["user"], r["error_code"]) for r in (await scram_credentials.alter(ctx(broker, 51, 0), body))["results"]]


async def test_scram_users_named_twice():
    broker = FakeBroker()
    # Kafka 4.2's answers (conformance scram_users_named_twice): the other users in its HashMap's
    # order, then the duplicated ones; a user whose first entry failed keeps that error.
    assert await _alter_scram(broker, upsertions=[_up("a1"), _up("b1"), _up("a1"), _up("c1"), _up("a1")]) == [
        ("c1", 0), ("b1", 0), ("a1", 92)]
    assert await _alter_scram(broker, upsertions=[_up("u7", iterations=1), _up("u7")]) == [("u7", 93)]
    assert await _alter_scram(broker, upsertions=[_up("u9"), _up("u9", iterations=1)]) == [("u9", 92)]
    assert await _alter_scram(broker, deletions=[{"name": "u8", "mechanism": 1}] * 2) == [("u8", 91)]
    assert await _alter_scram(broker, deletions=[{"name": "b1", "mechanism": 1}] * 2) == [("b1", 92)]
    names = {name for name, _ in broker.controller.security.scram_credentials}
    assert names == {"b1", "c1"}


# -- the broker's own group bounds ----------------------------------------------------------------

def test_group_timeouts_outside_their_bounds_stop_the_start():
    # Kafka 4.2 refuses to start the same way (its storage tool and broker say exactly this).
    with pytest.raises(ConfigError, match="^group.consumer.session.timeout.ms must be greater than or equal to "
                                          "group.consumer.min.session.timeout.ms$"):
        BrokerConfig.load(environ={}, overrides={"group.consumer.session.timeout.ms": "1000"})
    with pytest.raises(ConfigError, match="^group.share.heartbeat.interval.ms must be less than or equal to "
                                          "group.share.max.heartbeat.interval.ms$"):
        BrokerConfig.load(environ={}, overrides={"group.share.heartbeat.interval.ms": "20000"})
    config = BrokerConfig.load(environ={}, overrides={"group.consumer.heartbeat.interval.ms": "300",
                                                      "group.consumer.min.heartbeat.interval.ms": "300"})
    assert config.get("group.consumer.heartbeat.interval.ms") == 300


def test_a_group_without_configs_stays_listed_until_restart():
    broker = FakeBroker()
    broker.controller.set_resource_configs(32, "g", {"consumer.heartbeat.interval.ms": "6000"})
    broker.controller.set_resource_configs(32, "g", {})
    assert broker.controller.resource_configs[(32, "g")] == {}  # Kafka still lists it
    again = Controller(broker.config, broker.metadata_log, RecordingLogManager())
    assert (32, "g") not in again.resource_configs


# -- consumer groups follow their group configs -----------------------------------------------------

def test_a_consumer_group_uses_its_own_session_timeout_and_heartbeat_interval():
    import uuid as _uuid

    from minikafka.broker.clock import MockTimer
    from minikafka.broker.group.consumer import ConsumerConfig
    from minikafka.broker.group.shard import CoordinatorShard, GroupConfig, MemoryOffsetsLog

    overrides = {"fast": {"consumer.session.timeout.ms": 3000, "consumer.heartbeat.interval.ms": 1000}}
    timer = MockTimer()
    consumer = ConsumerConfig(session_timeout_ms=45000, heartbeat_interval_ms=5000,
                              group_configs=lambda gid: overrides.get(gid, {}))
    shard = CoordinatorShard(0, MemoryOffsetsLog(), timer, timer.clock, GroupConfig(), consumer)
    shard.topic_metadata = lambda: {"t1": (_uuid.UUID(int=1), 2)}
    shard.load()

    def join(group):
        return shard.consumer_group_heartbeat(
            {"group_id": group, "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
             "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["t1"], "subscribed_topic_regex": None,
             "server_assignor": None, "topic_partitions": []}, api_version=1, client_id="c", client_host="/127.0.0.1")

    assert join("fast")["heartbeat_interval_ms"] == 1000
    assert join("slow")["heartbeat_interval_ms"] == 5000
    timer.advance(3000)  # the fast group's session timeout, not the broker's 45 s
    assert "m" not in shard.consumer.groups["fast"].members
    assert "m" in shard.consumer.groups["slow"].members
