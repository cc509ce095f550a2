"""The broker's ``group.share.*`` settings the share-group side reads, and Kafka 4.2's start-up checks
of them.  Kept apart from the group manager so that a starting broker validates its settings without
loading the share-group machinery, which loads with the first share-group request (idle memory)."""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's only share-group assignor (the ``simple`` assignor); its name is part of the settings.
ASSIGNOR_NAME = "simple"


@dataclass
class ShareConfig:
    """The broker's group.share.* settings the group side uses, with Kafka 4.2's defaults."""
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    assignors: tuple[str, ...] = (ASSIGNOR_NAME,)
    initialize_retry_interval_ms: int = 30000

    @classmethod
    def from_broker_config(cls, config) -> "ShareConfig":
        def get(name, default):
            try:
                value = config.get(name)
            except Exception:  # a config without the setting
                return default
            return default if value is None else value

        assignors = get("group.share.assignors", ASSIGNOR_NAME)
        if isinstance(assignors, str):
            assignors = [a.strip() for a in assignors.split(",") if a.strip()]
        return cls(session_timeout_ms=int(get("group.share.session.timeout.ms", 45000)),
                   heartbeat_interval_ms=int(get("group.share.heartbeat.interval.ms", 5000)),
                   max_size=int(get("group.share.max.size", 200)),
                   assignors=tuple(assignors) or (ASSIGNOR_NAME,),
                   initialize_retry_interval_ms=int(get("group.share.initialize.retry.interval.ms", 30000)))


class ShareConfigError(RuntimeError):
    """group.share.* settings that contradict each other: the broker does not start (as Kafka)."""


def validate_broker_settings(config) -> None:
    """Kafka 4.2's start-up checks of the group.share.* settings (GroupCoordinatorConfig)."""
    def get(name):
        return int(config.get(name))

    names = ("group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
             "group.share.max.heartbeat.interval.ms", "group.share.session.timeout.ms",
             "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")
    hb, min_hb, max_hb, st, min_st, max_st = (get(n) for n in names)
    checks = [
        (max_hb >= min_hb, names[2], "greater than or equal to", names[1]),
        (hb >= min_hb, names[0], "greater than or equal to", names[1]),
        (hb <= max_hb, names[0], "less than or equal to", names[2]),
        (max_st >= min_st, names[5], "greater than or equal to", names[4]),
        (st >= min_st, names[3], "greater than or equal to", names[4]),
        (st <= max_st, names[3], "less than or equal to", names[5]),
        (hb < st, names[0], "less than", names[3]),
    ]
    for ok, a, relation, b in checks:
        if not ok:
            raise ShareConfigError(f"{a} must be {relation} {b}")
    size = get("group.share.max.size")
    if not 1 <= size <= 1000:
        raise ShareConfigError(f"Invalid value {size} for configuration group.share.max.size: "
                               "Value must be between 1 and 1000")
    assignors = [a.strip() for a in str(config.get("group.share.assignors")).split(",") if a.strip()]
    if len(assignors) != 1:
        raise ShareConfigError(f"group.share.assignors must contain exactly one assignor, but found {len(assignors)}")
    if assignors[0] != ASSIGNOR_NAME:
        raise ShareConfigError(f"group.share.assignors: {assignors[0]} is not a share group assignor "
                               f"(minikafka serves Kafka's {ASSIGNOR_NAME!r} assignor)")
