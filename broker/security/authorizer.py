"""ACL authorization with the semantics of Kafka's StandardAuthorizer (KRaft).

Enabled by ``authorizer.class.name`` (any non-empty value, e.g.
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``).  ACL bindings live in the metadata
log (broker/security/store.py) and are managed with CreateAcls / DescribeAcls / DeleteAcls.

A request is allowed when (as ``StandardAuthorizerData.authorize``):

1. the principal is in ``super.users`` (``User:a;User:b``), else
2. no ACL binding matches the resource at all (literal name, the ``*`` wildcard, or a prefix) ->
   ``allow.everyone.if.no.acl.found``, else
3. a matching DENY binding (principal or ``User:*``, host or ``*``, operation or ALL) denies,
   else
4. a matching ALLOW binding allows, where DESCRIBE is implied by READ, WRITE, DELETE and ALTER,
   and DESCRIBE_CONFIGS by ALTER_CONFIGS; else denied.

Handlers call :func:`authorize` (``ctx``, operation, resource type, name) once per check; it is
True when no authorizer is configured, so the default broker stays open.
"""

from __future__ import annotations

import logging

log = logging.getLogger("minikafka.authorizer")

# Kafka's AclOperation / ResourceType / PatternType / AclPermissionType codes.
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14
ANY_RESOURCE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7
PATTERN_ANY, PATTERN_MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
PERMISSION_ANY, DENY, ALLOW = 1, 2, 3
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"

IMPLIED_BY = {DESCRIBE: (READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (ALTER_CONFIGS,)}
# Operations that apply to each resource type (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


def _super_users(text: str) -> set[str]:
    return {p.strip() for p in (text or "").split(";") if p.strip()}


class StandardAuthorizer:
    def __init__(self, config, store) -> None:
        self.super_users = _super_users(config.get("super.users"))
        self.allow_if_no_acl = bool(config.get("allow.everyone.if.no.acl.found"))
        self.store = store
        self._by_type: dict[int, list[dict]] = {}
        store.listeners.append(self._rebuild)
        self._rebuild()

    def _rebuild(self) -> None:
        by_type: dict[int, list[dict]] = {}
        for binding in self.store.acls.values():
            by_type.setdefault(binding["resource_type"], []).append(binding)
        self._by_type = by_type

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = [b for b in self._by_type.get(resource_type, ())
                    if (b["pattern_type"] == LITERAL and b["resource_name"] in (name, WILDCARD))
                    or (b["pattern_type"] == PREFIXED and name.startswith(b["resource_name"]))]
        if not matching:
            return self.allow_if_no_acl
        applicable = [b for b in matching if b["principal"] in (principal, "User:*")
                      and b["host"] in (host, WILDCARD)]
        for b in applicable:
            if b["permission_type"] == DENY and b["operation"] in (operation, ALL):
                return False
        allowed_ops = (operation, ALL) + IMPLIED_BY.get(operation, ())
        return any(b["permission_type"] == ALLOW and b["operation"] in allowed_ops for b in applicable)

    def authorize_by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type, existing or not
        (Kafka's ``Authorizer.authorizeByResourceType``, used by KIP-679's idempotent producers):
        an ALLOW binding for the principal that no DENY binding dominates, where a literal DENY
        dominates the same literal and a prefixed DENY every name starting with it."""
        # Kafka first authorizes a made-up name, so super users and "no ACL found" pass as usual.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal, deny_prefixed, allow = set(), set(), []
        for b in self._by_type.get(resource_type, ()):
            if b["principal"] not in (principal, "User:*") or b["host"] not in (host, WILDCARD):
                continue
            if b["operation"] not in (operation, ALL):
                continue
            if b["permission_type"] == DENY:
                if b["pattern_type"] == LITERAL and b["resource_name"] == WILDCARD:
                    return False
                (deny_literal if b["pattern_type"] == LITERAL else deny_prefixed).add(b["resource_name"])
            elif b["permission_type"] == ALLOW:
                if b["pattern_type"] == LITERAL and b["resource_name"] == WILDCARD:
                    return True
                allow.append((b["pattern_type"], b["resource_name"]))
        for pattern_type, name in allow:
            if pattern_type == LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits


def enabled(broker) -> bool:
    security = getattr(broker, "security", None)
    return security is not None and security.authorizer is not None


def authorize(ctx, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> bool:
    """Whether the principal of ``ctx``'s connection may do ``operation`` on the resource."""
    security = getattr(ctx.broker, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return True
    conn = ctx.connection
    principal = getattr(conn, "principal", "User:ANONYMOUS")
    allowed = authorizer.authorize(principal, ctx.client_host, operation, resource_type, name)
    if not allowed and log.isEnabledFor(logging.INFO):
        log.info("denied %s operation %d on resource type %d %r from %s", principal, operation,
                 resource_type, name, ctx.client_host)
    return allowed


def authorize_by_resource_type(ctx, operation: int, resource_type: int) -> bool:
    """Whether the principal may do ``operation`` on some resource of the type (True when open)."""
    security = getattr(ctx.broker, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return True
    principal = getattr(ctx.connection, "principal", "User:ANONYMOUS")
    return authorizer.authorize_by_resource_type(principal, ctx.client_host, operation, resource_type)


def authorized_operations(ctx, resource_type: int, name: str = CLUSTER_NAME) -> int:
    """Kafka's ``*_authorized_operations`` bit set (every supported operation when open)."""
    security = getattr(ctx.broker, "security", None)
    authorizer = getattr(security, "authorizer", None)
    if authorizer is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))
    principal = getattr(ctx.connection, "principal", "User:ANONYMOUS")
    return authorizer.authorized_operations(principal, ctx.client_host, resource_type, name)


def build(broker):
    """The configured authorizer, or None (open broker)."""
    if not broker.config.get("authorizer.class.name"):
        return None
    return StandardAuthorizer(broker.config, broker.controller.security)
