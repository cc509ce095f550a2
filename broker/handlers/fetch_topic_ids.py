"""Fetch v13-17 (KIP-516 topic ids, KIP-951 node endpoints) at the edges of the v12 handler.

v13 replaces the topic name with the topic id, in the request (``topics``,
``forgotten_topics_data``) and in the response; v14 and v15 change nothing a single node sees
(v15 moves ``replica_id`` into the tagged ``replica_state``, and consumers send neither); v16
adds the top-level ``node_endpoints``; v17 adds a replica directory id for followers.

The v12 handler (``fetch.handle_fetch``) keeps working by name: ids are resolved to names on
the way in and names back to ids on the way out, so what Fetch reads (isolation level, LSO,
long polls) lives in one place.  A topic id we do not know gets UNKNOWN_TOPIC_ID (100) for
each of its partitions, and the request is answered without waiting, as Kafka does for an
erroneous fetch.  The zero id is never a topic's id, so it is unknown too.

Node endpoints: a partition answered with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries
``current_leader`` (this node, epoch 0), and the response lists this node's endpoint, so a v16+
client learns where the leader is without a Metadata round trip.  Otherwise both stay unset.
"""

from __future__ import annotations

import uuid

from minikafka.protocol.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)
FIRST_TOPIC_ID_VERSION = 13
NODE_ENDPOINTS_VERSION = 16


def _unknown_topic(topic_id, partitions) -> dict:
    return {"topic_id": topic_id, "partitions": [
        {"partition_index": p["partition"], "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "high_watermark": -1,
         "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],  # as Kafka 4.2
         "preferred_read_replica": -1, "records": b""} for p in partitions or ()]}


def by_topic_id(handle_by_name):
    """Wrap a name-based Fetch handler so that it also serves v13+."""

    async def handle_fetch(ctx, body: dict) -> dict:
        version = ctx.api_version
        if version < FIRST_TOPIC_ID_VERSION:
            return await handle_by_name(ctx, body)
        controller = ctx.broker.controller
        known, unknown, order = [], {}, []
        for index, topic in enumerate(body.get("topics") or ()):
            topic_id = topic.get("topic_id")
            info = controller.topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            if info is None:
                unknown[index] = _unknown_topic(topic_id, topic.get("partitions"))
            else:
                known.append(dict(topic, topic=info.name))
            order.append(info)
        forgotten = []
        for topic in body.get("forgotten_topics_data") or ():
            info = controller.topic_by_id(topic.get("topic_id"))
            if info is not None:
                forgotten.append(dict(topic, topic=info.name))
        by_name = dict(body, topics=known, forgotten_topics_data=forgotten)
        if unknown:
            by_name["max_wait_ms"] = 0  # an erroneous fetch is answered at once
        response = await handle_by_name(ctx, by_name)
        named = iter(response.get("responses") or ())
        out = []
        for index, info in enumerate(order):
            if info is None:
                out.append(unknown[index])
                continue
            topic = next(named)
            topic["topic_id"] = info.topic_id
            out.append(topic)
        response["responses"] = out
        if version >= NODE_ENDPOINTS_VERSION:
            _add_node_endpoints(ctx.broker, response)
        return response

    return handle_fetch


def _add_node_endpoints(broker, response: dict) -> None:
    node = broker.config.node_id
    moved = False
    for topic in response["responses"]:
        for p in topic["partitions"]:
            if p["error_code"] in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                p["current_leader"] = {"leader_id": node, "leader_epoch": 0}
                moved = True
    if moved:
        host, port = broker.config.advertised
        response["node_endpoints"] = [{"node_id": node, "host": host, "port": port, "rack": None}]
