"""Kafka's topic and broker configs as the admin APIs report and validate them.

One table per resource type: each ``ConfigKey`` has Kafka's name, ConfigDef type, default,
validator and a short description of our own (DescribeConfigs v3 ``include_documentation``).
Parsing follows Kafka's ``ConfigDef.parseType`` and the error texts are Kafka's
``ConfigException`` format, "Invalid value X for configuration Y: reason", because clients and
tools print them verbatim.

How a topic value is resolved (Kafka's ``KafkaConfigSchema.resolveEffectiveTopicConfig``): the
topic's own override (source DYNAMIC_TOPIC_CONFIG), else its broker synonyms in priority order
(``TOPIC_SYNONYMS``: retention.ms <- log.retention.ms, log.retention.minutes,
log.retention.hours) looked up first in the per-broker dynamic configs, then the cluster-wide
dynamic default, then the static broker config, else the topic default.  DescribeConfigs reports
the synonyms the way Kafka's ``ConfigHelper`` does, including its quirk of dropping leading
synonyms whose name is not the first broker name (so retention.ms with only the
log.retention.hours default shows no synonyms at all, as on a real broker).

Broker configs: every config Kafka 4.2 has (``broker/kafka_configs.py``, generated from Kafka's
own definitions: types, defaults, validators, update modes), built into ``broker_configs()`` with
the first DescribeConfigs or alteration, never at start-up; minikafka's own descriptions and
deliberate defaults for the ones it acts on (``_OWN_BROKER_KEYS``); the names it does not act on
are listed in ``broker/CONFIGS.md``.

Dynamic broker configs (KIP-226) live in ``DynamicBrokerConfigs``: the per-broker resource
("1") and the cluster default (""), kept in the metadata log as ``config`` records (KRaft's
ConfigRecord) and pushed into the running ``BrokerConfig`` so the rest of the broker sees the
effective value.  ``validate_broker_changes`` applies Kafka's update modes: read-only names are
refused, per-broker ones (listener, SSL, SASL) only on the node's own resource, cluster-wide ones
on both; the SSL key/trust store settings only under a listener prefix.  With
eligible.leader.replicas.version 1 (KIP-966) the cluster default always holds
min.insync.replicas (``ensure_cluster_min_insync_replicas``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from decimal import Decimal
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, Iterable, Mapping

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids (not the ACL ResourceType ids)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs config_operation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigError(ValueError):
    """A config name or value Kafka rejects; the message is Kafka's text (INVALID_CONFIG)."""


def invalid_value(name: str, value: Any, reason: str | None = None) -> ConfigError:
    # Kafka's ConfigException(name, value, message) format.
    shown = _java_str(value)
    return ConfigError(f"Invalid value {shown} for configuration {name}" + (f": {reason}" if reason else ""))


def _java_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, float):
        return _double_str(value)
    return str(value)


def _double_str(value: float) -> str:
    """Java's Double.toString: "0.5", "1.0", "1.7976931348623157E308" (scientific outside 1e-3..1e7)."""
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        return {True: "Infinity", False: "-Infinity"}.get(value > 0, "NaN") if value == value else "NaN"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        if "e" in text:  # Python writes 1e-03 style for some of these
            text = f"{value:.17f}".rstrip("0")
        return text if "." in text else text + ".0"
    # The shortest digits that round-trip (repr), placed as d.ddd x 10^e: mantissa and exponent both
    # from those digits (a 17-digit rendering can fall into the decade below: 1e-06 as 9.99...e-07).
    _, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent += len(digits) - 1
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if value < 0 else ''}{mantissa}E{exponent}"


# -- parsing (ConfigDef.parseType) ---------------------------------------------------------

_INT_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
_LIST_SPLIT = re.compile(r"\s*,\s*")

_INT_BOUNDS = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.SHORT: (-32768, 32767),
               ConfigType.LONG: (LONG_MIN, LONG_MAX)}


def parse_typed(name: str, type_: ConfigType, raw: str) -> Any:
    """A string value as Kafka's ConfigDef type; ConfigError with Kafka's message otherwise."""
    text = raw.strip()
    if type_ is ConfigType.BOOLEAN:
        low = text.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        raise invalid_value(name, raw, "Expected value to be either true or false")
    if type_ in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[type_]
        if not _INT_RE.fullmatch(text) or not lo <= int(text) <= hi:
            raise invalid_value(name, raw, f"Not a number of type {type_.name}")
        return int(text)
    if type_ is ConfigType.DOUBLE:
        if not _DOUBLE_RE.fullmatch(text):
            raise invalid_value(name, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("dDfF"))
    if type_ is ConfigType.LIST:
        return [] if not text else _LIST_SPLIT.split(text)
    return text


