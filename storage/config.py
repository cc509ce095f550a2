"""Per-topic log settings under Kafka's names (``segment.bytes``, ``retention.ms`` ...).

Values come from the broker as strings (CreateTopics/AlterConfigs) or as Python values (tests),
so ``LogConfig.from_kafka`` parses both.  A bad value raises ``ValueError``; the broker turns that
into INVALID_CONFIG.  Names this module does not know are ignored: they are the broker's business.

Flush policy (the dev default, on purpose different from Kafka's "never fsync, rely on replicas"):
every append is written to the operating system (``os.write``) before it returns, so a crash of
the broker process, including ``kill -9``, loses no acknowledged write: the page cache survives the
process.  Once the oldest unflushed append is ``flush.ms`` (default 1000) old, the next append or
the broker's timer (``maybe_flush``) starts an ``fsync`` in a background thread, so appends do not
wait for the disk; only a power loss or kernel crash can lose the last second or so.  Every segment
roll and close fsyncs synchronously.  ``flush.messages=N`` fsyncs synchronously after N records
(``flush.messages=1``: every append is on disk before it returns).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

LONG_MAX = 9223372036854775807

_POLICIES = ("delete", "compact")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    cleanup_policy: str = "delete"  # "delete", "compact", "compact,delete" or "" (neither)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = 1000
    message_timestamp_type: str = "CreateTime"
    max_message_bytes: int = 1048588

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get before it rolls: on a compacted topic also no
        older than max.compaction.lag.ms, so its records can be compacted in time (KIP-354)."""
        if self.compact and 0 < self.max_compaction_lag_ms < self.segment_ms:
            return self.max_compaction_lag_ms
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_kafka(cls, configs: dict | None = None, base: "LogConfig | None" = None) -> "LogConfig":
        """Build from a dict keyed by Kafka names, on top of ``base`` (default: Kafka's defaults)."""
        base = base or cls()
        changes = {}
        for name, raw in (configs or {}).items():
            attr = name.replace(".", "_")
            if attr not in _FIELD_TYPES or raw is None:
                continue
            changes[attr] = _parse(name, _FIELD_TYPES[attr], raw)
        config = replace(base, **changes)
        config.validate()
        return config

    def to_kafka(self) -> dict[str, str]:
        """The settings as Kafka names and strings (what DescribeConfigs shows)."""
        return {f.name.replace("_", "."): str(getattr(self, f.name)) for f in fields(self)}

    def validate(self) -> None:
        if not 14 <= self.segment_bytes <= 2147483647:
            raise ValueError("segment.bytes must be between 14 and 2147483647")
        if self.segment_ms < 1:
            raise ValueError("segment.ms must be positive")
        if self.segment_index_bytes < 8:
            raise ValueError("segment.index.bytes must be at least 8")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must be >= 0")
        # retention.bytes has no lower bound in Kafka 4.2 (any negative value means no limit).
        if self.retention_ms < -1:
            raise ValueError("retention.ms must be >= -1")
        # Empty is allowed (Kafka 4.2): neither delete nor compact, so segments go only when they
        # fall below the log start offset (DeleteRecords), as with infinite retention.
        parts = [p.strip() for p in self.cleanup_policy.split(",") if p.strip()]
        if any(p not in _POLICIES for p in parts):
            raise ValueError(f"cleanup.policy must be delete, compact, both or empty, not {self.cleanup_policy!r}")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise ValueError("delete.retention.ms and min.compaction.lag.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError("max.compaction.lag.ms must be >= 1")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError("min.cleanable.dirty.ratio must be between 0 and 1")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise ValueError("flush.messages must be >= 1 and flush.ms >= 0")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError("message.timestamp.type must be CreateTime or LogAppendTime")
        if self.max_message_bytes < 0:
            raise ValueError("max.message.bytes must be >= 0")


_FIELD_TYPES = {f.name: f.type for f in fields(LogConfig)}

# Broker-level settings that supply the topic defaults (Kafka's documented synonyms).
BROKER_SYNONYMS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
}


def topic_names(configs: dict | None) -> dict:
    """Translate broker-level names (log.segment.bytes ...) to topic names; topic names pass through."""
    configs = configs or {}
    out = {BROKER_SYNONYMS[name]: value for name, value in configs.items() if name in BROKER_SYNONYMS}
    out.update((name, value) for name, value in configs.items() if name not in BROKER_SYNONYMS)
    return out


def _parse(name: str, kind: str, raw):
    try:
        if kind == "int":
            if isinstance(raw, bool):
                raise ValueError
            return int(raw)
        if kind == "float":
            return float(raw)
        if isinstance(raw, (list, tuple, set, frozenset)):
            raw = ",".join(str(p) for p in raw)
        value = str(raw).strip()
        if name == "cleanup.policy":
            value = ",".join(sorted(p.strip() for p in value.split(",") if p.strip()))
        return value
    except (TypeError, ValueError):
        raise ValueError(f"invalid value {raw!r} for {name}") from None
