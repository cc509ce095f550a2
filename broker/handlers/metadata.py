"""Metadata (key 3), versions 0-13.

Single node: we are the only broker, the controller (Java sends CreateTopics and friends to
``controller_id``) and the leader of every partition with leader epoch 0, replicas = ISR = [us].

Per version (Kafka's MetadataRequest/Response JSON):
- v0: an empty topic list means all topics.  v1+: null means all, empty means none; adds
  ``controller_id``, ``is_internal`` and ``rack``.
- v2+: ``cluster_id`` (persistent, from the controller).  v4+: ``allow_auto_topic_creation``
  (earlier versions always allow it).  v5+: ``offline_replicas``.  v7+: ``leader_epoch``.
- v8-10: authorized-operations fields; we report Kafka's "not requested" value unless asked,
  then the operations the principal may do (all without an authorizer; cluster operations only
  with DESCRIBE on the cluster, else 0).  v10+: topic ids; v12: topics may be requested by id
  (name null): an unknown id answers UNKNOWN_TOPIC_ID, an id the principal may not DESCRIBE
  TOPIC_AUTHORIZATION_FAILED with the id and no name (Kafka does not count ids as secret).  v13: a top-level error code (KIP-1102 re-bootstrap), always NONE
  here.

Auto-creation happens only here, as in Kafka (never on Produce): a missing topic is created
with ``num.partitions`` when the request allows it and ``auto.create.topics.enable`` is on.
Kafka answers the first Metadata of a freshly auto-created topic with LEADER_NOT_AVAILABLE while
the controller elects a leader; here the topic is ready at once, so it is answered with NONE.
Not implemented: rack awareness.
"""

from __future__ import annotations

import logging
import uuid

from minikafka.broker.security import authorizer as az
from minikafka.broker.security.listeners import endpoint_for
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.metadata")

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)
AUTHORIZED_OPERATIONS_NOT_REQUESTED = -2147483648
# Bit sets of Kafka's AclOperation codes (READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, CREATE_TOKENS 13,
# DESCRIBE_TOKENS 14): every operation that applies to a topic / the cluster, all allowed.  Kafka 4.2
# without an authorizer leaves the token operations out of the cluster's set (as DescribeCluster).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def broker_entry(broker, ctx=None) -> dict:
    # The address of the listener the request came in on (Kafka answers per listener).
    host, port = endpoint_for(ctx) if ctx is not None else broker.config.advertised
    return {"node_id": broker.config.node_id, "host": host, "port": port, "rack": None}


def topic_entry(broker, info, include_ops: bool, ctx=None) -> dict:
    node = broker.config.node_id
    replicas = [node]
    none = ErrorCode.NONE  # bound once: an enum attribute costs ~60 ns per lookup, here per partition
    if getattr(broker, "unregistered", False):
        # After UnregisterBroker this node is fenced until it restarts, as Kafka 4.2 answers: no
        # leader (the leader epoch moves on), an empty ISR, the replica offline.
        partitions = [
            {"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "partition_index": p, "leader_id": -1, "leader_epoch": 1,
             "replica_nodes": replicas, "isr_nodes": [], "offline_replicas": replicas}
            for p in range(info.num_partitions)
        ]
    else:
        partitions = [
            {"error_code": none, "partition_index": p, "leader_id": node, "leader_epoch": 0,
             "replica_nodes": replicas, "isr_nodes": replicas, "offline_replicas": []}
            for p in range(info.num_partitions)
        ]
    return {"error_code": ErrorCode.NONE, "name": info.name, "topic_id": info.topic_id,
            "is_internal": info.internal, "partitions": partitions,
            "topic_authorized_operations": (az.authorized_operations(ctx, az.TOPIC, info.name) if ctx is not None and az.enabled(broker)
                                            else TOPIC_OPERATIONS) if include_ops else AUTHORIZED_OPERATIONS_NOT_REQUESTED}


def error_entry(name, topic_id, code: int) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id or ZERO_UUID, "is_internal": False,
            "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_NOT_REQUESTED}


