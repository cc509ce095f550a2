"""The KRaft quorum and its feature levels, as a single-node combined broker/controller has them.

- DescribeQuorum (55) v0-2: the metadata partition ``__cluster_metadata``-0 has one voter, this
  node, which is also the leader (epoch 1); its log end offset and the high watermark are the
  count of metadata-log records, and its fetch timestamps are now (the leader is always caught
  up with itself).  v1 adds the timestamps, v2 the voter's directory id (stable per cluster),
  per-partition error messages and ``nodes`` with this node's listener.  Any other topic or
  partition: UNKNOWN_TOPIC_OR_PARTITION on each partition named, as KafkaRaftClient answers.
- UpdateFeatures (57) v0-2: see ``broker.features`` for what can change.  Updates are all or
  nothing: the first refused one is the top-level error (INVALID_UPDATE_VERSION) and nothing is
  written; v0-1 repeat it in a result per feature, v2 has no per-feature results.
  ``validate_only`` (v1+) checks without writing.  v0's ``allow_downgrade`` maps to a safe
  downgrade.
"""

from __future__ import annotations

import uuid

from .. import features

DESCRIBE_QUORUM, UPDATE_FEATURES = 55, 57
METADATA_TOPIC = "__cluster_metadata"
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
LEADER_EPOCH = 1


def _directory_id(broker) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_OID, f"minikafka-metadata-dir:{broker.controller.cluster_id}")


async def describe_quorum(ctx, body: dict) -> dict:
    broker = ctx.broker
    node = broker.config.node_id
    requested = body.get("topics") or []
    valid = (len(requested) == 1 and requested[0]["topic_name"] == METADATA_TOPIC
             and [p["partition_index"] for p in requested[0].get("partitions") or ()] == [0])
    if not valid:
        return {"error_code": 0, "error_message": None, "nodes": [], "topics": [
            {"topic_name": t["topic_name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": UNKNOWN_TOPIC_OR_PARTITION,
                 "error_message": None, "leader_id": -1, "leader_epoch": -1, "high_watermark": -1,
                 "current_voters": [], "observers": []} for p in t.get("partitions") or ()]}
            for t in requested]}
    end = broker.controller.metadata_records
    now = broker.now_ms()
    voter = {"replica_id": node, "replica_directory_id": _directory_id(broker), "log_end_offset": end,
             "last_fetch_timestamp": now, "last_caught_up_timestamp": now}
    host, port = broker.config.advertised
    # Kafka 4.2 answers error_message "" (not null) on success.
    return {"error_code": 0, "error_message": "", "topics": [
        {"topic_name": METADATA_TOPIC, "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": "", "leader_id": node,
             "leader_epoch": LEADER_EPOCH, "high_watermark": end, "current_voters": [voter], "observers": []}]}],
        "nodes": [{"node_id": node, "listeners": [{"name": "PLAINTEXT", "host": host, "port": port}]}]}


async def update_features(ctx, body: dict) -> dict:
    broker = ctx.broker
    updates = body.get("feature_updates") or []
    error, message = 0, None
    names = [u["feature"] for u in updates]
    if len(set(names)) != len(names):
        error, message = INVALID_REQUEST, "The request contains multiple updates for the same feature."
    else:
        for u in updates:
            if ctx.api_version == 0:
                upgrade_type = features.SAFE_DOWNGRADE if u.get("allow_downgrade") else features.UPGRADE
            else:
                upgrade_type = u.get("upgrade_type", features.UPGRADE)
            reason = features.check_update(broker, u["feature"], u["max_version_level"], upgrade_type)
            if reason is not None:
                error, message = features.INVALID_UPDATE_VERSION, reason
                break
    if error == 0 and not body.get("validate_only"):
        for u in updates:
            broker.controller.set_feature_level(u["feature"], u["max_version_level"])
    # Kafka 4.2 answers a refused update with the top-level error only (no per-feature results).
    # Accepted ones carry Kafka's ApiError text of NONE, "NONE".
    results = [] if error else [{"feature": n, "error_code": error, "error_message": "NONE"} for n in names]
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "results": results}


def register(registry, broker) -> None:
    registry.register(DESCRIBE_QUORUM, 0, 2, describe_quorum)
    registry.register(UPDATE_FEATURES, 0, 2, update_features)
