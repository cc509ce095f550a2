"""Issue 20, configs: every broker config Kafka 4.2 describes, the dynamic update modes
(read-only, per-broker, cluster-wide) and their refusals, KIP-966's cluster-level
min.insync.replicas, GROUP config resources, and AlterUserScramCredentials naming a user twice.

Changes that would alter what other scenarios see (a dynamic broker value) run with
validate_only, or on the "acl" pair with settings nothing else reads."""

from __future__ import annotations

from ..engine import scenario
from .common import create_topic, ok, sort_by

BROKER, GROUP, TOPIC = 4, 32, 2


def _ops(*ops):
    return [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]


def _res(rtype, name, *ops):
    return {"resource_type": rtype, "resource_name": name, "configs": _ops(*ops)}


@scenario
def describe_every_broker_config(ctx):
    """A DescribeConfigs of broker 1 without keys: every name, default, source, type and synonym."""
    for v in ctx.versions(32):
        ctx.call(32, v, {"resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": None}],
                         "include_synonyms": v >= 1, "include_documentation": v >= 3},
                 label="broker 1, every config", scoped=sort_by("name"))
    ctx.call(32, 4, {"resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": [
        "sasl.kerberos.min.time.before.relogin", "log.cleaner.threads", "background.threads", "ssl.keystore.type",
        "max.connections.per.ip.overrides", "log.cleaner.io.max.bytes.per.second", "process.roles",
        "group.consumer.min.session.timeout.ms", "group.share.max.record.lock.duration.ms",
        "group.streams.max.standby.replicas", "no.such.config"]}],
        "include_synonyms": True, "include_documentation": False}, label="broker 1, named configs Kafka alone had")


