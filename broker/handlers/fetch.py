"""Fetch (key 1), versions 4-18.

v4 adds isolation_level, last_stable_offset and aborted_transactions; v5 log_start_offset;
v7 fetch sessions (KIP-227); v9 current_leader_epoch; v11 rack_id and preferred_read_replica;
v12 is flexible and adds last_fetched_epoch / diverging_epoch.  v13-17 (topic ids, node
endpoints) are served by ``fetch_topic_ids``, which translates ids at the edges of this handler.

Behaviour:
- Long poll: if fewer than ``min_bytes`` are available the request parks on futures that
  Produce resolves (``Broker.notify_append``) and is answered when enough data arrived or
  ``max_wait_ms`` passed.  No polling loop; every wait is bounded by ``max_wait_ms``.
- Reads start at the batch containing ``fetch_offset`` (clients skip the records before it) and
  stop at the high watermark (read_uncommitted) or the last stable offset (read_committed).
  ``partition_max_bytes`` and the request's ``max_bytes`` (capped by ``fetch.max.bytes``)
  limit whole batches, except that the first batch of the response is always sent whole
  (KIP-74), so a consumer can make progress past a batch bigger than its limits.
- An offset below the log start or above the log end gives OFFSET_OUT_OF_RANGE.  Records are
  never null (librdkafka rejects a -1 size): an empty partition gets empty bytes.
- read_committed responses carry ``aborted_transactions`` as a list (empty without aborted
  transactions), read_uncommitted ones null, as Kafka does.
- The record bytes are memoryviews into the log's mapped segments, handed to the codec as a
  list of chunks for ``transport.writelines``: never copied into Python objects.
- Fetch sessions (KIP-227) live in ``fetch_session``, which wraps this handler: what reaches
  ``handle_fetch`` is always sessionless (it still refuses a session it is handed directly).
- Single leader epoch 0: current_leader_epoch above it gives UNKNOWN_LEADER_EPOCH, below it
  (other than -1) FENCED_LEADER_EPOCH.  Diverging-epoch detection is not needed and not done.
- Follower fetches (replica_id >= 0) are not supported: there are no followers.
"""

from __future__ import annotations

import asyncio
import logging

from minikafka.protocol.errors import ErrorCode, KafkaError

from .leader_epoch import leader_epoch_error

log = logging.getLogger("minikafka.fetch")

API_KEY = 1
READ_COMMITTED = 1


def _error_partition(index: int, error: int) -> dict:
    # Kafka 4.2 (FetchResponse.partitionResponse): offsets -1 and aborted_transactions [] for an
    # error found before reading (OFFSET_OUT_OF_RANGE: see read_partitions).
    return {"partition_index": index, "error_code": error, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],
            "preferred_read_replica": -1, "records": b""}


def _aborted(plog, start: int, end: int):
    fn = getattr(plog, "aborted_transactions", None)
    if fn is None:
        return []
    return [{"producer_id": pid, "first_offset": first} for pid, first in fn(start, end)]


def read_partitions(broker, body: dict) -> tuple[list, int, bool]:
    """Build the per-topic responses; returns (responses, bytes of records, any error)."""
    controller = broker.controller
    read_committed = body.get("isolation_level", 0) == READ_COMMITTED
    budget = min(body.get("max_bytes", 0x7FFFFFFF), broker.config.get("fetch.max.bytes"))
    if budget <= 0:
        budget = 1
    total = 0
    any_error = False
    first = True  # KIP-74: the first batch of the response goes out whatever its size
    none = ErrorCode.NONE  # bound once: an enum attribute costs ~60 ns per lookup, here per partition
    responses = []
    for topic in body.get("topics") or ():
        name = topic["topic"]
        info = controller.topic(name)
        parts = []
        for p in topic.get("partitions") or ():
            index = p["partition"]
            if info is None or not 0 <= index < info.num_partitions:
                parts.append(_error_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                any_error = True
                continue
            epoch_error = leader_epoch_error(p.get("current_leader_epoch", -1))
            if epoch_error:
                # Kafka 4.2: found while reading, so aborted_transactions stays null.
                parts.append(dict(_error_partition(index, epoch_error), aborted_transactions=None))
                any_error = True
                continue
            try:
                plog = controller.log(name, index)
            except KafkaError as exc:
                parts.append(_error_partition(index, exc.code))
                any_error = True
                continue
            log_start = plog.log_start_offset
            hw = plog.high_watermark
            lso = plog.last_stable_offset
            offset = p["fetch_offset"]
            entry = {"partition_index": index, "error_code": none, "high_watermark": hw,
                     "last_stable_offset": lso, "log_start_offset": log_start,
                     "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
            if offset < log_start or offset > plog.log_end_offset:
                # Kafka 4.2: offsets -1 as for any error, aborted_transactions null (the read failed).
                parts.append(dict(_error_partition(index, ErrorCode.OFFSET_OUT_OF_RANGE), aborted_transactions=None))
                any_error = True
                continue
            upper = lso if read_committed else hw
            limit = min(p.get("partition_max_bytes", budget), budget - total)
            if offset < upper and (limit > 0 or first):
                chunks = plog.read(offset, max(limit, 0), upper)
                size = 0
                for c in chunks:
                    size += len(c)
                # Storage always returns the first batch whole (KIP-74); only the response's
                # first batch may break the limits.
                if size and (first or size <= limit):
                    entry["records"] = chunks
                    total += size
                    first = False
            if read_committed:
                entry["aborted_transactions"] = _aborted(plog, offset, upper) if entry["records"] else []
            parts.append(entry)
        responses.append({"topic": name, "partitions": parts})
    return responses, total, any_error


async def handle_fetch(ctx, body: dict) -> dict:
    broker = ctx.broker
    session_id = body.get("session_id", 0)
    session_epoch = body.get("session_epoch", -1)
    if session_id != 0 or session_epoch not in (0, -1):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                "responses": []}
    denied = _authorize_fetch(ctx, body)  # READ per topic (issue 12); removes denied topics
    responses, total, any_error = read_partitions(broker, body)
    if denied:
        responses.extend(denied)
        any_error = True
    max_wait_ms = body.get("max_wait_ms", 0)
    min_bytes = body.get("min_bytes", 1)
    if total < min_bytes and max_wait_ms > 0 and not any_error:
        keys = [(t["topic"], p["partition"]) for t in body.get("topics") or () for p in t.get("partitions") or ()]
        if keys:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + max_wait_ms / 1000.0
            waiters = broker.append_waiters
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                await waiters.until(keys, loop, remaining)
                responses, total, any_error = read_partitions(broker, body)
                responses.extend(denied)
                if total >= min_bytes or any_error:
                    break
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses}


def _authorize_fetch(ctx, body: dict) -> list:
    from minikafka.broker.security import authorizer as az

    if not az.enabled(ctx.broker):
        return []
    topics = body.get("topics") or []
    denied = [t for t in topics if not az.authorize(ctx, az.READ, az.TOPIC, t["topic"])]
    body["topics"] = [t for t in topics if t not in denied]
    return [{"topic": t["topic"], "partitions": [_error_partition(p["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                 for p in t.get("partitions") or ()]} for t in denied]




def register(registry, broker) -> None:
    from .fetch_session import with_sessions
    from .fetch_topic_ids import by_topic_id

    registry.register(API_KEY, 4, 18, with_sessions(by_topic_id(handle_fetch)))
