"""InitProducerId (key 22), versions 0-5.

Idempotent producers (null transactional id): as Kafka's transaction coordinator does for them,
every request gets a fresh producer id with epoch 0, whatever producer id/epoch it carries
(v3+ sends the old ones after an error, KIP-360; a new id is also a valid answer there).
Ids come from the controller's ProducerIdManager, whose reserved blocks are persisted in the
metadata log, so an id is never handed out twice, even across restarts.

Transactional ids need a transaction coordinator.  When one is installed
(``broker.txn_coordinator`` with ``async init_producer_id(ctx, body) -> dict``) the request goes
to it; without one the answer is COORDINATOR_NOT_AVAILABLE (retriable), which is what Kafka
answers while its transaction coordinator is not ready; producers retry and eventually time out.
v2 is flexible; v4 adds PRODUCER_FENCED, v5 TRANSACTION_ABORTABLE (both coordinator matters).
"""

from __future__ import annotations

import logging

from minikafka.protocol.errors import ErrorCode

API_KEY = 22

log = logging.getLogger("minikafka.init_producer_id")


async def handle_init_producer_id(ctx, body: dict) -> dict:
    broker = ctx.broker
    denied = _authorization_error(ctx, body.get("transactional_id"))
    if denied:
        return {"throttle_time_ms": 0, "error_code": denied, "producer_id": -1, "producer_epoch": -1}
    if (body.get("producer_id", -1) == -1) != (body.get("producer_epoch", -1) == -1):
        # Kafka 4.2 (KafkaApis): a producer id without an epoch, or the reverse, is refused.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    if body.get("transactional_id") is not None:
        coordinator = broker.txn_coordinator
        if coordinator is not None:
            return await coordinator.init_producer_id(ctx, body)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "producer_id": -1, "producer_epoch": -1}
    producer_id = broker.controller.producer_ids.next_id()
    log.debug("producer id %d for client_id=%s", producer_id, ctx.client_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}


def _authorization_error(ctx, transactional_id) -> int:
    """Kafka's checks: WRITE on the transactional id; an idempotent producer needs
    IDEMPOTENT_WRITE on the cluster or (KIP-679) WRITE on some topic, existing or not
    (``authorizeByResourceType``)."""
    from minikafka.broker.security import authorizer as az

    if not az.enabled(ctx.broker):
        return 0
    if transactional_id is not None:
        return 0 if az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, transactional_id) else 53
    if az.authorize(ctx, az.IDEMPOTENT_WRITE, az.CLUSTER):
        return 0
    if az.authorize_by_resource_type(ctx, az.WRITE, az.TOPIC):
        return 0
    return 31  # CLUSTER_AUTHORIZATION_FAILED


def register(registry, broker) -> None:
    registry.register(API_KEY, 0, 5, handle_init_producer_id)
