"""Produce (key 0): advertise 0-13, serve 3-13.

Versions 0-2 are advertised because librdkafka < 2.11.1 turns compression off when Produce v0
is outside the broker's range (KAFKA-18659); a request at one of them is answered as Kafka 4.2
answers it (checked against it): by closing the connection after the answers to earlier
requests.  v3+ carries record batch v2 only.

Per partition, in Kafka's order (``ReplicaManager.appendToLocalLog``,
``UnifiedLog.analyzeAndValidateRecords``, ``ProduceRequest.validateRecords``):

1. unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (Produce never auto-creates);
   an internal topic (``__consumer_offsets``) -> INVALID_TOPIC_EXCEPTION;
2.-4. the whole batch is validated before anything is stored (protocol/validation.py, Kafka's
   LogValidator): one magic-2 batch with base offset 0, size, CRC-32C, attributes, record count,
   every record's structure (decompressed within ``decompression.max.ratio`` times
   ``max.message.bytes``), keys on compacted topics and CreateTime bounds per record; the error
   codes and, from v8, ``record_errors`` with the offending records' indexes, are Kafka's;
5. idempotent producers (producer id >= 0): a duplicate of one of the last five batches is
   acknowledged with its original base offset and no error; a stale epoch gives
   INVALID_PRODUCER_EPOCH, a sequence gap OUT_OF_ORDER_SEQUENCE_NUMBER (broker.producer_state).

acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS for every partition).  With one replica, -1
and 1 complete at the same moment.  acks=0 gets no response at all.  The batch is appended as
the client sent it (compressed data untouched); only base offset and leader epoch are patched
in place (the CRC does not cover them), or for ``message.timestamp.type=LogAppendTime`` the
timestamp fields (storage recomputes the CRC).  Every append wakes Fetch long polls on that
partition.  The handler appends before any ``await``, so several Produce requests in flight on
one connection land in request order.

Transactional batches (v3+ with a transactional id) are checked like idempotent ones, then by the
transaction coordinator (``broker.txn_coordinator.validate_produce``, broker/txn/apis.py): the
partition must be in the producer's open transaction (Kafka 3.9's partition verification), else
TRANSACTION_ABORTABLE for Produce v11 and INVALID_TXN_STATE for older versions.

v12 (KIP-890 part 2, transactions V2): with ``transaction.version`` 2 finalized (the default, as
in Kafka 4.2), a transactional batch adds its partition to the producer's transaction itself
(``TxnService.add_partition_implicitly``) instead of being verified against AddPartitionsToTxn;
with ``transaction.version`` 1 v12 is v11.  v13 (KIP-516) names topics by id: an id the broker does not know (the zero id
included) answers UNKNOWN_TOPIC_ID for each of its partitions, before any authorization; the
answer carries the id instead of the name.
"""

from __future__ import annotations

import logging

from minikafka.protocol.errors import CloseConnection, CorruptRecordError, ErrorCode, KafkaError
from minikafka.protocol.records import TRANSACTIONAL_BIT, set_max_timestamp, set_partition_leader_epoch
from minikafka.protocol.validation import BatchRejected, ValidationRules, validate_batch

from ..security import authorizer as az

log = logging.getLogger("minikafka.produce")

API_KEY = 0
LONG_MAX = 9223372036854775807
LEADER_EPOCH = 0
_NO_MESSAGE = (ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)
_NOT_IN_TRANSACTION = "Partition was not added to the transaction"
TV2_PRODUCE_VERSION = 12


def tv2_enabled(broker) -> bool:
    """``transaction.version`` finalized at 2 or more (the default; UpdateFeatures may lower it)."""
    from minikafka.broker import features

    return features.level(broker, features.TRANSACTION_VERSION) >= 2

def _partition_response(index: int, error: int, base_offset: int = -1, log_start_offset: int = -1,
                        log_append_time_ms: int = -1, message: str | None = None,
                        record_errors: list | None = None) -> dict:
    return {"index": index, "error_code": error, "base_offset": base_offset,
            "log_append_time_ms": log_append_time_ms, "log_start_offset": log_start_offset,
            "record_errors": record_errors or [], "error_message": message}


