"""TxnOffsetCommit (key 28): the checks KafkaApis makes before the group coordinator sees it.

The group coordinator serves TxnOffsetCommit (broker/group/apis.py, which checks READ on the
group); this module, loaded after it, wraps that handler with what Kafka's
``handleTxnOffsetCommitRequest`` checks first, in its order:

1. WRITE on the transactional id, else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
2. READ on the group, else every partition GROUP_AUTHORIZATION_FAILED;
3. READ per topic (TOPIC_AUTHORIZATION_FAILED for its partitions), then unknown topics and
   partitions (UNKNOWN_TOPIC_OR_PARTITION); only the rest reaches the coordinator, and when
   nothing is left the coordinator is not asked at all.

Without an authorizer every check passes and only step 3's existence check can refuse, as in Kafka.
"""

from __future__ import annotations

from minikafka.protocol.errors import ErrorCode

from ..security import authorizer as az

TXN_OFFSET_COMMIT = 28


def _every_partition(topics: list, code: int) -> dict:
    return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": code} for p in t["partitions"]]}
        for t in topics]}


def authorized(handler):
    async def txn_offset_commit(ctx, body: dict) -> dict:
        topics = body.get("topics") or []
        if not az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, body["transactional_id"]):
            return _every_partition(topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not az.authorize(ctx, az.READ, az.GROUP, body["group_id"]):
            return _every_partition(topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        controller = ctx.broker.controller
        errors: dict[tuple[str, int], int] = {}
        passed = []
        for t in topics:
            readable = az.authorize(ctx, az.READ, az.TOPIC, t["name"])
            info = controller.topic(t["name"]) if readable else None
            known = []
            for p in t["partitions"]:
                index = p["partition_index"]
                if not readable:
                    errors[(t["name"], index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif info is None or not 0 <= index < info.num_partitions:
                    errors[(t["name"], index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    known.append(p)
            if known:
                passed.append({**t, "partitions": known})
        if passed:
            response = await handler(ctx, {**body, "topics": passed})
            for t in response["topics"]:
                for p in t["partitions"]:
                    errors[(t["name"], p["partition_index"])] = p["error_code"]
        return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": errors[(t["name"], p["partition_index"])]}
            for p in t["partitions"]]} for t in topics]}

    return txn_offset_commit


def register(registry, broker) -> None:
    if TXN_OFFSET_COMMIT in registry:
        registry.wrap(TXN_OFFSET_COMMIT, authorized)
