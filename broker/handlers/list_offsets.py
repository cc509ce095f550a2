"""ListOffsets (key 2), versions 1-11.

Special timestamps: -1 latest (the high watermark; with v2+ ``isolation_level`` 1 the last stable
offset), -2 earliest (the log start offset), -3 (v7, KIP-734) the offset of the record with the
largest timestamp, together with that timestamp.  Any other timestamp finds the first offset
whose record timestamp is >= it; when there is none, offset and timestamp are -1 (Kafka's
"unknown offset").  v1+ returns a single offset (v0's ``old_style_offsets`` list is not served);
v4+ adds leader_epoch (always 0 here); v6 is flexible.  v8 adds -4 (KIP-405, the earliest
offset of the local log: the log start offset, as there is no tiered storage), v9 -5 (KIP-1005,
the latest tiered offset: offset -1 with epoch -1, Kafka's answer without remote storage), v10 a
timeout for remote lookups (nothing here is remote), v11 -6 (KIP-1023, the earliest offset still
to be uploaded to remote storage: offset -1 with epoch -1, Kafka's answer without remote storage).
Each sentinel is answered only from the version that introduced it (-3 v7, -4 v8, -5 v9, -6
v11); below it, and for any other negative timestamp, the partition gets UNSUPPORTED_VERSION with
offset, timestamp and epoch -1, as Kafka 4.2 answers.

current_leader_epoch (v4+) above ours gives UNKNOWN_LEADER_EPOCH, below (other than -1)
FENCED_LEADER_EPOCH.  Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.

A lookup by timestamp reads records from the log.  A batch that does not decode there (written
by an older version, a flipped bit) answers CORRUPT_MESSAGE for that partition, logged once per
partition; the connection and the other partitions are not affected.
"""

from __future__ import annotations

import logging
import struct

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode, KafkaError, ProtocolError

from .leader_epoch import LEADER_EPOCH, leader_epoch_error

API_KEY = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
# The first ListOffsets version that knows each sentinel timestamp (Kafka 4.2 checks them).
SENTINEL_MIN_VERSION = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                        EARLIEST_PENDING_UPLOAD: 11}

log = logging.getLogger("minikafka.list_offsets")
_reported: set[tuple[str, int]] = set()


def _entry(index: int, error: int, offset: int = -1, timestamp: int = -1, epoch: int = -1) -> dict:
    return {"partition_index": index, "error_code": error, "old_style_offsets": [],
            "timestamp": timestamp, "offset": offset, "leader_epoch": epoch}


def list_partition(broker, topic: str, p: dict, read_committed: bool, version: int = 11) -> dict:
    index = p["partition_index"]
    try:
        plog = broker.controller.log(topic, index)
    except KafkaError as exc:
        return _entry(index, exc.code)
    epoch_error = leader_epoch_error(p.get("current_leader_epoch", -1))
    if epoch_error:
        return _entry(index, epoch_error)
    ts = p["timestamp"]
    if ts < 0 and version < SENTINEL_MIN_VERSION.get(ts, 1 << 16):
        return _entry(index, ErrorCode.UNSUPPORTED_VERSION)
    if ts == LATEST:
        offset = plog.last_stable_offset if read_committed else plog.high_watermark
        return _entry(index, ErrorCode.NONE, offset, -1, LEADER_EPOCH)
    if ts == EARLIEST or ts == EARLIEST_LOCAL:
        return _entry(index, ErrorCode.NONE, plog.log_start_offset, -1, LEADER_EPOCH)
    if ts == LATEST_TIERED or ts == EARLIEST_PENDING_UPLOAD:
        return _entry(index, ErrorCode.NONE, -1, -1, -1)
    upper = plog.last_stable_offset if read_committed else plog.high_watermark
    try:
        found = plog.max_timestamp_offset() if ts == MAX_TIMESTAMP else plog.offset_for_timestamp(ts)
    except (ProtocolError, struct.error, ValueError) as exc:
        if (topic, index) not in _reported:
            _reported.add((topic, index))
            log.error("ListOffsets by timestamp on %s-%d: undecodable batch in the log: %s", topic, index, exc)
        return _entry(index, ErrorCode.CORRUPT_MESSAGE)
    if found is None or found[0] >= upper:
        return _entry(index, ErrorCode.NONE, -1, -1, -1)
    offset, timestamp = found
    return _entry(index, ErrorCode.NONE, offset, timestamp, LEADER_EPOCH)




async def handle_list_offsets(ctx, body: dict) -> dict:
    read_committed = body.get("isolation_level", 0) == 1
    topics = []
    for topic in body.get("topics") or ():
        name = topic["name"]
        if not az.authorize(ctx, az.DESCRIBE, az.TOPIC, name):  # issue 12
            topics.append({"name": name, "partitions": [
                _entry(p["partition_index"], ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1)
                for p in topic.get("partitions") or ()]})
            continue
        if getattr(ctx.broker, "unregistered", False):  # after UnregisterBroker: no leader here until restart (Kafka 4.2)
            topics.append({"name": name, "partitions": [
                _entry(p["partition_index"], ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1)
                for p in topic.get("partitions") or ()]})
            continue
        topics.append({"name": name, "partitions": [
            list_partition(ctx.broker, name, p, read_committed, ctx.api_version) for p in topic.get("partitions") or ()]})
    return {"throttle_time_ms": 0, "topics": topics}


def register(registry, broker) -> None:
    registry.register(API_KEY, 1, 11, handle_list_offsets)
