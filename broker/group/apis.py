"""Group APIs: the asyncio side of the group coordinator.

Served versions (PROTOCOL.md "Serve" column) and per-version notes:

* FindCoordinator 0-6: v4+ batches ``coordinator_keys``; v5 adds nothing a broker answers
  differently (TRANSACTION_ABORTABLE for clients); v6 key_type 2 (KIP-932 share coordinator,
  "group:topicId:partition", INVALID_REQUEST below v6 or malformed; well formed:
  COORDINATOR_NOT_AVAILABLE, as there is no share coordinator).  key_type 0 (group) answers this broker,
  creating ``__consumer_offsets`` on first use; key_type 1 (transaction) answers this broker when a
  transaction coordinator is installed (``broker.txn_coordinator``), creating
  ``__transaction_state`` on first use, else COORDINATOR_NOT_AVAILABLE (also when the topic cannot
  be created); other key types INVALID_REQUEST.
* JoinGroup 0-9: v0 has no rebalance timeout (the session timeout is used); v4+ MEMBER_ID_REQUIRED
  two-step join; v5+ group.instance.id; protocol_name is nullable only from v7 ("" before);
  v9 skip_assignment for a static leader rejoining a Stable group.
* SyncGroup 0-5: v3+ group.instance.id; v5 protocol type/name checked and returned.
* Heartbeat 0-4, LeaveGroup 0-5 (v3+ batched members; v0-2 report the member's error at the top).
* OffsetCommit 2-10 (v2-4 retention_time_ms; v6+ leader epoch; v7+ group.instance.id; v9 answers
  GROUP_ID_NOT_FOUND for an unknown group with a generation), OffsetFetch 1-10 (v2+ all topics with
  null topics; v7 require_stable; v8+ several groups).  v10 of both names topics by id (KIP-848):
  an unknown id, the zero id included, answers UNKNOWN_TOPIC_ID for its partitions.  Partitions of topics that do not exist get
  UNKNOWN_TOPIC_OR_PARTITION on commit, as Kafka's request handler does.
* DescribeGroups 0-6 (v6: GROUP_ID_NOT_FOUND for a missing group), ListGroups 0-5 (v4 states filter, v5 types filter), DeleteGroups 0-2,
  OffsetDelete 0.
* TxnOffsetCommit 0-5 (v5, transactions V2: adds the group's offsets partition to the
  transaction itself instead of needing AddOffsetsToTxn): registered only when a transaction coordinator is installed
  (``broker.txn_coordinator`` set by a handler module registered before this one), because the offsets
  stay pending until that coordinator ends the transaction through
  ``broker.group_coordinator.complete_transaction(producer_id, producer_epoch, commit)``.  While
  pending, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for those partitions.
* ConsumerGroupHeartbeat 0-1 and ConsumerGroupDescribe 0-1 (KIP-848, ``consumer.py``): advertised when
  ``group.coordinator.rebalance.protocols`` includes ``consumer`` (the default).  Heartbeat v1 adds the
  topic regex and wants a client-generated member id (v0: the coordinator generates it); Describe v1
  adds the member type.  OffsetCommit/OffsetFetch check member epochs for consumer groups
  (STALE_MEMBER_EPOCH); ListGroups and DeleteGroups know both group types; DescribeGroups answers
  Dead for a consumer group, as Kafka does, and the Java Admin describes those with 69.

A parked JoinGroup/SyncGroup is an asyncio future completed by the shard's ``respond`` callback, so
it never blocks the event loop or other connections; the connection keeps responses in order.
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az
from minikafka.broker.security.listeners import endpoint_for

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Optional

from minikafka.protocol.errors import ErrorCode, KafkaError

from minikafka.broker.clock import timer_scope

from . import OFFSETS_TOPIC
from .result import every_partition, join_error, sync_error

if TYPE_CHECKING:  # the coordinator's modules load with the first coordinator (_activate)
    from .coordinator import GroupCoordinator

log = logging.getLogger("minikafka.group")

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 15, 16, 42, 47
TXN_OFFSET_COMMIT = 28
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

# READ, DELETE, DESCRIBE: what Kafka reports for a group when no authorizer is configured.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
NOT_REQUESTED_OPERATIONS = -2147483648


def _coordinator(ctx) -> "Optional[GroupCoordinator]":
    return getattr(ctx.broker, "group_coordinator", None)


def _check(ctx, group_id: str, operation: int = az.READ):
    """(shard, ErrorCode) for a group: the error covers authorization (``operation`` on the
    group, Kafka's GROUP_AUTHORIZATION_FAILED), a missing/idle coordinator and loading."""
    if not az.authorize(ctx, operation, az.GROUP, group_id):
        return None, ErrorCode.GROUP_AUTHORIZATION_FAILED
    coord = _coordinator(ctx)
    if coord is None:
        return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    return coord.check(group_id)


def _is_share_group(shard, group_id: str) -> bool:
    """Share groups (broker/share) live beside the others in the shard; their ids answer the classic
    and consumer APIs as Kafka 4.2 does (GROUP_ID_NOT_FOUND / INCONSISTENT_GROUP_PROTOCOL)."""
    share = getattr(shard, "share", None)
    return share is not None and share.has_group(group_id)


def _client_host(ctx) -> str:
    # Kafka reports InetAddress.toString(): "/" + the address.
    return "/" + (ctx.client_host or "")


# == FindCoordinator ==============================================================================

async def find_coordinator(ctx, body: dict) -> dict:
    key_type = body.get("key_type", 0)
    keys = (body.get("coordinator_keys") or []) if ctx.api_version >= 4 else [body.get("key", "")]
    host, port = endpoint_for(ctx)  # the listener the client came in on
    node_id = ctx.broker.config.node_id
    results = []
    for key in keys:
        if getattr(ctx.broker, "unregistered", False) and key_type in (0, 1):
            # After UnregisterBroker this node coordinates nothing until it restarts (Kafka 4.2).
            results.append({"key": key, "node_id": -1, "host": "", "port": -1,
                            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": ""})
            continue
        if key_type == 0 and not az.authorize(ctx, az.DESCRIBE, az.GROUP, key):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
            message = "Group authorization failed."
        elif key_type == 1 and not az.authorize(ctx, az.DESCRIBE, az.TRANSACTIONAL_ID, key):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            message = "Transactional Id authorization failed."
        elif key_type == 0:
            try:
                coord = ensure_coordinator(ctx.broker)
            except KafkaError as exc:
                # __consumer_offsets could not be created (a full disk): retriable, the client
                # asks again; the controller logged the storage error.
                log.debug("no group coordinator yet: %s", exc)
                coord = None
            error = ErrorCode.NONE if coord is not None and coord.active else ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif key_type == 1:
            error = _ensure_txn_coordinator(ctx.broker)
        elif key_type == SHARE_KEY and ctx.api_version >= 6 and _share_key_valid(key):
            # KIP-932 (v6): the share coordinator of "group:topicId:partition"; brokers ask it,
            # so it needs CLUSTER_ACTION.  broker/share/state/apis.py answers (the first one creates
            # __share_group_state and answers COORDINATOR_NOT_AVAILABLE, as Kafka).
            from ..share.state.apis import find_coordinator_error

            error = find_coordinator_error(ctx.broker, key) if az.authorize(ctx, az.CLUSTER_ACTION, az.CLUSTER) \
                else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            message = ""
        elif key_type == SHARE_KEY:
            # Kafka 4.2: a share key below v6 or not of the form "group:topicId:partition".
            error, message = ErrorCode.INVALID_REQUEST, ""
        else:
            error = ErrorCode.INVALID_REQUEST
        if error == ErrorCode.NONE:
            # Kafka 4.2 answers success with the message "NONE" (v1-3) or "" (v4), never null.
            results.append({"key": key, "node_id": node_id, "host": host, "port": port,
                            "error_code": ErrorCode.NONE, "error_message": "NONE" if ctx.api_version < 4 else ""})
        elif error in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) \
                or key_type == SHARE_KEY:
            # Kafka 4.2: the error's description before v4, "" in v4's batched answer.
            results.append({"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
                            "error_message": message if ctx.api_version < 4 else ""})
        else:
            results.append({"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
                            "error_message": error.name})
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": results}
    r = results[0]
    return {"throttle_time_ms": 0, "error_code": r["error_code"], "error_message": r["error_message"],
            "node_id": r["node_id"], "host": r["host"], "port": r["port"]}


SHARE_KEY = 2


def _share_key_valid(key: str) -> bool:
    """A share coordinator key as Kafka's SharePartitionKey reads it: group:topicId:partition."""
    from ..share.state.coordinator import parse_coordinator_key

    return parse_coordinator_key(key) is not None


def _ensure_txn_coordinator(broker) -> ErrorCode:
    """FindCoordinator for a transactional id creates ``__transaction_state`` on first use, as the
    group key creates ``__consumer_offsets`` (Kafka creates either internal topic there)."""
    service = getattr(broker, "txn_coordinator", None)
    if service is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    try:
        coord = service.ensure()
    except KafkaError as exc:
        # __transaction_state could not be created (a full disk): retriable, the client asks again.
        log.debug("no transaction coordinator yet: %s", exc)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE if coord.active else ErrorCode.COORDINATOR_NOT_AVAILABLE


# == JoinGroup / SyncGroup / Heartbeat / LeaveGroup ===============================================

def _fit_join(response: dict, version: int) -> dict:
    out = dict(response)
    out["throttle_time_ms"] = 0
    out.setdefault("skip_assignment", False)
    if out.get("protocol_name") is None and version < 7:
        out["protocol_name"] = ""  # not nullable before v7
    if out.get("leader") is None:
        out["leader"] = ""
    return out


async def join_group(ctx, body: dict) -> dict:
    group_id = body["group_id"]
    if not group_id:
        return _fit_join(join_error(ErrorCode.INVALID_GROUP_ID, body["member_id"]), ctx.api_version)
    shard, error = _check(ctx, group_id)
    if shard is None:
        return _fit_join(join_error(error, body["member_id"]), ctx.api_version)
    future = ctx.broker.loop.create_future()

    def respond(response: dict) -> None:
        if not future.done():
            future.set_result(response)

    if _is_share_group(shard, group_id):
        return _fit_join(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, body["member_id"]), ctx.api_version)
    request = dict(body)
    if ctx.api_version == 0:
        request["rebalance_timeout_ms"] = body["session_timeout_ms"]
    shard.join_group(request, api_version=ctx.api_version, client_id=ctx.client_id or "",
                     client_host=_client_host(ctx), respond=respond)
    return _fit_join(await future, ctx.api_version)


def _fit_sync(response: dict) -> dict:
    out = dict(response)
    out["throttle_time_ms"] = 0
    if out.get("assignment") is None:
        out["assignment"] = b""
    return out


async def sync_group(ctx, body: dict) -> dict:
    group_id = body["group_id"]
    if not group_id:
        return _fit_sync(sync_error(ErrorCode.INVALID_GROUP_ID))
    shard, error = _check(ctx, group_id)
    if shard is None:
        return _fit_sync(sync_error(error))
    future = ctx.broker.loop.create_future()

    def respond(response: dict) -> None:
        if not future.done():
            future.set_result(response)

    shard.sync_group(body, respond)
    return _fit_sync(await future)


async def heartbeat(ctx, body: dict) -> dict:
    group_id = body["group_id"]
    if not group_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID}
    shard, error = _check(ctx, group_id)
    if shard is None:
        return {"throttle_time_ms": 0, "error_code": error}
    response = shard.heartbeat(body)
    return {"throttle_time_ms": 0, "error_code": response["error_code"]}


