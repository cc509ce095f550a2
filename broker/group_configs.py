"""Group configs: ConfigResource type GROUP (32), as Kafka 4.2 serves them (KIP-848, KIP-932, KIP-1071).

Contract for the rest of the broker (consumer, share and streams groups)::

    effective(broker, group_id) -> dict[str, int | str]

returns every group config name Kafka 4.2 has (``GROUP_CONFIG_NAMES``: consumer.session.timeout.ms,
consumer.heartbeat.interval.ms, share.session.timeout.ms, share.heartbeat.interval.ms,
share.record.lock.duration.ms, share.auto.offset.reset, share.isolation.level,
streams.session.timeout.ms, streams.heartbeat.interval.ms, streams.num.standby.replicas,
streams.initial.rebalance.delay.ms) with the value in force for that group: the group's own
override when one is set, else the broker setting it defaults to (``BROKER_DEFAULTS``:
consumer.session.timeout.ms <- group.consumer.session.timeout.ms, ...), else Kafka's default.
Integers are ``int``, the two share strings ``str``.  It reads memory only (no I/O, no await),
so it is cheap enough to call on every heartbeat; a change made through the admin APIs is seen
by the next call.  ``overrides(broker, group_id)`` gives only what was set for the group.

Storage: the group's override map is a ``config`` record in the metadata log (resource type 32),
as KRaft keeps a ConfigRecord per group; it survives restarts and does not need the group to
exist (Kafka accepts configs for a group id before any member joins).

Validation is Kafka's GroupConfig.validate, checked against Kafka 4.2's answers: unknown names
("Unknown group config name: x"), types and ranges ("Invalid value x for configuration y: ..."),
then the broker's bounds ("consumer.session.timeout.ms must be greater than or equal to
group.consumer.min.session.timeout.ms", "... less than or equal to ..."), then each session
timeout against its heartbeat interval ("consumer.session.timeout.ms must be greater than
consumer.heartbeat.interval.ms", the broker's value standing in for one not given), all INVALID_CONFIG;
an empty group id is INVALID_REQUEST ("Default group resources are not allowed." when altering,
"Group name must not be empty" when describing).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from minikafka.broker import configs as cfg
from minikafka.broker.configs import ConfigSource, ResourceType
from minikafka.protocol.errors import ErrorCode

GROUP = int(ResourceType.GROUP)
INVALID_CONFIG, INVALID_REQUEST = ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST

# Group config -> the broker setting that supplies its default (Kafka's GroupCoordinatorConfig /
# ShareGroupConfig); names without one take GroupConfig's own default.
BROKER_DEFAULTS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "streams.session.timeout.ms": "group.streams.session.timeout.ms",
    "streams.heartbeat.interval.ms": "group.streams.heartbeat.interval.ms",
    "streams.num.standby.replicas": "group.streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms": "group.streams.initial.rebalance.delay.ms",
}

# (group config, broker lower bound, broker upper bound), in Kafka's order of checking.
BOUNDS = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms",
     "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
)

_DOCS = {
    "consumer.session.timeout.ms": "Session timeout of this consumer group's members (KIP-848); within the broker's "
                                   "group.consumer.min/max.session.timeout.ms.",
    "consumer.heartbeat.interval.ms": "Heartbeat interval given to this consumer group's members; within the broker's "
                                      "group.consumer.min/max.heartbeat.interval.ms.",
    "share.session.timeout.ms": "Session timeout of this share group's members.",
    "share.heartbeat.interval.ms": "Heartbeat interval given to this share group's members.",
    "share.record.lock.duration.ms": "How long a share group member holds a record it was given.",
    "share.auto.offset.reset": "Where a share group starts on a partition without a start offset: latest, "
                               "earliest or by_duration:<ISO-8601 duration>.",
    "share.isolation.level": "read_committed or read_uncommitted for this share group's fetches.",
    "streams.session.timeout.ms": "Session timeout of this streams group's members (KIP-1071).",
    "streams.heartbeat.interval.ms": "Heartbeat interval given to this streams group's members.",
    "streams.num.standby.replicas": "Standby task replicas of this streams group; at most the broker's "
                                    "group.streams.max.standby.replicas.",
    "streams.initial.rebalance.delay.ms": "Wait before this streams group's first assignment.",
}

_DURATION = re.compile(r"P(?:[0-9]+D)?(?:T(?=[0-9])(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+(?:\.[0-9]{1,9})?S)?)?",
                       re.IGNORECASE)


def _auto_offset_reset(name: str, value: Any) -> None:
    # Kafka's ShareGroupAutoOffsetResetStrategy.Validator (a java.time.Duration after by_duration:).
    text = value.strip().lower()
    if text in ("latest", "earliest"):
        return
    if text.startswith("by_duration:"):
        duration = value.strip()[len("by_duration:"):]
        if duration.upper() not in ("P", "PT") and _DURATION.fullmatch(duration):
            return
    raise cfg.invalid_value(name, value, f"Invalid value `{value}` for configuration {name}. The value must be "
                                         "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


_TABLE: dict[str, cfg.ConfigKey] | None = None


def table() -> dict[str, cfg.ConfigKey]:
    """Kafka 4.2's group configs (broker/kafka_configs.py GROUP) with our own descriptions."""
    global _TABLE
    if _TABLE is None:
        _TABLE = {name: cfg.ConfigKey(name, key.type, key.default, _DOCS.get(name, ""),
                                      _auto_offset_reset if name == "share.auto.offset.reset" else key.validator,
                                      True)
                  for name, key in cfg.group_configs().items()}
    return _TABLE


