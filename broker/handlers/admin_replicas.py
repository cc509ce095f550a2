"""Replica and log-directory admin APIs, answered as a single-node KRaft Kafka 4.0 answers them.

- DescribeLogDirs (35) v1-4: the one log directory (the data dir) with the real size of every
  partition (its segment files) and, from v4, the file system's total and usable bytes.  A
  request for named topics lists only those that exist; null lists every partition.  v3+
  carries a top-level error code.  Offset lag is 0 (no future replicas); v5's cordoning is not
  served.
- AlterReplicaLogDirs (34) v1-2: the only configured directory is the data dir, so moving a
  partition there is a no-op that succeeds; any other path is LOG_DIR_NOT_FOUND (Kafka: "not
  found in the config"), an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
- ElectLeaders (43) v0-2: this node leads every partition, so each named partition that exists
  gets ELECTION_NOT_NEEDED and unknown ones UNKNOWN_TOPIC_OR_PARTITION; a null partition list
  (all partitions) answers with no results, as Kafka's controller leaves out partitions that
  already have their leader.  Election types other than preferred (0) and unclean (1) are
  INVALID_REQUEST.
- AlterPartitionReassignments (45) v0-1: a target of exactly this node is a reassignment that
  completes at once (NONE); another broker id, an empty or duplicated list is
  INVALID_REPLICA_ASSIGNMENT; cancelling (null replicas) is NO_REASSIGNMENT_IN_PROGRESS; v1's
  ``allow_replication_factor_change`` false with a different replica count is
  INVALID_REPLICATION_FACTOR.
- ListPartitionReassignments (46) v0: nothing is ever in progress, so the list is empty.
- DescribeTopicPartitions (75) v0 (KIP-966): topics in name order, an empty list meaning all
  topics; at most ``response_partition_limit`` partitions (capped by
  ``max.request.partition.size.limit``, 2000) per response, continued with ``next_cursor``.  A
  cursor whose topic is not among the requested ones is INVALID_REQUEST for every topic;
  requested topics that do not exist are UNKNOWN_TOPIC_OR_PARTITION (left out when listing
  all).  Eligible leader replicas are empty lists (ELR is off).
"""

from __future__ import annotations

import os
import uuid

from minikafka.protocol.errors import ErrorCode

from .metadata import TOPIC_OPERATIONS

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, ELECT_LEADERS = 34, 35, 43
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS, DESCRIBE_TOPIC_PARTITIONS = 45, 46, 75

ZERO_UUID = uuid.UUID(int=0)


def log_dir(broker) -> str:
    return os.path.abspath(broker.config.data_dir)


def partition_size(broker, topic: str, partition: int) -> int:
    plog = broker.controller.log(topic, partition)
    size = getattr(plog, "size_bytes", None)
    return int(size) if size is not None else 0


def _exists(broker, topic: str, partition: int) -> bool:
    info = broker.controller.topic(topic)
    return info is not None and 0 <= partition < info.num_partitions


# -- DescribeLogDirs / AlterReplicaLogDirs ---------------------------------------------------

async def describe_log_dirs(ctx, body: dict) -> dict:
    broker = ctx.broker
    controller = broker.controller
    requested = body.get("topics")
    if requested is None:
        wanted = [(info.name, list(range(info.num_partitions))) for info in controller.topics.values()]
    else:
        wanted = []
        for t in requested:
            info = controller.topic(t["topic"])
            if info is not None:
                parts = [p for p in t.get("partitions") or () if 0 <= p < info.num_partitions]
                if parts:
                    wanted.append((info.name, parts))
    topics = [{"name": name, "partitions": [
        {"partition_index": p, "partition_size": partition_size(broker, name, p), "offset_lag": 0,
         "is_future_key": False} for p in parts]} for name, parts in wanted]
    directory = log_dir(broker)
    try:
        stat = os.statvfs(directory)
        total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
    except OSError:
        total = usable = -1
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": [
        {"error_code": ErrorCode.NONE, "log_dir": directory, "topics": topics, "total_bytes": total,
         "usable_bytes": usable, "is_cordoned": False}]}


async def alter_replica_log_dirs(ctx, body: dict) -> dict:
    broker = ctx.broker
    ours = log_dir(broker)
    results: dict[str, list] = {}
    for d in body.get("dirs") or ():
        same_dir = os.path.abspath(d["path"]) == ours
        for t in d.get("topics") or ():
            out = results.setdefault(t["name"], [])
            for p in t.get("partitions") or ():
                if not same_dir:
                    code = ErrorCode.LOG_DIR_NOT_FOUND
                elif not _exists(broker, t["name"], p):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = ErrorCode.NONE  # already there: the move is a no-op
                out.append({"partition_index": p, "error_code": code})
    return {"throttle_time_ms": 0, "results": [
        {"topic_name": name, "partitions": parts} for name, parts in results.items()]}