async def leave_group(ctx, body: dict) -> dict:
    group_id = body["group_id"]
    if ctx.api_version >= 3:
        members = [{"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id")}
                   for m in body.get("members") or []]
    else:
        members = [{"member_id": body["member_id"], "group_instance_id": None}]
    if not group_id:
        response = {"error_code": ErrorCode.INVALID_GROUP_ID, "members": []}
    else:
        shard, error = _check(ctx, group_id)
        response = {"error_code": error, "members": []} if shard is None else shard.leave_group(group_id, members)
    out = {"throttle_time_ms": 0, "error_code": response["error_code"], "members": response["members"]}
    if ctx.api_version < 3 and out["error_code"] == ErrorCode.NONE:
        # One member, no member list on the wire: its error becomes the response's error.
        errors = [m["error_code"] for m in out["members"] if m["error_code"] != ErrorCode.NONE]
        out["error_code"] = errors[0] if errors else ErrorCode.NONE
    return out


# == OffsetCommit / OffsetFetch / OffsetDelete ====================================================

def _partition_exists(ctx, topic: str, partition: int) -> bool:
    controller = ctx.broker.controller
    info = controller.topic(topic) if controller is not None else None
    return info is not None and 0 <= partition < info.num_partitions


def _commit(ctx, body: dict, commit) -> dict:
    """OffsetCommit and TxnOffsetCommit in KafkaApis's order: READ on the group, then per topic READ
    (TOPIC_AUTHORIZATION_FAILED) and existence (UNKNOWN_TOPIC_OR_PARTITION); only the remaining
    partitions reach the coordinator, which is not asked at all when none remain."""
    topics = body.get("topics") or []
    group_id = body["group_id"]
    # The empty group id is a group like any other here (Kafka 4.2 stores and serves its offsets).
    if not az.authorize(ctx, az.READ, az.GROUP, group_id):
        return {"throttle_time_ms": 0, **every_partition(topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    errors: dict[tuple[str, int], ErrorCode] = {}
    known_topics = []
    for t in topics:
        readable = az.authorize(ctx, az.READ, az.TOPIC, t["name"])
        known = []
        for p in t["partitions"]:
            if not readable:
                errors[(t["name"], p["partition_index"])] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _partition_exists(ctx, t["name"], p["partition_index"]):
                errors[(t["name"], p["partition_index"])] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(p)
        if known:
            known_topics.append({**t, "partitions": known})
    if known_topics:
        shard, error = _check(ctx, group_id)
        if shard is not None and _is_share_group(shard, group_id):
            shard, error = None, ErrorCode.GROUP_ID_NOT_FOUND  # "Group ... is not a consumer group."
        response = commit(shard, {**body, "topics": known_topics}) if shard is not None \
            else every_partition(known_topics, error)
        for t in response["topics"]:
            for p in t["partitions"]:
                errors[(t["name"], p["partition_index"])] = p["error_code"]
    return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": errors[(t["name"], p["partition_index"])]}
        for p in t["partitions"]]} for t in topics]}


