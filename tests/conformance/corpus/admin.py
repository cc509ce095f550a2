"""Cluster-level admin APIs: DescribeCluster, ACL APIs without an authorizer, quotas, log dirs."""

from __future__ import annotations

from ..engine import scenario
from .common import create_topic, ok


@scenario
def describe_cluster(ctx):
    for v in ctx.versions(60):
        ctx.call(60, v, {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                         "include_fenced_brokers": False}, label="brokers")
        if v >= 1:
            ctx.call(60, v, {"include_cluster_authorized_operations": True, "endpoint_type": 2}, label="controllers")
            ctx.call(60, v, {"endpoint_type": 5}, label="invalid endpoint type")


@scenario
def acls_without_authorizer(ctx):
    for v in ctx.versions(29):
        ctx.call(29, v, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
                 label="describe any")
    for v in ctx.versions(30):
        ctx.call(30, v, {"creations": [{"resource_type": 2, "resource_name": ctx.name("t"),
                                        "resource_pattern_type": 3, "principal": "User:alice", "host": "*",
                                        "operation": 3, "permission_type": 3}]}, label="create")
    for v in ctx.versions(31):
        ctx.call(31, v, {"filters": [{"resource_type_filter": 2, "resource_name_filter": ctx.name("t"),
                                      "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                                      "operation": 1, "permission_type": 1}]}, label="delete")


def _sort_entries(body):
    """AlterClientQuotas results come from a hash map in Kafka: compare them sorted by entity."""
    return dict(body, entries=sorted(body.get("entries") or [], key=lambda e: repr(e.get("entity"))))


@scenario
def client_quotas(ctx):
    user = ctx.name("u")
    for v in ctx.versions(49):
        ctx.call(49, v, {"entries": [{"entity": [{"entity_type": "user", "entity_name": user}],
                                      "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
                         "validate_only": False}, label="set")
        ctx.call(49, v, {"entries": [{"entity": [{"entity_type": "user", "entity_name": user}],
                                      "ops": [{"key": "no_such_quota", "value": 1.0, "remove": False}]},
                                     {"entity": [{"entity_type": "nobody", "entity_name": "x"}],
                                      "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}],
                         "validate_only": True}, label="errors", scoped=_sort_entries)
    for v in ctx.versions(48):
        ctx.call(48, v, {"components": [{"entity_type": "user", "match_type": 0, "match": user}], "strict": True},
                 label="describe exact")


@scenario
def log_dirs_and_topic_partitions(ctx):
    topic = ctx.name("ld")
    create_topic(ctx, topic, partitions=2)
    for v in ctx.versions(35):
        ctx.call(35, v, {"topics": [{"topic": topic, "partitions": [0, 1, 7]}]}, label="describe log dirs")
    for v in ctx.versions(75):
        ctx.call(75, v, {"topics": [{"name": topic}, {"name": ctx.name("absent")}], "response_partition_limit": 1,
                         "cursor": None}, label="describe topic partitions, limit 1")
    for v in ctx.versions(43):
        ctx.call(43, v, {"election_type": 0, "topic_partitions": [{"topic": topic, "partitions": [0, 9]}],
                         "timeout_ms": 5000}, label="elect leaders")
    for v in ctx.versions(46):
        ctx.call(46, v, {"timeout_ms": 5000, "topics": [{"name": topic, "partition_indexes": [0]}]},
                 label="list reassignments")
    for v in ctx.versions(55):
        ctx.call(55, v, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
                 label="describe quorum")


@scenario
def admin_misc(ctx):
    """The admin APIs of a one-node cluster that change little: reassignments, log dirs, SCRAM
    users, features, and SASL requests on a PLAINTEXT listener."""
    topic = ctx.name("m")
    create_topic(ctx, topic, partitions=2)
    for v in ctx.versions(45):
        ctx.call(45, v, {"timeout_ms": 5000, "allow_replication_factor_change": True, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1]},
                                           {"partition_index": 1, "replicas": None},
                                           {"partition_index": 5, "replicas": [1]}]},
            {"name": ctx.name("absent"), "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
            label="reassign to this node, cancel, unknown")
        ctx.call(45, v, {"timeout_ms": 5000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [2]}]}]}, label="to an unknown broker")
    for v in ctx.versions(34):
        ctx.call(34, v, {"dirs": [{"path": "/nowhere", "topics": [{"name": topic, "partitions": [0]}]}]},
                 label="unknown log dir")
    for v in ctx.versions(50):
        ctx.call(50, v, {"users": [{"name": ctx.name("nobody")}]}, label="unknown user")
        ctx.call(50, v, {"users": None}, label="all users (scoped)", scoped=_scope_users(ctx.prefix))
    for v in ctx.versions(51):
        ctx.call(51, v, {"deletions": [{"name": ctx.name("nobody"), "mechanism": 1}],
                         "upsertions": [{"name": ctx.name("u"), "mechanism": 9, "iterations": 4096,
                                         "salt": b"salt", "salted_password": b"x" * 32},
                                        {"name": ctx.name("w"), "mechanism": 1, "iterations": 1,
                                         "salt": b"salt", "salted_password": b"x" * 32}]},
                 label="errors", scoped=_sort_results_by_user)
    for v in ctx.versions(57):
        ctx.call(57, v, {"timeout_ms": 5000, "validate_only": True, "feature_updates": [
            {"feature": "no.such.feature", "max_version_level": 1, "upgrade_type": 1}]},
            label="unknown feature, validate only")
    for v in ctx.versions(17):
        ctx.call(17, v, {"mechanism": "PLAIN"}, label="handshake on PLAINTEXT", conn=f"sasl{v}")
    for v in ctx.versions(36):
        ctx.call(36, v, {"auth_bytes": b"\x00u\x00p"}, label="authenticate without handshake", conn=f"auth{v}")


def _sort_results_by_user(body):
    return dict(body, results=sorted(body.get("results") or [], key=lambda r: r["user"]))


def _scope_users(prefix):
    def keep(body):
        return dict(body, results=[r for r in body.get("results") or [] if r["user"].startswith(prefix)])
    return keep


@scenario
def leader_epochs(ctx):
    """Fenced and unknown leader epochs (Fetch, ListOffsets, OffsetForLeaderEpoch)."""
    from .core import _fetch_body

    topic = ctx.name("e")
    topic_id = create_topic(ctx, topic)
    for v in ctx.versions(1, lo=9):
        for epoch in (0, 5):
            body = _fetch_body(topic, topic_id, 0, 0)
            body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
            ctx.call(1, v, body, label=f"current leader epoch {epoch}")
    for v in ctx.versions(23):
        ctx.call(23, v, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": 9, "leader_epoch": 0},
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 7}]}]}, label="future epochs")


