"""The broker's ``group.streams.*`` settings (Kafka 4.2's names, defaults and bounds) and their
start-up checks.  Kept apart from the streams group manager so that a starting broker validates its
settings without loading the streams-group machinery, which loads with the first streams request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

INT_MAX = 2147483647


@dataclass
class StreamsConfig:
    """The ``group.streams.*`` broker settings (Kafka 4.2's names, defaults and bounds)."""
    session_timeout_ms: int = 45000
    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    heartbeat_interval_ms: int = 5000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000
    max_size: int = INT_MAX
    num_standby_replicas: int = 0
    max_standby_replicas: int = 2
    initial_rebalance_delay_ms: int = 3000
    # group id -> that group's configs in force (broker/group_configs.py ``effective``: its GROUP
    # resource overrides of streams.*, else these broker values); None: these values for every group.
    group_configs: Optional[Callable[[str], dict]] = None

    def for_group(self, group_id: str, name: str) -> int:
        """The streams.<name> group config of ``group_id`` ("session.timeout.ms", ...), as Kafka's
        GroupConfig resolves it: the group's own value when set, else the broker's."""
        default = getattr(self, name.replace(".", "_"))
        if self.group_configs is None:
            return default
        return int(self.group_configs(group_id).get("streams." + name, default))

    SETTINGS = {
        "session_timeout_ms": ("group.streams.session.timeout.ms", 1),
        "min_session_timeout_ms": ("group.streams.min.session.timeout.ms", 1),
        "max_session_timeout_ms": ("group.streams.max.session.timeout.ms", 1),
        "heartbeat_interval_ms": ("group.streams.heartbeat.interval.ms", 1),
        "min_heartbeat_interval_ms": ("group.streams.min.heartbeat.interval.ms", 1),
        "max_heartbeat_interval_ms": ("group.streams.max.heartbeat.interval.ms", 1),
        "max_size": ("group.streams.max.size", 1),
        "num_standby_replicas": ("group.streams.num.standby.replicas", 0),
        "max_standby_replicas": ("group.streams.max.standby.replicas", 0),
        "initial_rebalance_delay_ms": ("group.streams.initial.rebalance.delay.ms", 0),
    }

    @classmethod
    def from_broker_config(cls, config) -> "StreamsConfig":
        values = {}
        for attr, (name, _) in cls.SETTINGS.items():
            try:
                value = config.get(name)
            except Exception:  # a config object without the setting: Kafka's default
                value = None
            if value is not None:
                values[attr] = int(value)
        out = cls(**values)
        out.validate()
        return out

    def validate(self) -> None:
        """Kafka refuses to start with these (ConfigException); so does the broker here (at start-up)."""
        for attr, (name, lowest) in self.SETTINGS.items():
            if getattr(self, attr) < lowest:
                raise ValueError(f"Invalid value {getattr(self, attr)} for configuration {name}: "
                                 f"Value must be at least {lowest}")
        checks = (
            (self.max_session_timeout_ms >= self.min_session_timeout_ms,
             "group.streams.max.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms"),
            (self.session_timeout_ms >= self.min_session_timeout_ms,
             "group.streams.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms"),
            (self.session_timeout_ms <= self.max_session_timeout_ms,
             "group.streams.session.timeout.ms must be less than or equal to group.streams.max.session.timeout.ms"),
            (self.max_heartbeat_interval_ms >= self.min_heartbeat_interval_ms,
             "group.streams.max.heartbeat.interval.ms must be greater than or equal to group.streams.min.heartbeat.interval.ms"),
            (self.heartbeat_interval_ms >= self.min_heartbeat_interval_ms,
             "group.streams.heartbeat.interval.ms must be greater than or equal to group.streams.min.heartbeat.interval.ms"),
            (self.heartbeat_interval_ms <= self.max_heartbeat_interval_ms,
             "group.streams.heartbeat.interval.ms must be less than or equal to group.streams.max.heartbeat.interval.ms"),
            (self.heartbeat_interval_ms < self.session_timeout_ms,
             "group.streams.heartbeat.interval.ms must be less than group.streams.session.timeout.ms"),
            (self.num_standby_replicas <= self.max_standby_replicas,
             "group.streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
