"""A transaction coordinator shard: the transactional ids of one ``__transaction_state`` partition.

As the group shards (broker/group/shard.py): every state change is a record appended to the
partition and then applied by ``replay()``, the same function that rebuilds the shard when it is
loaded, so what the shard holds is exactly what its log says.  Sans-IO and synchronous.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Iterator, Protocol

from minikafka.protocol.errors import CorruptRecordError
from minikafka.protocol.records import build_batch, iter_records, read_header

from .records import TransactionLogKey, TransactionLogValue, decode_key, decode_value, encode_key, encode_value
from .state import TxnState

log = logging.getLogger("minikafka.txn")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnLog(Protocol):
    def append(self, batch: bytearray) -> int: ...

    def iter_batches(self) -> Iterator[bytes]: ...


class MemoryTxnLog:
    """An in-memory partition for unit tests; keep it and build a new shard to simulate a restart."""

    def __init__(self) -> None:
        self.batches: list[bytearray] = []
        self.fail_with: Exception | None = None

    def append(self, batch: bytearray) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        base = len(self.batches)
        self.batches.append(batch)
        return base

    def iter_batches(self) -> Iterator[bytes]:
        return iter(list(self.batches))


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset = frozenset()  # {(topic, partition)}
    start_ms: int = -1
    last_update_ms: int = -1
    # Kept in memory only for V1, as Kafka 3.9 does (value v1 holds them for V2 transactions):
    # what InitProducerId needs to recognise a retry after an epoch bump whose answer was lost.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # Transactions V2 (KIP-890 part 2), written in value v1's tagged fields as Kafka 4.x does: the
    # transaction version of the client's current transaction (2: its end bumps the epoch) and,
    # while a V2 end whose epoch would overflow is prepared, the producer id it rotates to.
    client_tv: int = 1
    next_producer_id: int = NO_PRODUCER_ID

    def to_value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, p in self.partitions:
            by_topic.setdefault(topic, []).append(p)
        value = TransactionLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state.code,
                                    by_topic, self.last_update_ms, self.start_ms)
        if self.client_tv >= 2:
            # Value v1 (as Kafka 4.x writes it for transactions V2): what a V2 end needs after a
            # restart, the previous id/epoch for lost-answer retries and the id it rotates to.
            value.client_transaction_version = self.client_tv
            value.previous_producer_id = self.last_producer_id
            value.next_producer_id = self.next_producer_id
            value.next_producer_epoch = 0 if self.next_producer_id != NO_PRODUCER_ID else NO_PRODUCER_EPOCH
        return value

    def copy(self, **changes) -> "TxnMetadata":
        return replace(self, **changes)


@dataclass
class TxnShard:
    partition: int
    log: TxnLog
    txns: dict[str, TxnMetadata] = field(default_factory=dict)
    loaded: bool = False

    def write(self, new: TxnMetadata | None, transactional_id: str, now_ms: int) -> None:
        """Append the record of a state change (``None``: tombstone), then apply it."""
        key = TransactionLogKey(transactional_id)
        value = None if new is None else new.to_value()
        batch = build_batch([(encode_key(key), encode_value(value), [], now_ms)])
        self.log.append(batch)
        self.replay(key, value, new)

    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None,
               live: TxnMetadata | None = None) -> None:
        tid = key.transactional_id
        if value is None:
            self.txns.pop(tid, None)
            return
        partitions = frozenset((t, p) for t, ids in value.partitions.items() for p in ids)
        meta = TxnMetadata(tid, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                           TxnState.from_code(value.transaction_status), partitions, value.start_timestamp_ms,
                           value.last_update_timestamp_ms)
        if live is not None:
            meta.last_producer_id, meta.last_producer_epoch = live.last_producer_id, live.last_producer_epoch
            meta.client_tv, meta.next_producer_id = live.client_tv, live.next_producer_id
        elif value.client_transaction_version >= 2:
            # Value v1 (transactions V2): the previous id, the rotation target, the client's version.
            # The previous epoch is the one before the bump (or the last one, after a rotation).
            meta.client_tv = value.client_transaction_version
            meta.next_producer_id = value.next_producer_id
            if value.previous_producer_id != NO_PRODUCER_ID:
                meta.last_producer_id = value.previous_producer_id
                meta.last_producer_epoch = (value.producer_epoch - 1 if value.previous_producer_id == value.producer_id
                                            else 32766)
        # Loaded from a v0 value they stay unknown, as in Kafka 3.9 (v0 does not hold them).
        self.txns[tid] = meta

    def load(self) -> None:
        self.txns.clear()
        for batch in self.log.iter_batches():
            header = read_header(batch)
            if header.is_control:
                continue
            for record in iter_records(batch):
                try:
                    key = decode_key(record.key)
                    value = decode_value(record.value)
                except CorruptRecordError as exc:
                    log.warning("__transaction_state-%d: skipping record at %d: %s", self.partition,
                                record.offset, exc)
                    continue
                self.replay(key, value)
        self.loaded = True
