"""Broker configuration under Kafka's own setting names.

Every setting has a Kafka name (``message.max.bytes``), a type, a default and a one-line doc.
Values come from, in increasing priority: the defaults below, a TOML file (``--config-file``),
environment variables ``MINIKAFKA_<NAME>`` (dots become underscores, upper case:
``MINIKAFKA_MESSAGE_MAX_BYTES``), then command-line flags (``--override name=value`` and the
dedicated flags such as ``--port``).

Topic-level settings (``max.message.bytes``, ``retention.ms``...) are listed in
``TOPIC_CONFIGS`` with the broker setting that supplies their default, as Kafka documents them
("synonyms"), so DescribeConfigs and the log layer agree on one table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigError(ValueError):
    """A setting that does not exist or a value that does not parse."""


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("boolean is not an integer")
    if isinstance(value, int):
        return value
    return int(str(value).strip())


def _parse_double(value: Any) -> float:
    return float(str(value).strip()) if not isinstance(value, (int, float)) else float(value)


def _parse_string(value: Any) -> str:
    return str(value)


def _parse_list(value: Any) -> str:
    # Kafka's LIST type: comma separated, kept as the canonical string so it round-trips
    # through DescribeConfigs unchanged.
    if isinstance(value, (list, tuple)):
        return ",".join(str(v).strip() for v in value)
    return ",".join(part.strip() for part in str(value).split(",") if part.strip())


PARSERS: dict[str, Callable[[Any], Any]] = {
    "boolean": _parse_bool,
    "int": _parse_int,
    "long": _parse_int,
    "short": _parse_int,
    "double": _parse_double,
    "string": _parse_string,
    "list": _parse_list,
    "class": _parse_string,
    "password": _parse_string,
}


@dataclass(frozen=True)
class Setting:
    name: str
    type: str  # Kafka's ConfigDef type name: boolean, int, long, short, double, string, list
    default: Any
    doc: str
    read_only: bool = False  # Kafka's "read-only" broker configs cannot change without a restart


def _s(name, type_, default, doc, read_only=False) -> Setting:
    return Setting(name, type_, default, doc, read_only)


# Broker settings the project reads or reports.  Defaults are Kafka's unless noted.
BROKER_SETTINGS: dict[str, Setting] = {s.name: s for s in (
    _s("node.id", "int", 1, "This broker's node id (reported as broker and controller).", True),
    _s("broker.id", "int", 1, "Alias of node.id, as Kafka keeps it.", True),
    _s("listeners", "string", "",
       "Listeners NAME://host:port,...; empty: one PLAINTEXT listener on --host/--port.", True),
    _s("advertised.listeners", "string", "", "Per listener name, the address Metadata advertises.", True),
    _s("log.dirs", "string", "./data", "Data directory (same as --data-dir).", True),
    _s("auto.create.topics.enable", "boolean", True,
       "Create a topic when Metadata asks for one that does not exist (and the request allows it)."),
    _s("num.partitions", "int", 1, "Partitions of an auto-created topic or of CreateTopics with -1."),
    _s("default.replication.factor", "short", 1, "Replication factor reported for new topics (always 1 here)."),
    _s("message.max.bytes", "int", 1048588, "Largest record batch a producer may send (topic: max.message.bytes)."),
    _s("socket.request.max.bytes", "int", 104857600, "Largest request frame; bigger frames close the connection.", True),
    _s("log.segment.bytes", "int", 1073741824, "Segment size before rolling (topic: segment.bytes)."),
    _s("log.roll.ms", "long", 604800000, "Segment age before rolling (topic: segment.ms); Kafka derives it from log.roll.hours=168."),
    _s("log.roll.jitter.ms", "long", 0, "Random jitter subtracted from segment.ms (topic: segment.jitter.ms)."),
    _s("log.retention.ms", "long", 604800000, "Time retention (topic: retention.ms); -1 keeps forever."),
    _s("log.retention.bytes", "long", -1, "Size retention per partition (topic: retention.bytes); -1 unlimited."),
    _s("log.retention.check.interval.ms", "long", 300000, "How often retention runs (the maintenance tick)."),
    _s("log.cleanup.policy", "list", "delete", "delete, compact or both (topic: cleanup.policy)."),
    _s("log.cleaner.delete.retention.ms", "long", 86400000, "How long tombstones stay (topic: delete.retention.ms)."),
    _s("log.cleaner.min.compaction.lag.ms", "long", 0, "Topic: min.compaction.lag.ms."),
    _s("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Topic: max.compaction.lag.ms."),
    _s("log.cleaner.min.cleanable.ratio", "double", 0.5, "Topic: min.cleanable.dirty.ratio."),
    _s("log.cleaner.enable", "boolean", True, "Run the log cleaner (compaction of compacted topics).", True),
    _s("log.cleaner.backoff.ms", "long", 15000, "How long the cleaner sleeps when no log needs compaction."),
    _s("log.index.size.max.bytes", "int", 10485760, "Topic: segment.index.bytes."),
    _s("log.index.interval.bytes", "int", 4096, "Topic: index.interval.bytes."),
    _s("log.flush.interval.messages", "long", LONG_MAX, "Topic: flush.messages."),
    _s("log.flush.interval.ms", "long", LONG_MAX, "Topic: flush.ms (Kafka: null, i.e. the scheduler's default)."),
    _s("log.segment.delete.delay.ms", "long", 60000, "Topic: file.delete.delay.ms."),
    _s("log.preallocate", "boolean", False, "Topic: preallocate."),
    _s("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime (topic: message.timestamp.type)."),
    _s("log.message.timestamp.before.max.ms", "long", LONG_MAX, "Topic: message.timestamp.before.max.ms."),
    _s("log.message.timestamp.after.max.ms", "long", 3600000, "Topic: message.timestamp.after.max.ms (Kafka 4.x: one hour)."),
    _s("log.message.downconversion.enable", "boolean", True, "Topic: message.downconversion.enable."),
    _s("compression.type", "string", "producer", "Topic: compression.type; only 'producer' (store as sent) is honoured."),
    _s("min.insync.replicas", "int", 1, "Topic: min.insync.replicas (single node: always satisfied)."),
    _s("unclean.leader.election.enable", "boolean", False, "Topic: unclean.leader.election.enable."),
    _s("log.local.retention.ms", "long", -2, "Topic: local.retention.ms (tiered storage; unused)."),
    _s("log.local.retention.bytes", "long", -2, "Topic: local.retention.bytes (tiered storage; unused)."),
    _s("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", True),
    _s("offsets.topic.replication.factor", "short", 1, "Replication factor of __consumer_offsets (Kafka: 3).", True),
    _s("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", True),
    _s("offsets.retention.minutes", "int", 10080, "How long committed offsets of empty groups are kept."),
    _s("offsets.retention.check.interval.ms", "long", 600000, "How often expired offsets are removed."),
    _s("group.initial.rebalance.delay.ms", "int", 0,
       "Wait before the first rebalance of an empty group (Kafka: 3000; 0 here on purpose)."),
    _s("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    _s("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for."),
    _s("group.max.size", "int", INT_MAX, "Most members in one classic group."),
    # KIP-848 consumer groups (broker/group/consumer.py): Kafka's names and defaults.
    _s("group.coordinator.rebalance.protocols", "list", "classic,consumer,streams",
       "Group protocols served; without consumer, ConsumerGroupHeartbeat/Describe are not advertised; "
       "without streams, StreamsGroupHeartbeat/Describe answer UNSUPPORTED_VERSION.", True),
    _s("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of consumer-group members."),
    _s("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to consumer-group members."),
    _s("group.consumer.max.size", "int", INT_MAX, "Most members in one consumer group."),
    _s("group.consumer.assignors", "list", "uniform,range",
       "Server-side assignors; the first is used when a member names none."),
    _s("group.consumer.migration.policy", "string", "bidirectional",
       "Converting classic <-> consumer groups: disabled, upgrade, downgrade or bidirectional."),
    # Bounds of the consumer group configs (ConfigResource GROUP, broker/group_configs.py): Kafka 4.2's
    # names and defaults, read-only as in Kafka.
    _s("group.consumer.min.session.timeout.ms", "int", 45000,
       "Smallest consumer.session.timeout.ms a consumer group may be given.", True),
    _s("group.consumer.max.session.timeout.ms", "int", 60000,
       "Largest consumer.session.timeout.ms a consumer group may be given.", True),
    _s("group.consumer.min.heartbeat.interval.ms", "int", 5000,
       "Smallest consumer.heartbeat.interval.ms a consumer group may be given.", True),
    _s("group.consumer.max.heartbeat.interval.ms", "int", 15000,
       "Largest consumer.heartbeat.interval.ms a consumer group may be given.", True),
    # Share groups (KIP-932, broker/share): Kafka 4.2's names, defaults and bounds (Kafka 4.2 has none
    # for the delivery count limit and the record locks); read-only, as in Kafka.
    _s("group.share.session.timeout.ms", "int", 45000, "Session timeout of share-group members.", True),
    _s("group.share.min.session.timeout.ms", "int", 45000, "Smallest share.session.timeout.ms a group may set.", True),
    _s("group.share.max.session.timeout.ms", "int", 60000, "Largest share.session.timeout.ms a group may set.", True),
    _s("group.share.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to share-group members.", True),
    _s("group.share.min.heartbeat.interval.ms", "int", 5000, "Smallest share.heartbeat.interval.ms a group may set.", True),
    _s("group.share.max.heartbeat.interval.ms", "int", 15000, "Largest share.heartbeat.interval.ms a group may set.", True),
    _s("group.share.max.size", "int", 200, "Most members in one share group.", True),
    _s("group.share.assignors", "list", "simple", "Server-side assignor of share groups (Kafka's simple assignor).", True),
    _s("group.share.record.lock.duration.ms", "int", 30000, "How long a share consumer holds an acquired record.", True),
    _s("group.share.min.record.lock.duration.ms", "int", 15000, "Smallest share.record.lock.duration.ms a group may set.", True),
    _s("group.share.max.record.lock.duration.ms", "int", 60000, "Largest share.record.lock.duration.ms a group may set.", True),
    _s("group.share.delivery.count.limit", "int", 5, "Deliveries of a record before it is archived.", True),
    _s("group.share.partition.max.record.locks", "int", 2000, "Records in flight per share partition.", True),
    _s("group.share.max.share.sessions", "int", 2000, "Share sessions per broker.", True),
    # KIP-1071 streams groups (broker/streams): Kafka 4.2's names, defaults and bounds (checked at start-up).
    _s("group.streams.session.timeout.ms", "int", 45000, "Session timeout of streams-group members (>= 1).", True),
    _s("group.streams.min.session.timeout.ms", "int", 45000, "Smallest streams session timeout allowed (>= 1).", True),
    _s("group.streams.max.session.timeout.ms", "int", 60000, "Largest streams session timeout allowed (>= 1).", True),
    _s("group.streams.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to streams-group members (>= 1).", True),
    _s("group.streams.min.heartbeat.interval.ms", "int", 5000, "Smallest streams heartbeat interval allowed (>= 1).", True),
    _s("group.streams.max.heartbeat.interval.ms", "int", 15000, "Largest streams heartbeat interval allowed (>= 1).", True),
    _s("group.streams.max.size", "int", INT_MAX, "Most members in one streams group (>= 1).", True),
    _s("group.streams.num.standby.replicas", "int", 0, "Standby replicas of each stateful task (>= 0).", True),
    _s("group.streams.max.standby.replicas", "int", 2, "Largest group.streams.num.standby.replicas allowed (>= 0).", True),
    _s("group.streams.initial.rebalance.delay.ms", "int", 3000,
       "Wait before the first assignment of a new streams group (>= 0).", True),
    _s("transactional.id.expiration.ms", "int", 604800000, "How long an idle transactional id is kept."),
    _s("transaction.max.timeout.ms", "int", 900000, "Largest transaction timeout a producer may ask for."),
    _s("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", True),
    # Transactions (broker/txn): how often idle transactional ids are looked for.
    _s("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
       "How often transactional ids idle longer than transactional.id.expiration.ms are removed."),
    # The share coordinator (broker/share/state): Kafka 4.2's names and defaults (ShareCoordinatorConfig).
    _s("share.coordinator.state.topic.num.partitions", "int", 50, "Partitions of __share_group_state.", True),
    _s("share.coordinator.state.topic.replication.factor", "short", 1,
       "Replication factor of __share_group_state (Kafka: 3; one node here).", True),
    _s("share.coordinator.state.topic.min.isr", "short", 1, "min.insync.replicas of __share_group_state (Kafka: 2).", True),
    _s("share.coordinator.state.topic.segment.bytes", "int", 104857600, "Segment size of __share_group_state.", True),
    _s("share.coordinator.snapshot.update.records.per.snapshot", "int", 500,
       "ShareUpdate records written between two ShareSnapshot records of a share partition (0-500).", True),
    _s("share.coordinator.state.topic.prune.interval.ms", "int", 300000,
       "How often __share_group_state is pruned below the oldest record still needed.", True),
    _s("share.coordinator.cold.partition.snapshot.interval.ms", "int", 300000,
       "How long a share partition may go without a snapshot before one is written.", True),
    _s("producer.id.expiration.ms", "int", 86400000, "How long an idle idempotent producer's state is kept."),
    _s("delete.topic.enable", "boolean", True, "Whether DeleteTopics is allowed."),
    _s("replica.fetch.max.bytes", "int", 1048576, "Reported only."),
    _s("fetch.max.bytes", "int", 57671680, "Largest Fetch response the broker builds."),
    _s("queued.max.requests", "int", 500, "Requests in flight per connection before reading pauses (Kafka: per broker)."),
    _s("connections.max.idle.ms", "long", 600000,
       "Close connections idle (no bytes in or out, nothing in flight) this long; -1 never."),
    _s("num.io.threads", "int", 8, "Reported only (one event loop here)."),
    _s("num.network.threads", "int", 3, "Reported only (one event loop here)."),
    _s("log.flush.on.shutdown", "boolean", True, "minikafka: flush and mark clean on SIGINT/SIGTERM."),
    _s("socket.send.buffer.high.water.bytes", "int", 4 * 1024 * 1024,
       "minikafka: stop reading requests while a connection's unsent responses exceed this."),
    _s("http.port", "int", -1,
       "minikafka: port of the HTTP server (control API, metrics, health, console); -1 off, 0 a free port.", True),
    _s("http.host", "string", "127.0.0.1", "minikafka: address the HTTP server binds (loopback by default).", True),
    _s("http.max.request.bytes", "int", 16 * 1024 * 1024, "minikafka: largest HTTP request body.", True),
    _s("decompression.max.ratio", "int", 64,
       "minikafka: a compressed batch may inflate to at most this many times max.message.bytes "
       "(and never past 256 MiB); larger ones are refused with RECORD_LIST_TOO_LARGE."),
    # Test kit (issue 9): the control API (faults, clock) on the HTTP server.
    _s("http.control.enable", "boolean", False,
       "minikafka: serve the control API for tests (faults, clock, waits) under /control on the HTTP server.", True),
    _s("maintenance.interval.ms", "long", 1000, "minikafka: period of the maintenance task (LogManager.tick)."),
    # issue 14: bounded request memory, connection log summary, quotas, client telemetry
    _s("queued.max.request.bytes", "long", 268435456,
       "Bytes of received, unanswered requests across connections before reading pauses, half-received "
       "frames counted at their declared size (Kafka: -1, unbounded)."),
    _s("queued.max.request.bytes.per.connection", "long", 67108864,
       "minikafka: the same bound per connection; -1 unbounded."),
    _s("connections.summary.interval.ms", "long", 60000,
       "minikafka: period of the INFO line counting connections opened/closed (only when they changed)."),
    _s("quota.window.num", "int", 11, "Samples of the client-quota rate."),
    _s("quota.window.size.seconds", "int", 1, "Length of one client-quota sample."),
    _s("client.telemetry.enable", "boolean", False,
       "minikafka: serve KIP-714 client telemetry (GetTelemetrySubscriptions/PushTelemetry) and keep what clients push."),
    _s("client.telemetry.metrics", "list", "*",
       "minikafka: metric name prefixes requested from clients; * requests every metric."),
    _s("client.telemetry.push.interval.ms", "int", 30000, "minikafka: how often clients push their metrics."),
    _s("telemetry.max.bytes", "int", 1048576, "Largest metrics payload a client may push."),
    _s("max.request.partition.size.limit", "int", 2000,
       "Most partitions in one DescribeTopicPartitions response (the request may ask for fewer)."),
    # issue 14: incremental fetch sessions (KIP-227)
    _s("max.incremental.fetch.session.cache.slots", "int", 1000, "Most incremental fetch sessions kept."),
    _s("fetch.session.eviction.ms", "long", 120000,
       "minikafka: a fetch session unused this long may be evicted for a new one (Kafka fixes 120000)."),
    # issue 23: the schema registry (broker/schema_registry/), off unless listeners are set.
    _s("schema.registry.listeners", "list", "",
       "minikafka: Confluent-compatible Schema Registry listeners, http://host:port or https://host:port "
       "(TLS from the broker's ssl.keystore.* PEM settings); empty: no registry.", True),
    _s("schema.registry.authentication.method", "string", "NONE",
       "minikafka: NONE, or BASIC (HTTP basic auth against the broker's SCRAM and PLAIN users).", True),
    _s("schema.registry.topic", "string", "_schemas", "minikafka: the compacted topic the registry keeps its state in.",
       True),
    # Security (issue 12, broker/security/): listeners, TLS, SASL, ACLs.  Each ssl.* / sasl.*
    # setting may also be given per listener as listener.name.<listener>.<setting>.
    _s("listener.security.protocol.map", "string",
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "Listener name -> security protocol.", True),
    _s("ssl.keystore.type", "string", "PEM", "Only PEM key stores are supported.", True),
    _s("ssl.keystore.location", "string", "", "PEM file with the private key and certificate chain.", True),
    _s("ssl.keystore.certificate.chain", "password", "", "Inline PEM certificate chain.", True),
    _s("ssl.keystore.key", "password", "", "Inline PEM private key.", True),
    _s("ssl.key.password", "password", "", "Password of an encrypted private key.", True),
    _s("ssl.truststore.type", "string", "PEM", "Only PEM trust stores are supported.", True),
    _s("ssl.truststore.location", "string", "", "PEM file of CAs client certificates must chain to.", True),
    _s("ssl.truststore.certificates", "password", "", "Inline PEM CA certificates.", True),
    _s("ssl.client.auth", "string", "none", "none, requested or required.", True),
    _s("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions offered.", True),
    _s("ssl.principal.mapping.rules", "string", "DEFAULT", "Certificate subject -> principal name rules.", True),
    _s("sasl.enabled.mechanisms", "list", "GSSAPI",
       "SASL mechanisms offered (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; GSSAPI is not served).", True),
    _s("sasl.jaas.config", "password", "",
       "PLAIN users as user_<name>=\"<password>\" (usually set as listener.name.<l>.plain.sasl.jaas.config).", True),
    _s("connections.max.reauth.ms", "long", 0, "SASL session lifetime (KIP-368); 0 = no limit."),
    _s("connection.failed.authentication.delay.ms", "int", 100,
       "Delay of the answer to a failed authentication and of the close after it (KIP-306); 0 = none."),
    _s("authorizer.class.name", "string", "", "Set (e.g. org.apache.kafka.metadata.authorizer.StandardAuthorizer) to enforce ACLs.", True),
    _s("super.users", "string", "", "Principals allowed everything: User:admin;User:broker.", True),
    _s("allow.everyone.if.no.acl.found", "boolean", False, "Allow access to resources without any ACL."),
    _s("sasl.oauthbearer.expected.audience", "list", "", "OAUTHBEARER (unsecured): required aud values.", True),
    _s("sasl.oauthbearer.sub.claim.name", "string", "sub", "OAUTHBEARER (unsecured): principal claim.", True),
    _s("sasl.oauthbearer.scope.claim.name", "string", "scope", "OAUTHBEARER (unsecured): scope claim.", True),
    _s("sasl.oauthbearer.allowable.clock.skew.ms", "long", 0, "OAUTHBEARER (unsecured): clock skew.", True),
    # Delegation tokens (KIP-48, issue 20, broker/security/tokens.py): off without a secret key.
    _s("delegation.token.secret.key", "password", "",
       "Key of the tokens' HMAC; unset: the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED.", True),
    _s("delegation.token.max.lifetime.ms", "long", 604800000, "Longest a token lives, renewals included.", True),
    _s("delegation.token.expiry.time.ms", "long", 86400000, "How long a token lives unless renewed.", True),
    _s("delegation.token.expiry.check.interval.ms", "long", 3600000,
       "How often expired tokens are removed (broker time).", True),
)}

# Topic-level settings: (type, broker synonym supplying the default).  Values are stored as
# strings, as in Kafka's topic config records.
TOPIC_CONFIGS: dict[str, tuple[str, str]] = {
    "cleanup.policy": ("list", "log.cleanup.policy"),
    "compression.type": ("string", "compression.type"),
    "delete.retention.ms": ("long", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("long", "log.segment.delete.delay.ms"),
    "flush.messages": ("long", "log.flush.interval.messages"),
    "flush.ms": ("long", "log.flush.interval.ms"),
    "index.interval.bytes": ("int", "log.index.interval.bytes"),
    "local.retention.bytes": ("long", "log.local.retention.bytes"),
    "local.retention.ms": ("long", "log.local.retention.ms"),
    "max.compaction.lag.ms": ("long", "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("int", "message.max.bytes"),
    "message.downconversion.enable": ("boolean", "log.message.downconversion.enable"),
    "message.timestamp.after.max.ms": ("long", "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": ("long", "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": ("string", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("double", "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("long", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("int", "min.insync.replicas"),
    "preallocate": ("boolean", "log.preallocate"),
    "retention.bytes": ("long", "log.retention.bytes"),
    "retention.ms": ("long", "log.retention.ms"),
    "segment.bytes": ("int", "log.segment.bytes"),
    "segment.index.bytes": ("int", "log.index.size.max.bytes"),
    "segment.jitter.ms": ("long", "log.roll.jitter.ms"),
    "segment.ms": ("long", "log.roll.ms"),
    "unclean.leader.election.enable": ("boolean", "unclean.leader.election.enable"),
}

_EMPTY_LIST_OK = {"cleanup.policy", "log.cleanup.policy"}

_ENUMS = {
    "cleanup.policy": {"delete", "compact"},
    "log.cleanup.policy": {"delete", "compact"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
    "log.message.timestamp.type": {"CreateTime", "LogAppendTime"},
    "compression.type": {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"},
}


def parse_value(name: str, type_: str, value: Any) -> Any:
    """Parse ``value`` as Kafka's ``type_``; raises ConfigError with a readable message."""
    try:
        parsed = PARSERS[type_](value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"invalid value {value!r} for {name} ({type_}): {exc}") from None
    allowed = _ENUMS.get(name)
    if allowed is not None:
        if type_ == "list":
            raw_parts = [] if not str(value).strip() else [p.strip() for p in str(value).split(",")]
            if "" in raw_parts:  # "compact,,delete": an empty element, refused as Kafka's ValidList does
                raise ConfigError(f"Configuration '{name}' values must not be empty.")
            parts = raw_parts
        else:
            parts = [parsed]
        bad = [p for p in parts if p not in allowed]
        # An empty list is a value of its own for the lists that allow it (cleanup.policy "" in
        # Kafka 4.2: neither delete nor compact, so nothing is removed but below the log start).
        if bad or (not parts and name not in _EMPTY_LIST_OK):
            raise ConfigError(f"invalid value {value!r} for {name}: allowed {sorted(allowed)}")
    if type_ in ("int", "short") and not (-(2 ** 31) <= parsed < 2 ** 31):
        raise ConfigError(f"value {value!r} for {name} does not fit an int")
    return parsed


