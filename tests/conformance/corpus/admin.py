"""Cluster-level admin APIs: DescribeCluster, ACL APIs without an authorizer, quotas, log dirs."""

from __future__ import annotations

from ..engine import scenario
from .common import create_topic


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