@scenario
def broker_update_modes(ctx):
    """IncrementalAlterConfigs / AlterConfigs (validate only) on the per-broker and cluster-default
    resources: which names each mode takes, and Kafka's refusals in its order."""
    cases = {
        "per-broker SASL setting on broker 1": [_res(BROKER, "1", ("sasl.kerberos.min.time.before.relogin", 0, "30000"))],
        "per-broker SASL setting at the cluster default": [
            _res(BROKER, "", ("sasl.kerberos.min.time.before.relogin", 0, "30000"))],
        "listener-prefixed SASL setting": [
            _res(BROKER, "1", ("listener.name.plaintext.sasl.kerberos.min.time.before.relogin", 0, "30000"))],
        "listener-prefixed at the cluster default": [
            _res(BROKER, "", ("listener.name.plaintext.sasl.kerberos.min.time.before.relogin", 0, "30000"))],
        "SSL key store without a listener prefix": [_res(BROKER, "1", ("ssl.keystore.location", 0, "/nope"))],
        "SSL key store at the cluster default": [_res(BROKER, "", ("ssl.truststore.type", 0, "PEM"))],
        "SSL key store with a listener prefix": [
            _res(BROKER, "1", ("listener.name.plaintext.ssl.keystore.type", 0, "PEM"))],
        "other per-broker security settings": [_res(BROKER, "1", ("ssl.client.auth", 0, "required"),
                                                    ("sasl.enabled.mechanisms", 0, "PLAIN,SCRAM-SHA-256"),
                                                    ("ssl.enabled.protocols", 0, "TLSv1.3"))],
        "read-only before per-broker at the default": [
            _res(BROKER, "", ("broker.id", 0, "3"), ("ssl.keystore.location", 0, "/x"))],
        "not a number": [_res(BROKER, "1", ("sasl.kerberos.min.time.before.relogin", 0, "soon"))],
        "types before ranges": [_res(BROKER, "", ("log.segment.bytes", 0, "1"), ("message.max.bytes", 0, "x"))],
        "below the range": [_res(BROKER, "", ("log.segment.bytes", 0, "1000"))],
        "a name Kafka does not know": [_res(BROKER, "1", ("no.such.config", 0, "1"))],
        "unknown name appended": [_res(BROKER, "", ("no.such.config", 2, "x"))],
        "append to an INT": [_res(BROKER, "", ("min.insync.replicas", 2, "2"))],
        "append to a read-only LIST": [_res(BROKER, "1", ("log.dirs", 2, "/x"))],
        "subtract from log.cleanup.policy": [_res(BROKER, "", ("log.cleanup.policy", 3, "delete"))],
        "thread pools halved or doubled": [_res(BROKER, "", ("num.io.threads", 0, "4"), ("num.network.threads", 0, "6"))],
        "thread pool more than doubled": [_res(BROKER, "", ("num.io.threads", 0, "17"))],
        "thread pool below half": [_res(BROKER, "", ("background.threads", 0, "4"))],
        "cleaner threads doubled": [_res(BROKER, "", ("log.cleaner.threads", 0, "2"))],
        "cleaner threads more than doubled": [_res(BROKER, "", ("log.cleaner.threads", 0, "3"))],
        "cleaner threads negative": [_res(BROKER, "1", ("log.cleaner.threads", 0, "-1"))],
        "a class Kafka cannot load": [_res(BROKER, "1", ("ssl.engine.factory.class", 0, "no.Such"))],
        "connection overrides": [_res(BROKER, "", ("max.connections.per.ip.overrides", 0, "127.0.0.1:5,localhost:7"))],
        "connection overrides without a count": [_res(BROKER, "", ("max.connections.per.ip.overrides", 0, "bad"))],
        "connection overrides, count not a number": [
            _res(BROKER, "", ("max.connections.per.ip.overrides", 0, "127.0.0.1:x"))],
        "cluster-wide settings minikafka does not act on": [
            _res(BROKER, "", ("log.cleaner.io.max.bytes.per.second", 0, "1000000"), ("max.connections", 0, "100"),
                 ("remote.log.reader.threads", 0, "12"), ("transaction.partition.verification.enable", 0, "false"))],
        "the gzip level rule": [_res(BROKER, "", ("compression.gzip.level", 0, "0"))],
        "removing the cluster-level min.insync.replicas": [_res(BROKER, "", ("min.insync.replicas", 1, None))],
        "cluster-level min.insync.replicas below 1": [_res(BROKER, "", ("min.insync.replicas", 0, "0"))],
    }
    for label, resources in cases.items():
        ctx.call(44, 1, {"resources": resources, "validate_only": True}, label=label)
    for v in ctx.versions(33):
        ctx.call(33, v, {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "value": "60000"}]}], "validate_only": True},
            label="AlterConfigs of the cluster default without min.insync.replicas")
        ctx.call(33, v, {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
            {"name": "min.insync.replicas", "value": "1"}, {"name": "log.retention.ms", "value": "60000"}]}],
            "validate_only": True}, label="AlterConfigs of the cluster default keeping min.insync.replicas")
        ctx.call(33, v, {"resources": [{"resource_type": BROKER, "resource_name": "1", "configs": [
            {"name": "broker.id", "value": "3"}, {"name": "zzz", "value": "1"}]}], "validate_only": True},
            label="AlterConfigs with a read-only and an unknown name")


@scenario
def cluster_min_insync_replicas(ctx):
    """KIP-966 (eligible.leader.replicas.version 1): the cluster default holds min.insync.replicas,
    and every topic reports it from there."""
    topic = ctx.name("mir")
    create_topic(ctx, topic)
    ctx.call(32, 4, {"resources": [{"resource_type": BROKER, "resource_name": "", "configuration_keys": None}],
                     "include_synonyms": True, "include_documentation": False}, label="cluster default")
    for v in ctx.versions(32):
        ctx.call(32, v, {"resources": [{"resource_type": TOPIC, "resource_name": topic,
                                        "configuration_keys": ["min.insync.replicas"]}],
                         "include_synonyms": v >= 1}, label="a topic's min.insync.replicas")


