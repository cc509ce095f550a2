"""Share-coordinator APIs: the asyncio side of the share coordinator (``broker.share_state``).

Served versions, Kafka 4.2's:

* InitializeShareGroupState 0 (83), ReadShareGroupState 0 (84), WriteShareGroupState 0-1 (85; v1 adds
  DeliveryCompleteCount), DeleteShareGroupState 0 (86), ReadShareGroupStateSummary 0-1 (87; v1 answers
  DeliveryCompleteCount).  Brokers call them on each other in Kafka; here share partitions use the
  coordinator in-process (``persister``), and the RPCs serve tools and tests.  They need CLUSTER_ACTION
  (every partition answers CLUSTER_AUTHORIZATION_FAILED otherwise).
* DescribeShareGroupOffsets 0-1 (90; v1 adds the lag), AlterShareGroupOffsets 0 (91),
  DeleteShareGroupOffsets 0 (92): the admin APIs, with Kafka's authorization (DESCRIBE on the group and
  on each topic; READ on the group and topics to alter; DELETE on the group and READ on topics to delete)
  and Kafka's answers, through the group side's seams in broker/share/view.py (``share_group_state``,
  ``initialized_partitions``, ``mark_initialized``).
* FindCoordinator key type 2 ("group:topicId:partition", v6+): ``find_coordinator_error``, called by the
  group APIs' FindCoordinator.  As in Kafka, the first one creates ``__share_group_state`` and answers
  COORDINATOR_NOT_AVAILABLE; once the topic exists it answers this broker.

``__share_group_state`` is created with ``share.coordinator.state.topic.num.partitions`` partitions and
the topic configs of Kafka 4.2 (cleanup.policy=delete, retention.ms=-1, segment.bytes from
``share.coordinator.state.topic.segment.bytes``), by the first FindCoordinator for a share key or the
first use of share-partition state.  An existing one is loaded in the background at start (shards still
loading answer COORDINATOR_LOAD_IN_PROGRESS).  The log is pruned (DeleteRecords up to the last redundant
offset) every ``share.coordinator.state.topic.prune.interval.ms`` and cold share partitions are
snapshotted every ``share.coordinator.cold.partition.snapshot.interval.ms``, on the broker's clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import build_batch, iter_records

from ...clock import timer_scope
from ...security import authorizer as az
from .. import view
from . import SHARE_STATE_TOPIC

if TYPE_CHECKING:  # loaded with the coordinator (ShareStateService._activate)
    from .coordinator import ShareCoordinator

log = logging.getLogger("minikafka.share.state")

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92

MSG = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.INVALID_GROUP_ID: "The group id is invalid.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
}


def topic_configs(config) -> dict[str, str]:
    """The configs Kafka 4.2 creates ``__share_group_state`` with (ShareCoordinatorService)."""
    def get(name: str, default):
        try:
            return config.get(name)
        except Exception:
            return default

    return {"cleanup.policy": "delete", "compression.type": "producer",
            "segment.bytes": str(get("share.coordinator.state.topic.segment.bytes", 104857600)),
            "min.insync.replicas": str(get("share.coordinator.state.topic.min.isr", 1)),
            "retention.ms": "-1"}


class StateLogAdapter:
    """A shard's view of its ``__share_group_state`` partition in storage."""

    def __init__(self, broker, partition: int) -> None:
        self._broker = broker
        self._partition = partition

    def _log(self):
        return self._broker.controller.log(SHARE_STATE_TOPIC, self._partition)

    def append(self, records, now_ms: int) -> int:
        from .records import encode_key, encode_value

        batch = build_batch([(encode_key(kind, key), encode_value(kind, value), [], now_ms)
                             for kind, key, value in records])
        info = self._log().append(batch)
        notify = getattr(self._broker, "notify_append", None)
        if notify is not None:
            notify(SHARE_STATE_TOPIC, self._partition)
        return info.base_offset

    def iter_records(self):
        plog = self._log()
        start = plog.log_start_offset
        for header, view_ in plog.iter_batches(0):
            if header.is_control:
                continue
            for record in iter_records(view_):
                if record.offset >= start:
                    yield record.offset, record.key, record.value

    def delete_records(self, offset: int) -> None:
        self._log().delete_records(offset)


