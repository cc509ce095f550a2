"""One share partition: the records of one topic partition as one share group consumes them.

Kafka's ``SharePartition`` (KIP-932), as a sans-IO state machine on the broker's loop: it never
reads the log nor sleeps itself; the ShareFetch handler reads batches and hands their offsets to
``acquire``, time comes from an injected ``Timer`` (``broker/clock.py``), and the durable state goes
through a ``SharePersister`` before any answer that depends on it.

Offsets and record states (Kafka's names and ids, ``persister.RecordState``):

- ``start_offset`` (SPSO): every offset below it is done (acknowledged or archived) or was never
  wanted; ``next_offset`` is one past the last offset ever acquired (Kafka keeps ``endOffset``, the
  last in-flight offset: ``end_offset`` below).  The in-flight records are [start, next).
- AVAILABLE -> ACQUIRED (``acquire``: the delivery count goes up by one and an acquisition lock of
  ``share.record.lock.duration.ms`` starts); ACQUIRED -> ACKNOWLEDGED (accept), AVAILABLE (release,
  lock timeout), ARCHIVED (reject, gap, or a release/timeout of a record whose delivery count reached
  ``share.delivery.count.limit``).  ACKNOWLEDGED and ARCHIVED are terminal.  When the head of the
  in-flight records is terminal the start offset moves past it and those records are forgotten.
- A release because the member left or its share session ended counts as the delivery it was
  (Kafka 4.2 answers so: the records come back with the next delivery count, and archive at the
  limit), like a lock timeout.
- In-flight records are kept as batches (the acquired ranges) with one state for the whole range;
  an acknowledgement or acquisition of part of a batch splits it into per-offset states, as Kafka's
  ``InFlightBatch.offsetState`` does.
- ``share.partition.max.record.locks`` caps the in-flight records (start to end): new records are
  acquired only while there is room; released records inside the range are always re-acquirable.
- Redelivery is throttled as Kafka 4.2 does: a batch whose delivery count reached half the limit
  (at least 2) is handed out alone and then in halving slices, and a record on its last delivery
  attempt goes out alone, so one poisonous record does not archive its neighbours.
- read_committed: the handler reads only up to the last stable offset (records of open
  transactions are never acquired); batches of aborted transactions in what was read are archived
  at once and left out of the acquired ranges (Kafka's ``filterAbortedTransactionalAcquiredRecords``).

Durability: the state written (``persister.ShareState``) is the start offset and the in-flight
records as runs of (state, delivery count).  An acquisition lock is not durable: an ACQUIRED record
is written as AVAILABLE with the delivery count it had before this acquisition, and runs of
never-delivered AVAILABLE records are left out (gaps), as Kafka's persister would have them.  On
load, gaps up to the last written offset are re-created as AVAILABLE records with delivery count 0,
so a restarted broker redelivers exactly what was not acknowledged, with Kafka's delivery counts.
A persister write that fails rolls the change back and the caller gets the mapped error.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

from minikafka.protocol.errors import ErrorCode

from .persister import RecordState, ShareState, StateBatch

log = logging.getLogger("minikafka.share.partition")

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED
TERMINAL = (ACKNOWLEDGED, ARCHIVED)

# Acknowledge types (ShareFetch/ShareAcknowledge AcknowledgeTypes; Java's AcknowledgeType ids).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, RELEASE: AVAILABLE, REJECT: ARCHIVED}

# Acquire modes (ShareFetch v2 ShareAcquireMode).
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1

NO_MEMBER = ""
UNINITIALIZED_START_OFFSET = -1


class ShareError(Exception):
    """A refused operation, with the Kafka error code the response carries."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or None