@scenario(profile="acl")
def broker_per_broker_values(ctx):
    """A per-broker SASL setting minikafka keeps but does not act on (librdkafka's broker tests set
    sasl.kerberos.min.time.before.relogin) and a listener-prefixed one: set, described, the
    unprefixed one refused while the listener has its own settings, then removed."""
    name = "sasl.kerberos.min.time.before.relogin"
    prefixed = "listener.name.plaintext.sasl.kerberos.ticket.renew.jitter"

    def await_value(key, value):
        ctx.setup(32, 4, {"resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": [key]}]},
                  retries=80, expect=lambda o: ok(o) and any(c["value"] == value for c in o["results"][0]["configs"]))

    def await_absent(key):
        ctx.setup(32, 4, {"resources": [{"resource_type": BROKER, "resource_name": "1", "configuration_keys": [key]}]},
                  retries=80, expect=lambda o: ok(o) and not o["results"][0]["configs"])

    def describe(label):
        ctx.call(32, 4, {"resources": [{"resource_type": BROKER, "resource_name": "1",
                                        "configuration_keys": [name, prefixed]}],
                         "include_synonyms": True}, label=label)

    ctx.call(44, 1, {"resources": [_res(BROKER, "1", (name, 0, "58000"))], "validate_only": False}, label="set")
    await_value(name, "58000")
    describe("described after the change")
    ctx.call(44, 1, {"resources": [_res(BROKER, "1", (prefixed, 0, "0.1"))], "validate_only": False},
             label="set a listener's own value")
    await_value(prefixed, "0.1")
    describe("described with the listener's value")
    ctx.call(44, 1, {"resources": [_res(BROKER, "1", (name, 0, "59000"))], "validate_only": True},
             label="change the unprefixed one, validate only")
    ctx.call(44, 1, {"resources": [_res(BROKER, "1", (name, 0, "59000"))], "validate_only": False},
             label="change the unprefixed one while the listener has its own")
    ctx.call(44, 1, {"resources": [_res(BROKER, "1", (prefixed, 1, None))], "validate_only": False},
             label="remove the listener's value")
    await_absent(prefixed)
    ctx.call(44, 1, {"resources": [_res(BROKER, "1", (name, 1, None))], "validate_only": False}, label="removed")
    await_value(name, "60000")
    describe("described after the removal")


def _await_group_value(ctx, group, name, value):
    def shows(o):
        return ok(o) and any(c["name"] == name and c["value"] == value for c in o["results"][0]["configs"])
    ctx.setup(32, 4, {"resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": [name]}]},
              expect=shows, retries=80)


@scenario
def group_config_resources(ctx):
    """GROUP (32) resources: describe (no group needed), alter within the broker's bounds, and
    Kafka's refusals."""
    group = ctx.name("gc")
    for v in ctx.versions(32):
        ctx.call(32, v, {"resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None},
                                       {"resource_type": GROUP, "resource_name": "", "configuration_keys": None}],
                         "include_synonyms": v >= 1, "include_documentation": False},
                 label="defaults, and the empty group", scoped=sort_by("name"))
    errors = {
        "session timeout below the broker's minimum": [_res(GROUP, group, ("consumer.session.timeout.ms", 0, "1000"))],
        "heartbeat above the broker's maximum": [_res(GROUP, group, ("consumer.heartbeat.interval.ms", 0, "20000"))],
        "unknown name": [_res(GROUP, group, ("no.such", 0, "1"))],
        "not a number": [_res(GROUP, group, ("consumer.session.timeout.ms", 0, "x"))],
        "share auto offset reset by duration": [_res(GROUP, group, ("share.auto.offset.reset", 0, "by_duration:PT1H"))],
        "share auto offset reset nonsense": [_res(GROUP, group, ("share.auto.offset.reset", 0, "nope"))],
        "share lock below 1000": [_res(GROUP, group, ("share.record.lock.duration.ms", 0, "999"))],
        "share lock above the broker's maximum": [_res(GROUP, group, ("share.record.lock.duration.ms", 0, "3600001"))],
        "streams standby above the broker's maximum": [_res(GROUP, group, ("streams.num.standby.replicas", 0, "3"))],
        "streams initial delay": [_res(GROUP, group, ("streams.initial.rebalance.delay.ms", 0, "3"))],
        "empty group id": [_res(GROUP, "", ("consumer.session.timeout.ms", 0, "50000"))],
        "append to an INT": [_res(GROUP, group, ("consumer.session.timeout.ms", 2, "50000"))],
        "isolation level in capitals": [_res(GROUP, group, ("share.isolation.level", 0, "READ_COMMITTED"))],
        "delete an unknown name": [_res(GROUP, group, ("no.such", 1, None))],
        "subtract from an INT": [_res(GROUP, group, ("consumer.session.timeout.ms", 3, "1"))],
        "a name twice": [_res(GROUP, group, ("consumer.session.timeout.ms", 1, None),
                              ("consumer.session.timeout.ms", 0, "50000"))],
    }
    for v in ctx.versions(44):
        for label, resources in errors.items():
            ctx.call(44, v, {"resources": resources, "validate_only": True}, label=label)
    for v in ctx.versions(33):
        ctx.call(33, v, {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": "consumer.session.timeout.ms", "value": "1"}]}], "validate_only": True},
            label="AlterConfigs below the minimum")
    ctx.call(44, 1, {"resources": [_res(GROUP, group, ("consumer.session.timeout.ms", 0, "50000"),
                                        ("consumer.heartbeat.interval.ms", 0, "6000"),
                                        ("share.isolation.level", 0, "read_committed"))],
                     "validate_only": False}, label="set three")
    _await_group_value(ctx, group, "consumer.session.timeout.ms", "50000")
    ctx.call(32, 4, {"resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
                     "include_synonyms": True}, label="after setting three", scoped=sort_by("name"))
    ctx.call(74, 1, {"resource_types": [GROUP]}, label="groups with configs")
    ctx.call(33, 2, {"resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
        {"name": "consumer.heartbeat.interval.ms", "value": "7000"}]}], "validate_only": False},
        label="AlterConfigs replaces the set")
    _await_group_value(ctx, group, "consumer.session.timeout.ms", "45000")
    ctx.call(32, 4, {"resources": [{"resource_type": GROUP, "resource_name": group,
                                    "configuration_keys": ["consumer.session.timeout.ms",
                                                           "consumer.heartbeat.interval.ms"]}],
                     "include_synonyms": True}, label="after AlterConfigs")
    ctx.call(44, 1, {"resources": [_res(GROUP, group, ("consumer.heartbeat.interval.ms", 1, None))],
                     "validate_only": False}, label="delete the last")
    _await_group_value(ctx, group, "consumer.heartbeat.interval.ms", "5000")
    ctx.call(32, 4, {"resources": [{"resource_type": GROUP, "resource_name": group,
                                    "configuration_keys": ["consumer.heartbeat.interval.ms"]}],
                     "include_synonyms": True}, label="after the delete")
    ctx.call(74, 1, {"resource_types": [GROUP]}, label="groups with configs, after the last is deleted")