def _request_level(records) -> bool:
    """Whether Kafka refuses these bytes before the partition sees them (ProduceRequest's
    validateRecords): not exactly one batch, or not magic 2."""
    size = len(records)
    if size < 61 or records[16] != 2:
        return True
    return 12 + int.from_bytes(bytes(records[8:12]), "big", signed=True) != size


def validation_rules(broker, topic: str) -> ValidationRules:
    """The topic's settings that decide whether a batch may be stored.

    Built from six settings per produce, this was a tenth of the produce handler (issue 24), so
    each topic's rules are kept with what they were built from: the topic's overrides (the
    controller replaces the dict on every change) and the broker overrides of the settings they
    fall back to."""
    info = broker.controller.topic(topic)
    overrides = getattr(broker.config, "overrides", None)
    cache = getattr(broker, "_validation_rules", None)
    if info is None or overrides is None or cache is None:
        return _build_rules(broker, topic)
    get = overrides.get  # the broker settings the topic's rules fall back to
    key = (get("message.max.bytes"), get("log.cleanup.policy"), get("log.message.timestamp.type"),
           get("log.message.timestamp.before.max.ms"), get("log.message.timestamp.after.max.ms"),
           get("decompression.max.ratio"))
    entry = cache.get(topic)
    if entry is not None and entry[0] is info.configs and entry[1] == key:
        return entry[2]
    rules = _build_rules(broker, topic)
    cache[topic] = (info.configs, key, rules)
    return rules


def _build_rules(broker, topic: str) -> ValidationRules:
    value = broker.controller.topic_config_value
    max_bytes = value(topic, "max.message.bytes")
    return ValidationRules(
        max_message_bytes=max_bytes,
        compact="compact" in value(topic, "cleanup.policy"),
        create_time=value(topic, "message.timestamp.type") == "CreateTime",
        timestamp_before_max_ms=value(topic, "message.timestamp.before.max.ms"),
        timestamp_after_max_ms=value(topic, "message.timestamp.after.max.ms"),
        decompressed_max_bytes=max_bytes * broker.config.get("decompression.max.ratio"))