def to_string(type_: ConfigType, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString: how a typed value is reported."""
    if value is None:
        return None
    if type_ is ConfigType.LIST:
        return ",".join(value) if isinstance(value, list) else str(value)
    if type_ is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if type_ is ConfigType.DOUBLE:
        return _double_str(value)
    return str(value)


# -- validators (ConfigDef.Range / ValidString / ValidList) -------------------------------

Validator = Callable[[str, Any], None]


def at_least(minimum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise invalid_value(name, value, f"Value must be at least {_java_str(minimum)}")
    return check


def between(low: int | float, high: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < low:
            raise invalid_value(name, value, f"Value must be at least {_java_str(low)}")
        if value > high:
            raise invalid_value(name, value, f"Value must be no more than {_java_str(high)}")
    return check


def at_most(maximum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value > maximum:
            raise invalid_value(name, value, f"Value must be no more than {_java_str(maximum)}")
    return check


def one_of_ignore_case(*allowed: str) -> Validator:
    lowered = {a.lower() for a in allowed}

    def check(name: str, value: Any) -> None:
        if value.lower() not in lowered:
            raise invalid_value(name, value, "String must be one of (case insensitive): " + ", ".join(allowed))
    return check


def _non_empty(name: str, value: Any) -> None:
    if value is not None and not value.strip():
        raise invalid_value(name, value, "String must be non-empty")


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise invalid_value(name, value, "String must be one of: " + ", ".join(allowed))
    return check


def each_one_of(*allowed: str) -> Validator:
    single = one_of(*allowed)

    def check(name: str, value: Any) -> None:
        for item in value:
            if not item:
                raise ConfigError(f"Configuration '{name}' values must not be empty.")
            single(name, item)
    return check


def _gzip_level(name: str, value: Any) -> None:
    if value != -1 and not 1 <= value <= 9:
        raise invalid_value(name, value, "Value must be between 1 and 9 or equal to -1")


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any  # typed value, or None for Kafka's "null" defaults
    doc: str
    validator: Validator | None = None
    dynamic: bool = False  # broker configs only: changeable with (Incremental)AlterConfigs
    # Broker configs: Kafka's update mode, "read-only", "per-broker" or "cluster-wide"
    # (DynamicBrokerConfig); None for names Kafka does not have (minikafka's own settings).
    mode: str | None = None
    acted: bool = True  # False: described and accepted as Kafka does, but minikafka ignores it

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> Any:
        value = parse_typed(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def canonical(self, raw: str) -> str:
        """Validate ``raw`` and return it as Kafka would report it ("compact, delete" -> "compact,delete")."""
        return to_string(self.type, self.parse(raw))

    @property
    def default_string(self) -> str | None:
        return to_string(self.type, self.default)


T = ConfigType
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


def _k(name, type_, default, doc, validator=None, dynamic=False) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, validator, dynamic)


def _storage_flush_ms() -> int:
    # Storage flushes on a timer by default (a single node has no replicas to rely on), so that
    # is the flush.ms DescribeConfigs must report.
    try:
        from minikafka.storage.config import LogConfig
        return int(LogConfig().flush_ms)
    except Exception:  # pragma: no cover - storage written in parallel
        return LONG_MAX


_STORAGE_FLUSH_MS = _storage_flush_ms()

# Topic configs of Kafka 4.0 plus message.downconversion.enable (3.9, still accepted).
# segment.bytes keeps 3.9's floor of 14 bytes: tests roll tiny segments on purpose.
TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in (
    _k("cleanup.policy", T.LIST, ["delete"], "Retention policy for old segments: delete (by time/size), "
       "compact (keep the last record per key) or both.", each_one_of(*CLEANUP_POLICIES)),
    _k("compression.gzip.level", T.INT, -1, "Compression level when compression.type is gzip.", _gzip_level),
    _k("compression.lz4.level", T.INT, 9, "Compression level when compression.type is lz4.", between(1, 17)),
    _k("compression.type", T.STRING, "producer", "Final compression of the topic's batches; 'producer' keeps "
       "what the producer sent.", one_of(*COMPRESSION_TYPES)),
    _k("compression.zstd.level", T.INT, 3, "Compression level when compression.type is zstd.",
       between(-131072, 22)),
    _k("delete.retention.ms", T.LONG, 86400000, "How long delete tombstones stay readable in a compacted "
       "topic.", at_least(0)),
    _k("file.delete.delay.ms", T.LONG, 60000, "Wait before a deleted segment file is removed from disk.",
       at_least(0)),
    _k("flush.messages", T.LONG, LONG_MAX, "Force an fsync after this many messages.", at_least(1)),
    _k("flush.ms", T.LONG, _STORAGE_FLUSH_MS, "Force an fsync once the oldest unflushed append is this old "
       "(this broker's storage default is 1000; Kafka's is Long.MAX, relying on replicas).", at_least(0)),
    _k("follower.replication.throttled.replicas", T.LIST, [], "Replicas throttled on the follower side "
       "(replication; informational on a single node)."),
    _k("index.interval.bytes", T.INT, 4096, "Bytes between two offset index entries.", at_least(0)),
    _k("leader.replication.throttled.replicas", T.LIST, [], "Replicas throttled on the leader side "
       "(replication; informational on a single node)."),
    _k("local.retention.bytes", T.LONG, -2, "Local size retention with tiered storage; -2 follows "
       "retention.bytes.", at_least(-2)),
    _k("local.retention.ms", T.LONG, -2, "Local time retention with tiered storage; -2 follows retention.ms.",
       at_least(-2)),
    _k("max.compaction.lag.ms", T.LONG, LONG_MAX, "Longest time a record stays uncompacted.", at_least(1)),
    _k("max.message.bytes", T.INT, 1048588, "Largest record batch the topic accepts.", at_least(0)),
    _k("message.downconversion.enable", T.BOOLEAN, True, "Kafka 3.x: whether old consumers get "
       "down-converted batches (no effect here; 4.0 removed it)."),
    _k("message.timestamp.after.max.ms", T.LONG, 3600000, "How far in the future a CreateTime timestamp may "
       "be (Kafka 4.x: one hour).", at_least(0)),
    _k("message.timestamp.before.max.ms", T.LONG, LONG_MAX, "How far in the past a CreateTime timestamp may "
       "be.", at_least(0)),
    _k("message.timestamp.type", T.STRING, "CreateTime", "CreateTime keeps the producer's timestamps; "
       "LogAppendTime stamps batches on append.", one_of(*TIMESTAMP_TYPES)),
    _k("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, "Dirty fraction of the log that triggers compaction.",
       between(0, 1)),
    _k("min.compaction.lag.ms", T.LONG, 0, "Shortest time a record stays uncompacted.", at_least(0)),
    _k("min.insync.replicas", T.INT, 1, "Replicas that must acknowledge an acks=all write (always met on a "
       "single node).", at_least(1)),
    _k("preallocate", T.BOOLEAN, False, "Preallocate segment files."),
    _k("remote.log.copy.disable", T.BOOLEAN, False, "Tiered storage: stop copying segments to remote storage."),
    _k("remote.log.delete.on.disable", T.BOOLEAN, False, "Tiered storage: delete remote data when disabled."),
    _k("remote.storage.enable", T.BOOLEAN, False, "Tiered storage for the topic (not supported here)."),
    _k("retention.bytes", T.LONG, -1, "Largest size of a partition before old segments are deleted; -1 "
       "means no limit."),
    _k("retention.ms", T.LONG, 604800000, "How long segments are kept before deletion; -1 means forever.",
       at_least(-1)),
    _k("segment.bytes", T.INT, 1073741824, "Size at which a segment file is rolled.", at_least(14)),
    _k("segment.index.bytes", T.INT, 10485760, "Size of a segment's offset index.", at_least(4)),
    _k("segment.jitter.ms", T.LONG, 0, "Random jitter subtracted from segment.ms.", at_least(0)),
    _k("segment.ms", T.LONG, 604800000, "Age at which a segment is rolled even if not full.", at_least(1)),
    _k("unclean.leader.election.enable", T.BOOLEAN, False, "Allow an out-of-sync replica to become leader "
       "(meaningless on a single node)."),
)}

_HOURS = 3600 * 1000
_MINUTES = 60 * 1000

# Topic config -> broker configs supplying its default, first wins, with the factor that turns
# the broker unit into the topic unit (Kafka's ServerTopicConfigSynonyms).
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOURS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTES),
                     ("log.retention.hours", _HOURS)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}

# Broker configs that Kafka treats as one setting in several units
# (DynamicBrokerConfig.brokerConfigSynonyms), most specific first.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {}
for _group in _BROKER_SYNONYM_GROUPS:
    for _name in _group:
        # Kafka lists log.flush.interval.ms's group only under log.flush.interval.ms itself.
        if _name != "log.flush.scheduler.interval.ms":
            BROKER_SYNONYMS[_name] = _group

# minikafka's own descriptions (and, where noted, its own defaults) of the broker configs it acts
# on.  Types, validators and update modes come from Kafka's table (broker/kafka_configs.py); these
# rows give the documentation and the defaults this broker runs with where they differ on purpose
# (group.initial.rebalance.delay.ms 0, offsets.topic.replication.factor 1 on a single node).
_OWN_BROKER_KEYS = (
    _k("node.id", T.INT, 1, "This broker's node id."),
    _k("broker.id", T.INT, 1, "This broker's id (same as node.id)."),
    _k("listeners", T.STRING, None, "Listener the broker binds (from --host/--port)."),
    _k("advertised.listeners", T.STRING, None, "Listener advertised to clients in Metadata."),
    _k("log.dirs", T.STRING, None, "Data directory holding the partition logs."),
    _k("auto.create.topics.enable", T.BOOLEAN, True, "Create unknown topics named in Metadata requests."),
    _k("num.partitions", T.INT, 1, "Partitions of a topic created without a partition count.", at_least(1)),
    _k("default.replication.factor", T.INT, 1, "Replication factor of topics created without one."),
    _k("delete.topic.enable", T.BOOLEAN, True, "Whether DeleteTopics may delete topics."),
    _k("message.max.bytes", T.INT, 1048588, "Largest record batch the broker accepts (topic: "
       "max.message.bytes).", at_least(0), True),
    _k("socket.request.max.bytes", T.INT, 104857600, "Largest request the broker reads.", at_least(1)),
    _k("log.segment.bytes", T.INT, 1073741824, "Segment size (topic: segment.bytes).", at_least(14), True),
    _k("log.roll.ms", T.LONG, None, "Segment age before rolling (topic: segment.ms); null uses log.roll.hours.",
       None, True),
    _k("log.roll.hours", T.INT, 168, "Segment age in hours before rolling, when log.roll.ms is not set.",
       at_least(1)),
    _k("log.roll.jitter.ms", T.LONG, None, "Jitter subtracted from the roll time (topic: segment.jitter.ms).",
       None, True),
    _k("log.roll.jitter.hours", T.INT, 0, "Roll jitter in hours, when log.roll.jitter.ms is not set.",
       at_least(0)),
    _k("log.retention.ms", T.LONG, None, "Time retention (topic: retention.ms); null uses "
       "log.retention.minutes or log.retention.hours.", None, True),
    _k("log.retention.minutes", T.INT, None, "Time retention in minutes, when log.retention.ms is not set."),
    _k("log.retention.hours", T.INT, 168, "Time retention in hours, when neither log.retention.ms nor "
       "log.retention.minutes is set."),
    _k("log.retention.bytes", T.LONG, -1, "Size retention per partition (topic: retention.bytes).", None, True),
    _k("log.retention.check.interval.ms", T.LONG, 300000, "How often retention runs.", at_least(1)),
    _k("log.cleanup.policy", T.LIST, ["delete"], "Default cleanup policy (topic: cleanup.policy).",
       each_one_of(*CLEANUP_POLICIES), True),
    _k("log.cleaner.delete.retention.ms", T.LONG, 86400000, "Tombstone retention (topic: "
       "delete.retention.ms).", at_least(0), True),
    _k("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Topic: min.compaction.lag.ms.", at_least(0), True),
    _k("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, "Topic: max.compaction.lag.ms.", at_least(1),
       True),
    _k("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Topic: min.cleanable.dirty.ratio.", between(0, 1),
       True),
    _k("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner (compaction of compacted topics)."),
    _k("log.cleaner.backoff.ms", T.LONG, 15000, "How long the cleaner sleeps when no log needs compaction.",
       at_least(0), True),
    _k("log.index.size.max.bytes", T.INT, 10485760, "Topic: segment.index.bytes.", at_least(4), True),
    _k("log.index.interval.bytes", T.INT, 4096, "Topic: index.interval.bytes.", at_least(0), True),
    _k("log.flush.interval.messages", T.LONG, LONG_MAX, "Topic: flush.messages.", at_least(1), True),
    _k("log.flush.interval.ms", T.LONG, None, "Topic: flush.ms; null uses log.flush.scheduler.interval.ms.",
       None, True),
    _k("log.flush.scheduler.interval.ms", T.LONG, LONG_MAX, "How often the flusher checks logs."),
    _k("log.segment.delete.delay.ms", T.LONG, 60000, "Topic: file.delete.delay.ms.", at_least(0), True),
    _k("log.preallocate", T.BOOLEAN, False, "Topic: preallocate.", None, True),
    _k("log.message.timestamp.type", T.STRING, "CreateTime", "Topic: message.timestamp.type.",
       one_of(*TIMESTAMP_TYPES), True),
    _k("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, "Topic: message.timestamp.before.max.ms.",
       at_least(0), True),
    _k("log.message.timestamp.after.max.ms", T.LONG, 3600000, "Topic: message.timestamp.after.max.ms.",
       at_least(0), True),
    _k("log.message.downconversion.enable", T.BOOLEAN, True, "Topic: message.downconversion.enable.", None,
       True),
    _k("log.local.retention.ms", T.LONG, -2, "Topic: local.retention.ms.", at_least(-2), True),
    _k("log.local.retention.bytes", T.LONG, -2, "Topic: local.retention.bytes.", at_least(-2), True),
    _k("compression.type", T.STRING, "producer", "Topic: compression.type.", one_of(*COMPRESSION_TYPES), True),
    _k("compression.gzip.level", T.INT, -1, "Topic: compression.gzip.level.", _gzip_level, True),
    _k("compression.lz4.level", T.INT, 9, "Topic: compression.lz4.level.", between(1, 17), True),
    _k("compression.zstd.level", T.INT, 3, "Topic: compression.zstd.level.", between(-131072, 22), True),
    _k("min.insync.replicas", T.INT, 1, "Topic: min.insync.replicas.", at_least(1), True),
    _k("unclean.leader.election.enable", T.BOOLEAN, False, "Topic: unclean.leader.election.enable.", None,
       True),
    _k("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets.", at_least(1)),
    _k("offsets.topic.replication.factor", T.SHORT, 1, "Replication factor of __consumer_offsets."),
    _k("offsets.topic.segment.bytes", T.INT, 104857600, "Segment size of __consumer_offsets.", at_least(1)),
    _k("offsets.retention.minutes", T.INT, 10080, "How long committed offsets of empty groups are kept.",
       at_least(1)),
    _k("offsets.retention.check.interval.ms", T.LONG, 600000, "How often expired offsets are removed.",
       at_least(1)),
    _k("group.initial.rebalance.delay.ms", T.INT, 0, "Wait before the first rebalance of an empty group "
       "(Kafka's default is 3000)."),
    _k("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout a member may ask for."),
    _k("group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout a member may ask for."),
    _k("group.max.size", T.INT, INT_MAX, "Most members in one consumer group.", at_least(1)),
    _k("transactional.id.expiration.ms", T.INT, 604800000, "How long an idle transactional id is kept.",
       at_least(1)),
    _k("transaction.max.timeout.ms", T.INT, 900000, "Largest transaction timeout a producer may ask for.",
       at_least(1)),
    _k("producer.id.expiration.ms", T.INT, 86400000, "How long an idle producer's state is kept.",
       at_least(-1), True),
    _k("num.io.threads", T.INT, 8, "Request handler threads (one event loop here).", at_least(1), True),
    _k("num.network.threads", T.INT, 3, "Network threads (one event loop here).", at_least(1), True),
)

# Deliberate defaults of this broker that differ from Kafka's (README: a development broker).
_OWN_DEFAULTS = frozenset({"group.initial.rebalance.delay.ms", "offsets.topic.replication.factor",
                           "queued.max.request.bytes", "ssl.keystore.type", "ssl.truststore.type",
                           "group.coordinator.rebalance.protocols",
                           "share.coordinator.state.topic.replication.factor",
                           "share.coordinator.state.topic.min.isr",
                           "log.roll.ms", "log.retention.ms", "log.flush.interval.ms",
                           "log.roll.jitter.ms", "listeners", "advertised.listeners", "log.dirs"})

NOT_ACTED_DOC = ("Kafka broker setting that minikafka describes with Kafka's default and accepts where Kafka "
                 "does, but does not act on (see broker/CONFIGS.md).")
OWN_SETTING_DOC = "minikafka's own setting (Kafka has no such config)."


def validator_from_spec(spec) -> Validator | None:
    """A validator from its data form in broker/kafka_configs.py."""
    if spec is None:
        return None
    kind = spec[0]
    if kind == "range":
        lo, hi = spec[1], spec[2]
        if lo is not None and hi is not None:
            return between(lo, hi)
        if lo is not None:
            return at_least(lo)
        return at_most(hi)
    if kind == "in":
        return one_of(*spec[1])
    if kind == "in_ci":
        return one_of_ignore_case(*spec[1])
    if kind == "list_in":
        return each_one_of(*spec[1])
    if kind == "non_empty":
        return _non_empty
    if kind == "gzip_level":
        return _gzip_level
    raise ValueError(f"unknown validator {spec!r}")


def _typed_default(name: str, type_: ConfigType, text: str | None) -> Any:
    if text is None:
        return None
    if type_ is ConfigType.LIST:
        return [] if not text.strip() else _LIST_SPLIT.split(text.strip())
    if type_ in (ConfigType.STRING, ConfigType.CLASS, ConfigType.PASSWORD):
        return text
    return parse_typed(name, type_, text)


_BROKER_TABLE: dict[str, ConfigKey] | None = None


def broker_configs() -> dict[str, ConfigKey]:
    """Every broker config this broker describes, built on first use (not at start-up).

    Kafka 4.2's configs (broker/kafka_configs.py: types, defaults, validators, update modes),
    with minikafka's own documentation and deliberate defaults for the ones it acts on, then
    minikafka's own settings (broker/config.py) that Kafka lacks, read-only.
    """
    global _BROKER_TABLE
    if _BROKER_TABLE is not None:
        return _BROKER_TABLE
    from minikafka.broker import kafka_configs
    from minikafka.broker.config import BROKER_SETTINGS

    own = {k.name: k for k in _OWN_BROKER_KEYS}
    table: dict[str, ConfigKey] = {}
    for name, type_name, default_text, spec, mode in kafka_configs.BROKER:
        type_ = ConfigType[type_name]
        default = _typed_default(name, type_, default_text)
        mine = own.get(name)
        acted = mine is not None or name in BROKER_SETTINGS
        doc = mine.doc if mine is not None else (BROKER_SETTINGS[name].doc if name in BROKER_SETTINGS
                                                 else NOT_ACTED_DOC)
        if mine is not None and name in _OWN_DEFAULTS:
            default = mine.default
        elif name in _OWN_DEFAULTS and name in BROKER_SETTINGS:
            default = _typed_default(name, type_, str(BROKER_SETTINGS[name].default))
        table[name] = ConfigKey(name, type_, default, doc, validator_from_spec(spec), mode != "read-only",
                                mode, acted)
    types = {"boolean": T.BOOLEAN, "int": T.INT, "long": T.LONG, "short": T.SHORT, "double": T.DOUBLE,
             "string": T.STRING, "list": T.LIST, "class": T.CLASS, "password": T.PASSWORD}
    for name, setting in BROKER_SETTINGS.items():
        if name in table:
            continue
        type_ = types.get(setting.type, T.STRING)
        default = setting.default
        if type_ is T.LIST and isinstance(default, str):
            default = [p for p in _LIST_SPLIT.split(default.strip()) if p] if default.strip() else []
        table[name] = ConfigKey(name, type_, default, setting.doc or OWN_SETTING_DOC, None, False, None, True)
    _BROKER_TABLE = table
    return table


def group_configs() -> dict[str, ConfigKey]:
    """Kafka 4.2's group configs (ConfigResource type GROUP), see broker/group_configs.py."""
    from minikafka.broker import kafka_configs

    return {name: ConfigKey(name, ConfigType[type_name], _typed_default(name, ConfigType[type_name], text),
                            "", validator_from_spec(spec), True, None, True)
            for name, type_name, text, spec, _ in kafka_configs.GROUP}


def __getattr__(name: str):
    # BROKER_CONFIGS / DYNAMIC_BROKER_CONFIGS load Kafka's table with their first reader.
    if name == "BROKER_CONFIGS":
        return broker_configs()
    if name == "DYNAMIC_BROKER_CONFIGS":
        return frozenset(k.name for k in broker_configs().values() if k.dynamic)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- topic names --------------------------------------------------------------------------

MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str | None) -> str | None:
    """Kafka's Topic.validate message for an illegal topic name, or None if it is legal."""
    if name is None or name == "":
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not _LEGAL_TOPIC.fullmatch(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return "Topic name is invalid: " + reason


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses a.b next to a_b."""
    return name.replace(".", "_")


# -- topic config validation --------------------------------------------------------------

def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check a full set of topic overrides (names, types, ranges and cross-checks).

    Returns the canonical strings to store; raises ConfigError with Kafka's message.
    """
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise ConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    parsed = {name: TOPIC_CONFIGS[name].parse(value) for name, value in configs.items()}
    min_lag = parsed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default)
    max_lag = parsed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default)
    if min_lag > max_lag:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                          f"max.compaction.lag.ms ({max_lag})")
    if parsed.get("remote.storage.enable"):
        raise ConfigError("Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.")
    return {name: to_string(TOPIC_CONFIGS[name].type, value) for name, value in parsed.items()}


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]],
                      defaults: Mapping[str, ConfigKey]) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations to a resource's override map.

    ``ops`` are (name, operation, value).  APPEND/SUBTRACT work on LIST configs, starting from
    the current override or the config's default, as Kafka's controller does.
    """
    result = dict(current)
    for name, op, value in ops:
        if op == AlterConfigOp.SET:
            result[name] = value
        elif op == AlterConfigOp.DELETE:
            result.pop(name, None)
        elif op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            key = defaults.get(name)
            if key is None or key.type is not ConfigType.LIST:
                verb = AlterConfigOp(op).name
                raise ConfigError(f"Can't {verb} to key {name} because its type is not LIST.")
            base = result.get(name)
            if base is None:
                base = key.default_string or ""
            parts = [p for p in base.split(",") if p]
            for item in (value or "").split(","):
                if op == AlterConfigOp.APPEND:
                    if item not in parts:
                        parts.append(item)
                elif item in parts:
                    parts.remove(item)
            result[name] = ",".join(parts)
        else:
            raise ConfigError(f"Unknown operations type {op}")
    return result


# -- dynamic broker configs ---------------------------------------------------------------

DYNAMIC_CONFIG_FILE = "dynamic-broker-configs.json"  # before the metadata log held them (migrated)
ELR_FEATURE = "eligible.leader.replicas.version"
LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]+\.(.+)")
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<name>).
SSL_PER_LISTENER = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates"})
# Kafka's DynamicThreadPool configs: a change may at most double or halve the running count.
THREAD_POOLS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                "num.recovery.threads.per.data.dir", "background.threads")
_DYNAMIC_INVALID = "Invalid value org.apache.kafka.common.config.ConfigException: {} for configuration Invalid dynamic configuration"


class BrokerConfigRefused(ConfigError):
    """A dynamic broker change Kafka refuses; ``code`` is its error (INVALID_REQUEST or INVALID_CONFIG)."""

    def __init__(self, message: str, code: int = 42):
        super().__init__(message)
        self.code = code


ConfigRefused = BrokerConfigRefused  # also raised for GROUP resources (broker/group_configs.py)


def scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


def validate_broker_changes(props: Mapping[str, str], per_broker: bool = True,
                            current: Callable[[str], str | None] | None = None) -> dict[str, str]:
    """Kafka's DynamicBrokerConfig.validate for a BROKER resource's new dynamic set.

    In Kafka's order: read-only names ("Cannot update these configs dynamically"), the SSL key and
    trust store settings outside a listener prefix, per-broker names (the listener/SSL/SASL ones,
    prefixed or not) at the cluster default, then types, validators and the reconfiguration
    checks (thread pools, class names, listeners).  Names Kafka does not know are accepted and
    kept, as Kafka keeps them.  Raises BrokerConfigRefused (INVALID_REQUEST unless noted);
    returns the values to store, canonical for known names.  ``current`` gives a config's
    running value (the thread-pool rule).
    """
    table = broker_configs()

    def base(name: str) -> str:
        m = LISTENER_PREFIX.fullmatch(name)
        return m.group(1) if m else name

    read_only = [n for n in props if n in table and not table[n].dynamic]
    if read_only:
        raise BrokerConfigRefused("Cannot update these configs dynamically: " + scala_set(read_only))
    ssl = [n for n in props if n in SSL_PER_LISTENER]
    if ssl:
        raise BrokerConfigRefused("These security configs can be dynamically updated only per-listener using "
                                  "the listener prefix: HashSet(" + ", ".join(ssl) + ")")
    if not per_broker:
        at_default = [n for n in props if LISTENER_PREFIX.fullmatch(n) or
                      (n in table and table[n].mode == "per-broker")]
        if at_default:
            raise BrokerConfigRefused("Cannot update these configs at default cluster level, broker id must be "
                                      "specified: " + scala_set(at_default))
    parsed: dict[str, Any] = {}
    for name, value in props.items():  # ConfigDef.parse: every type first ...
        key = table.get(base(name))
        if key is not None and value is not None:
            parsed[name] = parse_typed(name, key.type, value)
    for name, value in parsed.items():  # ... then the validators
        key = table[base(name)]
        if key.validator is not None:
            key.validator(name, value)
    for name, value in parsed.items():
        _check_reconfiguration(base(name), name, value, table[base(name)], current)
    return {name: (to_string(table[base(name)].type, parsed[name]) if name in parsed else value)
            for name, value in props.items()}


def _check_reconfiguration(name: str, given: str, value: Any, key: ConfigKey,
                           current: Callable[[str], str | None] | None) -> None:
    """The checks Kafka's reconfigurable components make on a new value."""
    running = None
    if current is not None and (name in THREAD_POOLS or name == "log.cleaner.threads"):
        text = current(name)
        running = int(text) if text is not None else key.default
    if name in THREAD_POOLS and running is not None:
        if value > 2 * running:
            raise BrokerConfigRefused(_DYNAMIC_INVALID.format(
                f"Dynamic thread count update validation failed for {name}={value}, value should not be "
                f"greater than double the current value {running}"))
        if value < running / 2:
            raise BrokerConfigRefused(_DYNAMIC_INVALID.format(
                f"Dynamic thread count update validation failed for {name}={value}, value should be at "
                f"least half the current value {running}"))
    if name == "log.cleaner.threads" and running is not None:
        if value == 0:
            raise BrokerConfigRefused("/ by zero")  # Kafka 4.2's own answer (its check divides by it)
        if value > 2 * running:
            raise BrokerConfigRefused(_DYNAMIC_INVALID.format(
                f"Log cleaner threads cannot be increased to more than double the current value {running}"))
    if key.type is ConfigType.CLASS and value and value != key.default:
        # No JVM here: the classes Kafka would load are its defaults; anything else is not found.
        raise BrokerConfigRefused(f"Invalid value {value} for configuration {given}: Class {value} could not be found.")
    if name == "max.connections.per.ip.overrides" and value:
        for item in value.split(","):
            host, sep, count = item.strip().rpartition(":")
            if not sep:
                raise BrokerConfigRefused(f"Error parsing configuration property '{given}': begin 0, end -1, "
                                          f"length {len(item.strip())}")
            if not _INT_RE.fullmatch(count.strip()):
                raise BrokerConfigRefused(f'For input string: "{count.strip()}"')
    if name == "listeners":
        for item in value:
            if not re.fullmatch(r"[A-Za-z0-9_]+://(\[[^\]]*\]|[^:/]*):-?[0-9]+", item):
                raise BrokerConfigRefused(f"Error creating broker listeners from '[{', '.join(value)}]': "
                                          f"Unable to parse {item} to a broker endpoint")
    if name == "listener.security.protocol.map" and value:
        for item in value.split(","):
            if ":" not in item:
                raise BrokerConfigRefused(f"Error parsing configuration property '{given}': begin 0, end -1, "
                                          f"length {len(item)}")