def validate_topic_config(name: str, value: str | None) -> Any:
    """Parse one topic-level override; ConfigError for unknown names or bad values."""
    if name not in TOPIC_CONFIGS:
        raise ConfigError(f"unknown topic config {name!r}")
    if value is None:
        raise ConfigError(f"null value for topic config {name!r}")
    return parse_value(name, TOPIC_CONFIGS[name][0], value)


def format_value(value: Any) -> str:
    """A typed value as Kafka prints it (booleans lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kafka_key(name: str):
    """Kafka 4.2's definition of a broker config this module does not list (loads Kafka's table,
    broker/kafka_configs.py, only when such a name is given)."""
    from .configs import broker_configs

    key = broker_configs().get(name)
    return key if key is not None and key.mode is not None else None


def env_name(kafka_name: str) -> str:
    return "MINIKAFKA_" + kafka_name.replace(".", "_").replace("-", "_").upper()


class Endpoint(tuple):
    """A (host, port) pair that also answers ``endpoint()`` with itself."""

    def __call__(self) -> "Endpoint":
        return self


@dataclass
class BrokerConfig:
    node_id: int = 1
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: str = "./data"
    log_level: str = "INFO"
    # Kafka-named settings explicitly set (typed); everything else falls back to the default.
    overrides: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        if name in ("node.id", "broker.id"):
            return self.node_id
        if name == "log.dirs":
            return self.data_dir
        try:
            return BROKER_SETTINGS[name].default
        except KeyError:
            pass
        key = _kafka_key(name)
        if key is None:
            raise ConfigError(f"unknown broker setting {name!r}")
        return key.default

    def set(self, name: str, value: Any) -> None:
        """Set a Kafka-named setting from a string/TOML value (validated)."""
        setting = BROKER_SETTINGS.get(name)
        if setting is None and name.startswith("listener.name."):
            # Per-listener security settings (Kafka's prefix): kept as given, read by
            # broker.security.listeners.Listener.setting().
            self.overrides[name] = str(value)
            return
        if setting is None:
            # A Kafka broker config minikafka does not act on: accepted as Kafka accepts it
            # (its type and validator) and described, nothing more.
            key = _kafka_key(name)
            if key is None:
                raise ConfigError(f"unknown broker setting {name!r}")
            from .configs import ConfigError as KafkaConfigError, to_string

            try:
                self.overrides[name] = key.parse(value if isinstance(value, str) else to_string(key.type, value))
            except KafkaConfigError as exc:
                raise ConfigError(str(exc)) from None
            return
        parsed = parse_value(name, setting.type, value)
        if name in ("node.id", "broker.id"):
            self.node_id = parsed
        elif name == "log.dirs":
            self.data_dir = parsed
        else:
            self.overrides[name] = parsed

    def unset(self, name: str) -> None:
        self.overrides.pop(name, None)

    def is_default(self, name: str) -> bool:
        return name not in self.overrides

    def topic_default(self, topic_config: str) -> Any:
        """The broker-level value a topic setting falls back to."""
        return self.get(TOPIC_CONFIGS[topic_config][1])

    def topic_value(self, topic_config: str, topic_overrides: Mapping[str, str] | None) -> Any:
        """Typed value of a topic setting: the topic override if any, else the broker default."""
        if topic_overrides and topic_config in topic_overrides:
            return parse_value(topic_config, TOPIC_CONFIGS[topic_config][0], topic_overrides[topic_config])
        return self.topic_default(topic_config)

    @property
    def advertised(self) -> "Endpoint":
        """(host, port) clients are told to connect to.  Also callable (``config.advertised()``)
        because both spellings are in use in the handlers."""
        host = self.advertised_host or self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return Endpoint((host, self.advertised_port or self.port))

    # -- loading ---------------------------------------------------------------------------

    _FIELD_KEYS = {
        "host": "host", "port": "port", "advertised-host": "advertised_host",
        "advertised_host": "advertised_host", "advertised-port": "advertised_port",
        "advertised_port": "advertised_port", "data-dir": "data_dir", "data_dir": "data_dir",
        "node-id": "node_id", "node_id": "node_id", "log-level": "log_level", "log_level": "log_level",
        # Dotted spellings (tests pass overrides as dotted names; Kafka < 3 had advertised.port).
        "advertised.host": "advertised_host", "advertised.host.name": "advertised_host",
        "advertised.port": "advertised_port", "data.dir": "data_dir", "log.level": "log_level",
    }

    def apply_mapping(self, values: Mapping[str, Any], source: str) -> None:
        """Apply a flat mapping of field names or Kafka names (TOML file, tests)."""
        for key, value in values.items():
            if isinstance(value, dict):
                # A TOML table such as [log] retention.ms = 1 ... flattens to dotted names.
                self.apply_mapping({f"{key}.{k}": v for k, v in value.items()}, source)
                continue
            attr = self._FIELD_KEYS.get(key)
            try:
                if attr is not None:
                    self._set_field(attr, value)
                else:
                    self.set(key, value)
            except ConfigError as exc:
                raise ConfigError(f"{source}: {exc}") from None

    def _set_field(self, attr: str, value: Any) -> None:
        if attr in ("port", "advertised_port", "node_id"):
            value = parse_value(attr, "int", value)
            if attr != "node_id" and not 0 <= value <= 65535:
                raise ConfigError(f"{attr} {value} outside 0..65535")
        else:
            value = str(value)
        setattr(self, attr, value)

    def apply_env(self, environ: Mapping[str, str]) -> None:
        by_env = {env_name(name): name for name in BROKER_SETTINGS}
        fields = {"MINIKAFKA_HOST": "host", "MINIKAFKA_PORT": "port",
                  "MINIKAFKA_ADVERTISED_HOST": "advertised_host",
                  "MINIKAFKA_ADVERTISED_PORT": "advertised_port",
                  "MINIKAFKA_DATA_DIR": "data_dir", "MINIKAFKA_LOG_LEVEL": "log_level"}
        for key, value in environ.items():
            if not key.startswith("MINIKAFKA_"):
                continue
            try:
                if key in fields:
                    self._set_field(fields[key], value)
                elif key in by_env:
                    self.set(by_env[key], value)
            except ConfigError as exc:
                raise ConfigError(f"environment {key}: {exc}") from None

    @classmethod
    def load(cls, *, config_file: str | None = None, environ: Mapping[str, str] | None = None,
             fields: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None
             ) -> "BrokerConfig":
        """Defaults < TOML file < environment < explicit fields and overrides (the command line)."""
        config = cls()
        if config_file:
            import tomllib  # only with a file: the parser is a few ms of every start otherwise

            try:
                with open(config_file, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read config file {config_file}: {exc}") from None
            config.apply_mapping(data, config_file)
        config.apply_env(os.environ if environ is None else environ)
        for key, value in (fields or {}).items():
            if value is not None:
                config._set_field(key, value)
        for key, value in (overrides or {}).items():
            try:
                if key in cls._FIELD_KEYS:
                    config._set_field(cls._FIELD_KEYS[key], value)
                else:
                    config.set(key, value)
            except ConfigError as exc:
                raise ConfigError(f"--override {key}: {exc}") from None
        config.check_group_bounds()
        return config

    # (setting, lower bound, upper bound) of the consumer, share and streams groups' timeouts.
    _GROUP_BOUNDS = tuple(
        (f"group.{kind}.{what}", f"group.{kind}.min.{what}", f"group.{kind}.max.{what}")
        for kind in ("consumer", "share", "streams")
        for what in ("heartbeat.interval.ms", "session.timeout.ms"))

    def check_group_bounds(self) -> None:
        """Kafka refuses to start when a group timeout lies outside its own min/max settings
        ("group.consumer.session.timeout.ms must be greater than or equal to
        group.consumer.min.session.timeout.ms"), or a heartbeat interval is not below the session
        timeout; so does this broker (ConfigError, before anything is opened)."""
        for name, low, high in self._GROUP_BOUNDS:
            value = self.get(name)
            if value < self.get(low):
                raise ConfigError(f"{name} must be greater than or equal to {low}")
            if value > self.get(high):
                raise ConfigError(f"{name} must be less than or equal to {high}")
        for kind in ("consumer", "share", "streams"):
            heartbeat, session = f"group.{kind}.heartbeat.interval.ms", f"group.{kind}.session.timeout.ms"
            if self.get(heartbeat) >= self.get(session):
                raise ConfigError(f"{heartbeat} must be less than {session}")
