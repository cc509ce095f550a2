"""The transaction coordinator: transactional ids over ``__transaction_state``, Kafka's rules.

One broker leads every partition, so every shard is local; a transactional id lives on partition
``abs(javaStringHashCode(id)) % transaction.state.log.num.partitions`` as in Kafka.  Logic follows
Kafka's ``TransactionCoordinator``/``TransactionMetadata``: transaction version 1 (Kafka 3.9's
rules) and, for clients that use it, version 2 (KIP-890 part 2: ``end_txn_v2`` bumps the epoch on
every end, the markers carry the bumped epoch, the producer id rotates when the epoch would
overflow; partitions are added implicitly through ``add_partitions(client_tv=2)``).

Ending a transaction: EndTxn writes PrepareCommit/PrepareAbort (the decision, durable before
anything else happens), then the markers to every partition of the transaction (data partitions
through storage, ``__consumer_offsets`` partitions through the group coordinator, which makes the
pending transactional offsets visible), then CompleteCommit/CompleteAbort.  All of it is local and
synchronous, so the client's answer comes after the markers; Kafka answers after the Prepare record
and writes markers asynchronously.  A restart finds any transaction left in a Prepare state and
writes its markers again (a duplicate marker is harmless: the partition has no open transaction
of that producer any more), then completes it.

Time comes from an injected ``Clock`` and timeouts from a keyed ``Timer`` (broker/clock.py):
each Ongoing transaction has a timer at start + transaction.timeout.ms that aborts it with an
epoch bump (the producer is fenced), and each shard a periodic timer that removes transactional
ids idle longer than transactional.id.expiration.ms.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable

from minikafka.protocol.errors import ErrorCode

from . import TRANSACTION_STATE_TOPIC  # noqa: F401  (importers of the coordinator find it here)
from ..group.partitioner import partition_for
from ..clock import Clock, Timer
from .shard import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnLog, TxnMetadata, TxnShard
from .state import TxnState, check_transition

log = logging.getLogger("minikafka.txn")

SHORT_MAX = 32767

# (producer_id, producer_epoch, commit, partitions, coordinator_epoch) -> None
MarkerWriter = Callable[[int, int, bool, list, int], None]


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= SHORT_MAX - 1


@dataclass
class TxnConfig:
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    remove_expired_interval_ms: int = 3600000

    @classmethod
    def from_broker_config(cls, config) -> "TxnConfig":
        def get(name: str, default: int) -> int:
            try:
                value = config.get(name)
            except Exception:
                return default
            return default if value is None else int(value)

        return cls(get("transaction.max.timeout.ms", 900000), get("transactional.id.expiration.ms", 604800000),
                   get("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000))


class TransactionCoordinator:
    def __init__(self, num_partitions: int, log_factory: Callable[[int], TxnLog], timer: Timer, clock: Clock,
                 next_producer_id: Callable[[], int], write_markers: MarkerWriter,
                 config: TxnConfig | None = None, coordinator_epoch: int = 0,
                 crash_hook: Callable[[str], None] | None = None) -> None:
        self.num_partitions = num_partitions
        self.shards = [TxnShard(p, log_factory(p)) for p in range(num_partitions)]
        self.timer = timer
        self.clock = clock
        self.next_producer_id = next_producer_id
        self.write_markers = write_markers
        self.config = config or TxnConfig()
        self.coordinator_epoch = coordinator_epoch
        self.crash_hook = crash_hook or (lambda phase: None)
        self.active = False

    # == routing and loading =====================================================================

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def shard_for(self, transactional_id: str) -> TxnShard:
        return self.shards[self.partition_for(transactional_id)]

    def check(self, transactional_id: str) -> tuple[TxnShard | None, ErrorCode]:
        if not self.active:
            return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        shard = self.shard_for(transactional_id)
        if not shard.loaded:
            return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return shard, ErrorCode.NONE

    def load_shard(self, shard: TxnShard) -> None:
        """Rebuild a shard, then finish what was decided before a restart and re-arm the timers."""
        shard.load()
        for meta in list(shard.txns.values()):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info("transactional id %r was in %s at restart: writing its markers again",
                         meta.transactional_id, meta.state.label)
                self._finish(shard, meta)
            elif meta.state is TxnState.ONGOING:
                self._arm_timeout(meta)
        self.timer.schedule(("txn-expire", shard.partition), self.config.remove_expired_interval_ms,
                            lambda: self._expire_ids(shard))

    def load(self) -> None:
        self.active = True
        for shard in self.shards:
            self.load_shard(shard)

    def unload(self) -> None:
        self.active = False
        for shard in self.shards:
            shard.loaded = False
            self.timer.cancel(("txn-expire", shard.partition))
            for tid in shard.txns:
                self.timer.cancel(("txn-timeout", tid))

    # == writing state ===========================================================================

    def _write(self, shard: TxnShard, current: TxnMetadata | None, new: TxnMetadata) -> None:
        if current is not None:
            check_transition(current.state, new.state)
        shard.write(new, new.transactional_id, self.clock.now_ms())
        if new.state is TxnState.ONGOING:
            self._arm_timeout(shard.txns[new.transactional_id])
        else:
            self.timer.cancel(("txn-timeout", new.transactional_id))

    def _arm_timeout(self, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        delay = meta.start_ms + meta.timeout_ms - self.clock.now_ms()
        self.timer.schedule(("txn-timeout", tid), max(delay, 0), lambda: self._time_out(tid))

    # == InitProducerId ==========================================================================

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_pid: int = -1,
                         expected_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch).  Kafka's handleInitProducerId for a transactional id."""
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, -1, -1
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        shard, error = self.check(transactional_id)
        if shard is None:
            return error, -1, -1
        now = self.clock.now_ms()
        meta = shard.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self.next_producer_id(), NO_PRODUCER_EPOCH, timeout_ms,
                               TxnState.EMPTY, frozenset(), -1, now)
            fresh = True
        else:
            fresh = False
        expected = expected_pid >= 0
        if expected and not (meta.producer_epoch == NO_PRODUCER_EPOCH or expected_pid == meta.producer_id
                             or (expected_pid == meta.last_producer_id and epoch_exhausted(expected_epoch))):
            return ErrorCode.PRODUCER_FENCED, -1, -1
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE,
                     TxnState.DEAD):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if state is TxnState.ONGOING:
            # A new instance: fence the old one (epoch bump) and abort its transaction; the client
            # retries and then gets an epoch of its own.
            self._fence_and_abort(shard, meta)
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if epoch_exhausted(meta.producer_epoch) and (not expected or expected_epoch == meta.producer_epoch):
            new = meta.copy(producer_id=self.next_producer_id(), producer_epoch=0,
                            last_producer_id=meta.producer_id if expected else NO_PRODUCER_ID,
                            last_producer_epoch=meta.producer_epoch if expected else NO_PRODUCER_EPOCH)
        elif not expected:
            new = meta.copy(producer_epoch=meta.producer_epoch + 1, last_producer_id=NO_PRODUCER_ID,
                            last_producer_epoch=NO_PRODUCER_EPOCH)
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            new = meta.copy(producer_epoch=meta.producer_epoch + 1, last_producer_id=meta.producer_id,
                            last_producer_epoch=meta.producer_epoch)
        elif expected_epoch == meta.last_producer_epoch:
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch  # a retry of the last bump
        else:
            return ErrorCode.PRODUCER_FENCED, -1, -1
        new = new.copy(state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1, last_update_ms=now,
                       timeout_ms=timeout_ms)
        self._write(shard, None if fresh else meta, new)
        shard.txns[transactional_id].last_producer_id = new.last_producer_id
        shard.txns[transactional_id].last_producer_epoch = new.last_producer_epoch
        return ErrorCode.NONE, new.producer_id, new.producer_epoch

    # == AddPartitionsToTxn / AddOffsetsToTxn ====================================================

    def _validate(self, transactional_id: str, producer_id: int, producer_epoch: int
                  ) -> tuple[TxnShard | None, TxnMetadata | None, ErrorCode]:
        if transactional_id == "":
            return None, None, ErrorCode.INVALID_REQUEST
        shard, error = self.check(transactional_id)
        if shard is None:
            return None, None, error
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return shard, meta, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return shard, meta, ErrorCode.PRODUCER_FENCED
        return shard, meta, ErrorCode.NONE

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], client_tv: int = 1) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn (``client_tv`` 1), or the implicit add of
        transactions V2 (``client_tv`` 2: Produce v12+, TxnOffsetCommit v5+), which marks the
        transaction as V2."""
        shard, meta, error = self._validate(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        wanted = frozenset(partitions)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is TxnState.DEAD:
            return ErrorCode.INVALID_TXN_STATE
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            meta.client_tv = max(meta.client_tv, client_tv)
            return ErrorCode.NONE
        now = self.clock.now_ms()
        starting = meta.state is not TxnState.ONGOING
        new = meta.copy(state=TxnState.ONGOING, partitions=(wanted if starting else meta.partitions | wanted),
                        start_ms=now if starting else meta.start_ms, last_update_ms=now,
                        client_tv=client_tv if starting else max(meta.client_tv, client_tv))
        self._write(shard, meta, new)
        return ErrorCode.NONE

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> dict:
        """AddPartitionsToTxn v4+ with verify_only: which partitions are in the open transaction
        (TRANSACTION_ABORTABLE for the others, as Kafka 4.2 answers); nothing is added."""
        shard, meta, error = self._validate(transactional_id, producer_id, producer_epoch)
        out = {}
        for tp in partitions:
            if error:
                out[tp] = error
            elif meta.state is TxnState.ONGOING and tp in meta.partitions:
                out[tp] = ErrorCode.NONE
            else:
                out[tp] = ErrorCode.TRANSACTION_ABORTABLE
        return out

    def validate_produce(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> ErrorCode:
        """A transactional batch may go only to a partition added to the producer's open transaction
        (Kafka 3.9's partition verification, transaction.partition.verification.enable=true)."""
        if transactional_id is None:
            return ErrorCode.INVALID_TXN_STATE
        shard, meta, error = self._validate(transactional_id, producer_id, producer_epoch)
        if error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return ErrorCode.NOT_ENOUGH_REPLICAS  # retriable for every client, as Kafka maps it
        if error is ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if error:
            return ErrorCode.INVALID_TXN_STATE
        if meta.state is not TxnState.ONGOING or (topic, partition) not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # == EndTxn ==================================================================================

    def end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                   commit: bool) -> tuple[ErrorCode, int, int]:
        """EndTxn v5+ (transactions V2): every end bumps the epoch (the markers carry the new one)
        and the answer gives the producer id and epoch for the next transaction; when the epoch
        would overflow, the producer id rotates (the markers still carry the old id at the last
        epoch).  A retry of an end whose answer was lost (the old epoch, or the old id at the last
        epoch) gets that answer again; an abort outside a transaction bumps the epoch too."""
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST, -1, -1
        shard, error = self.check(transactional_id)
        if shard is None:
            return error, -1, -1
        meta = shard.txns.get(transactional_id)
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, -1
        state = meta.state
        completed = {TxnState.COMPLETE_COMMIT: True, TxnState.COMPLETE_ABORT: False}
        retry = (state in completed and meta.client_tv >= 2 and (
            (producer_id == meta.producer_id and producer_epoch == meta.producer_epoch - 1
             and producer_epoch == meta.last_producer_epoch)
            or (producer_id == meta.last_producer_id and producer_id != meta.producer_id
                and producer_epoch == SHORT_MAX - 1)))
        if retry:
            if completed[state] != commit:
                return ErrorCode.INVALID_TXN_STATE, -1, -1
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch
        if producer_id != meta.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, -1
        if producer_epoch != meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED, -1, -1
        if state is TxnState.ONGOING:
            meta.client_tv = 2
            self._end(shard, meta, commit, bump=True)
        elif state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and not commit:
            # Nothing to abort (the producer could not tell whether its partitions were added):
            # the epoch is bumped all the same, no markers.
            meta.client_tv = 2
            self._end(shard, meta, False, bump=True)
        elif state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        else:
            return ErrorCode.INVALID_TXN_STATE, -1, -1
        done = shard.txns[transactional_id]
        return ErrorCode.NONE, done.producer_id, done.producer_epoch

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        shard, meta, error = self._validate(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        state = meta.state
        if state is TxnState.ONGOING:
            self._end(shard, meta, commit)
            return ErrorCode.NONE
        if state is TxnState.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
        if state is TxnState.COMPLETE_ABORT:
            return ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if commit != (state is TxnState.PREPARE_COMMIT):
                return ErrorCode.INVALID_TXN_STATE
            # Still prepared: an earlier marker write failed.  Try the markers again (they are
            # idempotent) and answer as Kafka does while markers are in flight; the client's next
            # retry finds the transaction complete.
            self._finish(shard, meta)
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state is TxnState.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE  # Empty, Dead

    def _end(self, shard: TxnShard, meta: TxnMetadata, commit: bool, epoch: int | None = None,
             bump: bool = False) -> None:
        now = self.clock.now_ms()
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        next_pid = NO_PRODUCER_ID
        if bump:
            # Transactions V2: the end bumps the epoch; at the last epoch the id rotates after it.
            if epoch_exhausted(meta.producer_epoch):
                next_pid = self.next_producer_id()
            epoch = meta.producer_epoch + 1
        prepared = meta.copy(state=target, last_update_ms=now, next_producer_id=next_pid,
                             producer_epoch=meta.producer_epoch if epoch is None else epoch)
        if bump:
            prepared.last_producer_id, prepared.last_producer_epoch = meta.producer_id, meta.producer_epoch
            self._write(shard, meta, prepared)
            self.crash_hook("prepare")
            self._finish(shard, shard.txns[meta.transactional_id])
            return
        if epoch is not None:
            # A fence is not a bump the fenced producer asked for: no retry may claim it.
            prepared.last_producer_id, prepared.last_producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if epoch is not None:
            check_transition(meta.state, TxnState.PREPARE_EPOCH_FENCE)
            meta = meta.copy(state=TxnState.PREPARE_EPOCH_FENCE)
        self._write(shard, meta, prepared)
        self.crash_hook("prepare")
        self._finish(shard, shard.txns[meta.transactional_id])

    def _finish(self, shard: TxnShard, meta: TxnMetadata) -> None:
        """Write the markers of a prepared transaction, then complete it."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        if meta.partitions:
            self.write_markers(meta.producer_id, meta.producer_epoch, commit, sorted(meta.partitions),
                               self.coordinator_epoch)
        done = meta.copy(state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                         partitions=frozenset(), last_update_ms=self.clock.now_ms())
        if meta.next_producer_id != NO_PRODUCER_ID:
            # V2 epoch overflow: the next transaction runs under a new producer id at epoch 0.
            done = done.copy(producer_id=meta.next_producer_id, producer_epoch=0, next_producer_id=NO_PRODUCER_ID,
                             last_producer_id=meta.producer_id, last_producer_epoch=meta.producer_epoch)
        self._write(shard, meta, done)
        if done.last_producer_id != NO_PRODUCER_ID:
            shard.txns[meta.transactional_id].last_producer_id = done.last_producer_id
            shard.txns[meta.transactional_id].last_producer_epoch = done.last_producer_epoch

    def _fence_and_abort(self, shard: TxnShard, meta: TxnMetadata) -> None:
        """Bump the epoch (unless exhausted) and abort the open transaction under the new epoch."""
        epoch = meta.producer_epoch if epoch_exhausted(meta.producer_epoch) else meta.producer_epoch + 1
        self._end(shard, meta, commit=False, epoch=epoch)

    def _time_out(self, transactional_id: str) -> None:
        shard = self.shard_for(transactional_id)
        meta = shard.txns.get(transactional_id)
        if not shard.loaded or meta is None or meta.state is not TxnState.ONGOING:
            return
        if self.clock.now_ms() < meta.start_ms + meta.timeout_ms:
            self._arm_timeout(meta)
            return
        log.info("transaction of %r (producer %d epoch %d) timed out after %d ms: aborting it",
                 transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
        if meta.client_tv >= 2:
            # Transactions V2 (as Kafka 4.2 answers): an abort with the usual epoch bump, so the
            # producer's own EndTxn(abort) with the old epoch is answered as a retry (with the new
            # epoch) and its commit gets INVALID_TXN_STATE; it is not fenced.
            self._end(shard, meta, False, bump=True)
            return
        self._fence_and_abort(shard, meta)

    def _expire_ids(self, shard: TxnShard) -> None:
        if not shard.loaded:
            return
        now = self.clock.now_ms()
        for meta in list(shard.txns.values()):
            if meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) \
                    and meta.last_update_ms + self.config.id_expiration_ms <= now:
                check_transition(meta.state, TxnState.DEAD)
                log.info("transactional id %r idle since %d: removed", meta.transactional_id, meta.last_update_ms)
                shard.write(None, meta.transactional_id, now)
        self.timer.schedule(("txn-expire", shard.partition), self.config.remove_expired_interval_ms,
                            lambda: self._expire_ids(shard))

    # == admin ===================================================================================

    def describe(self, transactional_id: str) -> dict:
        shard, error = self.check(transactional_id)
        meta = shard.txns.get(transactional_id) if shard is not None else None
        if shard is not None and meta is None:
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if meta is None:
            # Kafka 4.2 leaves every other field at its default (0).
            return {"error_code": error, "transactional_id": transactional_id, "transaction_state": "",
                    "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
                    "producer_epoch": 0, "topics": []}
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(p)
        return {"error_code": ErrorCode.NONE, "transactional_id": transactional_id,
                "transaction_state": meta.state.label, "transaction_timeout_ms": meta.timeout_ms,
                "transaction_start_time_ms": meta.start_ms, "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    def list(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
             duration_filter_ms: int = -1) -> dict:
        states = set()
        unknown = []
        for label in state_filters or ():
            state = TxnState.from_label(label)
            if state is None:
                unknown.append(label)
            else:
                states.add(state)
        pids = set(producer_id_filters or ())
        now = self.clock.now_ms()
        error = ErrorCode.NONE if self.active else ErrorCode.COORDINATOR_NOT_AVAILABLE
        out = []
        for shard in self.shards:
            if not shard.loaded:
                if self.active:
                    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                continue
            for meta in shard.txns.values():
                if (state_filters and meta.state not in states) or (pids and meta.producer_id not in pids):
                    continue
                if meta.state is TxnState.DEAD:
                    continue
                if duration_filter_ms >= 0 and now - meta.start_ms <= duration_filter_ms:
                    # Kafka's test, as it is: an id with no transaction (start -1) always passes.
                    continue
                out.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                            "transaction_state": meta.state.label})
        if state_filters and not states:
            out = []
        return {"error_code": error, "unknown_state_filters": unknown, "transaction_states": out}
