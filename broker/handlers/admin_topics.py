"""Topic administration: CreateTopics (19) v2-7, DeleteTopics (20) v1-6, DeleteRecords (21) v0-2,
CreatePartitions (37) v0-3.

Checks, their order and their messages follow Kafka's KRaft controller
(``ReplicationControlManager``, ``ControllerApis``), since admin clients show the message:

* CreateTopics: a name twice in one request -> INVALID_REQUEST "Duplicate topic name." (one
  result per name, the response is keyed by name); illegal names -> INVALID_TOPIC_EXCEPTION;
  existing -> TOPIC_ALREADY_EXISTS; configs -> INVALID_CONFIG; manual assignments must name only
  this node; replication factor 1 or -1 (the default), anything else
  INVALID_REPLICATION_FACTOR "... only 1 broker(s) are registered."; partitions -1 means
  ``num.partitions``.  v5+ answers num_partitions, replication_factor and the effective configs
  with their sources; v7 the topic id.  validate_only runs every check and creates nothing.
* DeleteTopics: by name (v1-5) or by name or id (v6).  ``delete.topic.enable=false`` gives
  TOPIC_DELETION_DISABLED (v3+) or INVALID_REQUEST.  Deviation: Kafka lets a client delete
  ``__consumer_offsets``; here the group coordinator's state lives there, so internal topics are
  refused with INVALID_REQUEST.
* CreatePartitions: only growth (INVALID_PARTITIONS otherwise), assignments name this node;
  internal topics are refused (their partition count is the group/transaction hash modulus).
* DeleteRecords: offset -1 means the high watermark; negative or above the high watermark ->
  OFFSET_OUT_OF_RANGE; internal topics -> INVALID_TOPIC_EXCEPTION; a topic whose cleanup.policy
  lacks ``delete`` -> POLICY_VIOLATION.  low_watermark is the new log start offset (-1 on error).

Timeouts (``timeout_ms``) are not waited on: every change is applied before the answer.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections import Counter
from typing import Any

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode, KafkaError, error_name

from minikafka.broker import configs as cfg

log = logging.getLogger(__name__)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
CREATE_PARTITIONS = 37

ZERO_UUID = uuid.UUID(int=0)
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

# Kafka's default texts for errors it reports without a specific message.
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


class AdminError(Exception):
    """One topic's failure: an error code and Kafka's message for it."""

    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = int(code)
        self.message = message


def _kafka_error_message(exc: KafkaError) -> str | None:
    text = str(exc)
    return None if text == error_name(exc.code) else text


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _check_assignment(broker_ids: list[int], node_id: int, replication_factor: int | None) -> None:
    """Kafka's validateManualPartitionAssignment on a one-node cluster."""
    if not broker_ids:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id != node_id:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {broker_id}, "
                             "but no such broker is registered.")
        if broker_id == previous:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with {len(broker_ids)} "
                         "replica(s), but this is not consistent with previous partitions, which have "
                         f"{replication_factor} replica(s).")


def _broker_int(broker, name: str, fallback: int) -> int:
    try:
        return int(broker.config.get(name))
    except Exception:
        return fallback


# -- CreateTopics -------------------------------------------------------------------------