def check_listener_update(old: Mapping[str, str], new: Mapping[str, str], listener_names: Iterable[str]) -> None:
    """Kafka 4.2 on a per-broker change (validate-only too), as answered: while the new set
    holds listener.name.<l>.* settings for one of this broker's listeners, a change of an
    unprefixed per-broker (listener / SSL / SASL) setting is refused, because those listeners
    cannot be rebuilt in place."""
    table = broker_configs()
    prefixed = {m.group(0).split(".")[2] for m in (LISTENER_PREFIX.fullmatch(n) for n in new) if m}
    existing = [name for name in listener_names if name.lower() in prefixed]
    if not existing:
        return
    changed = [n for n in set(old) | set(new) if old.get(n) != new.get(n)
               and n in table and table[n].mode == "per-broker"]
    if changed:
        raise BrokerConfigRefused(_DYNAMIC_INVALID.format(
            f"Configs cannot be updated dynamically for existing listener ListenerName({existing[0]}), restart "
            "broker or create a new listener for update"))


def check_cluster_min_insync(controller, new_default: Mapping[str, str]) -> None:
    """KIP-966: with ELR on, the cluster-level min.insync.replicas stays (INVALID_CONFIG)."""
    if elr_enabled(controller) and "min.insync.replicas" not in new_default:
        raise BrokerConfigRefused("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.", 40)