def _upsert(name, mechanism=1, iterations=8192):
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": b"salt",
            "salted_password": b"x" * 32}


def _delete(name, mechanism=1):
    return {"name": name, "mechanism": mechanism}


@scenario
def scram_users_named_twice(ctx):
    """AlterUserScramCredentials naming a user more than once: DUPLICATE_RESOURCE for that user
    unless an earlier entry of it already failed; the other users are altered."""
    u = {k: ctx.name(k) for k in ("a", "b", "c", "d", "e", "f", "g", "x1", "x2")}
    ctx.setup(51, 0, {"deletions": [], "upsertions": [_upsert(u["x1"]), _upsert(u["x2"])]},
              expect=lambda o: ok(o) and all(r["error_code"] == 0 for r in o["results"]))
    cases = {
        "same user, same mechanism": {"deletions": [], "upsertions": [_upsert(u["a"]), _upsert(u["a"])]},
        "same user, two mechanisms": {"deletions": [], "upsertions": [_upsert(u["b"], 1), _upsert(u["b"], 2)]},
        "delete a missing credential and upsert it": {"deletions": [_delete(u["c"])], "upsertions": [_upsert(u["c"])]},
        "a valid entry, then a bad one": {"deletions": [], "upsertions": [_upsert(u["d"]), _upsert(u["d"], iterations=1)]},
        "a bad entry, then a valid one": {"deletions": [], "upsertions": [_upsert(u["e"], iterations=1), _upsert(u["e"])]},
        "delete an existing credential twice": {"deletions": [_delete(u["x1"]), _delete(u["x1"])], "upsertions": []},
        "delete an existing credential and upsert another": {"deletions": [_delete(u["x2"])],
                                                             "upsertions": [_upsert(u["x2"], 2)]},
        "a duplicate among others": {"deletions": [], "upsertions": [_upsert(u["f"]), _upsert(u["g"]), _upsert(u["f"])]},
    }
    for label, body in cases.items():
        ctx.call(51, 0, body, label=label)
    # Kafka applies the changes a moment after answering: wait (bounded) for the last one.
    ctx.setup(50, 0, {"users": [{"name": u["g"]}]}, retries=80,
              expect=lambda o: ok(o) and o["results"] and o["results"][0]["error_code"] == 0)
    ctx.call(50, 0, {"users": [{"name": n} for n in sorted(u.values())]}, label="who has credentials now",
             scoped=lambda b: {**b, "results": sorted(b["results"], key=lambda r: r["user"])})