class ShareStateService:
    """``broker.share_state``: creates the coordinator on first use and answers the handlers."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.coordinator: "ShareCoordinator | None" = None
        self.loader: asyncio.Task | None = None
        self._timer = None
        self._persister = None

    # -- life cycle -----------------------------------------------------------------------------

    def _activate(self, info) -> "ShareCoordinator":
        from .coordinator import ShareCoordinator, ShareStateConfig

        broker = self.broker
        controller = broker.controller

        def partitions_of(topic_id):
            topic = controller.topic_by_id(topic_id)
            return None if topic is None else topic.num_partitions

        config = ShareStateConfig.from_broker_config(broker.config)
        config.num_partitions = info.num_partitions
        self.coordinator = ShareCoordinator(info.num_partitions, lambda p: StateLogAdapter(broker, p), broker,
                                            config, partitions_of)
        self.coordinator.active = True
        if getattr(broker, "loop", None) is not None:
            self._timer = timer_scope(broker, "share-state")
            self._timer.schedule("prune", config.prune_interval_ms, self._prune)
            self._timer.schedule("cold", config.cold_snapshot_interval_ms, self._snapshot_cold)
        return self.coordinator

    def existing(self) -> "ShareCoordinator | None":
        return self.coordinator

    def ensure(self) -> "ShareCoordinator":
        """The coordinator, creating ``__share_group_state`` when it does not exist yet."""
        if self.coordinator is not None:
            return self.coordinator
        controller = self.broker.controller
        info = controller.topic(SHARE_STATE_TOPIC)
        if info is None:
            info = controller.create_topic(
                SHARE_STATE_TOPIC, num_partitions=_config(self.broker, "share.coordinator.state.topic.num.partitions", 50),
                configs=topic_configs(self.broker.config), internal=True)
            log.info("created %s with %d partitions", SHARE_STATE_TOPIC, info.num_partitions)
        coordinator = self._activate(info)
        coordinator.load()  # a new topic is empty; an existing one not loaded yet is loaded now
        return coordinator

    def persister(self):
        if self._persister is None:
            from .persister import CoordinatorPersister

            self._persister = _LazyPersister(self)
        return self._persister

    async def start(self) -> None:
        info = self.broker.controller.topic(SHARE_STATE_TOPIC)
        if info is None:
            return
        coordinator = self._activate(info)
        self.loader = self.broker.loop.create_task(self._load_in_background(coordinator))

    async def _load_in_background(self, coordinator: "ShareCoordinator") -> None:
        started = time.monotonic()
        for shard in coordinator.shards:
            if not coordinator.active:
                return
            try:
                shard.load()
            except Exception:
                log.error("loading %s-%d failed", SHARE_STATE_TOPIC, shard.partition, exc_info=True)
            await asyncio.sleep(0)
        log.info("share coordinator loaded %d partitions (%d share partitions) in %.0f ms",
                 coordinator.num_partitions, sum(len(s.states) for s in coordinator.shards),
                 (time.monotonic() - started) * 1000)

    async def stop(self) -> None:
        if self.loader is not None:
            self.loader.cancel()
        if self.coordinator is not None:
            self.coordinator.unload()
        if self._timer is not None:
            self._timer.cancel_all()

    # -- housekeeping ----------------------------------------------------------------------------

    def _prune(self) -> None:
        coordinator = self.coordinator
        try:
            if coordinator is not None and coordinator.active:
                coordinator.forget_deleted_topics()
                for partition, offset in coordinator.prune_points():
                    plog = self.broker.controller.log(SHARE_STATE_TOPIC, partition)
                    if offset > plog.log_start_offset:
                        log.debug("pruning %s-%d up to %d", SHARE_STATE_TOPIC, partition, offset)
                        plog.delete_records(offset)
        except KafkaError as exc:
            log.error("pruning %s failed: %s", SHARE_STATE_TOPIC, exc)
        finally:
            if coordinator is not None and coordinator.active:
                self._timer.schedule("prune", coordinator.config.prune_interval_ms, self._prune)

    def _snapshot_cold(self) -> None:
        coordinator = self.coordinator
        try:
            if coordinator is not None and coordinator.active:
                coordinator.snapshot_cold_partitions()
        except KafkaError as exc:
            log.error("snapshotting cold share partitions failed: %s", exc)
        finally:
            if coordinator is not None and coordinator.active:
                self._timer.schedule("cold", coordinator.config.cold_snapshot_interval_ms, self._snapshot_cold)


class _LazyPersister:
    """The persister handed to share partitions: creates the coordinator (and its topic) on first use."""

    def __init__(self, service: ShareStateService) -> None:
        self._service = service
        self._inner = None

    def _get(self):
        coordinator = self._service.ensure()
        if self._inner is None or self._inner.coordinator is not coordinator:
            from .persister import CoordinatorPersister

            self._inner = CoordinatorPersister(coordinator)
        return self._inner

    def initialize(self, *args):
        return _guard(lambda: self._get().initialize(*args))

    def read(self, *args):
        from ..persister import ReadResult

        result = _guard(lambda: self._get().read(*args))
        return ReadResult(result) if isinstance(result, ErrorCode) else result

    def read_summary(self, *args):
        from ..persister import ReadResult

        result = _guard(lambda: self._get().read_summary(*args))
        return ReadResult(result) if isinstance(result, ErrorCode) else result

    def write(self, *args):
        return _guard(lambda: self._get().write(*args))

    def delete(self, *args):
        return _guard(lambda: self._get().delete(*args))


def _guard(call):
    """A failed append (storage error) answers COORDINATOR_NOT_AVAILABLE, retriable, as Kafka maps
    append failures; the state is untouched by a record that was not appended."""
    try:
        return call()
    except KafkaError as exc:
        log.error("share state operation failed in storage: %s", exc)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE


def _config(broker, name: str, default):
    try:
        value = broker.config.get(name)
    except Exception:
        return default
    return default if value is None else value


def _service(ctx) -> ShareStateService:
    return ctx.broker.share_state


# == FindCoordinator key type 2 ===================================================================

def find_coordinator_error(broker, key: str) -> ErrorCode:
    """The answer to FindCoordinator for a share key (v6+; the caller checked the version and
    authorization): INVALID_REQUEST for a malformed key; COORDINATOR_NOT_AVAILABLE while
    ``__share_group_state`` is being created (Kafka creates it on this request and answers so);
    else NONE (this broker leads every partition)."""
    from .coordinator import parse_coordinator_key

    if parse_coordinator_key(key) is None:
        return ErrorCode.INVALID_REQUEST
    service = broker.share_state
    if service.coordinator is None and broker.controller.topic(SHARE_STATE_TOPIC) is None:
        try:
            service.ensure()
        except KafkaError as exc:
            log.debug("no share coordinator yet: %s", exc)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    try:
        coordinator = service.ensure()
    except KafkaError:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE if coordinator.active else ErrorCode.COORDINATOR_NOT_AVAILABLE


# == 83-87: the share-group-state RPCs ============================================================

def _global_error(body: dict, code: ErrorCode, extra: dict) -> dict:
    return {"results": [{"topic_id": t["topic_id"], "partitions": [
        {"partition": p["partition"], "error_code": code, "error_message": MSG.get(code), **extra}
        for p in t.get("partitions") or []]} for t in body.get("topics") or []]}


def _state_rpc(method: str, extra: dict):
    async def handler(ctx, body: dict) -> dict:
        if not az.authorize(ctx, az.CLUSTER_ACTION, az.CLUSTER):
            return _global_error(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, extra)
        try:
            coordinator = _service(ctx).ensure()
        except KafkaError:
            return _global_error(body, ErrorCode.COORDINATOR_NOT_AVAILABLE, extra)
        try:
            return getattr(coordinator, method)(body)
        except KafkaError as exc:
            log.error("%s failed in storage: %s", method, exc)
            return _global_error(body, ErrorCode.COORDINATOR_NOT_AVAILABLE, extra)
    handler.__name__ = method
    return handler


initialize_share_group_state = _state_rpc("initialize_state", {})
read_share_group_state = _state_rpc("read_state", {"state_epoch": 0, "start_offset": 0, "state_batches": []})
write_share_group_state = _state_rpc("write_state", {})
delete_share_group_state = _state_rpc("delete_state", {})
read_share_group_state_summary = _state_rpc("read_state_summary", {"state_epoch": 0, "leader_epoch": 0,
                                                                   "start_offset": 0,
                                                                   "delivery_complete_count": -1})


# == 90-92: the admin APIs =========================================================================

def _latest_offset(ctx, topic: str, partition: int) -> int:
    """ListOffsets LATEST as Kafka's PartitionMetadataClient asks it (read_uncommitted: the high watermark)."""
    return ctx.broker.controller.log(topic, partition).high_watermark


