"""The config table itself: parsing like Kafka's ConfigDef and agreement with broker.config."""

import pytest

from minikafka.broker import configs as cfg
from minikafka.broker.config import BROKER_SETTINGS


@pytest.mark.parametrize("type_, raw, expected", [
    (cfg.ConfigType.INT, " 42 ", 42),
    (cfg.ConfigType.LONG, "+9223372036854775807", 9223372036854775807),
    (cfg.ConfigType.BOOLEAN, "TRUE", True),
    (cfg.ConfigType.DOUBLE, "0.25", 0.25),
    (cfg.ConfigType.LIST, "compact ,  delete", ["compact", "delete"]),
    (cfg.ConfigType.LIST, "", []),
])
def test_parse(type_, raw, expected):
    assert cfg.parse_typed("x", type_, raw) == expected


@pytest.mark.parametrize("type_, raw", [
    (cfg.ConfigType.INT, "2147483648"), (cfg.ConfigType.INT, "1_000"), (cfg.ConfigType.INT, "1.0"),
    (cfg.ConfigType.LONG, "0x10"), (cfg.ConfigType.BOOLEAN, "1"), (cfg.ConfigType.DOUBLE, "half"),
])
def test_parse_rejects(type_, raw):
    with pytest.raises(cfg.ConfigError) as exc:
        cfg.parse_typed("x", type_, raw)
    assert str(exc.value).startswith(f"Invalid value {raw} for configuration x: ")


def test_canonical_strings():
    assert cfg.TOPIC_CONFIGS["min.cleanable.dirty.ratio"].canonical("1") == "1.0"
    assert cfg.TOPIC_CONFIGS["preallocate"].canonical("True") == "true"
    assert cfg.TOPIC_CONFIGS["compression.gzip.level"].canonical("-1") == "-1"
    with pytest.raises(cfg.ConfigError, match="Value must be between 1 and 9 or equal to -1"):
        cfg.TOPIC_CONFIGS["compression.gzip.level"].canonical("0")


def test_every_topic_config_has_a_type_default_and_doc():
    for name, key in cfg.TOPIC_CONFIGS.items():
        assert key.doc and key.type is not cfg.ConfigType.UNKNOWN
        assert key.default is not None, name
        # Defaults pass their own validators.
        assert key.canonical(key.default_string) == key.default_string


def test_topic_synonyms_point_at_broker_configs_with_the_same_default():
    for topic_name, synonyms in cfg.TOPIC_SYNONYMS.items():
        assert topic_name in cfg.TOPIC_CONFIGS
        for broker_name, _ in synonyms:
            assert broker_name in cfg.BROKER_CONFIGS, broker_name
        first = cfg.BROKER_CONFIGS[synonyms[0][0]]
        if first.default is not None:
            assert first.default_string == cfg.TOPIC_CONFIGS[topic_name].default_string, topic_name


def test_broker_defaults_agree_with_broker_config():
    # Kafka's null defaults (log.retention.ms...) are resolved to numbers by broker.config.
    for name, setting in BROKER_SETTINGS.items():
        key = cfg.BROKER_CONFIGS[name]
        if key.default is None or name in ("node.id", "broker.id", "log.dirs"):
            continue  # Kafka's null, unset here as "" (paths, passwords), or known only at run time
        assert cfg.to_string(key.type, key.default) == cfg._stringify(key, setting.default), name


def test_dynamic_set_is_the_log_synonyms_plus_a_few():
    assert "log.retention.ms" in cfg.DYNAMIC_BROKER_CONFIGS
    assert "message.max.bytes" in cfg.DYNAMIC_BROKER_CONFIGS
    assert "log.retention.hours" not in cfg.DYNAMIC_BROKER_CONFIGS
    assert "num.partitions" not in cfg.DYNAMIC_BROKER_CONFIGS
    assert "auto.create.topics.enable" not in cfg.DYNAMIC_BROKER_CONFIGS


def test_apply_incremental_on_defaults():
    keys = cfg.TOPIC_CONFIGS
    assert cfg.apply_incremental({}, [("cleanup.policy", 2, "compact")], keys) == {"cleanup.policy": "delete,compact"}
    assert cfg.apply_incremental({}, [("cleanup.policy", 3, "delete")], keys) == {"cleanup.policy": ""}
    assert cfg.apply_incremental({"a": "1"}, [("a", 1, None), ("b", 0, "2")], keys) == {"b": "2"}
