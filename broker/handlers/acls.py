"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31), versions 1-3.

Bindings are kept in the metadata log (broker/security/store.py, one record per binding, keyed
by a uuid) and read by the StandardAuthorizer (broker/security/authorizer.py).

- Without ``authorizer.class.name`` all three answer SECURITY_DISABLED, as Kafka does.
- Describe needs DESCRIBE on the cluster, Create/Delete need ALTER on the cluster
  (CLUSTER_AUTHORIZATION_FAILED otherwise).
- Creations are validated as Kafka's AclControlManager does: a concrete resource type, LITERAL or
  PREFIXED pattern, a concrete operation and permission, a ``Type:name`` principal, the cluster
  named ``kafka-cluster``; a bad one gets INVALID_REQUEST with a message.  Re-creating an
  existing binding is a no-op that succeeds.
- Filters: ANY matches every value, a null name/principal/host any value; pattern MATCH matches
  the bindings that apply to the named resource (the literal name, ``*`` and prefixes of it).
"""

from __future__ import annotations

import uuid

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
          "permission_type")


def _filter_matches(f: dict, b: dict) -> bool:
    if f["resource_type_filter"] != az.ANY_RESOURCE and f["resource_type_filter"] != b["resource_type"]:
        return False
    name = f.get("resource_name_filter")
    pattern = f.get("pattern_type_filter", az.LITERAL)
    if pattern == az.PATTERN_MATCH:
        if name is not None and not (
                (b["pattern_type"] == az.LITERAL and b["resource_name"] in (name, az.WILDCARD))
                or (b["pattern_type"] == az.PREFIXED and name.startswith(b["resource_name"]))):
            return False
    else:
        if pattern != az.PATTERN_ANY and pattern != b["pattern_type"]:
            return False
        if name is not None and name != b["resource_name"]:
            return False
    if f.get("principal_filter") is not None and f["principal_filter"] != b["principal"]:
        return False
    if f.get("host_filter") is not None and f["host_filter"] != b["host"]:
        return False
    if f["operation"] != az.ANY_OP and f["operation"] != b["operation"]:
        return False
    return f["permission_type"] in (az.PERMISSION_ANY, b["permission_type"])


def _invalid(c: dict) -> str | None:
    if c["resource_type"] not in az.SUPPORTED_OPERATIONS:
        return f"Invalid resource type {c['resource_type']}"
    if c["pattern_type"] not in (az.LITERAL, az.PREFIXED):
        return f"Invalid pattern type {c['pattern_type']}"
    if c["operation"] < az.ALL or c["operation"] > az.DESCRIBE_TOKENS:
        return f"Invalid operation {c['operation']}"
    if c["permission_type"] not in (az.DENY, az.ALLOW):
        return f"Invalid permission type {c['permission_type']}"
    kind, sep, name = (c.get("principal") or "").partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{c.get('principal')}` (no colon is present separating the principal type from the principal name)"
    if not c.get("host"):
        return "Invalid host"
    if not c.get("resource_name"):
        return "Resource name must not be empty"
    if c["resource_type"] == az.CLUSTER and c["resource_name"] != az.CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    return None


async def describe_acls(ctx, body: dict) -> dict:
    def error(code, message):
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}

    if not az.enabled(ctx.broker):
        return error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not az.authorize(ctx, az.DESCRIBE, az.CLUSTER):
        return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    store = ctx.broker.controller.security
    grouped: dict[tuple, list] = {}
    for b in store.acls.values():
        if _filter_matches(body, b):
            key = (b["resource_type"], b["resource_name"], b["pattern_type"])
            grouped.setdefault(key, []).append({"principal": b["principal"], "host": b["host"],
                                                "operation": b["operation"],
                                                "permission_type": b["permission_type"]})
    resources = [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                 for (t, n, p), acls in grouped.items()]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "resources": resources}  # "" as Kafka 4.2


async def create_acls(ctx, body: dict) -> dict:
    creations = body.get("creations") or []
    if not az.enabled(ctx.broker):
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": "No Authorizer is configured on the broker"}
            for _ in creations]}
    if not az.authorize(ctx, az.ALTER, az.CLUSTER):
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": "Cluster authorization failed."}
            for _ in creations]}
    store = ctx.broker.controller.security
    results = []
    for c in creations:
        binding = {k: c.get(k) for k in FIELDS}
        binding["pattern_type"] = c.get("resource_pattern_type", az.LITERAL)  # the spec's name here
        message = _invalid(binding)
        if message is not None:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": message})
            continue
        if not any(all(existing[k] == binding[k] for k in FIELDS) for existing in store.acls.values()):
            store.add_acl(str(uuid.uuid4()), binding)
        results.append({"error_code": ErrorCode.NONE, "error_message": ""})  # "" as Kafka 4.2
    return {"throttle_time_ms": 0, "results": results}


async def delete_acls(ctx, body: dict) -> dict:
    filters = body.get("filters") or []

    def every(code, message):
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]}

    if not az.enabled(ctx.broker):
        return every(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not az.authorize(ctx, az.ALTER, az.CLUSTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    store = ctx.broker.controller.security
    results = []
    for f in filters:
        matching = [(acl_id, b) for acl_id, b in list(store.acls.items()) if _filter_matches(f, b)]
        for acl_id, _ in matching:
            if acl_id in store.acls:
                store.remove_acl(acl_id)
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, **{k: b[k] for k in FIELDS}} for _, b in matching]})
    return {"throttle_time_ms": 0, "filter_results": results}


def register(registry, broker) -> None:
    registry.register(DESCRIBE_ACLS, 1, 3, describe_acls)
    registry.register(CREATE_ACLS, 1, 3, create_acls)
    registry.register(DELETE_ACLS, 1, 3, delete_acls)
