"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89), v0, as Apache Kafka 4.2 serves them.

Both are advertised always (as Kafka 4.2 does) and answer UNSUPPORTED_VERSION while streams groups are
off: they are on when ``group.coordinator.rebalance.protocols`` names ``streams`` (Kafka 4.2's default
list is classic,consumer,streams; so is minikafka's) and the finalized ``streams.version`` feature is 1
(Kafka 4.2 finalizes 1 on a new cluster; UpdateFeatures can set it to 0).

Heartbeat, in KafkaApis's order: READ on the group (GROUP_AUTHORIZATION_FAILED); for a topology, no
Kafka-internal topic among its topics and only legal names (STREAMS_INVALID_TOPOLOGY), DESCRIBE on every
one of its topics (TOPIC_AUTHORIZATION_FAILED); then the coordinator shard (``manager``).  When the
answer says internal topics are missing, this broker creates them (CREATE on the cluster or on each
topic; a denied one is named in the MISSING_INTERNAL_TOPICS status detail) with the partition counts,
replication factor (-1: ``default.replication.factor``) and configs the topology asked for; the group
sees them on the member's next heartbeat, as Kafka's group sees its metadata update.

Describe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED); the empty id INVALID_GROUP_ID; an id that is
not a streams group GROUP_ID_NOT_FOUND.  With an authorizer, a group whose topology names a topic the
caller may not describe answers TOPIC_AUTHORIZATION_FAILED without topology and members.
"""

from __future__ import annotations

import logging

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode, KafkaError

from .settings import StreamsConfig

log = logging.getLogger("minikafka.streams")

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89
STREAMS_VERSION = "streams.version"
NOT_REQUESTED_OPERATIONS = -2147483648
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
# Kafka's Topic.INTERNAL_TOPICS, which a topology may not use.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def streams_protocol_configured(config) -> bool:
    """``group.coordinator.rebalance.protocols`` names ``streams``."""
    if config is None:
        return True
    try:
        value = config.get("group.coordinator.rebalance.protocols")
    except Exception:
        return True
    names = value if isinstance(value, (list, tuple)) else str(value or "").split(",")
    return "streams" in {n.strip().lower() for n in names}


def streams_enabled(broker) -> bool:
    from minikafka.broker import features

    return streams_protocol_configured(getattr(broker, "config", None)) and features.level(broker, STREAMS_VERSION) >= 1



def error_response(code: ErrorCode, message: str | None = None) -> dict:
    # The streams-group manager loads with the first request that needs it, not at start (idle memory).
    from .manager import error_response as answer

    return answer(code, message)


def _client_host(ctx) -> str:
    return "/" + (ctx.client_host or "")


def _answer(response: dict) -> dict:
    out = {k: v for k, v in response.items() if k != "topics_to_create"}
    out["throttle_time_ms"] = 0
    return out


def _topology_topics(topology: dict) -> list[str]:
    """Source, repartition sink, repartition source and changelog topics, without duplicates, in order."""
    seen: dict[str, None] = {}
    for s in topology.get("subtopologies") or []:
        for t in s.get("source_topics") or []:
            seen.setdefault(t, None)
        for t in s.get("repartition_sink_topics") or []:
            seen.setdefault(t, None)
        for t in s.get("repartition_source_topics") or []:
            seen.setdefault(t["name"], None)
        for t in s.get("state_changelog_topics") or []:
            seen.setdefault(t["name"], None)
    return list(seen)


async def streams_group_heartbeat(ctx, body: dict) -> dict:
    if not streams_enabled(ctx.broker):
        return _answer(error_response(ErrorCode.UNSUPPORTED_VERSION))  # Kafka 4.2: no message
    group_id = body["group_id"]
    if not az.authorize(ctx, az.READ, az.GROUP, group_id):
        return _answer(error_response(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    topology = body.get("topology")
    if topology is not None:
        from minikafka.broker.controller import topic_name_error

        topics = _topology_topics(topology)
        prohibited = [t for t in topics if t in KAFKA_INTERNAL_TOPICS]
        if prohibited:
            return _answer(error_response(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                          f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams "
                                          "topology is prohibited."))
        invalid = [t for t in topics if topic_name_error(t)]
        if invalid:
            return _answer(error_response(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                          f"Topic names {','.join(invalid)} are not valid topic names."))
        if topics and not all(az.authorize(ctx, az.DESCRIBE, az.TOPIC, t) for t in topics):
            return _answer(error_response(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    from minikafka.broker.group.apis import _coordinator

    coordinator = _coordinator(ctx)
    if coordinator is None:
        return _answer(error_response(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    shard, error = coordinator.check(group_id) if group_id else (None, ErrorCode.NONE)
    if not group_id:
        # An empty id is refused before the group is looked at (INVALID_REQUEST, as Kafka's checks).
        from .manager import HeartbeatError, validate_request
        try:
            validate_request(body)
        except HeartbeatError as exc:
            return _answer(error_response(exc.code, exc.message))
        return _answer(error_response(ErrorCode.INVALID_REQUEST, "GroupId can't be empty."))
    if shard is None:
        return _answer(error_response(error))
    response = shard.execute(shard.streams.heartbeat(body, ctx.client_id or "", _client_host(ctx)))
    to_create = response.get("topics_to_create") or {}
    if to_create:
        _create_internal_topics(ctx, shard, group_id, to_create, response)
    return _answer(response)


def _create_internal_topics(ctx, shard, group_id: str, topics: dict, response: dict) -> None:
    """Create missing internal topics as Kafka's broker does (its auto-topic-creation manager)."""
    if not az.authorize(ctx, az.CREATE, az.CLUSTER):
        denied = [t for t in topics if not az.authorize(ctx, az.CREATE, az.TOPIC, t)]
    else:
        denied = []
    if denied:
        statuses = response.setdefault("status", []) or []
        response["status"] = statuses
        detail = f"Unauthorized to CREATE on topics {', '.join(denied)}."
        for s in statuses:
            if s["status_code"] == 3:
                s["status_detail"] = f"{s['status_detail']}; {detail}"
                return
        statuses.append({"status_code": 3, "status_detail": detail})
        return
    controller = ctx.broker.controller
    created = False
    for name, spec in topics.items():
        if controller.topic(name) is not None:
            continue
        try:
            controller.create_topic(name, num_partitions=spec["num_partitions"],
                                    replication_factor=spec["replication_factor"], configs=spec["configs"])
            created = True
            log.info("streams group %s: created internal topic %s (%d partitions)", group_id, name,
                     spec["num_partitions"])
        except KafkaError as exc:
            log.warning("streams group %s: could not create internal topic %s: %s", group_id, name, exc)
    if created:
        group = shard.streams.groups.get(group_id)
        if group is not None:
            group.request_metadata_refresh()


