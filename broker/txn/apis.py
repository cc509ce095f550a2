"""Transaction APIs: the asyncio side of the transaction coordinator.

Served versions (PROTOCOL.md "Serve" column):

* InitProducerId 0-5 with a transactional id (handlers/init_producer_id.py hands it over here):
  v3+ carries the current producer id/epoch (KIP-360 epoch bump without a new id); PRODUCER_FENCED
  from v4, INVALID_PRODUCER_EPOCH before.
* AddPartitionsToTxn 0-5 (v4+: the broker-to-broker batched form with verify_only, CLUSTER_ACTION),
  AddOffsetsToTxn 0-4, EndTxn 0-5: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before; v5
  (transactions V2) bumps the epoch on every end and answers the producer id and epoch to go on
  with (``TransactionCoordinator.end_txn_v2``).
* TxnOffsetCommit 0-5 is served by the group coordinator (broker/group/apis.py), which registers it
  because this module installs ``broker.txn_coordinator`` first.
* DescribeTransactions 0, ListTransactions 0-2 (v1 duration filter, v2 transactional id pattern:
  a regular expression the whole id matches, INVALID_REGULAR_EXPRESSION when it does not compile),
  DescribeProducers 0.
* FindCoordinator key_type 1 answers this broker and creates ``__transaction_state`` on first use
  (broker/group/apis.py).
* Authorization (KafkaApis): WRITE on the transactional id for AddPartitionsToTxn, AddOffsetsToTxn
  and EndTxn (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); then WRITE per topic for AddPartitionsToTxn
  (internal topics are never authorized: TOPIC_AUTHORIZATION_FAILED, the others
  OPERATION_NOT_ATTEMPTED) and READ on the group for AddOffsetsToTxn (GROUP_AUTHORIZATION_FAILED).
  DescribeProducers needs READ per topic; DescribeTransactions DESCRIBE per transactional id (and
  lists only the topics the principal may DESCRIBE); ListTransactions lists only the ids the
  principal may DESCRIBE.  TxnOffsetCommit (WRITE on the transactional id, then the group's and
  topics' checks shared with OffsetCommit) is served in broker/group/apis.py.
* WriteTxnMarkers is internal (markers are written in-process), as in Kafka it is broker-only.

Transaction version: ``transaction.version`` 2 is finalized by default (broker/features.py), as in
Kafka 4.2, so Java 4.x producers use transactions V2 (KIP-890 part 2): Produce v12 adds the
partition of a transactional batch itself (``add_partition_implicitly``), TxnOffsetCommit v5 adds
the group's offsets partition itself, EndTxn v5 bumps the epoch (the markers carry the new one,
the producer id rotates at the last epoch).  Clients that send older versions (librdkafka,
kafka-python, Java 3.x) get transactions V1 unchanged: AddPartitionsToTxn / AddOffsetsToTxn, the
same epoch across transactions.

``__transaction_state`` is created by the first FindCoordinator for a transactional id (as in
Kafka) or the first request that needs a transactional id's state, with
``transaction.state.log.num.partitions`` partitions; an existing one is loaded in the background at
start, answering COORDINATOR_LOAD_IN_PROGRESS for shards still loading.

Crash testing: the environment variable ``MINIKAFKA_TXN_CRASH_AFTER`` (``prepare`` or ``marker``)
makes the broker SIGKILL itself right after writing a Prepare record or the first marker of a
transaction ending; tests/integration/test_txn_crash.py uses it to stop in the middle of EndTxn.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import time
from typing import TYPE_CHECKING

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import build_control_batch, set_partition_leader_epoch

from ..security import authorizer as az

from ..clock import timer_scope
from ..group import OFFSETS_TOPIC
from . import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:  # the coordinator's modules load with the coordinator (TxnService._activate)
    from .coordinator import TransactionCoordinator

log = logging.getLogger("minikafka.txn")

ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 24, 25, 26
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
LEADER_EPOCH = 0  # the only leader epoch of a one-node cluster (as broker/handlers/produce.py)
TV2_END_TXN_VERSION = 5  # EndTxn v5+: transactions V2 (KIP-890 part 2)


def _fenced(error: ErrorCode, version: int, fenced_from: int) -> ErrorCode:
    if error is ErrorCode.PRODUCER_FENCED and version < fenced_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


class TxnLogAdapter:
    """A shard's view of its ``__transaction_state`` partition in storage."""

    def __init__(self, broker, partition: int) -> None:
        self._broker = broker
        self._partition = partition

    def append(self, batch: bytearray) -> int:
        return self._broker.controller.log(TRANSACTION_STATE_TOPIC, self._partition).append(batch).base_offset

    def iter_batches(self):
        for _header, view in self._broker.controller.log(TRANSACTION_STATE_TOPIC, self._partition).iter_batches(0):
            yield view


class TxnService:
    """``broker.txn_coordinator``: creates the coordinator on first use and answers the handlers."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.coordinator: "TransactionCoordinator | None" = None
        self.loader: asyncio.Task | None = None
        crash_after = os.environ.get("MINIKAFKA_TXN_CRASH_AFTER")
        self._crash_after = crash_after
        self._timer = None  # the broker's timer scope "txn" (broker/clock.py)

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list, version: int) -> ErrorCode:
        """Add partitions to an open transaction, storage failures answered as the handlers do
        (for the group coordinator: TxnOffsetCommit v5 adds the offsets partition itself)."""
        return _storage_guard(self.coordinator.add_partitions, transactional_id, producer_id,
                              producer_epoch, partitions, version)

    # -- life cycle ---------------------------------------------------------------------------

    def _crash_hook(self, phase: str) -> None:
        if self._crash_after == phase:
            log.warning("MINIKAFKA_TXN_CRASH_AFTER=%s: killing the broker now", phase)
            os.kill(os.getpid(), signal.SIGKILL)

    def _activate(self, info) -> "TransactionCoordinator":
        from .coordinator import TransactionCoordinator, TxnConfig

        broker = self.broker
        # The broker's steerable clock: advancing it aborts timed-out transactions now.
        self._timer = timer_scope(broker, "txn")
        self.coordinator = TransactionCoordinator(
            info.num_partitions, lambda p: TxnLogAdapter(broker, p), self._timer, broker,
            broker.controller.producer_ids.next_id, self.write_markers,
            TxnConfig.from_broker_config(broker.config), crash_hook=self._crash_hook)
        self.coordinator.active = True
        return self.coordinator

    def ensure(self) -> "TransactionCoordinator":
        if self.coordinator is not None:
            return self.coordinator
        controller = self.broker.controller
        info = controller.topic(TRANSACTION_STATE_TOPIC)
        if info is None:
            info = controller.create_topic(
                TRANSACTION_STATE_TOPIC, num_partitions=self.broker.config.get("transaction.state.log.num.partitions"),
                # The topic configs Kafka 4.2 creates it with (TransactionLog's topic configs).
                configs={"cleanup.policy": "compact", "segment.bytes": "104857600",
                         "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
                         "min.insync.replicas": "1"}, internal=True)
            log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC, info.num_partitions)
        coordinator = self._activate(info)
        coordinator.load()  # new: empty, loading is immediate
        return coordinator

    async def start(self) -> None:
        info = self.broker.controller.topic(TRANSACTION_STATE_TOPIC)
        if info is None:
            return
        coordinator = self._activate(info)
        self.loader = self.broker.loop.create_task(self._load_in_background(coordinator))

    async def _load_in_background(self, coordinator: "TransactionCoordinator") -> None:
        started = time.monotonic()
        # Markers for __consumer_offsets go through the group shards once they are loaded.
        for shard in coordinator.shards:
            if not coordinator.active:
                return
            try:
                coordinator.load_shard(shard)
            except Exception:
                log.error("loading __transaction_state-%d failed", shard.partition, exc_info=True)
            await asyncio.sleep(0)
        log.info("transaction coordinator loaded %d partitions (%d transactional ids) in %.0f ms",
                 coordinator.num_partitions, sum(len(s.txns) for s in coordinator.shards),
                 (time.monotonic() - started) * 1000)

    async def stop(self) -> None:
        if self.loader is not None:
            self.loader.cancel()
        if self.coordinator is not None:
            self.coordinator.unload()
        if self._timer is not None:
            self._timer.cancel_all()

    # -- markers (Kafka's WriteTxnMarkers, in-process) -----------------------------------------

    def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, partitions: list,
                      coordinator_epoch: int) -> None:
        for topic, partition in partitions:
            if not self.write_marker(topic, partition, producer_id, producer_epoch, commit, coordinator_epoch):
                log.info("no marker for %s-%d: the partition no longer exists", topic, partition)

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int) -> bool:
        """One COMMIT/ABORT marker; False when the partition does not exist; KafkaError when
        storage fails.  The coordinator's markers and WriteTxnMarkers (handlers/write_txn_markers.py)
        both come here."""
        broker = self.broker
        controller = broker.controller
        if topic == OFFSETS_TOPIC:
            groups = broker.group_coordinator
            if groups is not None and groups.active and groups.shards[partition].loaded:
                groups.shards[partition].complete_transaction(producer_id, producer_epoch, commit,
                                                              coordinator_epoch)
                broker.notify_append(topic, partition)
                self._crash_hook("marker")
                return True
            # Not loaded yet: the shard applies the marker when it replays its log.
        info = controller.topic(topic)
        if info is None or partition >= info.num_partitions:
            return False
        plog = controller.log(topic, partition)
        try:
            marker = build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch, broker.now_ms())
            # Stamped with the partition's leader epoch, as every batch the leader appends
            # (Kafka 4.2; the CRC does not cover it).
            set_partition_leader_epoch(marker, 0, LEADER_EPOCH)
            plog.append(marker)
        except KafkaError as exc:
            # The decision is durable; a restart writes the markers again.
            log.error("marker for %s-%d failed: %s", topic, partition, exc)
            raise
        if topic != OFFSETS_TOPIC:
            controller.producer_states.for_partition(topic, partition, plog).end_transaction(
                producer_id, producer_epoch)
        broker.notify_append(topic, partition)
        self._crash_hook("marker")
        return True

    # -- produce hook ---------------------------------------------------------------------------

    def validate_produce(self, transactional_id, topic: str, partition: int, header) -> int:
        coordinator = self.coordinator
        if coordinator is None:
            return ErrorCode.INVALID_TXN_STATE
        error = coordinator.validate_produce(transactional_id, header.producer_id, header.producer_epoch,
                                             topic, partition)
        # Kafka's verification answers TRANSACTION_ABORTABLE; produce.py turns it into
        # INVALID_TXN_STATE for Produce versions below 11, as Kafka does.
        return ErrorCode.TRANSACTION_ABORTABLE if error is ErrorCode.INVALID_TXN_STATE else error

    def add_partition_implicitly(self, transactional_id, topic: str, partition: int, header) -> int:
        """Transactions V2 (Produce v12+): a transactional batch adds its partition to the open
        transaction (or opens one).  Errors as Kafka's produce path maps the coordinator's:
        retriable ones NOT_ENOUGH_REPLICAS, a stale epoch INVALID_PRODUCER_EPOCH, the rest
        TRANSACTION_ABORTABLE."""
        if transactional_id is None:
            return ErrorCode.INVALID_TXN_STATE
        coordinator = self.ensure()
        error = _storage_guard(coordinator.add_partitions, transactional_id, header.producer_id,
                               header.producer_epoch, [(topic, partition)], 2)
        if error is ErrorCode.NONE:
            return ErrorCode.NONE
        if error in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if error in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return ErrorCode.TRANSACTION_ABORTABLE

    # -- handlers -------------------------------------------------------------------------------

    async def init_producer_id(self, ctx, body: dict) -> dict:
        coordinator = self.ensure()
        result = _storage_guard(coordinator.init_producer_id, body["transactional_id"],
                                body["transaction_timeout_ms"], body.get("producer_id", -1),
                                body.get("producer_epoch", -1))
        error, pid, epoch = (result, -1, -1) if isinstance(result, ErrorCode) else result
        error = _fenced(error, ctx.api_version, 4)
        if error is ErrorCode.TRANSACTION_ABORTABLE and ctx.api_version < 5:
            error = ErrorCode.INVALID_TXN_STATE
        return {"throttle_time_ms": 0, "error_code": error, "producer_id": pid, "producer_epoch": epoch}


def _service(ctx) -> TxnService:
    return ctx.broker.txn_coordinator


def _storage_guard(call, *args):
    """Run a coordinator operation; a failed append to __transaction_state or to a data partition
    (storage error) answers COORDINATOR_NOT_AVAILABLE, retriable, as Kafka maps append failures.
    The state is untouched by a failed record append; a failed marker leaves the transaction
    prepared, and the next load writes the markers again."""
    try:
        return call(*args)
    except KafkaError as exc:
        log.error("transaction operation failed in storage: %s", exc)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE


async def add_partitions_to_txn(ctx, body: dict) -> dict:
    if ctx.api_version >= 4:
        return await _add_partitions_batched(ctx, body)
    return await _add_partitions_v3(ctx, body)


async def _add_partitions_batched(ctx, body: dict) -> dict:
    """AddPartitionsToTxn v4+: the broker-to-broker form (CLUSTER_ACTION), several transactional
    ids at once, each either added or, with verify_only, only checked (KIP-890 part 1: a partition
    not in the transaction answers TRANSACTION_ABORTABLE, at v4 too, as Kafka 4.2 does)."""
    transactions = body.get("transactions") or []
    if not transactions:
        # Kafka 4.2 never answers a batched request without transactions (seen on the wire: the
        # client times out); minikafka does the same rather than invent an answer.
        return None
    if not az.authorize(ctx, az.CLUSTER_ACTION, az.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    coordinator = _service(ctx).ensure()
    controller = ctx.broker.controller
    results = []
    for txn in transactions:
        topics = txn.get("topics") or []
        wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
        if txn.get("verify_only"):
            errors = coordinator.verify_partitions(txn["transactional_id"], txn["producer_id"],
                                                   txn["producer_epoch"], wanted)
        else:
            failed = {}
            for t in topics:
                info = controller.topic(t["name"])
                for p in t["partitions"]:
                    if info is None or not 0 <= p < info.num_partitions:
                        failed[(t["name"], p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if failed:
                errors = {tp: ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
                errors.update(failed)
            else:
                error = _storage_guard(coordinator.add_partitions, txn["transactional_id"], txn["producer_id"],
                                       txn["producer_epoch"], wanted)
                errors = {tp: error for tp in wanted}
        results.append({"transactional_id": txn["transactional_id"], "topic_results": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": errors[(t["name"], p)]} for p in t["partitions"]]}
            for t in topics]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}


async def _add_partitions_v3(ctx, body: dict) -> dict:
    controller = ctx.broker.controller
    topics = body.get("v3_and_below_topics") or []
    if not az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, body["v3_and_below_transactional_id"]):
        errors = {(t["name"], p): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                  for t in topics for p in t["partitions"]}
        return _add_partitions_response(topics, errors)
    coordinator = _service(ctx).ensure()
    wanted, failed = [], {}
    writable = {t["name"] for t in topics
                if not _internal(controller, t["name"]) and az.authorize(ctx, az.WRITE, az.TOPIC, t["name"])}
    for t in topics:
        info = controller.topic(t["name"])
        for p in t["partitions"]:
            if t["name"] not in writable:
                failed[(t["name"], p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p < info.num_partitions:
                failed[(t["name"], p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append((t["name"], p))
    if failed:
        # One failed partition fails the whole request; the others were not added.
        errors = {tp: ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
        errors.update(failed)
    else:
        error = _storage_guard(coordinator.add_partitions, body["v3_and_below_transactional_id"],
                               body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"], wanted)
        error = _fenced(error, ctx.api_version, 2)
        errors = {tp: error for tp in wanted}
    return _add_partitions_response(topics, errors)


def _internal(controller, topic: str) -> bool:
    info = controller.topic(topic)
    return info.internal if info is not None else topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


def _add_partitions_response(topics: list, errors: dict) -> dict:
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": errors[(t["name"], p)]} for p in t["partitions"]]}
        for t in topics]}


async def add_offsets_to_txn(ctx, body: dict) -> dict:
    from ..group.apis import ensure_coordinator

    if not az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, body["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not az.authorize(ctx, az.READ, az.GROUP, body["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    coordinator = _service(ctx).ensure()
    groups = ensure_coordinator(ctx.broker)
    partition = groups.partition_for(body["group_id"])
    error = _storage_guard(coordinator.add_partitions, body["transactional_id"], body["producer_id"],
                           body["producer_epoch"], [(OFFSETS_TOPIC, partition)])
    return {"throttle_time_ms": 0, "error_code": _fenced(error, ctx.api_version, 2)}


async def end_txn(ctx, body: dict) -> dict:
    if not az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, body["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    coordinator = _service(ctx).ensure()
    if ctx.api_version >= TV2_END_TXN_VERSION:
        # Transactions V2: the end bumps the epoch; the answer carries the id and epoch to go on with.
        result = _storage_guard(coordinator.end_txn_v2, body["transactional_id"], body["producer_id"],
                                body["producer_epoch"], bool(body["committed"]))
        error, pid, epoch = (result, -1, -1) if isinstance(result, ErrorCode) else result
        return {"throttle_time_ms": 0, "error_code": error, "producer_id": pid, "producer_epoch": epoch}
    error = _storage_guard(coordinator.end_txn, body["transactional_id"], body["producer_id"],
                           body["producer_epoch"], bool(body["committed"]))
    return {"throttle_time_ms": 0, "error_code": _fenced(error, ctx.api_version, 2)}


async def describe_transactions(ctx, body: dict) -> dict:
    coordinator = _service(ctx).ensure()
    states = []
    for tid in body.get("transactional_ids") or []:
        if not az.authorize(ctx, az.DESCRIBE, az.TRANSACTIONAL_ID, tid):
            states.append({"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional_id": tid,
                           "transaction_state": "", "transaction_timeout_ms": 0,
                           "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
                           "topics": []})
            continue
        state = coordinator.describe(tid)
        state["topics"] = [t for t in state["topics"] if az.authorize(ctx, az.DESCRIBE, az.TOPIC, t["topic"])]
        states.append(state)
    return {"throttle_time_ms": 0, "transaction_states": states}


async def list_transactions(ctx, body: dict) -> dict:
    coordinator = _service(ctx).coordinator
    if coordinator is None:
        if ctx.api_version >= 2 and body.get("transactional_id_pattern"):
            try:
                re.compile(body["transactional_id_pattern"])
            except re.error:
                return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                        "unknown_state_filters": [], "transaction_states": []}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": [],
                "transaction_states": []}
    pattern = None
    if ctx.api_version >= 2 and body.get("transactional_id_pattern"):
        # KIP-1152 (v2): a regular expression the whole id must match; null or "" lists all.
        try:
            pattern = re.compile(body["transactional_id_pattern"])
        except re.error:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                    "unknown_state_filters": [], "transaction_states": []}
    out = coordinator.list(body.get("state_filters") or [], body.get("producer_id_filters") or [],
                           body.get("duration_filter", -1) if ctx.api_version >= 1 else -1)
    if pattern is not None:
        out["transaction_states"] = [s for s in out["transaction_states"] if pattern.fullmatch(s["transactional_id"])]
    out["transaction_states"] = [s for s in out["transaction_states"]
                                 if az.authorize(ctx, az.DESCRIBE, az.TRANSACTIONAL_ID, s["transactional_id"])]
    return {"throttle_time_ms": 0, **out}


async def describe_producers(ctx, body: dict) -> dict:
    from ..handlers.admin_topics import UNKNOWN_TOPIC_MESSAGE

    controller = ctx.broker.controller
    topics = []
    for t in body.get("topics") or []:
        info = controller.topic(t["name"])
        readable = az.authorize(ctx, az.READ, az.TOPIC, t["name"])
        parts = []
        for index in t.get("partition_indexes") or []:
            if not readable or info is None or not 0 <= index < info.num_partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                # Kafka 4.2 sends the error's description for an unknown topic (not for an unknown
                # partition of a known one).
                message = UNKNOWN_TOPIC_MESSAGE if readable and info is None else None
                parts.append({"partition_index": index, "error_code": error, "error_message": message,
                              "active_producers": []})
                continue
            plog = controller.log(t["name"], index)
            state = controller.producer_states.for_partition(t["name"], index, plog)
            txn = plog.txn
            producers = []
            for pid, entry in sorted(state.producers.items()):
                producers.append({"producer_id": pid, "producer_epoch": entry.epoch,
                                  "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
                                  "coordinator_epoch": txn.coordinator_epochs.get(pid, -1),
                                  "current_txn_start_offset": txn.open_transaction_start(pid)})
            parts.append({"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                          "active_producers": producers})
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def register(registry, broker) -> None:
    broker.txn_coordinator = TxnService(broker)
    for api_key, lo, hi, handler in (
        (ADD_PARTITIONS_TO_TXN, 0, 5, add_partitions_to_txn),
        (ADD_OFFSETS_TO_TXN, 0, 4, add_offsets_to_txn),
        (END_TXN, 0, 5, end_txn),
        (DESCRIBE_PRODUCERS, 0, 0, describe_producers),
        (DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions),
        (LIST_TRANSACTIONS, 0, 2, list_transactions),
    ):
        registry.register(api_key, lo, hi, handler)


async def start(broker) -> None:
    await broker.txn_coordinator.start()


async def stop(broker) -> None:
    await broker.txn_coordinator.stop()
