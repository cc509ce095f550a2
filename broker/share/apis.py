"""Share-group APIs of the group coordinator: ShareGroupHeartbeat (76) and ShareGroupDescribe (77).

Served versions, as Kafka 4.2 (version 0 was Kafka 4.0's early access and is gone since 4.1):

* ShareGroupHeartbeat 1: join (epoch 0, with the subscribed topic names), heartbeat, leave (epoch -1).
  The client chooses its member id.  Errors as Kafka 4.2: INVALID_REQUEST (empty member/group/rack id,
  no topics on join, epoch below -1), GROUP_ID_NOT_FOUND (unknown share group, or the id is a
  classic/consumer group's), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED,
  GROUP_AUTHORIZATION_FAILED (READ on the group), TOPIC_AUTHORIZATION_FAILED (DESCRIBE on a
  subscribed topic), COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS.
* ShareGroupDescribe 1: GROUP_ID_NOT_FOUND for a missing group or another type's id,
  INVALID_GROUP_ID for the empty id, GROUP_AUTHORIZATION_FAILED (DESCRIBE) listed first as Kafka does.

Both are advertised always and answer UNSUPPORTED_VERSION while the ``share.version`` feature is 0
(Kafka 4.2's switch; finalized at 1 by default, so share groups are on).  The groups live in the
group coordinator's shards (``CoordinatorShard.share``, a ``group_manager.ShareGroupManager``); the
other group APIs (ListGroups, DescribeGroups, DeleteGroups) reach them through the shard.

``BrokerHooks`` connects a manager to the rest of the broker: the share coordinator's persister and
the share partitions (``view``), and the group's ``group.share.*`` settings.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minikafka.protocol.errors import ErrorCode

from ..security import authorizer as az
from . import view

if TYPE_CHECKING:
    from .group_manager import ShareGroupManager

log = logging.getLogger("minikafka.share")

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
SHARE_VERSION = "share.version"
NOT_REQUESTED_OPERATIONS = -2147483648
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka 4.2 reports for a share group
# without an authorizer (the group configs' operations included).
SHARE_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def share_groups_enabled(broker) -> bool:
    from .. import features

    return features.level(broker, SHARE_VERSION) >= 1


class BrokerHooks:
    """What a share-group manager needs from the broker: the persister, the share partitions."""

    def __init__(self, broker) -> None:
        self._broker = broker

    def persister(self):
        return view.persister(self._broker)

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        try:
            view.on_member_leave(self._broker, group_id, member_id)
        except Exception:  # the group side must not fail because a share partition did
            log.error("share group %s: releasing the records of member %s failed", group_id, member_id,
                      exc_info=True)

    def on_group_deleted(self, group_id: str) -> None:
        try:
            view.forget_group(self._broker, group_id)
        except Exception:
            log.error("share group %s: forgetting its share partitions failed", group_id, exc_info=True)

    def session_timeout_ms(self, group_id: str, default: int) -> int:
        return int(view.share_config(self._broker, group_id).get("share.session.timeout.ms", default))

    def heartbeat_interval_ms(self, group_id: str, default: int) -> int:
        return int(view.share_config(self._broker, group_id).get("share.heartbeat.interval.ms", default))


def manager_for(broker, group_id: str) -> "ShareGroupManager | None":
    """The manager holding ``group_id`` when the coordinator serves it (None: not active or loading)."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return None
    shard, error = coordinator.check(group_id)
    return None if shard is None else shard.share


def error_response(code: ErrorCode, message: str | None = None) -> dict:
    # The share-group manager loads with the first request that needs it, not at start (idle memory).
    from .group_manager import error_response as answer

    return answer(code, message)


def _client_host(ctx) -> str:
    return "/" + (ctx.client_host or "")


async def share_group_heartbeat(ctx, body: dict) -> dict:
    broker = ctx.broker
    if not share_groups_enabled(broker):
        return {"throttle_time_ms": 0, **error_response(ErrorCode.UNSUPPORTED_VERSION)}
    group_id = body["group_id"]
    if not az.authorize(ctx, az.READ, az.GROUP, group_id):
        return {"throttle_time_ms": 0, **error_response(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    names = body.get("subscribed_topic_names") or []
    if any(not az.authorize(ctx, az.DESCRIBE, az.TOPIC, n) for n in set(names)):
        return {"throttle_time_ms": 0, **error_response(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None or not coordinator.active:
        return {"throttle_time_ms": 0, **error_response(ErrorCode.COORDINATOR_NOT_AVAILABLE)}
    from .group_manager import ShareGroupManager

    try:
        ShareGroupManager._validate(body)
    except Exception as exc:  # the request's own errors come before the routing ones, as in Kafka
        return {"throttle_time_ms": 0, **error_response(exc.code, exc.message)}
    shard, error = coordinator.check(group_id)
    if shard is None:
        return {"throttle_time_ms": 0, **error_response(error)}
    response = shard.share.heartbeat(body, client_id=ctx.client_id or "", client_host=_client_host(ctx))
    return {"throttle_time_ms": 0, **response}


async def share_group_describe(ctx, body: dict) -> dict:
    broker = ctx.broker
    group_ids = body.get("group_ids") or []
    if not share_groups_enabled(broker):
        return {"throttle_time_ms": 0, "groups": [_failed(g, ErrorCode.UNSUPPORTED_VERSION) for g in group_ids]}
    controller = broker.controller

    def name_of(topic_id):
        info = controller.topic_by_id(topic_id)
        return info.name if info is not None else None

    denied, allowed = [], []
    for group_id in group_ids:
        if az.authorize(ctx, az.DESCRIBE, az.GROUP, group_id):
            allowed.append(group_id)
        else:
            denied.append(_failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    coordinator = getattr(broker, "group_coordinator", None)
    out = list(denied)
    for group_id in allowed:
        if coordinator is None or not coordinator.active:
            out.append(_failed(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            continue
        if not group_id:
            out.append(_failed(group_id, ErrorCode.INVALID_GROUP_ID))
            continue
        shard, error = coordinator.check(group_id)
        if shard is None:
            out.append(_failed(group_id, error))
            continue
        described = shard.share.describe(group_id, name_of)
        described["authorized_operations"] = NOT_REQUESTED_OPERATIONS
        if body.get("include_authorized_operations") and described["error_code"] == ErrorCode.NONE:
            described["authorized_operations"] = _group_operations(ctx, group_id)
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}


def _group_operations(ctx, group_id: str) -> int:
    """Kafka's authorized operations of a group: each operation a group supports (the group configs'
    included) that the principal may do."""
    return sum(1 << op for op in (3, 6, 8, 10, 11) if SHARE_GROUP_OPERATIONS & (1 << op)
               and az.authorize(ctx, op, az.GROUP, group_id))


def _failed(group_id: str, code: ErrorCode) -> dict:
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": NOT_REQUESTED_OPERATIONS}


def register(registry, broker) -> None:
    config = getattr(broker, "config", None)
    if config is not None:
        from .settings import validate_broker_settings

        validate_broker_settings(config)  # contradicting group.share.* settings: no start, as Kafka
    registry.register(SHARE_GROUP_HEARTBEAT, 1, 1, share_group_heartbeat)
    registry.register(SHARE_GROUP_DESCRIBE, 1, 1, share_group_describe)