class LogBatch(NamedTuple):
    """What acquisition needs of one record batch read from the log."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False
    abort_marker: bool = False  # a control batch whose record is an ABORT marker


class Acquired(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class InFlightState:
    """State, delivery count, owner and lock of one record or of a whole batch."""

    __slots__ = ("state", "delivery_count", "member_id", "lock")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str = NO_MEMBER, lock=None):
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock = lock  # the timer key of the acquisition lock while ACQUIRED

    def copy(self) -> "InFlightState":
        return InFlightState(self.state, self.delivery_count, self.member_id, self.lock)

    def restore(self, other: "InFlightState") -> None:
        self.state, self.delivery_count, self.member_id, self.lock = (
            other.state, other.delivery_count, other.member_id, other.lock)

    def __repr__(self) -> str:
        return f"{self.state.name}/{self.delivery_count}{'@' + self.member_id if self.member_id else ''}"


class InFlightBatch:
    """Offsets first..last with one state (``whole``) until split into per-offset ``offsets``."""

    __slots__ = ("first", "last", "whole", "offsets")

    def __init__(self, first: int, last: int, whole: InFlightState):
        self.first = first
        self.last = last
        self.whole: InFlightState | None = whole
        self.offsets: dict[int, InFlightState] | None = None

    def split(self) -> dict[int, InFlightState]:
        if self.offsets is None:
            w = self.whole
            self.offsets = {o: InFlightState(w.state, w.delivery_count, w.member_id, w.lock)
                            for o in range(self.first, self.last + 1)}
            self.whole = None
        return self.offsets

    def states(self, lo: int | None = None, hi: int | None = None) -> Iterable[tuple[int, int, InFlightState]]:
        """(first, last, state) runs of this batch clipped to [lo, hi]."""
        lo = self.first if lo is None else max(lo, self.first)
        hi = self.last if hi is None else min(hi, self.last)
        if lo > hi:
            return
        if self.offsets is None:
            yield lo, hi, self.whole
        else:
            for o in range(lo, hi + 1):
                yield o, o, self.offsets[o]

    def __repr__(self) -> str:
        return f"[{self.first}-{self.last} {self.whole if self.offsets is None else self.offsets}]"


@dataclass
class ShareSettings:
    """The share.* settings a share partition reads (from ``view.share_config``)."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"

    @classmethod
    def from_config(cls, config: dict) -> "ShareSettings":
        return cls(int(config.get("share.record.lock.duration.ms", 30000)),
                   int(config.get("share.delivery.count.limit", 5)),
                   int(config.get("share.partition.max.record.locks", 2000)),
                   str(config.get("share.auto.offset.reset", "latest")),
                   str(config.get("share.isolation.level", "read_uncommitted")))

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration of ``by_duration:`` (Kafka accepts PnDTnHnMn.nS, not negative)."""
    m = _DURATION.match(text.strip().upper())
    if m is None or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"invalid duration {text!r}")
    days, hours, minutes, seconds = m.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
    return total + int(float(seconds or 0) * 1000)


class LogView:
    """What a share partition asks of the partition's log (``storage.log.PartitionLog`` has it)."""

    def earliest(self) -> int: ...

    def latest(self) -> int: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...


def aborted_batches(batches: list[LogBatch], aborted: list[tuple[int, int]]) -> list[LogBatch]:
    """The data batches of aborted transactions among ``batches`` (read in offset order), given the
    (producer id, first offset) of the aborted transactions overlapping them: Kafka's
    ``fetchAbortedTransactionRecordBatches``."""
    pending = sorted(aborted, key=lambda a: a[1])
    i = 0
    aborting: set[int] = set()
    out = []
    for b in batches:
        if b.producer_id < 0:
            continue
        while i < len(pending) and pending[i][1] <= b.last_offset:
            aborting.add(pending[i][0])
            i += 1
        if b.control:
            if b.abort_marker:
                aborting.discard(b.producer_id)
        elif b.transactional and b.producer_id in aborting:
            out.append(b)
    return out