async def describe_share_group_offsets(ctx, body: dict) -> dict:
    groups = []
    for g in body.get("groups") or []:
        group_id = g["group_id"]
        if not az.authorize(ctx, az.DESCRIBE, az.GROUP, group_id):
            groups.append(_describe_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        topics = g.get("topics")
        error = _group_coordinator_error(ctx.broker, group_id) if topics is None else None
        if error is not None:
            groups.append(_describe_group_error(group_id, error, MSG.get(error)))
            continue
        if topics is not None and not topics:
            groups.append({"group_id": group_id, "topics": [], "error_code": ErrorCode.NONE, "error_message": None})
            continue
        groups.append(_describe_group(ctx, group_id, topics))
    return {"throttle_time_ms": 0, "groups": groups}


def _initialized(broker, group_id: str) -> dict[uuid.UUID, set[int]]:
    """The group's initialized share partitions (the group side's record of them) that still have
    share state: DeleteShareGroupOffsets deletes the state, and until the group side offers a seam to
    take topics out of its record (``view.forget_initialized``), a partition without state is not
    counted as initialized, as Kafka no longer counts it after the delete."""
    recorded = view.initialized_partitions(broker, group_id)
    if not recorded or getattr(view, "forget_initialized", None) is not None:
        return recorded
    service = broker.share_state
    coordinator = service.coordinator
    if coordinator is None:
        return {}
    from .records import StateKey

    out = {}
    for topic_id, parts in recorded.items():
        live = {p for p in parts if StateKey(group_id, topic_id, p) in coordinator.shard_for(
            StateKey(group_id, topic_id, p)).states}
        if live:
            out[topic_id] = live
    return out


def _group_coordinator_error(broker, group_id: str) -> ErrorCode | None:
    """The error the group coordinator answers for a group it cannot serve now: NOT_COORDINATOR while
    ``__consumer_offsets`` does not exist (Kafka's runtime has no shard for it), or the coordinator's
    own answer while it is inactive or loading the group's partition."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return ErrorCode.NOT_COORDINATOR
    _, error = coordinator.check(group_id)
    return None if error is ErrorCode.NONE else error


MSG[ErrorCode.NOT_COORDINATOR] = "This is not the correct coordinator."


def _describe_group_error(group_id: str, code: ErrorCode, message) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": message}


def _describe_group(ctx, group_id: str, topics) -> dict:
    controller = ctx.broker.controller
    wanted: list[tuple[str, uuid.UUID, list[int]]] = []
    missing, unauthorized = [], []
    if topics is None:
        # Every initialized partition of the group, topics the principal may not describe left out.
        for topic_id, parts in _initialized(ctx.broker, group_id).items():
            info = controller.topic_by_id(topic_id)
            if info is not None and az.authorize(ctx, az.DESCRIBE, az.TOPIC, info.name):
                wanted.append((info.name, topic_id, sorted(parts)))
    else:
        for t in topics:
            if not az.authorize(ctx, az.DESCRIBE, az.TOPIC, t["topic_name"]):
                unauthorized.append(t)
                continue
            info = controller.topic(t["topic_name"])
            if info is None:
                missing.append(t)
            else:
                wanted.append((t["topic_name"], info.topic_id, list(t["partitions"] or [])))
    out_topics = []
    if wanted:
        try:
            coordinator = _service(ctx).ensure()
        except KafkaError:
            return _describe_group_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                         MSG[ErrorCode.COORDINATOR_NOT_AVAILABLE])
        from .records import StateKey

        for name, topic_id, parts in wanted:
            results = []
            for p in parts:
                r = coordinator.read_summary(StateKey(group_id, topic_id, p))
                s = r.state
                if r.error is ErrorCode.NONE and s.start_offset != -1 and s.delivery_complete_count != -1:
                    lag = _latest_offset(ctx, name, p) - s.start_offset - s.delivery_complete_count
                    results.append({"partition_index": p, "start_offset": s.start_offset,
                                    "leader_epoch": s.leader_epoch, "lag": lag, "error_code": ErrorCode.NONE,
                                    "error_message": None})
                else:
                    ok = r.error is ErrorCode.NONE
                    results.append({"partition_index": p, "start_offset": s.start_offset if ok else -1,
                                    "leader_epoch": s.leader_epoch if ok else 0, "lag": -1,
                                    "error_code": ErrorCode.NONE, "error_message": None})
            out_topics.append({"topic_name": name, "topic_id": topic_id, "partitions": results})
    for t in missing:
        out_topics.append({"topic_name": t["topic_name"], "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": ErrorCode.NONE,
             "error_message": None} for p in t["partitions"] or []]})
    for t in unauthorized:
        out_topics.append({"topic_name": t["topic_name"], "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": p, "start_offset": -1, "leader_epoch": 0, "lag": -1,
             "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
             "error_message": MSG[ErrorCode.TOPIC_AUTHORIZATION_FAILED]} for p in t["partitions"] or []]})
    return {"group_id": group_id, "topics": out_topics, "error_code": ErrorCode.NONE, "error_message": None}


def _offsets_error(code: ErrorCode, message=None) -> dict:
    """The whole-request error of AlterShareGroupOffsets and DeleteShareGroupOffsets (same shape)."""
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message or MSG.get(code), "responses": []}


async def alter_share_group_offsets(ctx, body: dict) -> dict:
    group_id = body.get("group_id")
    if not az.authorize(ctx, az.READ, az.GROUP, group_id):
        return _offsets_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return _offsets_error(ErrorCode.INVALID_GROUP_ID)
    error = _group_coordinator_error(ctx.broker, group_id)
    if error is not None:
        return _offsets_error(error)
    state = view.share_group_state(ctx.broker, group_id)
    if state is None and _other_group_type(ctx.broker, group_id):
        return _offsets_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    if state not in (None, "Empty", "Dead"):
        return _offsets_error(ErrorCode.NON_EMPTY_GROUP)
    controller = ctx.broker.controller
    responses = []
    to_init: dict[uuid.UUID, dict[int, int]] = {}
    for t in body.get("topics") or []:
        name = t["topic_name"]
        info = controller.topic(name)
        if not az.authorize(ctx, az.READ, az.TOPIC, name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            code = None
        if code is not None:
            responses.append({"topic_name": name, "topic_id": info.topic_id if info is not None else uuid.UUID(int=0),
                              "partitions": [{"partition_index": p["partition_index"], "error_code": code,
                                              "error_message": MSG[code]} for p in t["partitions"] or []]})
            continue
        parts = []
        for p in t["partitions"] or []:
            if 0 <= p["partition_index"] < info.num_partitions:
                to_init.setdefault(info.topic_id, {})[p["partition_index"]] = p["start_offset"]
                parts.append({"partition_index": p["partition_index"], "error_code": ErrorCode.NONE, "error_message": None})
            else:
                parts.append({"partition_index": p["partition_index"],
                              "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": MSG[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]})
        responses.append({"topic_name": name, "topic_id": info.topic_id, "partitions": parts})
    if to_init:
        try:
            coordinator = _service(ctx).ensure()
        except KafkaError:
            return _offsets_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        from .records import StateKey

        state_epoch = _group_epoch(ctx.broker, group_id)
        failed: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
        done: dict[uuid.UUID, set[int]] = {}
        for topic_id, offsets in to_init.items():
            for p, start in offsets.items():
                r = _guard(lambda: coordinator.initialize(StateKey(group_id, topic_id, p), state_epoch, start))
                error = r if isinstance(r, ErrorCode) else r.error
                if error is ErrorCode.NONE:
                    done.setdefault(topic_id, set()).add(p)
                else:
                    failed[(topic_id, p)] = (error, MSG.get(error) if isinstance(r, ErrorCode) else r.message)
        for topic_id, parts in done.items():
            view.mark_initialized(ctx.broker, group_id, topic_id, parts)
        if done:
            # The group is empty: share partitions cached with the old state load the new one when
            # next used (in Kafka a new member reads from the altered start offset too).
            view.forget_group(ctx.broker, group_id)
        for t in responses:
            for p in t["partitions"]:
                err = failed.get((t["topic_id"], p["partition_index"]))
                if err is not None and p["error_code"] == ErrorCode.NONE:
                    p["error_code"], p["error_message"] = err
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


def _group_epoch(broker, group_id: str) -> int:
    """The state epoch Kafka initializes altered partitions with: the share group's epoch (0 for a
    group the alter creates).  Read through ``view.share_group_epoch`` when the group side offers it,
    else from the group side's manager on the group's shard (``shard.share.groups``)."""
    epoch = getattr(view, "share_group_epoch", None)
    if epoch is not None:
        return int(epoch(broker, group_id))
    coordinator = getattr(broker, "group_coordinator", None)
    try:
        group = coordinator.shard_for(group_id).share.groups.get(group_id)
    except AttributeError:
        return 0
    return int(getattr(group, "group_epoch", 0)) if group is not None else 0


def _other_group_type(broker, group_id: str) -> bool:
    """A group of another type (classic, consumer, streams) holds that id (Kafka: "Group x is not a share group.")."""
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None or not coordinator.active:
        return False
    try:
        shard = coordinator.shard_for(group_id)
    except Exception:
        return False
    return shard.group_type(group_id) not in (None, "share")


async def delete_share_group_offsets(ctx, body: dict) -> dict:
    group_id = body.get("group_id")
    if not az.authorize(ctx, az.DELETE, az.GROUP, group_id):
        return _offsets_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return _offsets_error(ErrorCode.INVALID_GROUP_ID)
    error = _group_coordinator_error(ctx.broker, group_id)
    if error is not None:
        return _offsets_error(error)
    responses, authorized = [], []
    for t in body.get("topics") or []:
        if not az.authorize(ctx, az.READ, az.TOPIC, t["topic_name"]):
            responses.append({"topic_name": t["topic_name"], "topic_id": uuid.UUID(int=0),
                              "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              "error_message": MSG[ErrorCode.TOPIC_AUTHORIZATION_FAILED]})
        else:
            authorized.append(t["topic_name"])
    state = view.share_group_state(ctx.broker, group_id)
    if state is None:
        message = (f"Group {group_id} is not a share group." if _other_group_type(ctx.broker, group_id)
                   else f"Group {group_id} not found.")
        return _offsets_error(ErrorCode.GROUP_ID_NOT_FOUND, message)
    if state not in ("Empty", "Dead"):
        return _offsets_error(ErrorCode.NON_EMPTY_GROUP)
    controller = ctx.broker.controller
    initialized = _initialized(ctx.broker, group_id)
    deleted = []
    for name in authorized:
        info = controller.topic(name)
        if info is None:
            responses.append({"topic_name": name, "topic_id": uuid.UUID(int=0),
                              "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": MSG[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]})
            continue
        parts = initialized.get(info.topic_id)
        if not parts:
            responses.append({"topic_name": name, "topic_id": uuid.UUID(int=0),
                              "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": "There is no offset information to delete."})
            continue
        deleted.append((name, info.topic_id, parts))
    if deleted:
        try:
            coordinator = _service(ctx).ensure()
        except KafkaError:
            return _offsets_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        from .records import StateKey

        for name, topic_id, parts in deleted:
            error = ErrorCode.NONE
            for p in sorted(parts):
                r = _guard(lambda: coordinator.delete(StateKey(group_id, topic_id, p)))
                code = r if isinstance(r, ErrorCode) else r.error
                if code is not ErrorCode.NONE:
                    error = code
            if error is ErrorCode.NONE:
                view.forget_group(ctx.broker, group_id)  # cached share partitions: state gone
                forget = getattr(view, "forget_initialized", None)
                if forget is not None:
                    forget(ctx.broker, group_id, topic_id)
                responses.append({"topic_name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE, "error_message": None})
            else:
                responses.append({"topic_name": name, "topic_id": topic_id, "error_code": error,
                                  "error_message": MSG.get(error)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


# == registration =================================================================================

def register(registry, broker) -> None:
    broker.share_state = ShareStateService(broker)
    for api_key, lo, hi, handler in (
        (INITIALIZE, 0, 0, initialize_share_group_state),
        (READ, 0, 0, read_share_group_state),
        (WRITE, 0, 1, write_share_group_state),
        (DELETE, 0, 0, delete_share_group_state),
        (READ_SUMMARY, 0, 1, read_share_group_state_summary),
        (DESCRIBE_OFFSETS, 0, 1, describe_share_group_offsets),
        (ALTER_OFFSETS, 0, 0, alter_share_group_offsets),
        (DELETE_OFFSETS, 0, 0, delete_share_group_offsets),
    ):
        registry.register(api_key, lo, hi, handler)


async def start(broker) -> None:
    await broker.share_state.start()


async def stop(broker) -> None:
    await broker.share_state.stop()
