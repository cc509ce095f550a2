"""DescribeClientQuotas (48) v0-1 and AlterClientQuotas (49) v0-1 (KIP-546).

Quotas are metadata: AlterClientQuotas writes ``client_quota`` records to the metadata log
(``Controller.alter_client_quota``), so they survive restarts, and ``broker.quotas`` enforces
them on Produce, Fetch and every request (see there).  v1 is the flexible version of v0.

Entities are ``user``, ``client-id`` (alone or together) or ``ip`` (alone); a null name is the
default entity of that type.  Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (whole
numbers), ``request_percentage``, ``controller_mutation_rate`` for users and clients;
``connection_creation_rate`` (a whole number) for ips.  ``controller_mutation_rate`` and
``connection_creation_rate`` are stored and described but not enforced here.  Errors are
Kafka's INVALID_REQUEST with its reason, per entry for Alter and for the whole request for
Describe.

Describe filters: match type 0 exact name, 1 the default entity, 2 any specified (non-default)
name; ``strict`` keeps only entities with exactly the filtered types.
"""

from __future__ import annotations

import ipaddress

from minikafka.protocol.errors import ErrorCode

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# key -> (entity kinds it applies to, whole number?)
KEYS = {
    "producer_byte_rate": ({USER, CLIENT_ID}, True),
    "consumer_byte_rate": ({USER, CLIENT_ID}, True),
    "request_percentage": ({USER, CLIENT_ID}, False),
    "controller_mutation_rate": ({USER, CLIENT_ID}, False),
    "connection_creation_rate": ({IP}, True),
}


def _entity_error(pairs: list[tuple[str, str | None]]) -> str | None:
    types = [t for t, _ in pairs]
    if not types:
        return "Invalid empty client quota entity"
    if len(set(types)) != len(types):
        return "Invalid quota entity: an entity type appears more than once"
    for t, name in pairs:
        if t not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {t}"
        if t == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return f"{name} is not a valid IP or resolvable host."
    if IP in types and len(types) > 1:
        return "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
    return None


def _op_error(types: set[str], op: dict) -> str | None:
    key = op["key"]
    spec = KEYS.get(key)
    if spec is None or not types <= spec[0]:
        return f"Invalid configuration key {key}"
    if not op.get("remove"):
        value = op["value"]
        if spec[1] and abs(round(value) - value) > 1e-6:
            return f"Configuration {key} must be a Long value"
    return None


async def alter_client_quotas(ctx, body: dict) -> dict:
    controller = ctx.broker.controller
    results = []
    for entry in body.get("entries") or ():
        pairs = [(e["entity_type"], e.get("entity_name")) for e in entry.get("entity") or ()]
        error = _entity_error(pairs)
        ops = entry.get("ops") or []
        if error is None:
            types = {t for t, _ in pairs}
            for op in ops:
                error = _op_error(types, op)
                if error is not None:
                    break
        if error is None and not body.get("validate_only"):
            entity = tuple(sorted(pairs))
            for op in ops:
                controller.alter_client_quota(entity, op["key"], None if op.get("remove") else float(op["value"]))
        results.append({"error_code": ErrorCode.INVALID_REQUEST if error else 0, "error_message": error,
                        "entity": [{"entity_type": t, "entity_name": n} for t, n in pairs]})
    return {"throttle_time_ms": 0, "entries": results}


def _filter_error(components: list[dict]) -> str | None:
    types = [c["entity_type"] for c in components]
    if len(set(types)) != len(types):
        return "Entity type appears more than once in the filter"
    if IP in types and len(types) > 1:
        return "Invalid entity filter component combination, IP filter component should not be used with " \
               "User or ClientId filter component."
    for c in components:
        kind, match = c["match_type"], c.get("match")
        if kind == MATCH_EXACT and match is None:
            return f"Request specified exact match for {c['entity_type']} but no name"
        if kind == MATCH_DEFAULT and match is not None:
            return f"Request specified default match for {c['entity_type']} with a name"
        if kind not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return f"Unknown match type {kind}"
    return None


def _matches(entity: tuple, components: list[dict], strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(components):
        return False
    for c in components:
        if c["entity_type"] not in names:
            return False
        name = names[c["entity_type"]]
        kind = c["match_type"]
        if kind == MATCH_EXACT and name != c.get("match"):
            return False
        if kind == MATCH_DEFAULT and name is not None:
            return False
        if kind == MATCH_SPECIFIED and name is None:
            return False
    return True


async def describe_client_quotas(ctx, body: dict) -> dict:
    components = body.get("components") or []
    error = _filter_error(components)
    if error is not None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "error_message": error, "entries": None}
    strict = bool(body.get("strict"))
    entries = []
    for entity, values in sorted(ctx.broker.controller.client_quotas.items(), key=lambda kv: repr(kv[0])):
        if values and _matches(entity, components, strict):
            entries.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                            "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    # Kafka 4.2 answers error_message "" (not null) on success.
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "entries": entries}


def register(registry, broker) -> None:
    registry.register(DESCRIBE_CLIENT_QUOTAS, 0, 1, describe_client_quotas)
    registry.register(ALTER_CLIENT_QUOTAS, 0, 1, alter_client_quotas)