TOPIC_ID_VERSION = 10  # OffsetCommit and OffsetFetch v10 (KIP-848) name topics by id only


def _topic_by_id(ctx, topic_id):
    controller = ctx.broker.controller
    if controller is None or topic_id is None or not topic_id.int:
        return None
    return controller.topic_by_id(topic_id)


def _topic_id_of(ctx, name: str):
    controller = ctx.broker.controller
    info = controller.topic(name) if controller is not None else None
    return info.topic_id if info is not None else uuid.UUID(int=0)


async def offset_commit(ctx, body: dict) -> dict:
    commit = lambda shard, known: shard.commit_offsets(known, ctx.api_version)  # noqa: E731
    if ctx.api_version < TOPIC_ID_VERSION:
        return _commit(ctx, body, commit)
    return _by_topic_ids(ctx, body, lambda named: _commit(ctx, named, commit))


def _by_topic_ids(ctx, body: dict, commit_by_name) -> dict:
    """OffsetCommit v10 (KIP-848): group authorization comes first (every partition gets its
    error); then an unknown topic id, the zero id included, answers UNKNOWN_TOPIC_ID per
    partition.  The known topics are committed by name and answered by id, first, the unknown
    ones after them; topics of the same id share one entry (Kafka 4.2 builds the answer by id)."""
    topics = body.get("topics") or []
    if not az.authorize(ctx, az.READ, az.GROUP, body["group_id"]):
        # Kafka 4.2: group authorization first, then the topic ids (the empty group id is a group
        # like any other, see _commit).
        answers = [{"topic_id": t.get("topic_id"), "partitions": [
            {"partition_index": p["partition_index"], "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
            for p in t["partitions"]]} for t in topics]
        return {"throttle_time_ms": 0, "topics": _merge_by_id(answers)}
    named, unknown = [], []
    for t in topics:
        info = _topic_by_id(ctx, t.get("topic_id"))
        if info is None:
            unknown.append({"topic_id": t.get("topic_id"), "partitions": [
                {"partition_index": p["partition_index"], "error_code": ErrorCode.UNKNOWN_TOPIC_ID}
                for p in t["partitions"]]})
        else:
            named.append(dict(t, name=info.name))
    answers = []
    if named:
        response = commit_by_name(dict(body, topics=named))
        answers = [{"topic_id": t["topic_id"], "partitions": a["partitions"]}
                   for t, a in zip(named, response["topics"])]
    return {"throttle_time_ms": 0, "topics": _merge_by_id(answers + unknown)}


def _merge_by_id(topics: list) -> list:
    merged: dict = {}
    for t in topics:
        key = t["topic_id"]
        if key in merged:
            merged[key]["partitions"].extend(t["partitions"])
        else:
            merged[key] = {"topic_id": key, "partitions": list(t["partitions"])}
    return list(merged.values())


async def txn_offset_commit(ctx, body: dict) -> dict:
    # Kafka checks WRITE on the transactional id before anything about the group.
    if not az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, body["transactional_id"]):
        return {"throttle_time_ms": 0,
                **every_partition(body.get("topics") or [], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}

    def commit(shard, known):
        error = _verify_txn_offsets(ctx, body)
        if error:
            return every_partition(known["topics"], error)
        return shard.txn_commit_offsets(known, ctx.api_version)

    return _commit(ctx, body, commit)


def _verify_txn_offsets(ctx, body: dict) -> ErrorCode:
    """Kafka 4.2's transaction verification of TxnOffsetCommit: the group's partition of
    __consumer_offsets must be in the producer's open transaction (AddOffsetsToTxn) at its
    epoch.  INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4), INVALID_PRODUCER_EPOCH."""
    service = getattr(ctx.broker, "txn_coordinator", None)
    coordinator = getattr(service, "coordinator", None)
    groups = _coordinator(ctx)
    if coordinator is None or groups is None:
        return ErrorCode.NONE
    if ctx.api_version >= 5:
        # Transactions V2 (KIP-890 part 2): the commit adds the group's partition of
        # __consumer_offsets to the transaction itself (no AddOffsetsToTxn).
        error = service.add_partitions(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                       [(OFFSETS_TOPIC, groups.partition_for(body["group_id"]))], 2)
        if error in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error is ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if error is ErrorCode.INVALID_TXN_STATE:
            return ErrorCode.TRANSACTION_ABORTABLE
        return error
    error = coordinator.validate_produce(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                         OFFSETS_TOPIC, groups.partition_for(body["group_id"]))
    if error is ErrorCode.INVALID_TXN_STATE and ctx.api_version >= 4:
        return ErrorCode.TRANSACTION_ABORTABLE
    if error is ErrorCode.NOT_ENOUGH_REPLICAS:  # the transaction coordinator is loading
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return error


def _fetch_group(ctx, group_id: str, topics, require_stable: bool, member_id: Optional[str] = None,
                 member_epoch: int = -1) -> dict:
    shard, error = _check(ctx, group_id, az.DESCRIBE)  # "" included, as Kafka 4.2
    if shard is None and ctx.api_version >= 2:
        # Kafka 4.2: from v2 a group-level error comes alone, without partitions.
        return {"group_id": group_id, "error_code": error, "topics": []}
    if shard is None:
        return {"group_id": group_id, "error_code": error, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": error} for i in t["partition_indexes"]]} for t in topics or []]}
    if topics is None:
        # All of the group's offsets: Kafka leaves out the topics the caller may not describe.
        fetched = shard.fetch_offsets(group_id, None, require_stable, member_id, member_epoch)
        return {**fetched, "topics": [t for t in fetched["topics"]
                                      if az.authorize(ctx, az.DESCRIBE, az.TOPIC, t["name"])]}
    # Named partitions: those of topics the caller may not describe answer TOPIC_AUTHORIZATION_FAILED.
    denied = {t["name"] for t in topics if not az.authorize(ctx, az.DESCRIBE, az.TOPIC, t["name"])}
    fetched = shard.fetch_offsets(group_id, [t for t in topics if t["name"] not in denied], require_stable,
                                  member_id, member_epoch)
    if fetched["error_code"] != ErrorCode.NONE or not denied:
        return fetched
    answered = iter(fetched["topics"])  # in request order, the denied topics left out
    return {**fetched, "topics": [next(answered) if t["name"] not in denied else {"name": t["name"], "partitions": [
        {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED} for i in t["partition_indexes"]]} for t in topics]}


def _fetch_group_by_ids(ctx, g: dict, require_stable: bool) -> dict:
    """OffsetFetch v10: topics by id; an unknown id answers UNKNOWN_TOPIC_ID per partition."""
    topics = g.get("topics")
    named, unknown = [], {}
    for index, t in enumerate(topics or []):
        info = _topic_by_id(ctx, t.get("topic_id"))
        if info is None:
            unknown[index] = {"topic_id": t.get("topic_id"), "partitions": [
                {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": ErrorCode.UNKNOWN_TOPIC_ID} for i in t["partition_indexes"]]}
        else:
            named.append((index, dict(t, name=info.name)))
    fetched = _fetch_group(ctx, g["group_id"], None if topics is None else [t for _, t in named],
                           require_stable, g.get("member_id"), g.get("member_epoch", -1))
    if fetched["error_code"] != ErrorCode.NONE and not fetched["topics"]:
        return fetched
    if topics is None:
        return {**fetched, "topics": [{"topic_id": _topic_id_of(ctx, t["name"]), "partitions": t["partitions"]}
                                      for t in fetched["topics"]]}
    # Kafka 4.2: the known topics first, then the unknown ids.
    answers = [{"topic_id": t["topic_id"], "partitions": a["partitions"]}
               for (_, t), a in zip(named, fetched["topics"])]
    return {**fetched, "topics": answers + [unknown[i] for i in sorted(unknown)]}


async def offset_fetch(ctx, body: dict) -> dict:
    require_stable = bool(body.get("require_stable", False))
    if ctx.api_version >= TOPIC_ID_VERSION:
        return {"throttle_time_ms": 0, "groups": [_fetch_group_by_ids(ctx, g, require_stable)
                                                  for g in body["groups"]]}
    if ctx.api_version >= 8:
        groups = [_fetch_group(ctx, g["group_id"], g.get("topics"), require_stable, g.get("member_id"),
                               g.get("member_epoch", -1)) for g in body["groups"]]
        return {"throttle_time_ms": 0, "groups": groups}
    group = _fetch_group(ctx, body["group_id"], body.get("topics"), require_stable)
    return {"throttle_time_ms": 0, "topics": group["topics"], "error_code": group["error_code"]}


async def offset_delete(ctx, body: dict) -> dict:
    group_id = body["group_id"]
    if not group_id:
        return {"error_code": ErrorCode.INVALID_GROUP_ID, "throttle_time_ms": 0, "topics": []}
    shard, error = _check(ctx, group_id, az.DELETE)
    if shard is None:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    topics = body.get("topics") or []
    denied = {t["name"] for t in topics if not az.authorize(ctx, az.READ, az.TOPIC, t["name"])}
    known = []
    for t in topics:
        partitions = [p for p in t["partitions"] if t["name"] not in denied
                      and _partition_exists(ctx, t["name"], p["partition_index"])]
        if partitions:
            known.append({"name": t["name"], "partitions": partitions})
    response = shard.delete_offsets({"group_id": group_id, "topics": known})
    if response["error_code"] != ErrorCode.NONE:
        return {"error_code": response["error_code"], "throttle_time_ms": 0, "topics": []}
    errors = {(t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]}
    missing = lambda name: ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in denied \
        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # noqa: E731
    out_topics = [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"],
         "error_code": errors.get((t["name"], p["partition_index"]), missing(t["name"]))}
        for p in t["partitions"]]} for t in topics]
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": out_topics}


# == DescribeGroups / ListGroups / DeleteGroups ===================================================

async def describe_groups(ctx, body: dict) -> dict:
    operations = (GROUP_AUTHORIZED_OPERATIONS if body.get("include_authorized_operations")
                  else NOT_REQUESTED_OPERATIONS)
    out = []
    for group_id in body.get("groups") or []:
        # The empty id is described like any group that does not exist (Kafka 4.2: Dead, or
        # GROUP_ID_NOT_FOUND from v6), not refused as INVALID_GROUP_ID.
        shard, error = _check(ctx, group_id, az.DESCRIBE)
        if shard is None:
            described = {"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
                         "protocol_data": "", "members": []}
        else:
            described = shard.describe_group(group_id)
            if ctx.api_version >= 6 and described["error_code"] == ErrorCode.NONE and described["group_state"] == "Dead":
                # KIP-1043: v6 names a missing group instead of describing it as Dead.
                # Kafka 4.2 says why when the id is a KIP-848 consumer group.
                modern = shard.group_type(group_id) not in (None, "classic")
                described.update(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                                 error_message=f"Group {group_id} is not a classic group." if modern
                                 else f"Group {group_id} not found.")
        if error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            operations_here = NOT_REQUESTED_OPERATIONS  # Kafka 4.2 leaves the default
        elif operations != NOT_REQUESTED_OPERATIONS and az.enabled(ctx.broker):
            operations_here = az.authorized_operations(ctx, az.GROUP, group_id)
        else:
            operations_here = operations
        described["authorized_operations"] = operations_here
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}


async def list_groups(ctx, body: dict) -> dict:
    coord = _coordinator(ctx)
    if coord is None:
        # No __consumer_offsets yet: there are no groups, which is not an error.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": []}
    if not coord.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    states = body.get("states_filter") or []
    types = body.get("types_filter") or []
    groups = []
    error = ErrorCode.NONE
    for shard in coord.shards:
        if not shard.loaded:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            continue
        groups.extend(shard.list_groups(states, types))
    if not az.authorize(ctx, az.DESCRIBE, az.CLUSTER):
        # Kafka lists only the groups the principal may DESCRIBE without DESCRIBE on the cluster.
        groups = [g for g in groups if az.authorize(ctx, az.DESCRIBE, az.GROUP, g["group_id"])]
    return {"throttle_time_ms": 0, "error_code": error, "groups": groups}


async def delete_groups(ctx, body: dict) -> dict:
    results = []
    for group_id in body.get("groups_names") or []:
        # The empty id is a group that does not exist (Kafka 4.2: GROUP_ID_NOT_FOUND).
        shard, error = _check(ctx, group_id, az.DELETE)
        if shard is not None:
            error = shard.delete_group(group_id)
        results.append({"group_id": group_id, "error_code": error})
    return {"throttle_time_ms": 0, "results": results}


# == KIP-848: ConsumerGroupHeartbeat / ConsumerGroupDescribe =====================================

def _heartbeat_error(code: ErrorCode) -> dict:
    # Kafka 4.2 leaves member_epoch at its default 0 in error answers.
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


async def consumer_group_heartbeat(ctx, body: dict) -> dict:
    group_id = body["group_id"]
    if not group_id:
        return _heartbeat_error(ErrorCode.INVALID_REQUEST)
    shard, error = _check(ctx, group_id)
    if shard is None:
        return _heartbeat_error(error)
    if _is_share_group(shard, group_id):
        return {**_heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND),
                "error_message": f"Group {group_id} is not a consumer group."}
    response = shard.consumer_group_heartbeat(body, api_version=ctx.api_version, client_id=ctx.client_id or "",
                                              client_host=_client_host(ctx))
    return {"throttle_time_ms": 0, **response}