def elr_enabled(controller) -> bool:
    features = getattr(controller, "finalized_features", None) or {}
    return int(features.get(ELR_FEATURE, 1)) >= 1


def ensure_cluster_min_insync_replicas(controller) -> None:
    """KIP-966 as Kafka 4.1+ does it: while eligible.leader.replicas.version is 1 (the default of a
    new cluster) the cluster default (BROKER "") holds min.insync.replicas, written once from the
    static setting; every topic then reports it as DYNAMIC_DEFAULT_BROKER_CONFIG."""
    set_configs = getattr(controller, "set_resource_configs", None)
    if set_configs is None or not elr_enabled(controller):
        return
    current = controller.resource_configs.get((ResourceType.BROKER, ""), {})
    if "min.insync.replicas" in current:
        return
    value = controller.config.get("min.insync.replicas")
    set_configs(ResourceType.BROKER, "", {**current, "min.insync.replicas": str(value)})


class DynamicBrokerConfigs:
    """The KIP-226 dynamic broker configs: one per-broker set and the cluster-wide default.

    Kept in the metadata log as ``config`` records (broker/controller.py, KRaft's ConfigRecord);
    without a controller (unit tests of this class) in memory, or in the JSON file at ``path``.
    A JSON file left by an older minikafka is moved into the metadata log on first use.
    ``static`` is the snapshot of the settings given at start-up (file, environment, flags),
    taken before any dynamic change is pushed into the BrokerConfig.
    """

    def __init__(self, broker_config: Any, path: str | None = None, controller: Any = None):
        self.config = broker_config
        self.path = path
        self.controller = controller if getattr(controller, "set_resource_configs", None) else None
        self.node = str(getattr(broker_config, "node_id", 1))
        overrides = getattr(broker_config, "overrides", None) or {}
        self._static_typed = dict(overrides)
        self._static: dict[str, str] | None = None
        self._per_broker: dict[str, str] = {}
        self._cluster_default: dict[str, str] = {}
        if path:
            self._load()
        self._push(set(self.per_broker) | set(self.cluster_default))

    @property
    def static(self) -> dict[str, str]:
        # Stringified lazily: it needs the config table, which loads with the first DescribeConfigs.
        if self._static is None:
            table = broker_configs()
            self._static = {}
            for name, value in self._static_typed.items():
                key = table.get(name)
                if key is not None and value is not None:
                    self._static[name] = _stringify(key, value)
        return self._static

    @property
    def per_broker(self) -> dict[str, str]:
        if self.controller is not None:
            return self.controller.resource_configs.get((ResourceType.BROKER, self.node), {})
        return self._per_broker

    @property
    def cluster_default(self) -> dict[str, str]:
        if self.controller is not None:
            return self.controller.resource_configs.get((ResourceType.BROKER, ""), {})
        return self._cluster_default

    def resource(self, per_broker: bool) -> dict[str, str]:
        return self.per_broker if per_broker else self.cluster_default

    def replace(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        old = self.resource(per_broker)
        changed = set(old) | set(configs)
        if self.controller is not None:
            self.controller.set_resource_configs(ResourceType.BROKER, self.node if per_broker else "", dict(configs))
        else:
            if per_broker:
                self._per_broker = dict(configs)
            else:
                self._cluster_default = dict(configs)
            self._save()
        self._push(changed)

    def effective(self, name: str) -> str | None:
        for layer in (self.per_broker, self.cluster_default):
            if name in layer:
                return layer[name]
        if name in self._static_typed:
            return self.static.get(name)
        return None

    def _push(self, names: Iterable[str]) -> None:
        # Make the running broker see the effective value of every changed name it acts on.
        # Listener and security settings (per-broker, or listener.name.* prefixed) are kept and
        # described, not pushed: listeners and TLS contexts are built at start.
        from minikafka.broker.config import BROKER_SETTINGS

        setter = getattr(self.config, "set", None)
        unsetter = getattr(self.config, "unset", None)
        for name in names:
            if name not in BROKER_SETTINGS or LISTENER_PREFIX.fullmatch(name):
                continue
            if BROKER_SETTINGS[name].read_only:
                continue
            dynamic = self.per_broker.get(name, self.cluster_default.get(name))
            try:
                if dynamic is not None:
                    if setter is not None:
                        setter(name, dynamic)
                elif name in self._static_typed:
                    overrides = getattr(self.config, "overrides", None)
                    if overrides is not None:
                        overrides[name] = self._static_typed[name]
                elif unsetter is not None:
                    unsetter(name)
            except Exception as exc:  # a value broker.config parses differently: described, not applied
                log.debug("dynamic config %s not applied to BrokerConfig: %s", name, exc)

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return
        per_broker = {str(k): str(v) for k, v in (data.get("broker") or {}).items()}
        default = {str(k): str(v) for k, v in (data.get("default") or {}).items()}
        if self.controller is None:
            self._per_broker, self._cluster_default = per_broker, default
            return
        # An older minikafka's file: into the metadata log once, then out of the way.
        if per_broker and not self.per_broker:
            self.controller.set_resource_configs(ResourceType.BROKER, self.node, per_broker)
        if default:
            self.controller.set_resource_configs(ResourceType.BROKER, "", {**self.cluster_default, **default})
        try:
            os.replace(self.path, self.path + ".migrated")
        except OSError as exc:
            log.warning("could not rename %s after moving it into the metadata log: %s", self.path, exc)

    def _save(self) -> None:
        if not self.path:
            return
        tmp = self.path + ".tmp"
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"broker": self._per_broker, "default": self._cluster_default}, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