def _plan_topic(broker, topic: dict) -> tuple[int, dict[str, str]]:
    """Every check Kafka makes before creating one topic; returns (partitions, canonical configs)."""
    controller = broker.controller
    name = topic["name"]
    problem = cfg.topic_name_problem(name)
    if name == CLUSTER_METADATA_TOPIC:
        raise AdminError(ErrorCode.INVALID_REQUEST,
                         f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
    if name in controller.topics:
        raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if problem:
        raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    key = cfg.collision_key(name)
    if key != name or "_" in name:
        for existing in controller.topics:
            if cfg.collision_key(existing) == key:
                raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {existing}")
    requested = {c["name"]: c.get("value") for c in topic.get("configs") or ()}
    try:
        configs = cfg.validate_topic_configs(requested)
    except cfg.ConfigError as exc:
        raise AdminError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    node_id = controller.node_id
    assignments = topic.get("assignments") or []
    replication_factor = topic.get("replication_factor", -1)
    num_partitions = topic.get("num_partitions", -1)
    if assignments:
        if replication_factor != -1:
            raise AdminError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                             "but replication factor was not set to -1.")
        if num_partitions != -1:
            raise AdminError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                             "but numPartitions was not set to -1.")
        seen: set[int] = set()
        factor = None
        for assignment in assignments:
            index = assignment["partition_index"]
            if index in seen:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Found multiple manual partition assignments for partition {index}")
            seen.add(index)
            _check_assignment(list(assignment.get("broker_ids") or []), node_id, factor)
            factor = len(assignment["broker_ids"])
        if seen != set(range(len(seen))):
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        return len(seen), configs
    if replication_factor < -1 or replication_factor == 0:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if num_partitions < -1 or num_partitions == 0:
        raise AdminError(ErrorCode.INVALID_PARTITIONS,
                         "Number of partitions was set to an invalid non-positive value.")
    if num_partitions == -1:
        num_partitions = _broker_int(broker, "num.partitions", 1)
    if replication_factor == -1:
        replication_factor = _broker_int(broker, "default.replication.factor", 1)
    if replication_factor != 1:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): The target "
                         f"replication factor of {replication_factor} cannot be reached because only "
                         "1 broker(s) are registered.")
    return num_partitions, configs


def _created_configs(broker, overrides: dict[str, str]) -> list[dict]:
    store = cfg.dynamic_configs(broker)
    entries = []
    for name in sorted(cfg.TOPIC_CONFIGS):
        key = cfg.TOPIC_CONFIGS[name]
        value, source = cfg.topic_value(name, overrides, store)
        entries.append({"name": name, "value": None if key.sensitive else value, "read_only": False,
                        "config_source": int(source), "is_sensitive": key.sensitive})
    return entries


def _once_per_name(topics):
    """Each named topic once, with whether the request named it more than once.

    Kafka answers a name given twice with one INVALID_REQUEST result for that name."""
    counts = Counter(t["name"] for t in topics)
    seen: set[str] = set()
    for topic in topics:
        if topic["name"] not in seen:
            seen.add(topic["name"])
            yield topic, counts[topic["name"]] > 1