async def streams_group_describe(ctx, body: dict) -> dict:
    if not streams_enabled(ctx.broker):
        return {"throttle_time_ms": 0, "groups": [
            {"error_code": ErrorCode.UNSUPPORTED_VERSION, "error_message": None, "group_id": g, "group_state": "",
             "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
             "authorized_operations": NOT_REQUESTED_OPERATIONS} for g in body.get("group_ids") or []]}
    from minikafka.broker.group.apis import _coordinator

    include_ops = bool(body.get("include_authorized_operations"))
    out = []
    for group_id in body.get("group_ids") or []:
        if not az.authorize(ctx, az.DESCRIBE, az.GROUP, group_id):
            out.append(_failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not group_id:
            out.append(_failed("", ErrorCode.INVALID_GROUP_ID))
            continue
        coordinator = _coordinator(ctx)
        shard, error = (None, ErrorCode.COORDINATOR_NOT_AVAILABLE) if coordinator is None else coordinator.check(group_id)
        if shard is None:
            out.append(_failed(group_id, error))
            continue
        described = shard.streams.describe(group_id)
        described["authorized_operations"] = NOT_REQUESTED_OPERATIONS
        if described["error_code"] == ErrorCode.NONE:
            if include_ops:
                # Without an authorizer Kafka 4.2 reports every group operation: READ, DELETE, DESCRIBE,
                # DESCRIBE_CONFIGS, ALTER_CONFIGS.
                described["authorized_operations"] = _group_operations(ctx, group_id) \
                    if az.enabled(ctx.broker) else ALL_GROUP_OPERATIONS
            if az.enabled(ctx.broker) and described["topology"] is not None:
                names = {t for s in described["topology"]["subtopologies"] for t in
                         list(s["source_topics"]) + list(s["repartition_sink_topics"])
                         + [i["name"] for i in s["repartition_source_topics"]]
                         + [i["name"] for i in s["state_changelog_topics"]]}
                if not all(az.authorize(ctx, az.DESCRIBE, az.TOPIC, t) for t in names):
                    described = {**_failed(group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                 "error_message": "The described group uses topics that the client is not "
                                                  "authorized to describe."}
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}


def _group_operations(ctx, group_id: str) -> int:
    """The group operations the caller may perform, as Kafka 4.2 counts them for a group (its configs too)."""
    bits = 0
    for op in (3, 6, 8, 10, 11):  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
        if az.authorize(ctx, op, az.GROUP, group_id):
            bits |= 1 << op
    return bits


def _failed(group_id: str, code: ErrorCode) -> dict:
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "topology": None, "members": [], "authorized_operations": NOT_REQUESTED_OPERATIONS}


def register(registry, broker) -> None:
    # Settings Kafka refuses to start with make this broker refuse to start too.
    StreamsConfig.from_broker_config(getattr(broker, "config", None) or {})
    registry.register(STREAMS_GROUP_HEARTBEAT, 0, 0, streams_group_heartbeat)
    registry.register(STREAMS_GROUP_DESCRIBE, 0, 0, streams_group_describe)
