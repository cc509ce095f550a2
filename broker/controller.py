"""The controller of a one-node cluster: topics, their ids, partition counts and config overrides.

State is a fold over metadata records (a state machine over a log, like Kafka's KRaft
controller): every change is appended to storage's metadata log first and then applied with
``_apply``, the same function start-up replays.  Records are small dicts:

* ``{"type": "cluster", "cluster_id": str}`` once, on first start (Kafka: meta.properties);
* ``{"type": "topic", "name", "topic_id", "num_partitions", "configs", "internal"}``;
* ``{"type": "partitions", "name", "num_partitions"}`` (CreatePartitions);
* ``{"type": "topic_configs", "name", "configs"}`` (the full override map after a change);
* ``{"type": "remove_topic", "name"}``;
* ``{"type": "producer_ids", "next": int}`` (ids below ``next`` are reserved; see producer_state);
* ``{"type": "feature_level", "name", "level"}`` (UpdateFeatures; level 0 turns the feature off);
* ``{"type": "client_quota", "entity": [[type, name or None], ...], "key", "value" or None}``
  (AlterClientQuotas; None removes the key, a None name is the default entity).
* ``{"type": "config", "resource_type": 4 or 32, "resource_name", "configs"}``: the whole dynamic
  config set of a BROKER resource ("" the cluster default, "1" this node) or a GROUP, after a
  change (KRaft: ConfigRecord; see broker/configs.py and broker/group_configs.py).
* SCRAM credentials, ACLs and delegation tokens: see broker/security/store.py.

Partition data lives in storage's LogManager, one PartitionLog per (topic, partition).
Topic names follow Kafka's rules (``Topic.validate``): 1..249 characters of ``[a-zA-Z0-9._-]``,
not ``.`` or ``..``.  Names differing only in ``.`` versus ``_`` collide in Kafka's metric names,
so Kafka refuses the second one with INVALID_TOPIC_EXCEPTION; so do we.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from minikafka.protocol.errors import ErrorCode, KafkaError

from .config import BrokerConfig, ConfigError, validate_topic_config
from .producer_state import ProducerIdManager, ProducerStateManager

log = logging.getLogger("minikafka.controller")

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


# The topics Kafka itself treats as internal (Topic.INTERNAL_TOPICS).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} contains characters other than [a-zA-Z0-9._-]"
    return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class Controller:
    def __init__(self, config: BrokerConfig, metadata_log, log_manager, *,
                 now_ms: Callable[[], int] | None = None):
        self.config = config
        self.node_id = config.node_id
        self.now_ms = now_ms
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._next_producer_id = 0
        self.finalized_features: dict[str, int] = {}
        self.client_quotas: dict[tuple, dict[str, float]] = {}
        # (config resource type, name) -> dynamic configs: BROKER ("" and the node id), GROUP
        self.resource_configs: dict[tuple[int, str], dict[str, str]] = {}
        self._replayed = True  # False while start-up replays the metadata log
        self.metadata_records = 0  # records replayed and committed: the metadata log's end offset
        self._metadata_log = metadata_log
        self._logs = log_manager
        from .security.store import SecurityStore

        # SCRAM credentials and ACLs (issue 12) live in the same log; the store applies them.
        self.security = SecurityStore(self._commit, config)
        self.scram_credentials = self.security.scram_credentials
        self._replayed = False
        for record in metadata_log.records():
            self._apply(record)
        self._replayed = True
        if self.cluster_id is None:
            self._commit({"type": "cluster", "cluster_id": new_cluster_id()})
        from .configs import ensure_cluster_min_insync_replicas

        ensure_cluster_min_insync_replicas(self)  # KIP-966, as Kafka 4.1+ at activation
        self.producer_ids = ProducerIdManager(lambda: self._next_producer_id, self._reserve_producer_ids)
        self.producer_states = ProducerStateManager()
        # A crash between a remove_topic record and the directory removal leaves partition
        # directories behind; the metadata log is the truth.
        stray = getattr(self._logs, "topics", None)
        for name in sorted(stray() - set(self.topics)) if stray is not None else ():
            log.warning("removing partition directories of unknown topic %s", name)
            self._logs.delete_topic(name)
        for info in self.topics.values():
            self._logs.open_topic(info.name, info.num_partitions, self._log_configs(info))
        if hasattr(self._logs, "__iter__"):
            self.producer_states.discard_stale_snapshots(self._logs)

    @classmethod
    def open(cls, config: BrokerConfig, *, now_ms: Callable[[], int] | None = None) -> "Controller":
        metadata_log, log_manager = open_storage(config, now_ms)
        return cls(config, metadata_log, log_manager, now_ms=now_ms)

    # -- the state machine ------------------------------------------------------------------

    def _commit(self, record: dict) -> None:
        """Write a change to the metadata log, then apply it; nothing changes if the write fails."""
        try:
            self._metadata_log.append(record)
        except OSError as exc:
            raise self._storage_error("cannot write the metadata log", exc) from exc
        self._storage_failing = False
        self._apply(record)

    def _apply(self, record: dict) -> None:
        self.metadata_records += 1
        kind = record.get("type")
        if kind == "cluster":
            self.cluster_id = record["cluster_id"]
        elif kind == "topic":
            info = TopicInfo(record["name"], uuid.UUID(str(record["topic_id"])), int(record["num_partitions"]),
                             dict(record.get("configs") or {}), bool(record.get("internal")))
            self.topics[info.name] = info
            self._by_id[info.topic_id] = info
        elif kind == "partitions":
            info = self.topics.get(record["name"])
            if info is not None:
                info.num_partitions = int(record["num_partitions"])
        elif kind == "topic_configs":
            info = self.topics.get(record["name"])
            if info is not None:
                info.configs = dict(record.get("configs") or {})
        elif kind == "remove_topic":
            info = self.topics.pop(record["name"], None)
            if info is not None:
                self._by_id.pop(info.topic_id, None)
        elif kind == "producer_ids":
            self._next_producer_id = max(self._next_producer_id, int(record["next"]))
        elif kind == "feature_level":
            # Kept at 0 too: an explicit 0 overrides the broker's default level.
            self.finalized_features[record["name"]] = int(record["level"])
        elif kind == "client_quota":
            entity = tuple((t, n) for t, n in record["entity"])
            values = self.client_quotas.setdefault(entity, {})
            if record.get("value") is None:
                values.pop(record["key"], None)
                if not values:
                    del self.client_quotas[entity]
            else:
                values[record["key"]] = float(record["value"])
        elif kind == "config":
            key = (int(record["resource_type"]), str(record["resource_name"]))
            configs = {str(k): str(v) for k, v in (record.get("configs") or {}).items()}
            if configs or (key[0] == 32 and self._replayed):
                # A group whose configs were all removed stays known until the next start (Kafka
                # 4.2 keeps listing it in ListConfigResources until its broker restarts).
                self.resource_configs[key] = configs
            else:
                self.resource_configs.pop(key, None)
        elif self.security.apply(record):
            pass
        else:
            log.warning("ignoring unknown metadata record %r", record)

    def set_feature_level(self, name: str, level: int) -> None:
        self._commit({"type": "feature_level", "name": name, "level": int(level)})
        from .configs import ensure_cluster_min_insync_replicas

        ensure_cluster_min_insync_replicas(self)

    def set_resource_configs(self, resource_type: int, name: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of a BROKER or GROUP resource (durable before visible)."""
        self._commit({"type": "config", "resource_type": int(resource_type), "resource_name": name,
                      "configs": dict(configs)})

    def alter_client_quota(self, entity: tuple, key: str, value: float | None) -> None:
        self._commit({"type": "client_quota", "entity": [list(e) for e in entity], "key": key,
                      "value": value})

    def _reserve_producer_ids(self, upto: int) -> None:
        self._commit({"type": "producer_ids", "next": upto})

    # -- queries ---------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    @staticmethod
    def valid_topic_name(name: str | None) -> bool:
        return topic_name_error(name) is None

    def log(self, topic: str, partition: int):
        """The PartitionLog of (topic, partition); KafkaError(UNKNOWN_TOPIC_OR_PARTITION) if none."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{partition}")
        plog = self._logs.get(topic, partition)
        if plog is None:
            try:
                plog = self._logs.get_or_create(topic, partition, self._log_configs(info))
            except OSError as exc:
                raise self._storage_error(f"cannot open {topic}-{partition}", exc) from exc
        return plog

    def topic_config_value(self, topic: str, name: str) -> Any:
        """Typed value of a topic setting (override or broker default)."""
        info = self.topics.get(topic)
        return self.config.topic_value(name, info.configs if info else None)

    def _log_configs(self, info: TopicInfo) -> dict[str, Any]:
        """Kafka-named settings handed to storage for this topic's logs: the topic's overrides
        over the broker settings the operator set (storage supplies the rest)."""
        result = _explicit_log_settings(self.config)
        if info.name == "__consumer_offsets":
            result["segment.bytes"] = self.config.get("offsets.topic.segment.bytes")
        result.update(info.configs)
        return result

    # -- changes ---------------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False,
                     internal: bool = False) -> TopicInfo:
        reason = topic_name_error(name)
        if reason:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for existing in self.topics:
            if existing.replace(".", "_") == collision:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {existing}")
        if num_partitions == -1:
            num_partitions = self.config.get("num.partitions")
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor == -1:
            replication_factor = self.config.get("default.replication.factor")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if replication_factor != 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): "
                             f"The target replication factor of {replication_factor} cannot be reached "
                             f"because only 1 broker(s) are registered.")
        clean = self._validate_configs(configs or {})
        info = TopicInfo(name, uuid.uuid4(), num_partitions, clean,
                         internal or name in INTERNAL_TOPICS)
        if validate_only:
            return info
        # Atomic: the partitions are opened first and the topic exists (a metadata record) only
        # once they all are; on a storage error neither is left behind.
        self._open_partitions(name, 0, num_partitions, info)
        try:
            self._commit({"type": "topic", "name": name, "topic_id": str(info.topic_id),
                          "num_partitions": num_partitions, "configs": clean, "internal": info.internal})
        except KafkaError:
            self._logs.drop_partitions(name, 0)
            raise
        info = self.topics[name]
        log.info("created topic %s id=%s partitions=%d configs=%s", name, info.topic_id, num_partitions, clean)
        return info

    def _validate_configs(self, configs: dict[str, str | None]) -> dict[str, str]:
        clean = {}
        for key, value in configs.items():
            try:
                validate_topic_config(key, value)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            clean[key] = str(value)
        try:
            from minikafka.storage.config import LogConfig

            LogConfig.from_kafka(clean)
        except ImportError:
            pass
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return clean

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
        self._commit({"type": "remove_topic", "name": name})
        self._logs.delete_topic(name)
        self.producer_states.drop_topic(name)
        log.info("deleted topic %s id=%s", name, info.topic_id)
        return info

    def create_partitions(self, name: str, new_total: int, validate_only: bool = False) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
        if new_total < info.num_partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {info.num_partitions} partitions, which is higher than "
                             f"the requested {new_total}.")
        if new_total == info.num_partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.num_partitions} partitions.")
        if validate_only:
            return info
        old_total = info.num_partitions
        self._open_partitions(name, old_total, new_total, info)
        try:
            self._commit({"type": "partitions", "name": name, "num_partitions": new_total})
        except KafkaError:
            self._logs.drop_partitions(name, old_total)
            raise
        return info

    def _open_partitions(self, name: str, first: int, end: int, info: TopicInfo) -> None:
        """Open partitions first..end-1 of a topic, or none of them (KAFKA_STORAGE_ERROR)."""
        try:
            self._logs.open_topic(name, end, self._log_configs(info))  # 0..first-1 exist already
        except OSError as exc:
            self._logs.drop_partitions(name, first)
            raise self._storage_error(f"cannot create the partitions of {name}", exc) from exc

    def _storage_error(self, what: str, exc: OSError) -> KafkaError:
        """KAFKA_STORAGE_ERROR for the request; logged once until a change is written again
        (clients retry, and a full disk would otherwise log at their pace)."""
        if not getattr(self, "_storage_failing", False):
            self._storage_failing = True
            log.error("%s: %s", what, exc)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {exc}")

    def set_topic_configs(self, name: str, configs: dict[str, str | None]) -> TopicInfo:
        """Apply overrides; a None value removes the override (back to the broker default)."""
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
        merged = dict(info.configs)
        for key, value in configs.items():
            if value is None:
                from .config import TOPIC_CONFIGS

                if key not in TOPIC_CONFIGS:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
                merged.pop(key, None)
            else:
                merged[key] = value
        clean = self._validate_configs(merged)
        self._commit({"type": "topic_configs", "name": name, "configs": clean})
        self._logs.update_topic_config(name, self._log_configs(info))
        return info

    def refresh_topic_configs(self, name: str) -> None:
        """Hand storage the topic's effective settings again (after a broker default changed);
        nothing is recorded because nothing about the topic itself changed."""
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")
        self._logs.update_topic_config(name, self._log_configs(info))

    # -- maintenance -------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Full maintenance: roll, flush, retention, compaction (storage's LogManager.tick),
        then forget idempotent-producer state whose batches are gone or expired."""
        self._logs.tick(now_ms)
        self.producer_states.expire(self._log_start_offset, now_ms,
                                    self.config.get("producer.id.expiration.ms"))
        self.producer_states.snapshot_rolled(self._existing_log)

    def clean(self) -> bool:
        """One pass of the log cleaner (storage's LogManager.clean): whether a log was compacted."""
        return self._logs.clean()

    def _existing_log(self, topic: str, partition: int):
        info = self.topics.get(topic)
        if info is None or partition >= info.num_partitions:
            return None
        return self._logs.get(topic, partition)

    def _log_start_offset(self, topic: str, partition: int) -> int | None:
        info = self.topics.get(topic)
        if info is None or partition >= info.num_partitions:
            return None
        plog = self._logs.get(topic, partition)
        return None if plog is None else plog.log_start_offset

    def light_tick(self, now_ms: int) -> None:
        """Frequent maintenance: roll segments by age and flush by flush.ms only."""
        for plog in self._logs:
            try:
                plog.maybe_roll()
                plog.maybe_flush()
            except Exception:
                log.error("maintenance of %s failed", getattr(plog, "directory", plog), exc_info=True)

    def flush(self) -> None:
        self._logs.flush()

    def close(self) -> None:
        try:
            self.producer_states.snapshot_all(self._existing_log)
            self._logs.close()
        finally:
            self._metadata_log.close()


METADATA_LOG_FILE = "metadata.log"


def open_storage(config: BrokerConfig, now_ms: Callable[[], int] | None = None):
    """Open storage's metadata log and log manager under ``config.data_dir``."""
    import os

    from minikafka.storage.manager import LogManager
    from minikafka.storage.metadata_log import MetadataLog

    os.makedirs(config.data_dir, exist_ok=True)
    metadata_log = MetadataLog(os.path.join(config.data_dir, METADATA_LOG_FILE), now_ms=now_ms)
    log_manager = LogManager(config.data_dir, _explicit_log_settings(config), now_ms=now_ms)
    return metadata_log, log_manager


def _explicit_log_settings(config: BrokerConfig) -> dict[str, Any]:
    """Broker-level log settings the operator set; storage keeps its own defaults otherwise
    (notably its flush policy, which differs from Kafka's on purpose)."""
    from .config import TOPIC_CONFIGS

    out = {}
    for topic_name, (_, broker_name) in TOPIC_CONFIGS.items():
        if not config.is_default(broker_name):
            out[topic_name] = config.get(broker_name)
    return out