async def create_topics(ctx, body: dict) -> dict:
    broker = ctx.broker
    controller = broker.controller
    validate_only = bool(body.get("validate_only", False))
    topics = body.get("topics") or []
    results = []
    for topic, duplicated in _once_per_name(topics):
        name = topic["name"]
        result = {"name": name, "topic_id": ZERO_UUID, "error_code": ErrorCode.NONE, "error_message": None,
                  "topic_config_error_code": 0, "num_partitions": -1, "replication_factor": -1,
                  "configs": []}
        results.append(result)
        if duplicated:
            result.update(error_code=int(ErrorCode.INVALID_REQUEST), error_message="Duplicate topic name.")
            continue
        if not (az.authorize(ctx, az.CREATE, az.CLUSTER) or az.authorize(ctx, az.CREATE, az.TOPIC, name)):
            result.update(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), error_message="Authorization failed.")
            continue
        try:
            num_partitions, configs = _plan_topic(broker, topic)
            info = await _maybe_await(controller.create_topic(
                name, num_partitions, 1, configs=configs, validate_only=validate_only))
        except AdminError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
            continue
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=_kafka_error_message(exc))
            continue
        topic_id = getattr(info, "topic_id", None) or uuid.uuid4()
        if not az.authorize(ctx, az.DESCRIBE_CONFIGS, az.TOPIC, name):
            # Kafka 4.2: created, but its configs are not shown to a principal that may not see them.
            result.update(topic_id=topic_id, topic_config_error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        result.update(topic_id=topic_id, num_partitions=num_partitions, replication_factor=1,
                      configs=_created_configs(broker, configs))
    if not validate_only:
        created = [r["name"] for r in results if r["error_code"] == ErrorCode.NONE]
        if created:
            log.info("CreateTopics from %s: created %s", ctx.client_id, ", ".join(created))
    return {"throttle_time_ms": 0, "topics": results}


# -- DeleteTopics -------------------------------------------------------------------------

async def delete_topics(ctx, body: dict) -> dict:
    broker = ctx.broker
    controller = broker.controller
    responses: list[dict] = []

    def answer(name: str | None, topic_id: uuid.UUID, code: int, message: str | None = None) -> None:
        responses.append({"name": name, "topic_id": topic_id, "error_code": int(code),
                          "error_message": message})

    # Requests name topics either as v0-5 topic_names or as v6 topics (name or id).
    requested: list[tuple[str | None, uuid.UUID]] = [(n, ZERO_UUID) for n in body.get("topic_names") or ()]
    for topic in body.get("topics") or ():
        requested.append((topic.get("name"), topic.get("topic_id") or ZERO_UUID))

    enabled = True
    try:
        enabled = bool(broker.config.get("delete.topic.enable"))
    except Exception:
        pass
    if not enabled:
        code = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
        for name, topic_id in requested:
            answer(name, topic_id, code, "Topic deletion is disabled.")
        return {"throttle_time_ms": 0, "responses": responses}

    name_counts = Counter(n for n, i in requested if n is not None and i == ZERO_UUID)
    id_counts = Counter(i for n, i in requested if n is None and i != ZERO_UUID)
    by_id = {info.topic_id: info for info in controller.topics.values()}
    to_delete: dict[uuid.UUID, str] = {}
    requested_by_name: dict[uuid.UUID, bool] = {}
    duplicate_names: list[str] = []
    duplicate_ids: list[uuid.UUID] = []
    for name, topic_id in requested:
        if name is None and topic_id == ZERO_UUID:
            answer(None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
        elif name is not None and topic_id != ZERO_UUID:
            answer(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
        elif name is None:
            if id_counts[topic_id] > 1:
                if topic_id not in duplicate_ids:
                    duplicate_ids.append(topic_id)
                continue
            info = by_id.get(topic_id)
            if info is None:
                # Kafka 4.2 sends the error's description.
                answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
            else:
                to_delete[topic_id] = info.name
        else:
            if name_counts[name] > 1:
                if name not in duplicate_names:
                    duplicate_names.append(name)
                continue
            info = controller.topics.get(name)
            if info is None:
                answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
            elif info.topic_id in to_delete or info.topic_id in duplicate_ids:
                to_delete.pop(info.topic_id, None)
                answer(name, info.topic_id, ErrorCode.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                to_delete[info.topic_id] = name
                requested_by_name[info.topic_id] = True
    for name in duplicate_names:
        answer(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    for topic_id in duplicate_ids:
        answer(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")

    # Kafka 4.2 (ControllerApis): DELETE on the cluster allows deleting (and describing) any topic.
    cluster_delete = az.authorize(ctx, az.DELETE, az.CLUSTER)
    for topic_id, name in to_delete.items():
        info = controller.topics.get(name)
        if cluster_delete:
            pass
        elif requested_by_name.get(topic_id) and not az.authorize(ctx, az.DESCRIBE, az.TOPIC, name):
            # Kafka 4.2 does not reveal a topic, named by the request, that the principal may not
            # describe.
            answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
            continue
        elif not az.authorize(ctx, az.DELETE, az.TOPIC, name):  # issue 12
            answer(name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            continue
        if info is not None and (info.internal or name in cfg.INTERNAL_TOPICS):
            answer(name, topic_id, ErrorCode.INVALID_REQUEST,
                   f"Topic {name} is an internal topic and cannot be deleted.")
            continue
        try:
            await _maybe_await(controller.delete_topic(name))
        except KafkaError as exc:
            answer(name, topic_id, exc.code, _kafka_error_message(exc))
            continue
        log.info("DeleteTopics from %s: deleted %s (%s)", ctx.client_id, name, topic_id)
        answer(name, topic_id, ErrorCode.NONE)
    return {"throttle_time_ms": 0, "responses": responses}


# -- CreatePartitions ---------------------------------------------------------------------

def _plan_partitions(controller, topic: dict) -> None:
    name = topic["name"]
    info = controller.topics.get(name)
    if info is None:
        raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    current = info.num_partitions
    count = topic["count"]
    if count == current:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise AdminError(ErrorCode.INVALID_PARTITIONS,
                         f"The topic {name} currently has {current} partition(s); {count} would not be an increase.")
    if info.internal or name in cfg.INTERNAL_TOPICS:
        raise AdminError(ErrorCode.INVALID_REQUEST,
                         f"The partition count of internal topic {name} cannot be changed.")
    additional = count - current
    assignments = topic.get("assignments")
    if assignments is not None:
        if len(assignments) != additional:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(assignments)} assignment(s) were specified.")
        for assignment in assignments:
            _check_assignment(list(assignment.get("broker_ids") or []), controller.node_id, 1)


async def create_partitions(ctx, body: dict) -> dict:
    controller = ctx.broker.controller
    validate_only = bool(body.get("validate_only", False))
    topics = body.get("topics") or []
    results = []
    for topic, duplicated in _once_per_name(topics):
        name = topic["name"]
        result = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        results.append(result)
        if duplicated:
            result.update(error_code=int(ErrorCode.INVALID_REQUEST), error_message="Duplicate topic name.")
            continue
        if not az.authorize(ctx, az.ALTER, az.TOPIC, name):
            # Kafka 4.2 sends no message with this refusal.
            result.update(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), error_message=None)
            continue
        try:
            _plan_partitions(controller, topic)
            await _maybe_await(controller.create_partitions(name, topic["count"], validate_only=validate_only))
        except AdminError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=_kafka_error_message(exc))
    return {"throttle_time_ms": 0, "results": results}


# -- DeleteRecords ------------------------------------------------------------------------

def _deletes_allowed(broker, info) -> bool:
    store = cfg.dynamic_configs(broker)
    value, _ = cfg.topic_value("cleanup.policy", info.configs or {}, store)
    return "delete" in [p.strip().lower() for p in (value or "").split(",")]


async def _delete_partition(broker, name: str, partition: int, offset: int) -> tuple[int, int]:
    """(error_code, low_watermark) for one partition (Kafka's Partition.deleteRecordsOnLeader)."""
    controller = broker.controller
    info = controller.topics.get(name)
    if info is None or not 0 <= partition < info.num_partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if info.internal or name in cfg.INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
    if not _deletes_allowed(broker, info):
        return ErrorCode.POLICY_VIOLATION, -1
    try:
        plog = controller.log(name, partition)
    except KafkaError as exc:
        return exc.code, -1
    high_watermark = plog.high_watermark
    target = high_watermark if offset == -1 else offset
    if target < 0 or target > high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    if target > plog.log_start_offset:
        try:
            await _maybe_await(plog.delete_records(target))
        except KafkaError as exc:
            return exc.code, -1
    return ErrorCode.NONE, plog.log_start_offset


async def delete_records(ctx, body: dict) -> dict:
    broker = ctx.broker
    topics = []
    for topic in body.get("topics") or ():
        partitions = []
        allowed = az.authorize(ctx, az.DELETE, az.TOPIC, topic["name"])
        for part in topic.get("partitions") or ():
            if not allowed:
                partitions.append({"partition_index": part["partition_index"], "low_watermark": -1,
                                   "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
                continue
            code, low = await _delete_partition(broker, topic["name"], part["partition_index"], part["offset"])
            partitions.append({"partition_index": part["partition_index"], "low_watermark": low,
                               "error_code": int(code)})
        topics.append({"name": topic["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


def register(registry, broker) -> None:
    registry.register(CREATE_TOPICS, 2, 7, create_topics)
    registry.register(DELETE_TOPICS, 1, 6, delete_topics)
    registry.register(DELETE_RECORDS, 0, 2, delete_records)
    registry.register(CREATE_PARTITIONS, 0, 3, create_partitions)