def _throttled(body):
    """Quota answers: whether the client was throttled (Kafka's exact throttle time depends on
    its sample windows and the clock), not by how much."""
    body = dict(body)
    body["throttled"] = body.pop("throttle_time_ms", 0) > 0
    return body


@scenario
def produce_quota(ctx):
    topic = ctx.name("q")
    create_topic(ctx, topic)
    client = ctx.name("slow")
    ctx.setup(49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": client}],
                                   "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
                      "validate_only": False}, expect=lambda o: ok(o) and o["entries"][0]["error_code"] == 0)
    # Kafka applies the quota when its broker replays the record: wait until DescribeClientQuotas has it.
    ctx.setup(48, 1, {"components": [{"entity_type": "client-id", "match_type": 0, "match": client}], "strict": True},
              expect=lambda o: ok(o) and bool(o["entries"]), retries=80)
    from .common import batch
    for i, v in enumerate((9, 10, 11)):
        ctx.call(0, v, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch(b"x" * 64 * 1024)}]}]},
            label="64 KiB over a 1 KiB/s quota", client_id=client, conn=f"q{i}", scoped=_throttled)
    ctx.call(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch(b"y")}]}]},
        label="another client, no quota", client_id=ctx.name("fast"), conn="fast", scoped=_throttled)