def _names() -> tuple[str, ...]:
    return tuple(sorted(table()))


def __getattr__(name: str):
    if name == "GROUP_CONFIG_NAMES":
        return _names()
    raise AttributeError(name)


def _broker_setting(broker, name: str) -> Any:
    try:
        return broker.config.get(name)
    except Exception:  # a setting this BrokerConfig does not know: Kafka's default
        key = cfg.broker_configs().get(name)
        return None if key is None else key.default


def overrides(broker, group_id: str) -> dict[str, str]:
    """The configs set for this group (strings as stored), without defaults."""
    controller = getattr(broker, "controller", None)
    stored = getattr(controller, "resource_configs", None) or {}
    return dict(stored.get((GROUP, group_id), {}))


def defaults(broker) -> dict[str, Any]:
    """The value of every group config for a group without overrides."""
    out = {}
    for name, key in table().items():
        broker_name = BROKER_DEFAULTS.get(name)
        value = _broker_setting(broker, broker_name) if broker_name else None
        out[name] = key.default if value is None else value
    return out


def effective(broker, group_id: str) -> dict[str, Any]:
    """Every group config in force for ``group_id`` (see the module's contract)."""
    values = defaults(broker)
    for name, text in overrides(broker, group_id).items():
        key = table().get(name)
        if key is not None:
            try:
                values[name] = key.parse(text)
            except cfg.ConfigError:
                pass  # stored by an older table: the default stays in force
    return values


def validate(broker, configs: Mapping[str, str | None]) -> dict[str, str]:
    """Kafka's GroupConfig.validate; returns the canonical strings to store."""
    keys = table()
    for name in configs:
        if name not in keys:
            raise cfg.ConfigRefused(f"Unknown group config name: {name}", INVALID_CONFIG)
    try:
        parsed = {name: keys[name].parse(value) for name, value in configs.items()}
    except cfg.ConfigError as exc:
        raise cfg.ConfigRefused(str(exc), INVALID_CONFIG) from None
    for name, low, high in BOUNDS:
        if name not in parsed:
            continue
        if low is not None and parsed[name] < int(_broker_setting(broker, low)):
            raise cfg.ConfigRefused(f"{name} must be greater than or equal to {low}", INVALID_CONFIG)
        if high is not None and parsed[name] > int(_broker_setting(broker, high)):
            raise cfg.ConfigRefused(f"{name} must be less than or equal to {high}", INVALID_CONFIG)
    base = defaults(broker)
    for kind in ("consumer", "share", "streams"):
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if int(parsed.get(session, base[session])) <= int(parsed.get(heartbeat, base[heartbeat])):
            raise cfg.ConfigRefused(f"{session} must be greater than {heartbeat}", INVALID_CONFIG)
    return {name: cfg.to_string(keys[name].type, value) for name, value in parsed.items()}


def alter(broker, group_id: str, configs: list[dict], incremental: bool, validate_only: bool) -> None:
    """IncrementalAlterConfigs (SET/DELETE; APPEND/SUBTRACT refused: no group config is a LIST)
    or AlterConfigs (the whole set replaced) for one group."""
    if not group_id:
        raise cfg.ConfigRefused("Default group resources are not allowed.", INVALID_REQUEST)
    current = overrides(broker, group_id)
    if incremental:
        try:
            new = cfg.apply_incremental(current, [(c["name"], c["config_operation"], c.get("value"))
                                                  for c in configs], table())
        except cfg.ConfigError as exc:
            raise cfg.ConfigRefused(str(exc), INVALID_CONFIG) from None
    else:
        new = {c["name"]: c["value"] for c in configs}
    canonical = validate(broker, new)
    if validate_only or canonical == current:
        return
    broker.controller.set_resource_configs(GROUP, group_id, canonical)
    broker._group_config_changes = changes(broker) + 1


def changes(broker) -> int:
    """How many group config changes this broker has applied since it started: a cache of
    ``effective`` is current while this number is the one it was built at (Kafka applies a group
    config change to the group's next request)."""
    return getattr(broker, "_group_config_changes", 0)


def describe(broker, group_id: str, keys, include_synonyms: bool, include_documentation: bool) -> list[dict]:
    """DescribeConfigs of a group: every group config, GROUP_CONFIG where set, else DEFAULT_CONFIG
    with the broker's value (a group need not exist)."""
    if not group_id:
        raise cfg.ConfigRefused("Group name must not be empty", INVALID_REQUEST)
    own = overrides(broker, group_id)
    values = effective(broker, group_id)
    names = sorted(table()) if not keys else [k for k in dict.fromkeys(keys) if k in table()]
    out = []
    for name in names:
        key = table()[name]
        source = ConfigSource.GROUP_CONFIG if name in own else ConfigSource.DEFAULT_CONFIG
        value = cfg.to_string(key.type, values[name])
        out.append({
            "name": name, "value": value, "read_only": False,
            "is_default": source == ConfigSource.DEFAULT_CONFIG, "config_source": int(source),
            "is_sensitive": False,
            "synonyms": [{"name": name, "value": value, "source": int(source)}] if include_synonyms else [],
            "config_type": int(key.type),
            "documentation": key.doc if include_documentation else None,
        })
    return out


__all__ = ["BROKER_DEFAULTS", "alter", "defaults", "describe", "effective", "overrides", "validate"]