async def consumer_group_describe(ctx, body: dict) -> dict:
    operations = (GROUP_AUTHORIZED_OPERATIONS if body.get("include_authorized_operations")
                  else NOT_REQUESTED_OPERATIONS)
    controller = ctx.broker.controller

    def name_of(topic_id):
        info = controller.topic_by_id(topic_id)
        return info.name if info is not None else None

    out = []
    for group_id in body.get("group_ids") or []:
        shard, error = _check(ctx, group_id) if group_id else (None, ErrorCode.INVALID_GROUP_ID)
        if shard is None:
            described = {"error_code": error, "error_message": None, "group_id": group_id, "group_state": "",
                         "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}
        elif _is_share_group(shard, group_id):
            described = {"error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                         "error_message": f"Group {group_id} is not a consumer group.", "group_id": group_id,
                         "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                         "members": []}
        else:
            described = shard.consumer_group_describe(group_id, name_of)
        described["authorized_operations"] = operations
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}


def consumer_protocol_enabled(config) -> bool:
    """``group.coordinator.rebalance.protocols`` names ``consumer`` (Kafka's switch for KIP-848)."""
    if config is None:
        return True
    try:
        value = config.get("group.coordinator.rebalance.protocols")
    except Exception:  # a config without the setting: Kafka's default, both protocols
        return True
    names = value if isinstance(value, (list, tuple)) else str(value or "").split(",")
    return "consumer" in {n.strip().lower() for n in names}


def topic_image(controller):
    """The broker's topics as consumer groups see them: name -> (topic id, partition count)."""
    def image() -> dict:
        return {name: (info.topic_id, info.num_partitions)
                for name, info in controller.topics.items() if not info.internal}
    return image


# == life cycle ==================================================================================

class PartitionLogAdapter:
    """A shard's view of its ``__consumer_offsets`` partition in storage."""

    def __init__(self, broker, partition: int) -> None:
        self._broker = broker
        self._partition = partition

    def _log(self):
        return self._broker.controller.log(OFFSETS_TOPIC, self._partition)

    def append(self, batch: bytearray) -> int:
        info = self._log().append(batch)
        notify = getattr(self._broker, "notify_append", None)
        if notify is not None:
            notify(OFFSETS_TOPIC, self._partition)
        return info.base_offset

    def iter_batches(self):
        for _header, view in self._log().iter_batches(0):
            yield view


def register(registry, broker) -> None:
    for api_key, lo, hi, handler in (
        (FIND_COORDINATOR, 0, 6, find_coordinator),
        (JOIN_GROUP, 0, 9, join_group),
        (HEARTBEAT, 0, 4, heartbeat),
        (LEAVE_GROUP, 0, 5, leave_group),
        (SYNC_GROUP, 0, 5, sync_group),
        (OFFSET_COMMIT, 2, 10, offset_commit),
        (OFFSET_FETCH, 1, 10, offset_fetch),
        (DESCRIBE_GROUPS, 0, 6, describe_groups),
        (LIST_GROUPS, 0, 5, list_groups),
        (DELETE_GROUPS, 0, 2, delete_groups),
        (OFFSET_DELETE, 0, 0, offset_delete),
    ):
        registry.register(api_key, lo, hi, handler)
    if getattr(broker, "txn_coordinator", None) is not None:
        # Only useful with someone to end the transactions (see the module docstring).
        registry.register(TXN_OFFSET_COMMIT, 0, 5, txn_offset_commit)
    if consumer_protocol_enabled(getattr(broker, "config", None)):
        registry.register(CONSUMER_GROUP_HEARTBEAT, 0, 1, consumer_group_heartbeat)
        registry.register(CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe)
    if getattr(broker, "group_coordinator", None) is None:
        broker.group_coordinator = None  # created by start() once __consumer_offsets exists


async def start(broker) -> None:
    """Serve groups as soon as the broker is up; load shards in the background.

    As in Kafka, ``__consumer_offsets`` is created by the first FindCoordinator for a group, not
    at boot, and an existing one is loaded shard by shard while the broker already answers
    (COORDINATOR_LOAD_IN_PROGRESS for a shard still loading, which clients retry).  Start-up time
    therefore does not grow with the number of partitions or of stored commits.
    """
    info = broker.controller.topic(OFFSETS_TOPIC)
    if info is None:
        return
    coordinator = _activate(broker, info)
    broker.group_loader = broker.loop.create_task(_load_in_background(coordinator))


def _activate(broker, info) -> "GroupCoordinator":
    from .consumer import ConsumerConfig
    from .coordinator import GroupCoordinator
    from .shard import GroupConfig

    # The broker's steerable clock: advancing it fires session and rebalance timeouts now.
    timer = timer_scope(broker, "group")
    from ..share.apis import BrokerHooks
    from ..share.group_manager import ShareConfig
    from ..streams.manager import StreamsConfig
    from minikafka.broker import group_configs

    consumer_config = ConsumerConfig.from_broker_config(broker.config)
    # Each group's own consumer.* configs (ConfigResource GROUP), read at every heartbeat.
    consumer_config.group_configs = lambda group_id: group_configs.effective(broker, group_id)
    streams_config = StreamsConfig.from_broker_config(broker.config)
    streams_config.group_configs = consumer_config.group_configs
    coordinator = GroupCoordinator(info.num_partitions, lambda p: PartitionLogAdapter(broker, p), timer,
                                   broker, GroupConfig.from_broker_config(broker.config),
                                   consumer_config,
                                   topic_image(broker.controller),
                                   ShareConfig.from_broker_config(broker.config), BrokerHooks(broker),
                                   streams_config)
    coordinator.active = True
    broker.group_coordinator = coordinator
    return coordinator


async def _load_in_background(coordinator: "GroupCoordinator") -> None:
    started = time.monotonic()
    for shard in coordinator.shards:
        if not coordinator.active:
            return
        shard.load()
        await asyncio.sleep(0)  # let requests for already-loaded shards through between shards
    log.info("group coordinator loaded %d __consumer_offsets partitions (%d groups) in %.0f ms",
             coordinator.num_partitions, sum(len(s.classic.groups) for s in coordinator.shards),
             (time.monotonic() - started) * 1000)


def ensure_coordinator(broker) -> "GroupCoordinator":
    """The coordinator, creating ``__consumer_offsets`` on first use (FindCoordinator for a group)."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is not None:
        return coordinator
    controller = broker.controller
    info = controller.topic(OFFSETS_TOPIC)
    if info is None:
        info = controller.create_topic(
            OFFSETS_TOPIC, num_partitions=broker.config.get("offsets.topic.num.partitions"),
            # The topic configs Kafka 4.2 creates it with (GroupCoordinatorService.groupMetadataTopicConfigs).
            configs={"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"},
            internal=True)
        log.info("created %s with %d partitions", OFFSETS_TOPIC, info.num_partitions)
    coordinator = _activate(broker, info)
    coordinator.load()  # a new topic is empty: loading is immediate
    return coordinator


async def stop(broker) -> None:
    loader = getattr(broker, "group_loader", None)
    if loader is not None:
        loader.cancel()
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return
    coordinator.unload()
    cancel_all = getattr(coordinator.timer, "cancel_all", None)
    if cancel_all is not None:
        cancel_all()
