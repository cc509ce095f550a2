"""OffsetForLeaderEpoch (key 23), versions 2-4.

Consumers (Java when v3+ is advertised, librdkafka, kafka-python) use it to validate a position
after a leader change: "where does epoch E end?".  This broker has had one leader forever, so
there is one epoch, 0:

- requested epoch 0 (ours) -> leader_epoch 0, end_offset = log end offset;
- requested epoch above ours or below 0 -> leader_epoch -1, end_offset -1 (Kafka's
  UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET answer);
- current_leader_epoch above ours -> UNKNOWN_LEADER_EPOCH, below (other than -1) ->
  FENCED_LEADER_EPOCH; unknown partition -> UNKNOWN_TOPIC_OR_PARTITION.

v2 adds current_leader_epoch, v3 replica_id, v4 is flexible.
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az

from minikafka.protocol.errors import ErrorCode, KafkaError

from .leader_epoch import LEADER_EPOCH, leader_epoch_error

API_KEY = 23


def _entry(index: int, error: int, epoch: int = -1, end_offset: int = -1) -> dict:
    return {"error_code": error, "partition": index, "leader_epoch": epoch, "end_offset": end_offset}


def epoch_for(broker, topic: str, p: dict) -> dict:
    index = p["partition"]
    try:
        plog = broker.controller.log(topic, index)
    except KafkaError as exc:
        return _entry(index, exc.code)
    epoch_error = leader_epoch_error(p.get("current_leader_epoch", -1))
    if epoch_error:
        return _entry(index, epoch_error)
    if p["leader_epoch"] != LEADER_EPOCH:
        return _entry(index, ErrorCode.NONE)
    return _entry(index, ErrorCode.NONE, LEADER_EPOCH, plog.log_end_offset)


async def handle_offset_for_leader_epoch(ctx, body: dict) -> dict:
    topics = []
    for topic in body.get("topics") or ():
        name = topic["topic"]
        if not az.authorize(ctx, az.DESCRIBE, az.TOPIC, name):  # issue 12
            topics.append({"topic": name, "partitions": [_entry(p["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                         for p in topic.get("partitions") or ()]})
            continue
        topics.append({"topic": name, "partitions": [epoch_for(ctx.broker, name, p)
                                                     for p in topic.get("partitions") or ()]})
    return {"throttle_time_ms": 0, "topics": topics}


def register(registry, broker) -> None:
    registry.register(API_KEY, 2, 4, handle_offset_for_leader_epoch)