class SharePartition:
    """The share state of (group, topic partition); see the module docstring."""

    def __init__(self, group_id: str, topic: str, topic_id: uuid.UUID, partition: int, *,
                 persister, timer, log_view: LogView, settings: Callable[[], ShareSettings],
                 on_available: Callable[[], None] | None = None) -> None:
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.persister = persister
        self.timer = timer
        self.log_view = log_view
        self.settings = settings
        self.on_available = on_available or (lambda: None)
        self.batches: list[InFlightBatch] = []
        self._firsts: list[int] = []  # batches' first offsets, for bisect
        self.start_offset = 0
        self.next_offset = 0
        self.state_epoch = 0
        self.loaded = False
        self._find_next = False
        self._lock_seq = itertools.count(1)
        self.last_error_message: str | None = None  # of the last refused acknowledgement

    # -- loading -------------------------------------------------------------------------------

    def maybe_load(self) -> None:
        """Read the durable state once (Kafka's ``maybeInitialize``).  Never initialized: initialize
        it here with an uninitialized start offset (the group side initializes it when wired)."""
        if self.loaded:
            return
        result = self.persister.read(self.group_id, self.topic_id, self.partition, 0)
        if result.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            code = self.persister.initialize(self.group_id, self.topic_id, self.partition, 0,
                                             UNINITIALIZED_START_OFFSET)
            if code != ErrorCode.NONE:
                raise ShareError(_persister_error(code))
            result = self.persister.read(self.group_id, self.topic_id, self.partition, 0)
        if result.error != ErrorCode.NONE or result.state is None:
            raise ShareError(_persister_error(result.error))
        state = result.state
        self.state_epoch = state.state_epoch
        resolved = state.start_offset == UNINITIALIZED_START_OFFSET
        start = self._reset_offset() if resolved else state.start_offset
        self.start_offset = start
        self.next_offset = start
        self.batches, self._firsts = [], []
        cursor = start
        for sb in sorted(state.state_batches, key=lambda b: b.first_offset):
            if sb.last_offset < start:
                continue
            first = max(sb.first_offset, start)
            if first > cursor:  # a gap: records acquired before the restart, never written
                self._append(InFlightBatch(cursor, first - 1, InFlightState(AVAILABLE, 0)))
            self._append(InFlightBatch(first, sb.last_offset, InFlightState(sb.delivery_state, sb.delivery_count)))
            cursor = sb.last_offset + 1
        if self.batches:
            self.next_offset = self.batches[-1].last + 1
            self._find_next = True
        self.loaded = True
        self._advance_start()
        if resolved:
            self._write()

    def _reset_offset(self) -> int:
        policy = self.settings().auto_offset_reset.strip().lower()
        if policy == "earliest":
            return self.log_view.earliest()
        if policy.startswith("by_duration:"):
            ts = self.timer.now_ms() - parse_duration_ms(policy.split(":", 1)[1])
            found = self.log_view.offset_for_timestamp(ts)
            return found[0] if found is not None else self.log_view.latest()
        return self.log_view.latest()

    # -- the cache -----------------------------------------------------------------------------

    def _append(self, batch: InFlightBatch) -> None:
        self.batches.append(batch)
        self._firsts.append(batch.first)

    def _insert(self, batch: InFlightBatch) -> None:
        i = bisect.bisect_left(self._firsts, batch.first)
        self.batches.insert(i, batch)
        self._firsts.insert(i, batch.first)

    def _floor_index(self, offset: int) -> int:
        """Index of the batch with the greatest first offset <= ``offset`` (-1 if none)."""
        return bisect.bisect_right(self._firsts, offset) - 1

    def _range(self, lo: int, hi: int) -> list[InFlightBatch]:
        """Batches overlapping [lo, hi]."""
        i = max(self._floor_index(lo), 0)
        out = []
        while i < len(self.batches) and self.batches[i].first <= hi:
            if self.batches[i].last >= lo:
                out.append(self.batches[i])
            i += 1
        return out

    @property
    def end_offset(self) -> int:
        """Kafka's endOffset: the last in-flight offset, or the next to fetch when none is in flight."""
        return self.batches[-1].last if self.batches else self.next_offset

    def in_flight(self) -> int:
        """Kafka's numInFlightRecords: end - start + 1 while anything is in flight."""
        if not self.batches:
            return 0
        return max(self.batches[-1].last - self.start_offset + 1, 0)

    def counts(self) -> dict[str, int]:
        """Records per state among the in-flight records (for the operator surface)."""
        out = {s.name.lower(): 0 for s in RecordState}
        for b in self.batches:
            for lo, hi, st in b.states(self.start_offset):
                out[st.state.name.lower()] += hi - lo + 1
        return out

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE in-flight record, else
        ``next_offset`` (Kafka's ``nextFetchOffset``)."""
        if self._find_next:
            for b in self.batches:
                for lo, _hi, st in b.states(self.start_offset):
                    if st.state == AVAILABLE:
                        return lo
            self._find_next = False
        return self.next_offset

    def can_acquire(self) -> bool:
        """Room for more records: something released to re-acquire, or below the in-flight cap."""
        if self.next_fetch_offset() != self.next_offset:
            return True
        return self.in_flight() < self.settings().max_record_locks

    # -- acquire -------------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: list[LogBatch], *, max_records: int, batch_size: int,
                fetch_offset: int, mode: int = BATCH_OPTIMIZED,
                aborted: list[tuple[int, int]] | None = None) -> list[Acquired]:
        """Acquire for ``member_id`` the records of ``batches`` (read from ``fetch_offset``) that are
        available, at most about ``max_records`` (whole log batches in batch-optimized mode), as
        ranges of at most ``batch_size`` records on log-batch boundaries.  ``aborted`` is the read's
        aborted transactions (read_committed only)."""
        if not batches or max_records <= 0:
            return []
        settings = self.settings()
        last_to_acquire, max_to_acquire = self._limits(fetch_offset, max_records, batches[-1].last_offset, settings)
        if max_to_acquire <= 0:
            return []
        record_limit = mode == RECORD_LIMIT
        base = batches[0].base_offset
        self._archive_stale(fetch_offset, base)
        fi = self._floor_index(base)
        if fi < 0:
            base = max(base, self.start_offset)
        elif self.batches[fi].last >= base:
            base = self.batches[fi].first
        existing = [b for b in self._range(base, last_to_acquire) if b.first >= base]
        result: list[Acquired] = []
        if not existing:
            got, n = self._acquire_new(member_id, batches, batches[0].base_offset, last_to_acquire,
                                       batch_size, max_to_acquire, record_limit, settings)
            result.extend(got)
        else:
            count = 0
            throttle_limit = max(2, -(-settings.delivery_count_limit // 2))
            for b in existing:
                if count >= max_to_acquire:
                    break
                full = b.first >= batches[0].base_offset and b.last <= last_to_acquire
                remaining = max_to_acquire - count
                subset_limit = record_limit and (b.last - b.first + 1) > remaining
                throttle = self._throttled(b, batches[0].base_offset, last_to_acquire, throttle_limit)
                if throttle and count > 0:
                    max_to_acquire = 0
                    break
                if not full or b.offsets is not None or subset_limit or throttle:
                    if b.offsets is None and b.whole.state != AVAILABLE:
                        continue
                    got = self._acquire_subset(member_id, b, batches[0].base_offset, last_to_acquire,
                                               remaining, record_limit, throttle_limit, settings)
                    result.extend(got)
                    count += sum(a.last_offset - a.first_offset + 1 for a in got)
                    if throttle and got:
                        max_to_acquire = 0
                        break
                    continue
                if b.whole.state != AVAILABLE:
                    continue
                w = b.whole
                w.state, w.delivery_count, w.member_id = ACQUIRED, w.delivery_count + 1, member_id
                w.lock = self._lock(member_id, b.first, b.last, settings)
                result.append(Acquired(b.first, b.last, w.delivery_count))
                count += b.last - b.first + 1
            if count < max_to_acquire and existing[-1].last < last_to_acquire:
                got, n = self._acquire_new(member_id, batches, existing[-1].last + 1, last_to_acquire,
                                           batch_size, max_to_acquire - count, record_limit, settings)
                result.extend(got)
        result.sort(key=lambda a: a.first_offset)
        if result and aborted and settings.read_committed:
            result = self._drop_aborted(result, aborted_batches(batches, aborted))
        return result

    def _limits(self, fetch_offset: int, max_records: int, last_offset: int, settings: ShareSettings) -> tuple[int, int]:
        in_flight = self.in_flight()
        max_to_acquire = min(max_records, settings.max_record_locks - in_flight)
        last_to_acquire = last_offset
        if max_to_acquire <= 0 and fetch_offset <= self.end_offset and self.batches:
            # At the cap, but re-acquiring released records inside the in-flight range.
            max_to_acquire = min(max_records, self.end_offset - fetch_offset + 1)
            last_to_acquire = min(last_offset, self.end_offset)
        return last_to_acquire, max_to_acquire

    def _archive_stale(self, fetch_offset: int, base: int) -> None:
        """Available in-flight records between the fetch offset and the first batch read are gone
        from the log (compaction, retention): archive them so the start offset can move."""
        if not self.batches or fetch_offset >= base:
            return
        changed = False
        for b in self._range(fetch_offset, base - 1):
            for lo, hi, st in list(b.states(fetch_offset, base - 1)):
                if st.state == AVAILABLE:
                    if b.offsets is None and (lo != b.first or hi != b.last):
                        b.split()
                        for o in range(lo, hi + 1):
                            b.offsets[o].state = ARCHIVED
                    else:
                        st.state = ARCHIVED
                    changed = True
        if changed:
            self._find_next = True

    def _acquire_new(self, member_id, batches, first, last, batch_size, max_records, record_limit,
                     settings) -> tuple[list[Acquired], int]:
        if not self.batches and self.next_offset > first:
            first = self.next_offset
        if first > last:
            return [], 0
        was_empty = not self.batches
        if max_records < last - first + 1:
            target = first + max_records - 1
            end = target
            for lb in batches:
                if lb.base_offset <= target <= lb.last_offset:
                    end = lb.last_offset
                    break
            last = end
        ranges = []
        cur = first
        if not record_limit and last - first + 1 > batch_size > 0:
            for lb in batches:
                if lb.base_offset > last:
                    break
                if lb.base_offset - cur >= batch_size:
                    ranges.append((cur, lb.base_offset - 1))
                    cur = lb.base_offset
        ranges.append((cur, last))
        out = []
        if record_limit and last - first + 1 > max_records:
            # Only max_records are acquired; the rest of the batch stays available.
            b = InFlightBatch(first, last, InFlightState(AVAILABLE, 0))
            offsets = b.split()
            lock = self._lock(member_id, first, first + max_records - 1, settings)
            for o in range(first, first + max_records):
                offsets[o].state, offsets[o].delivery_count = ACQUIRED, 1
                offsets[o].member_id, offsets[o].lock = member_id, lock
            self._insert(b)
            out.append(Acquired(first, first + max_records - 1, 1))
            self._find_next = True
        else:
            for lo, hi in ranges:
                lock = self._lock(member_id, lo, hi, settings)
                self._insert(InFlightBatch(lo, hi, InFlightState(ACQUIRED, 1, member_id, lock)))
                out.append(Acquired(lo, hi, 1))
        if was_empty and first > self.start_offset:
            self.start_offset = first
        if last + 1 > self.next_offset:
            self.next_offset = last + 1
        return out, sum(a.last_offset - a.first_offset + 1 for a in out)

    def _throttled(self, b: InFlightBatch, lo: int, hi: int, limit: int) -> bool:
        if b.offsets is None:
            return b.whole.delivery_count >= limit
        counts = [st.delivery_count for o, st in b.offsets.items() if lo <= o <= hi and st.state == AVAILABLE]
        return bool(counts) and max(counts) >= limit

    def _acquire_subset(self, member_id, b: InFlightBatch, lo, hi, max_records, record_limit,
                        throttle_limit, settings) -> list[Acquired]:
        offsets = b.split()
        out: list[Acquired] = []
        throttled_max = -1
        limit = settings.delivery_count_limit
        for o in range(max(lo, b.first), min(hi, b.last) + 1):
            st = offsets[o]
            if st.state != AVAILABLE:
                continue
            if limit > 2 and st.delivery_count == limit - 1 and out:
                break  # the last attempt goes out alone
            if st.delivery_count >= throttle_limit and throttled_max < 0:
                throttled_max = max(1, len(offsets) >> (st.delivery_count - throttle_limit + 1))
            st.state, st.delivery_count, st.member_id = ACQUIRED, st.delivery_count + 1, member_id
            st.lock = self._lock(member_id, o, o, settings)
            out.append(Acquired(o, o, st.delivery_count))
            if st.delivery_count == limit and limit > 2:
                break
            if record_limit and len(out) == max_records:
                break
            if throttled_max > 0 and len(out) == throttled_max:
                break
        # Consecutive offsets with the same delivery count go out as one range (as Kafka 4.2 answers).
        merged: list[Acquired] = []
        for a in out:
            if merged and merged[-1].last_offset + 1 == a.first_offset and merged[-1].delivery_count == a.delivery_count:
                merged[-1] = Acquired(merged[-1].first_offset, a.last_offset, a.delivery_count)
            else:
                merged.append(a)
        return merged

    def _drop_aborted(self, acquired: list[Acquired], doomed: list[LogBatch]) -> list[Acquired]:
        """Archive the acquired records of aborted transactions and cut them out of the ranges."""
        for d in doomed:
            for b in self._range(d.base_offset, d.last_offset):
                for lo, hi, st in list(b.states(d.base_offset, d.last_offset)):
                    if st.state != ACQUIRED:
                        continue
                    if b.offsets is None and (lo != b.first or hi != b.last):
                        b.split()
                        for o in range(lo, hi + 1):
                            self._terminate(b.offsets[o], ARCHIVED)
                    else:
                        self._terminate(st, ARCHIVED)
        out = []
        for a in acquired:
            pieces = [(a.first_offset, a.last_offset)]
            for d in doomed:
                nxt = []
                for lo, hi in pieces:
                    if hi < d.base_offset or lo > d.last_offset:
                        nxt.append((lo, hi))
                        continue
                    if lo < d.base_offset:
                        nxt.append((lo, d.base_offset - 1))
                    if hi > d.last_offset:
                        nxt.append((d.last_offset + 1, hi))
                pieces = nxt
            out.extend(Acquired(lo, hi, a.delivery_count) for lo, hi in pieces)
        self._advance_start()
        return out

    # -- locks ---------------------------------------------------------------------------------

    def _lock(self, member_id: str, first: int, last: int, settings: ShareSettings):
        key = ("share-lock", self.group_id, self.topic_id, self.partition, next(self._lock_seq))
        self.timer.schedule(key, settings.record_lock_duration_ms,
                            lambda: self._on_lock_timeout(key, first, last))
        return key

    def _drop_lock(self, st: InFlightState) -> None:
        """The record left ACQUIRED: its lock no longer matters (cancelled when it was the batch's)."""
        st.lock = None

    def _on_lock_timeout(self, key, first: int, last: int) -> None:
        """Kafka's ``releaseAcquisitionLockOnTimeout``: ACQUIRED records still under this lock go
        back to AVAILABLE (ARCHIVED at the delivery limit or below the start offset)."""
        limit = self.settings().delivery_count_limit
        changed = False
        for b in self._range(first, last):
            if b.offsets is None and b.whole.lock == key and b.first < self.start_offset <= b.last:
                b.split()
            for lo, hi, st in list(b.states(first, last)):
                if st.state != ACQUIRED or st.lock != key:
                    continue
                self._release_one(st, ARCHIVED if hi < self.start_offset else AVAILABLE, limit, decrease=False)
                changed = True
        if not changed:
            return
        self._find_next = True
        code = self._write()
        if code != ErrorCode.NONE:
            log.debug("writing the share state after a lock timeout failed: %s", code.name)
        self._advance_start()
        self.on_available()

    def _release_one(self, st: InFlightState, target: RecordState, limit: int, *, decrease: bool) -> None:
        if target == AVAILABLE and not decrease and st.delivery_count >= limit:
            target = ARCHIVED
        st.state = target
        if target != ARCHIVED and decrease:
            st.delivery_count -= 1
        st.member_id = NO_MEMBER
        self._drop_lock(st)

    def _terminate(self, st: InFlightState, target: RecordState) -> None:
        st.state = target
        st.member_id = NO_MEMBER
        self._drop_lock(st)

    def expire_lock(self, offset: int) -> bool:
        """Make the acquisition lock holding ``offset`` expire now (the control API)."""
        fi = self._floor_index(offset)
        if fi < 0 or self.batches[fi].last < offset:
            return False
        b = self.batches[fi]
        st = b.whole if b.offsets is None else b.offsets[offset]
        if st.state != ACQUIRED or st.lock is None:
            return False
        key = st.lock
        self.timer.cancel(key)
        self._on_lock_timeout(key, b.first, b.last)
        return True

    def acquired_locks(self) -> list[tuple[int, int, str]]:
        """(first, last, member) of every ACQUIRED run, for operators and tests."""
        return [(lo, hi, st.member_id) for b in self.batches for lo, hi, st in b.states() if st.state == ACQUIRED]

    # -- acknowledge ---------------------------------------------------------------------------

    def acknowledge(self, member_id: str, ack_batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        """Apply (first, last, types) acknowledgements of ``member_id``; all or nothing.  Returns
        NONE or the error (INVALID_RECORD_STATE, INVALID_REQUEST, or a persister error)."""
        undo: list[tuple[InFlightState, InFlightState, bool]] = []
        self.last_error_message = None
        splits: list[InFlightBatch] = []
        settings = self.settings()
        try:
            for first, last, types in ack_batches:
                if not types or any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
                    raise ShareError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type: {types}")
                if last < self.start_offset:
                    continue
                sub = self._ack_range(first, last)
                for b in sub:
                    if b.last < self.start_offset:
                        continue
                    if b.offsets is None:
                        w = b.whole
                        if w.member_id == NO_MEMBER:
                            raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                             "The batch cannot be acknowledged. The batch is not in the acquired state.")
                        if w.member_id != member_id:
                            raise ShareError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of batch record")
                    full = b.first >= first and b.last <= last
                    start_inside = b.first < self.start_offset <= b.last
                    if full and b.offsets is None and len(types) == 1 and not start_inside:
                        self._ack_one(b.whole, types[0], member_id, b.first, b.last, settings, undo, True)
                        continue
                    if b.offsets is None:
                        if b.whole.state != ACQUIRED:
                            raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                             "The batch cannot be acknowledged. The subset batch is not in the acquired state.")
                        splits.append(b)
                        b.split()
                    for o in range(max(first, b.first, self.start_offset), min(last, b.last) + 1):
                        st = b.offsets[o]
                        if st.state != ACQUIRED:
                            raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                             "The offset cannot be acknowledged. The offset is not acquired.")
                        if st.member_id != member_id:
                            raise ShareError(ErrorCode.INVALID_RECORD_STATE, "Member is not the owner of offset")
                        t = types[o - first] if len(types) > 1 else types[0]
                        self._ack_one(st, t, member_id, o, o, settings, undo, False)
        except ShareError as exc:
            self._undo(undo)
            self.last_error_message = exc.message
            return exc.code
        if not undo:
            return ErrorCode.NONE
        if any(st.state != ACQUIRED for st, _, _ in undo):
            code = self._write()
            if code != ErrorCode.NONE:
                self._undo(undo)
                return _persister_error(code)
        for st, old, whole in undo:
            if whole and old.lock is not None and old.lock != st.lock:
                self.timer.cancel(old.lock)
        start = self.start_offset
        self._advance_start()
        released = any(st.state == AVAILABLE for st, _, _ in undo)
        if released:
            self._find_next = True
        if released or self.start_offset != start:
            # Records to re-acquire, or room under share.partition.max.record.locks: wake waiting
            # fetches (Kafka completes delayed share fetches when the start offset moves).
            self.on_available()
        return ErrorCode.NONE

    def _ack_range(self, first: int, last: int) -> list[InFlightBatch]:
        fi = self._floor_index(first)
        if fi < 0:
            if first < self.start_offset <= last:
                fi = self._floor_index(self.start_offset)
            if fi < 0:
                raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                 "Batch record not found. The request batch offsets are not found in the cache.")
        sub = []
        i = fi
        while i < len(self.batches) and self.batches[i].first <= last:
            sub.append(self.batches[i])
            i += 1
        if not sub or sub[-1].last < first:
            raise ShareError(ErrorCode.INVALID_REQUEST,
                             "Batch record not found. The first offset in request is past acquired records.")
        if last > sub[-1].last:
            raise ShareError(ErrorCode.INVALID_REQUEST,
                             "Batch record not found. The last offset in request is past acquired records.")
        return sub

    def _ack_one(self, st: InFlightState, ack_type: int, member_id: str, lo: int, hi: int,
                 settings: ShareSettings, undo: list, whole: bool) -> None:
        if st.state != ACQUIRED:
            raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                             "The batch cannot be acknowledged. The batch is not in the acquired state.")
        undo.append((st, st.copy(), whole))
        if ack_type == RENEW:
            st.lock = self._lock(member_id, lo, hi, settings)
            return
        target = _ACK_STATE[ack_type]
        if target == AVAILABLE and st.delivery_count >= settings.delivery_count_limit:
            target = ARCHIVED
        st.state = target
        st.member_id = NO_MEMBER
        st.lock = None

    def _undo(self, undo: list) -> None:
        """Everything runs on the loop and the persister answers at once, so no lock can have
        expired meanwhile: restoring the old states (and dropping renewed locks) is enough."""
        for st, old, _ in reversed(undo):
            if st.lock is not None and st.lock != old.lock:
                self.timer.cancel(st.lock)
            st.restore(old)

    # -- release -------------------------------------------------------------------------------

    def release_member(self, member_id: str) -> ErrorCode:
        """Release every record ``member_id`` holds (member left, share session closed): back to
        AVAILABLE, as on a lock timeout (ARCHIVED at the delivery limit or below the start offset)."""
        limit = self.settings().delivery_count_limit
        changed = False
        for b in self.batches:
            if b.offsets is None and b.whole.state == ACQUIRED and b.whole.member_id == member_id \
                    and b.first < self.start_offset <= b.last:
                b.split()
            for lo, hi, st in list(b.states()):
                if st.state == ACQUIRED and st.member_id == member_id:
                    if st.lock is not None and b.offsets is None:
                        self.timer.cancel(st.lock)
                    self._release_one(st, ARCHIVED if hi < self.start_offset else AVAILABLE, limit, decrease=False)
                    changed = True
        if not changed:
            return ErrorCode.NONE
        self._find_next = True
        code = self._write()
        self._advance_start()
        self.on_available()
        return ErrorCode.NONE if code == ErrorCode.NONE else _persister_error(code)

    def members_holding(self) -> set[str]:
        return {st.member_id for b in self.batches for _, _, st in b.states() if st.state == ACQUIRED}

    # -- start offset --------------------------------------------------------------------------

    def _advance_start(self) -> None:
        """Move the start offset past terminal records at the head and forget whole batches below it
        (Kafka's ``maybeUpdateCachedStateAndOffsets``)."""
        if not self.batches:
            return
        new_start = self.start_offset
        drop = 0
        for b in self.batches:
            done = True
            for lo, hi, st in b.states(new_start):
                if st.state in TERMINAL:
                    new_start = hi + 1
                else:
                    done = False
                    break
            if not done:
                break
            drop += 1
        if drop == len(self.batches):
            self.start_offset = self.batches[-1].last + 1
            self.next_offset = max(self.next_offset, self.start_offset)
            self.batches, self._firsts = [], []
            return
        self.start_offset = max(self.start_offset, new_start)
        if drop:
            del self.batches[:drop]
            del self._firsts[:drop]

    def on_log_start_moved(self, log_start: int) -> None:
        """Records below the log start are gone: archive what is available there, move the start."""
        if log_start <= self.start_offset:
            return
        for b in self._range(self.start_offset, log_start - 1):
            for lo, hi, st in list(b.states(self.start_offset, log_start - 1)):
                if st.state != AVAILABLE:
                    continue
                if b.offsets is None and (lo != b.first or hi != b.last):
                    b.split()
                    for o in range(lo, hi + 1):
                        b.offsets[o].state = ARCHIVED
                else:
                    st.state = ARCHIVED
        self.start_offset = log_start
        if self.next_offset < log_start:
            self.next_offset = log_start
        self._find_next = True
        self._advance_start()

    # -- durability ----------------------------------------------------------------------------

    def snapshot(self) -> ShareState:
        """The durable form of the state (see the module docstring)."""
        runs: list[list] = []
        for b in self.batches:
            for lo, hi, st in b.states(self.start_offset):
                if st.state == ACQUIRED:
                    state, count = AVAILABLE, st.delivery_count - 1
                else:
                    state, count = st.state, st.delivery_count
                if state == AVAILABLE and count <= 0:
                    continue  # never delivered: a gap
                if runs and runs[-1][1] == lo - 1 and runs[-1][2] == state and runs[-1][3] == count:
                    runs[-1][1] = hi
                else:
                    runs.append([lo, hi, state, count])
        return ShareState(self.state_epoch, 0, self.start_offset,
                          [StateBatch(lo, hi, RecordState(s), c) for lo, hi, s, c in runs])

    def _write(self) -> ErrorCode:
        return self.persister.write(self.group_id, self.topic_id, self.partition, self.snapshot())

    def close(self) -> None:
        """Cancel every acquisition lock (the partition is being dropped)."""
        for b in self.batches:
            for _, _, st in b.states():
                if st.lock is not None:
                    self.timer.cancel(st.lock)
                    st.lock = None

    def lag(self, log_end: int) -> int:
        """Records not yet done: from the start offset to the log end, less the terminal in-flight ones."""
        done = sum(hi - lo + 1 for b in self.batches for lo, hi, st in b.states(self.start_offset)
                   if st.state in TERMINAL)
        return max(log_end - self.start_offset - done, 0)


def _persister_error(code: ErrorCode) -> ErrorCode:
    """Kafka's ``fetchPersisterError``: what a share fetch/acknowledge reports for a persister error."""
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return code
    if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR
