"""ListConfigResources (74) v0-1 (KIP-1142; v0 was KIP-714's ListClientMetricsResources).

Which resources have configs, as Kafka 4.2's ``KafkaApis.handleListConfigResources`` answers:

- DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED (and no resources);
- the types a version knows: v0 only CLIENT_METRICS (16); v1 TOPIC (2), BROKER (4),
  BROKER_LOGGER (8), CLIENT_METRICS (16) and GROUP (32); an empty list asks for all of them, a
  type the version does not know is UNSUPPORTED_VERSION (and no resources);
- in Kafka's order: groups with group configs, client-metrics subscriptions, this node as a
  BROKER_LOGGER, this node as a BROKER, then every topic (internal ones included; sorted here,
  Kafka's order is a hash set's).

Groups with configs are those holding a GROUP config record (broker/group_configs.py; sorted
here).  minikafka keeps no client-metrics subscriptions (DescribeConfigs answers INVALID_REQUEST
for that type), so that list is empty, as on a Kafka where none were set.
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode

LIST_CONFIG_RESOURCES = 74
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


async def list_config_resources(ctx, body: dict) -> dict:
    def answer(code: int, resources: list) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "config_resources": resources}

    if not az.authorize(ctx, az.DESCRIBE_CONFIGS, az.CLUSTER):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    supported = SUPPORTED[min(ctx.api_version, 1)]
    wanted = list(body.get("resource_types") or ()) or list(supported)
    if any(t not in supported for t in wanted):
        return answer(ErrorCode.UNSUPPORTED_VERSION, [])
    broker = ctx.broker
    node = str(broker.config.node_id)
    resources: list[tuple[str, int]] = []
    if GROUP in wanted:
        stored = getattr(broker.controller, "resource_configs", None) or {}
        resources.extend((name, GROUP) for rtype, name in sorted(stored) if rtype == GROUP)
    if BROKER_LOGGER in wanted:
        resources.append((node, BROKER_LOGGER))
    if BROKER in wanted:
        resources.append((node, BROKER))
    if TOPIC in wanted:
        resources.extend((name, TOPIC) for name in sorted(broker.controller.topics))
    return answer(ErrorCode.NONE, [{"resource_name": name, "resource_type": rtype} for name, rtype in resources])


def register(registry, broker) -> None:
    registry.register(LIST_CONFIG_RESOURCES, 0, 1, list_config_resources)