def _stringify(key: ConfigKey, value: Any) -> str:
    if isinstance(value, str):
        try:
            return key.canonical(value)
        except ConfigError:
            return value
    return to_string(key.type, value)


_STORE_ATTR = "_admin_dynamic_configs"


def dynamic_configs(broker: Any) -> DynamicBrokerConfigs:
    """The broker's DynamicBrokerConfigs, created on first use (a JSON file of an older minikafka
    in the data dir is moved into the metadata log then).

    Kept on the BrokerConfig itself, exactly one per config: a second one would mistake the
    dynamic values already pushed into the config for static settings.
    """
    config = broker.config
    store = getattr(config, _STORE_ATTR, None)
    if store is None:
        data_dir = getattr(config, "data_dir", None)
        path = os.path.join(data_dir, DYNAMIC_CONFIG_FILE) if data_dir else None
        store = DynamicBrokerConfigs(config, path, getattr(broker, "controller", None))
        setattr(config, _STORE_ATTR, store)
    return store


# -- DescribeConfigs entries --------------------------------------------------------------

def _synonym(name: str, value: str | None, source: ConfigSource, sensitive: bool) -> dict:
    return {"name": name, "value": None if sensitive else value, "source": int(source)}


def broker_synonyms(name: str, names: Iterable[str], store: DynamicBrokerConfigs, sensitive: bool) -> list[dict]:
    """Kafka's ConfigHelper.configSynonyms: every layer holding one of ``names``, by priority."""
    names = list(names)
    out: list[dict] = []
    layers = ((store.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (store.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
              (store.static, ConfigSource.STATIC_BROKER_CONFIG))
    for layer, source in layers:
        for n in names:
            if n in layer:
                out.append(_synonym(n, layer[n], source, sensitive))
    for n in names:
        key = broker_configs().get(n)
        if key is not None and key.default is not None:
            out.append(_synonym(n, key.default_string, ConfigSource.DEFAULT_CONFIG, sensitive))
    # Kafka drops leading entries that are not the described name itself.
    while out and out[0]["name"] != name:
        out.pop(0)
    return out


def topic_value(name: str, overrides: Mapping[str, str], store: DynamicBrokerConfigs) -> tuple[str | None, ConfigSource]:
    """Effective value of a topic config and where it came from (KafkaConfigSchema's order)."""
    key = TOPIC_CONFIGS[name]
    if name in overrides:
        return _stringify(key, overrides[name]), ConfigSource.DYNAMIC_TOPIC_CONFIG
    synonyms = TOPIC_SYNONYMS.get(name, ())
    layers = ((store.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (store.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
              (store.static, ConfigSource.STATIC_BROKER_CONFIG))
    for layer, source in layers:
        for broker_name, factor in synonyms:
            if broker_name in layer:
                value = layer[broker_name]
                if factor != 1:
                    value = str(int(value) * factor)
                return value, source
    return key.default_string, ConfigSource.DEFAULT_CONFIG


def topic_entry(name: str, overrides: Mapping[str, str], store: DynamicBrokerConfigs,
                include_synonyms: bool, include_documentation: bool) -> dict:
    """One DescribeConfigs result entry for a topic config (Kafka's createTopicConfigEntry)."""
    key = TOPIC_CONFIGS[name]
    value, _ = topic_value(name, overrides, store)
    # Kafka's value comes from LogConfig (which already folded the broker layers in), while
    # the reported source is the head of the synonym list.
    synonyms: list[dict] = []
    broker_names = TOPIC_SYNONYMS.get(name)
    if broker_names:
        first = broker_names[0][0]
        synonyms = broker_synonyms(first, BROKER_SYNONYMS.get(first, (first,)), store, key.sensitive)
    if name in overrides:
        synonyms.insert(0, _synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG, key.sensitive))
    source = synonyms[0]["source"] if synonyms else int(ConfigSource.DEFAULT_CONFIG)
    return {
        "name": name,
        "value": None if key.sensitive else value,
        "read_only": False,
        "is_default": source == ConfigSource.DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": key.sensitive,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": int(key.type),
        "documentation": key.doc if include_documentation else None,
    }


# Settings this broker has from how it runs (Kafka reads them from server.properties, so it
# describes them as STATIC_BROKER_CONFIG).
RUNTIME_STATIC = frozenset({"node.id", "broker.id", "log.dirs", "listeners", "advertised.listeners",
                            "process.roles", "inter.broker.listener.name"})


def _key(name: str) -> ConfigKey:
    key = broker_configs().get(name)
    if key is None:  # a name Kafka does not know, set dynamically or statically: kept as given
        key = ConfigKey(name, ConfigType.UNKNOWN, None, None, None, False, None, False)
    return key


def described_broker_names(store: DynamicBrokerConfigs) -> list[str]:
    """What DescribeConfigs lists for this broker without keys: Kafka's configs, and the other
    names set here (minikafka's own settings, names unknown to Kafka set dynamically), as Kafka
    lists the originals of its server.properties."""
    table = broker_configs()
    names = {n for n, k in table.items() if k.mode is not None}
    names.update(n for n in store._static_typed if n in table or LISTENER_PREFIX.fullmatch(n))
    names.update(store.per_broker)
    names.update(store.cluster_default)
    return sorted(names)


def broker_value(name: str, store: DynamicBrokerConfigs) -> str | None:
    """Current value of a broker config as this broker runs with it."""
    value = store.effective(name)
    if value is not None:
        return value
    key = _key(name)
    config = store.config
    if name in ("node.id", "broker.id"):
        return str(getattr(config, "node_id", key.default))
    if name == "log.dirs":
        return getattr(config, "data_dir", None)
    if name == "listeners":
        host, port = getattr(config, "host", None), getattr(config, "port", None)
        return f"PLAINTEXT://{host}:{port}" if host is not None else None
    if name == "advertised.listeners":
        advertised = getattr(config, "advertised", None)
        return f"PLAINTEXT://{advertised[0]}:{advertised[1]}" if advertised else None
    if name == "process.roles":
        return "broker,controller"  # one node, broker and controller in one (Kafka's combined mode)
    if name == "inter.broker.listener.name":
        listeners = config.get("listeners") if hasattr(config, "get") else ""
        first = str(listeners or "PLAINTEXT://").split(",")[0]
        return first.split("://")[0] or "PLAINTEXT"
    return key.default_string


def broker_entry(name: str, store: DynamicBrokerConfigs, per_broker: bool,
                 include_synonyms: bool, include_documentation: bool) -> dict:
    """One DescribeConfigs entry for a broker config (Kafka's createBrokerConfigEntry)."""
    key = _key(name)
    prefixed = LISTENER_PREFIX.fullmatch(name)
    read_only = not key.dynamic
    if prefixed and prefixed.group(1) in broker_configs():
        # A listener's own value (listener.name.<l>.<config>): described with the config's type,
        # read-only as Kafka reports it, the unprefixed config's layers as its further synonyms.
        base = broker_configs()[prefixed.group(1)]
        key = ConfigKey(name, base.type, None, base.doc, None, False, None, base.acted)
        read_only = True
        synonyms = (broker_synonyms(name, (name,), store, key.sensitive)
                    + broker_synonyms(base.name, BROKER_SYNONYMS.get(base.name, (base.name,)), store, key.sensitive))
    else:
        synonyms = broker_synonyms(name, BROKER_SYNONYMS.get(name, (name,)), store, key.sensitive)
    if per_broker:
        value = broker_value(name, store)
    else:
        synonyms = [s for s in synonyms if s["source"] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        value = store.cluster_default.get(name)
    # Settings that only exist at run time (listeners, log.dirs, node.id) are static.
    if (per_broker and name in RUNTIME_STATIC and value is not None
            and not any(s["source"] != ConfigSource.DEFAULT_CONFIG for s in synonyms)):
        synonyms.insert(0, _synonym(name, value, ConfigSource.STATIC_BROKER_CONFIG, key.sensitive))
    source = synonyms[0]["source"] if synonyms else int(ConfigSource.DEFAULT_CONFIG)
    return {
        "name": name,
        "value": None if key.sensitive else value,
        "read_only": read_only,
        "is_default": source == ConfigSource.DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": key.sensitive,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": int(key.type),
        "documentation": key.doc if include_documentation else None,
    }
