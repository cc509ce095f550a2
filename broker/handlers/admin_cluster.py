"""DescribeCluster (60) v0-2.

One broker: ours, at the advertised endpoint, which is also the controller (Java's Admin sends
CreateTopics and friends to the controller id it learns here and from Metadata).  v1 adds
``endpoint_type``: 1 (brokers) is served; 2 (controllers) answers MISMATCHED_ENDPOINT_TYPE and
anything else UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker listener does (v0 uses
INVALID_REQUEST for both).  ``cluster_authorized_operations`` is Kafka's "not requested" value
INT32_MIN unless asked for; with no authorizer every cluster operation is allowed.  With one,
DescribeCluster itself is open to every principal (Kafka's ``AuthHelper`` checks nothing else);
the operations are reported only to a principal that may DESCRIBE the cluster, 0 to the others.
v2 adds ``include_fenced_brokers`` and ``is_fenced``: this node is never fenced.
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az
from minikafka.broker.security.listeners import endpoint_for

from minikafka.protocol.errors import ErrorCode

DESCRIBE_CLUSTER = 60
BROKERS_ENDPOINT = 1
CONTROLLERS_ENDPOINT = 2
NOT_REQUESTED = -2147483648

# AclOperation codes of the operations Kafka supports on the CLUSTER resource:
# CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12 (AclEntry.supportedOperations).
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def advertised_endpoint(broker) -> tuple[str, int]:
    config = broker.config
    advertised = getattr(config, "advertised", None)
    if advertised:
        return advertised[0], int(advertised[1])
    host = getattr(config, "advertised_host", None) or getattr(config, "host", "127.0.0.1")
    port = getattr(config, "advertised_port", None) or getattr(config, "port", 9092)
    return host, int(port)


async def describe_cluster(ctx, body: dict) -> dict:
    broker = ctx.broker
    controller = broker.controller
    endpoint_type = body.get("endpoint_type", BROKERS_ENDPOINT)
    response = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "endpoint_type": BROKERS_ENDPOINT, "cluster_id": controller.cluster_id or "",
                "controller_id": -1, "brokers": [], "cluster_authorized_operations": NOT_REQUESTED}
    if endpoint_type not in (BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT):
        code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.update(error_code=int(code), error_message=f"Unsupported endpoint type {endpoint_type}")
        return response
    if endpoint_type == CONTROLLERS_ENDPOINT:
        code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        response.update(error_code=int(code), error_message="The request was sent to an endpoint of type "
                        "BROKER, but we wanted an endpoint of type CONTROLLER")
        return response
    host, port = endpoint_for(ctx) if getattr(ctx, "connection", None) is not None else advertised_endpoint(broker)
    node_id = controller.node_id
    if not getattr(broker, "unregistered", False):  # after UnregisterBroker: no broker, no controller (Kafka 4.2)
        response.update(controller_id=node_id,
                        brokers=[{"broker_id": node_id, "host": host, "port": port, "rack": None,
                                  "is_fenced": False}])
    if body.get("include_cluster_authorized_operations"):
        # As Kafka: anyone may DescribeCluster; the operations need DESCRIBE on the cluster (else 0).
        if not az.enabled(broker):
            response["cluster_authorized_operations"] = CLUSTER_OPERATIONS
        elif az.authorize(ctx, az.DESCRIBE, az.CLUSTER):
            response["cluster_authorized_operations"] = az.authorized_operations(ctx, az.CLUSTER)
        else:
            response["cluster_authorized_operations"] = 0
    return response


def register(registry, broker) -> None:
    registry.register(DESCRIBE_CLUSTER, 0, 2, describe_cluster)