# -- ElectLeaders ----------------------------------------------------------------------------

async def elect_leaders(ctx, body: dict) -> dict:
    broker = ctx.broker
    election_type = body.get("election_type", 0)
    requested = body.get("topic_partitions")
    if election_type not in (0, 1):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": []}
    results = []
    for t in requested or ():  # null: every partition, none of which needs an election
        parts = []
        for p in t.get("partitions") or ():
            if _exists(broker, t["topic"], p):
                parts.append({"partition_id": p, "error_code": ErrorCode.ELECTION_NOT_NEEDED,
                              "error_message": "Leader election not needed for topic partition."})
            else:
                parts.append({"partition_id": p, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": "This server does not host this topic-partition."})
        results.append({"topic": t["topic"], "partition_result": parts})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}


# -- partition reassignments -----------------------------------------------------------------

def _reassignment_error(broker, topic: str, partition: int, replicas, allow_rf_change: bool):
    if not _exists(broker, topic, partition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic or partition does not exist."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None  # Kafka 4.2 sends no message with it
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes duplicate replicas."
    node = broker.config.node_id
    for r in replicas:
        if r != node:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker {r}, "
                                                "but no such broker is registered.")
    if not allow_rf_change and len(replicas) != 1:
        return ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor cannot change."
    return ErrorCode.NONE, None


async def alter_partition_reassignments(ctx, body: dict) -> dict:
    broker = ctx.broker
    allow_rf_change = body.get("allow_replication_factor_change", True)
    responses = []
    for t in body.get("topics") or ():
        parts = []
        for p in t.get("partitions") or ():
            code, message = _reassignment_error(broker, t["name"], p["partition_index"], p.get("replicas"),
                                                allow_rf_change)
            parts.append({"partition_index": p["partition_index"], "error_code": code, "error_message": message})
        responses.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change, "error_code": ErrorCode.NONE,
            "error_message": None, "responses": responses}


async def list_partition_reassignments(ctx, body: dict) -> dict:
    # Reassignments to this node complete as they are made: none is ever ongoing.
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": []}


# -- DescribeTopicPartitions -----------------------------------------------------------------

def _topic_error(name, code: int) -> dict:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": [],
            "topic_authorized_operations": TOPIC_OPERATIONS}


def describe_topic_partitions_body(broker, body: dict) -> dict:
    controller = broker.controller
    node = broker.config.node_id
    requested = [t["name"] for t in body.get("topics") or ()]
    all_topics = not requested
    cursor = body.get("cursor")
    if cursor is not None and not all_topics and cursor["topic_name"] not in requested:
        return {"throttle_time_ms": 0, "next_cursor": None,
                "topics": [_topic_error(name, ErrorCode.INVALID_REQUEST) for name in requested]}
    names = sorted(controller.topics) if all_topics else sorted(set(requested))
    start = 0
    if cursor is not None:
        names = [n for n in names if n >= cursor["topic_name"]]
        if names and names[0] == cursor["topic_name"]:
            start = max(0, cursor["partition_index"])
    limit = body.get("response_partition_limit", 2000)
    remaining = max(1, min(limit if limit > 0 else 2000, broker.config.get("max.request.partition.size.limit")))
    topics, next_cursor = [], None
    for i, name in enumerate(names):
        first = start if i == 0 else 0
        info = controller.topic(name)
        if info is None:
            if not all_topics:
                topics.append(_topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        if remaining <= 0:
            next_cursor = {"topic_name": name, "partition_index": first}
            break
        end = min(info.num_partitions, first + remaining)
        topics.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": info.topic_id, "is_internal": info.internal,
                       "partitions": [
                           {"error_code": ErrorCode.NONE, "partition_index": p, "leader_id": node, "leader_epoch": 0,
                            "replica_nodes": [node], "isr_nodes": [node], "eligible_leader_replicas": [],
                            "last_known_elr": [], "offline_replicas": []} for p in range(first, end)],
                       "topic_authorized_operations": TOPIC_OPERATIONS})
        remaining -= end - first
        if end < info.num_partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


async def describe_topic_partitions(ctx, body: dict) -> dict:
    return describe_topic_partitions_body(ctx.broker, body)


def register(registry, broker) -> None:
    registry.register(DESCRIBE_LOG_DIRS, 1, 4, describe_log_dirs)
    registry.register(ALTER_REPLICA_LOG_DIRS, 1, 2, alter_replica_log_dirs)
    registry.register(ELECT_LEADERS, 0, 2, elect_leaders)
    registry.register(ALTER_PARTITION_REASSIGNMENTS, 0, 1, alter_partition_reassignments)
    registry.register(LIST_PARTITION_REASSIGNMENTS, 0, 0, list_partition_reassignments)
    registry.register(DESCRIBE_TOPIC_PARTITIONS, 0, 0, describe_topic_partitions)

