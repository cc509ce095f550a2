"""WriteTxnMarkers (27) v1-2: write COMMIT/ABORT markers, for tools and tests that call it.

Kafka's transaction coordinator sends this to partition leaders; here the coordinator writes its
markers in-process (broker/txn/apis.py ``TxnService.write_marker``), and this API goes through
the same function, so a marker written by a request ends a transaction exactly as the
coordinator's would (last stable offset, aborted-transaction index, transactional offsets of a
``__consumer_offsets`` partition).  Kafka 4.2's semantics (``KafkaApis.handleWriteTxnMarkersRequest``):

- ALTER or CLUSTER_ACTION on the cluster, else every partition answers
  CLUSTER_AUTHORIZATION_FAILED;
- per partition: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist;
  INVALID_PRODUCER_EPOCH when the marker's producer epoch is below the producer's epoch on that
  partition, or, for a transaction-version-2 marker (v2 ``transaction_version`` 2) ending an open
  transaction, not above it; TRANSACTION_COORDINATOR_FENCED when its coordinator epoch is below the one of the
  producer's last marker there (checked after the producer epoch, as Kafka's ProducerAppendInfo);
  a storage failure answers its error (KAFKA_STORAGE_ERROR);
- an empty request answers an empty list; results keep the request's order (Kafka's come from a
  hash map).

v2 adds ``transaction_version`` (KIP-890), used only by that check.  Left out: the
coordinator epochs of markers are remembered in memory (Kafka keeps them in producer state and
snapshots), and markers to ``__consumer_offsets`` are not checked against producer epochs.
"""

from __future__ import annotations

import weakref

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode, KafkaError

WRITE_TXN_MARKERS = 27
OFFSETS_TOPIC = "__consumer_offsets"

# broker -> {(topic, partition, producer id): coordinator epoch of the last marker written}
_FENCES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _fences(broker) -> dict:
    try:
        return _FENCES.setdefault(broker, {})
    except TypeError:  # a broker stand-in that cannot be weakly referenced
        return broker.__dict__.setdefault("_txn_marker_fences", {})


def _partition_exists(broker, topic: str, partition: int) -> bool:
    info = broker.controller.topic(topic)
    return info is not None and 0 <= partition < info.num_partitions


def _write_one(broker, marker: dict, topic: str, partition: int) -> int:
    if not _partition_exists(broker, topic, partition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    pid, epoch = marker["producer_id"], marker["producer_epoch"]
    coordinator_epoch = marker["coordinator_epoch"]
    controller = broker.controller
    if topic != OFFSETS_TOPIC:
        try:
            plog = controller.log(topic, partition)
        except KafkaError as exc:
            return int(exc.code)
        entry = controller.producer_states.for_partition(topic, partition, plog).producers.get(pid)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        # Transactions V2 end with a bumped epoch: a TV2 marker for an open transaction must
        # carry an epoch above the transaction's (Kafka 4.2 answers the same epoch with 47).
        if (marker.get("transaction_version", 0) >= 2 and entry is not None and epoch <= entry.epoch
                and plog.txn.open_transaction_start(pid) >= 0):
            return ErrorCode.INVALID_PRODUCER_EPOCH
    fences = _fences(broker)
    if fences.get((topic, partition, pid), -1) > coordinator_epoch:
        return ErrorCode.TRANSACTION_COORDINATOR_FENCED
    txn = broker.txn_coordinator
    try:
        written = txn.write_marker(topic, partition, pid, epoch, bool(marker["transaction_result"]),
                                   coordinator_epoch)
    except KafkaError as exc:
        return int(exc.code)
    except OSError:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if not written:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fences[(topic, partition, pid)] = coordinator_epoch
    return 0


async def write_txn_markers(ctx, body: dict) -> dict:
    allowed = az.authorize(ctx, az.ALTER, az.CLUSTER) or az.authorize(ctx, az.CLUSTER_ACTION, az.CLUSTER)
    results = []
    for marker in body.get("markers") or ():
        topics = []
        for item in marker.get("topics") or ():
            partitions = []
            for partition in item.get("partition_indexes") or ():
                code = (_write_one(ctx.broker, marker, item["name"], partition) if allowed
                        else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                partitions.append({"partition_index": partition, "error_code": code})
            topics.append({"name": item["name"], "partitions": partitions})
        results.append({"producer_id": marker["producer_id"], "topics": topics})
    return {"markers": results}


def register(registry, broker) -> None:
    registry.register(WRITE_TXN_MARKERS, 1, 2, write_txn_markers)