@scenario(profile="acl")
def broker_dynamic_configs(ctx):
    """Dynamic broker configs (runs on the second pair, whose topics no other scenario describes):
    per-broker and cluster-default values, their sources and synonyms, and refusals."""
    keys = ["log.retention.ms", "message.max.bytes", "log.cleaner.threads", "num.io.threads"]

    def describe(label):
        for name in ("1", ""):
            ctx.call(32, 4, {"resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": keys}],
                             "include_synonyms": True, "include_documentation": False}, label=f"{label}, broker {name!r}")

    describe("before")
    for v in ctx.versions(44):
        ctx.call(44, v, {"resources": [
            {"resource_type": 4, "resource_name": "", "configs": [
                {"name": "message.max.bytes", "config_operation": 0, "value": "2000000"}]},
            {"resource_type": 4, "resource_name": "1", "configs": [
                {"name": "log.retention.ms", "config_operation": 0, "value": "3600000"}]}], "validate_only": True},
            label="validate cluster default and per-broker values")
        ctx.call(44, v, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configs": [
                {"name": "no.such.config", "config_operation": 0, "value": "1"}]},
            {"resource_type": 4, "resource_name": "7", "configs": [
                {"name": "message.max.bytes", "config_operation": 0, "value": "1"}]},
            {"resource_type": 4, "resource_name": "1", "configs": [
                {"name": "broker.id", "config_operation": 0, "value": "3"}]}], "validate_only": True},
            label="unknown key, other broker, read-only key")
    ctx.call(44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
        {"name": "message.max.bytes", "config_operation": 0, "value": "2000000"}]}], "validate_only": False},
        label="set a cluster default")
    ctx.setup(32, 4, {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": ["message.max.bytes"]}]},
              retries=80, expect=lambda o: ok(o) and any(c["value"] == "2000000" for c in o["results"][0]["configs"]))
    ctx.call(44, 1, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": "log.retention.ms", "config_operation": 0, "value": "3600000"}]}], "validate_only": False},
        label="set a per-broker value")
    ctx.setup(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": ["log.retention.ms"]}]},
              retries=80, expect=lambda o: ok(o) and any(c["value"] == "3600000" for c in o["results"][0]["configs"]))
    describe("after")
    topic = ctx.name("t")
    create_topic(ctx, topic)
    ctx.call(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                    "configuration_keys": ["max.message.bytes", "retention.ms"]}],
                     "include_synonyms": True}, label="a topic's synonyms under dynamic broker values")


@scenario
def admin_listing(ctx):
    """Paging and "everything" forms of the one-node admin views."""
    topic = ctx.name("pg")
    create_topic(ctx, topic, partitions=3)
    for v in ctx.versions(75):
        first = ctx.call(75, v, {"topics": [{"name": topic}], "response_partition_limit": 2, "cursor": None},
                         label="first page of 2")
        cursor = first.get("next_cursor")
        ctx.call(75, v, {"topics": [{"name": topic}], "response_partition_limit": 2, "cursor": cursor},
                 label="next page")
        ctx.call(75, v, {"topics": [{"name": topic}], "response_partition_limit": 2,
                         "cursor": {"topic_name": topic, "partition_index": 7}}, label="cursor past the end")
    for v in ctx.versions(46):
        ctx.call(46, v, {"timeout_ms": 5000, "topics": None}, label="list all reassignments")
    for v in ctx.versions(43, lo=1):
        ctx.call(43, v, {"election_type": 1, "topic_partitions": [{"topic": topic, "partitions": [0, 1]}],
                         "timeout_ms": 5000}, label="unclean election, nothing to do")
    for v in ctx.versions(35):
        ctx.call(35, v, {"topics": None}, label="all log dirs (scoped)", scoped=_scope_log_dirs(ctx.prefix))


def _scope_log_dirs(prefix):
    def keep(body):
        out = dict(body)
        out["results"] = [dict(r, topics=[t for t in r.get("topics") or [] if t["name"].startswith(prefix)])
                          for r in body.get("results") or []]
        return out
    return keep