def build_metadata(broker, version: int, body: dict, client_id=None, ctx=None) -> dict:
    controller = broker.controller
    requested = body.get("topics")
    include_ops = bool(body.get("include_topic_authorized_operations"))
    allow_auto = body.get("allow_auto_topic_creation", True) if version >= 4 else True
    auto_create = allow_auto and broker.config.get("auto.create.topics.enable")
    if version < 12 and any(item.get("topic_id") not in (None, ZERO_UUID) for item in requested or ()):
        # Kafka 4.2: topic ids need v12+; the whole request gets its error response
        # (INVALID_REQUEST per topic, no brokers, no cluster id, no controller).
        return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
                "topics": [error_entry(item.get("name") or "", item.get("topic_id"), ErrorCode.INVALID_REQUEST)
                           for item in requested],
                "cluster_authorized_operations": AUTHORIZED_OPERATIONS_NOT_REQUESTED}
    topics = []
    secured = ctx is not None and az.enabled(broker)
    if requested is None or (version == 0 and not requested):
        for info in list(controller.topics.values()):
            # Kafka lists only the topics the principal may DESCRIBE.
            if not secured or az.authorize(ctx, az.DESCRIBE, az.TOPIC, info.name):
                topics.append(topic_entry(broker, info, include_ops, ctx))
    else:
        seen = set()
        for item in requested:
            name = item.get("name")
            topic_id = item.get("topic_id")
            if name is None:
                info = controller.topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
                if info is None:
                    topics.append(error_entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                elif secured and not az.authorize(ctx, az.DESCRIBE, az.TOPIC, info.name):
                    # Kafka: ids are not secret, so the id is answered, but never the name.
                    topics.append(error_entry(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                else:
                    topics.append(topic_entry(broker, info, include_ops, ctx))
                continue
            if name in seen:
                continue
            seen.add(name)
            info = controller.topic(name)
            if secured and not az.authorize(ctx, az.DESCRIBE, az.TOPIC, name):
                topics.append(error_entry(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if info is None and auto_create and secured and not (
                    az.authorize(ctx, az.CREATE, az.CLUSTER) or az.authorize(ctx, az.CREATE, az.TOPIC, name)):
                topics.append(error_entry(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if info is None and auto_create:
                try:
                    info = controller.create_topic(name)
                    log.info("auto-created topic %s (%d partitions) for client_id=%s",
                             name, info.num_partitions, client_id)
                except KafkaError as exc:
                    if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                        info = controller.topic(name)
                    else:
                        code = ErrorCode.INVALID_TOPIC if exc.code == ErrorCode.INVALID_TOPIC else exc.code
                        topics.append(error_entry(name, None, code))
                        continue
            if info is None:
                code = ErrorCode.INVALID_TOPIC if not controller.valid_topic_name(name) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(error_entry(name, None, code))
            else:
                topics.append(topic_entry(broker, info, include_ops, ctx))
    return {
        "throttle_time_ms": 0,
        # An unregistered node (UnregisterBroker) lists no live broker and no controller, as Kafka.
        "brokers": [] if getattr(broker, "unregistered", False) else [broker_entry(broker, ctx)],
        "cluster_id": controller.cluster_id,
        "controller_id": -1 if getattr(broker, "unregistered", False) else broker.config.node_id,
        "topics": topics,
        "cluster_authorized_operations": _cluster_operations(broker, ctx)
        if body.get("include_cluster_authorized_operations") else AUTHORIZED_OPERATIONS_NOT_REQUESTED,
        "error_code": ErrorCode.NONE,
    }


def _cluster_operations(broker, ctx) -> int:
    """Kafka reports the cluster's operations only to a principal that may DESCRIBE it, else 0."""
    if ctx is None or not az.enabled(broker):
        return CLUSTER_OPERATIONS
    if not az.authorize(ctx, az.DESCRIBE, az.CLUSTER):
        return 0
    return az.authorized_operations(ctx, az.CLUSTER)


def register(registry, broker) -> None:
    async def handle_metadata(ctx, body: dict) -> dict:
        return build_metadata(ctx.broker, ctx.api_version, body, ctx.client_id, ctx)

    registry.register(API_KEY, 0, 13, handle_metadata)