def produce_partition(broker, topic: str, info, index: int, records, transactional_id,
                      api_version: int = 11) -> dict:
    """Validate and append one partition's batch; returns its response entry."""
    controller = broker.controller
    if info is None or not 0 <= index < info.num_partitions:
        return _partition_response(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if info.internal:
        return _partition_response(index, ErrorCode.INVALID_TOPIC_EXCEPTION)  # no message, as Kafka 4.2
    if records is None:
        return _partition_response(index, ErrorCode.INVALID_RECORD, message="Produce request without records")
    try:
        header = validate_batch(records, validation_rules(broker, topic), api_version=api_version,
                                now_ms=broker.now_ms())
    except BatchRejected as exc:
        log.info("produce to %s-%d refused (%s): %s", topic, index, exc.code.name, exc.message)
        # As Kafka 4.2 answers (ReplicaManager): the request-level checks (one v2 batch) and
        # CORRUPT_MESSAGE / MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE carry neither a message nor
        # the log start offset; a refusal by the log's validator carries the log start offset, and
        # a message only when it names records (record_errors).
        if exc.code in _NO_MESSAGE or _request_level(records):
            return _partition_response(index, exc.code, record_errors=[
                {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                for e in exc.record_errors])
        try:
            log_start = controller.log(topic, index).log_start_offset
        except KafkaError:
            log_start = -1
        return _partition_response(index, exc.code, log_start_offset=log_start,
                                   message=exc.message if exc.record_errors else None, record_errors=[
            {"batch_index": e.batch_index, "batch_index_error_message": e.message}
            for e in exc.record_errors])
    try:
        plog = controller.log(topic, index)
    except KafkaError as exc:
        return _partition_response(index, exc.code, message=str(exc))
    txn = broker.txn_coordinator
    implicit = (header.is_transactional and api_version >= TV2_PRODUCE_VERSION and txn is not None
                and hasattr(txn, "add_partition_implicitly") and tv2_enabled(broker))
    if implicit:
        # Transactions V2: the batch adds its partition to the transaction itself, before the
        # append's own checks (Kafka verifies the transaction first; its errors carry no offsets).
        txn_error = txn.add_partition_implicitly(transactional_id, topic, index, header)
        if txn_error:
            return _partition_response(index, txn_error)
    if header.producer_id >= 0:
        state = controller.producer_states.for_partition(topic, index, plog)
        check = state.check(header.producer_id, header.producer_epoch, header.base_sequence,
                            header.last_offset_delta, is_transactional=header.is_transactional)
        if check.duplicate is not None:
            log.debug("duplicate batch of producer %d seq %d on %s-%d acknowledged at offset %d",
                      header.producer_id, header.base_sequence, topic, index, check.duplicate.first_offset)
            # Kafka 4.2 answers a duplicate with the stored batch's timestamp as its append time.
            return _partition_response(index, ErrorCode.NONE, check.duplicate.first_offset, plog.log_start_offset,
                                       check.duplicate.max_timestamp)
        if check.error:
            # Kafka 4.2 answers a sequence or epoch error with the partition's log start offset.
            return _partition_response(index, check.error, log_start_offset=plog.log_start_offset)
        if header.is_transactional and not implicit and txn is not None and hasattr(txn, "validate_produce"):
            txn_error = txn.validate_produce(transactional_id, topic, index, header)
            if txn_error:
                return _partition_response(index, txn_error)
    else:
        state = None
    # Kafka stamps the leader epoch on append; consumers send it back in OffsetForLeaderEpoch.
    if isinstance(records, memoryview) and records.readonly or isinstance(records, bytes):
        records = bytearray(records)  # the codec hands out writable views; stay correct if not
    set_partition_leader_epoch(records, 0, LEADER_EPOCH)
    set_max_timestamp(records, 0, header.max_timestamp)  # the records' largest, as Kafka writes it
    try:
        result = plog.append(records, validated=True)
    except CorruptRecordError as exc:
        return _partition_response(index, ErrorCode.CORRUPT_MESSAGE, message=str(exc))
    except KafkaError as exc:
        return _partition_response(index, exc.code, message=str(exc))
    base_offset, append_time = result.base_offset, result.log_append_time
    if state is not None:
        state.record(header.producer_id, header.producer_epoch, header.base_sequence,
                     header.last_offset_delta, base_offset, header.max_timestamp)
    broker.notify_append(topic, index)
    return _partition_response(index, ErrorCode.NONE, base_offset, plog.log_start_offset, append_time)


def handle_produce_sync(broker, version: int, body: dict) -> dict | None:
    acks = body.get("acks")
    topics = body.get("topic_data") or []
    responses = []
    if version < 3:
        raise CloseConnection(f"Produce v{version} (message format v0/v1) is not served by Kafka 4; "
                              "it closes the connection")
    if acks not in (0, 1, -1):
        error = ErrorCode.INVALID_REQUIRED_ACKS
        for topic in topics:
            responses.append({"name": topic["name"], "partition_responses": [
                _partition_response(p["index"], error) for p in topic.get("partition_data") or []]})
        return {"responses": responses, "throttle_time_ms": 0}
    controller = broker.controller
    transactional_id = body.get("transactional_id")
    for topic in topics:
        name = topic["name"]
        info = controller.topic(name)
        parts = [produce_partition(broker, name, info, p["index"], p.get("records"), transactional_id, version)
                 for p in topic.get("partition_data") or []]
        if version < 11:
            for part in parts:  # Kafka answers older producers INVALID_TXN_STATE instead
                if part["error_code"] == ErrorCode.TRANSACTION_ABORTABLE:
                    # ... saying why (Kafka 4.2; v11's TRANSACTION_ABORTABLE has no message).
                    part.update(error_code=ErrorCode.INVALID_TXN_STATE, error_message=_NOT_IN_TRANSACTION)
        responses.append({"name": name, "partition_responses": parts})
    return {"responses": responses, "throttle_time_ms": 0}


def _has_transactional_records(topics: list) -> bool:
    """Whether a partition's first batch is transactional (Kafka's
    ``RequestUtils.hasTransactionalRecords``); attributes are the int16 at byte 21 of a v2 batch."""
    for t in topics:
        for p in t.get("partition_data") or []:
            records = p.get("records")
            if records is not None and len(records) >= 23 and records[22] & TRANSACTIONAL_BIT:
                return True
    return False


def authorize_produce(ctx, body: dict) -> list:
    """Kafka's Produce checks: transactional batches need WRITE on the request's transactional id
    (none, or denied: every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE per
    topic (TOPIC_AUTHORIZATION_FAILED)."""
    topics = body.get("topic_data") or []
    if _transactional_id_denied(ctx, body):
        denied, body["topic_data"] = topics, []
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not az.enabled(ctx.broker):
        return []  # the common case: no per-topic checks, the request untouched
    else:
        denied = [t for t in topics if not az.authorize(ctx, az.WRITE, az.TOPIC, t["name"])]
        body["topic_data"] = [t for t in topics if t not in denied]
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return [{"name": t["name"], "partition_responses": [
        _partition_response(p["index"], int(code)) for p in t.get("partition_data") or []]} for t in denied]


FIRST_TOPIC_ID_VERSION = 13


def _transactional_id_denied(ctx, body: dict) -> bool:
    """Transactional batches need a transactional id, and with an authorizer WRITE on it; Kafka 4.2
    refuses them otherwise, with or without an authorizer (KafkaApis checks it first)."""
    if not _has_transactional_records(body.get("topic_data") or []):
        return False
    txn = body.get("transactional_id")
    return txn is None or (az.enabled(ctx.broker) and not az.authorize(ctx, az.WRITE, az.TRANSACTIONAL_ID, txn))


def _transactional_id_refused(ctx, body: dict) -> dict | None:
    """v13: the answer when ``_transactional_id_denied``, given before any topic id is resolved
    (the partitions are named by id)."""
    if not _transactional_id_denied(ctx, body):
        return None
    topics = body.get("topic_data") or []
    code = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return {"throttle_time_ms": 0, "responses": [
        {"topic_id": t.get("topic_id"), "partition_responses": [
            _partition_response(p["index"], code) for p in t.get("partition_data") or []]} for t in topics]}


def _names_from_ids(broker, body: dict) -> tuple[dict, list]:
    """v13: give every known topic its name; the unknown ids' answers come back separately."""
    controller = broker.controller
    known, unknown = [], []
    for topic in body.get("topic_data") or []:
        topic_id = topic.get("topic_id")
        info = controller.topic_by_id(topic_id) if topic_id is not None and topic_id.int else None
        if info is None:
            unknown.append({"topic_id": topic_id, "partition_responses": [
                _partition_response(p["index"], ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.get("partition_data") or []]})
        else:
            known.append(dict(topic, name=info.name))
    return dict(body, topic_data=known), unknown


def _ids_from_names(broker, responses: list) -> None:
    controller = broker.controller
    for r in responses:
        if "topic_id" not in r:
            info = controller.topic(r["name"])
            r["topic_id"] = info.topic_id if info is not None else None


def _has_error(response: dict) -> bool:
    return any(p["error_code"] for t in response["responses"] for p in t["partition_responses"])


def register(registry, broker) -> None:
    async def handle_produce(ctx, body: dict) -> dict | None:
        unknown_ids = []
        if ctx.api_version >= FIRST_TOPIC_ID_VERSION:
            refused = _transactional_id_refused(ctx, body)
            if refused is not None:
                return refused
            body, unknown_ids = _names_from_ids(ctx.broker, body)
        denied = authorize_produce(ctx, body)  # removes denied topics from body (issue 12)
        if getattr(ctx.broker, "unregistered", False):
            # After UnregisterBroker this node leads nothing until it restarts (Kafka 4.2).
            response = {"throttle_time_ms": 0, "responses": [
                {"name": t["name"], "partition_responses": [
                    _partition_response(p["index"], ErrorCode.NOT_LEADER_OR_FOLLOWER) for p in t["partition_data"]]}
                for t in body.get("topic_data") or ()]}
        else:
            response = handle_produce_sync(ctx.broker, ctx.api_version, body)
        if denied:
            response["responses"].extend(denied)
        if ctx.api_version >= FIRST_TOPIC_ID_VERSION:
            _ids_from_names(ctx.broker, response["responses"])
            response["responses"].extend(unknown_ids)
        if body.get("acks") == 0:
            # Kafka closes an acks=0 connection whose produce failed: the client cannot see an
            # error code, but the reconnect makes it refresh metadata.
            if _has_error(response) and ctx.connection is not None:
                log.info("acks=0 produce from client_id=%s failed; closing its connection", ctx.client_id)
                ctx.connection.close()
            return None
        return response

    registry.register(API_KEY, 0, 13, handle_produce)
