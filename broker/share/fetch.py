"""ShareFetch (key 78) and ShareAcknowledge (key 79), versions 1-2, as Kafka 4.2 serves them.

v1 (Kafka 4.1) is the first stable version (v0 was 4.0's early access and is not served); v2
(Kafka 4.2) adds ``ShareAcquireMode`` (0 batch-optimized, 1 record-limit: exactly ``MaxRecords``
records, KIP-1206) and RENEW acknowledgements (type 4, ``IsRenewAck``, KIP-1222), and
ShareAcknowledge v2 answers ``AcquisitionLockTimeoutMs``.

ShareFetch, in Kafka's order:
1. The share session (``fetch_sessions``): open (epoch 0), continue, or close (epoch -1); a session
   error is a top-level error with no partitions.
2. Piggybacked acknowledgements are applied per partition (``AcknowledgeErrorCode``): malformed
   batches (unordered, overlapping, first > last, a type count that is neither 1 nor the range's
   size) are INVALID_REQUEST for that partition, as Kafka validates them.
3. Records are acquired from the session's partitions (``partition.SharePartition``): the log is read
   from each share partition's next fetch offset up to the high watermark (read_committed: the last
   stable offset), ``MaxBytes`` (capped by ``fetch.max.bytes``) shared evenly between the partitions
   that can acquire, and at most about ``MaxRecords`` records acquired in ranges of ``BatchSize``,
   the partitions taken in Kafka's round-robin order (rotated by the session epoch).  Share
   partitions the request itself loads become acquirable one at a time, as Kafka's background
   initialization makes them: the answer has the first of them with records (and those loaded
   before it), the others come with the next fetch.  The records of the batches that hold acquired
   offsets are returned as the log has them (clients keep only the acquired offsets).
4. Long poll: with nothing acquired, the request waits up to ``MaxWaitMs``, woken by an append to one
   of its partitions or by records becoming available again (release, lock timeout, member leave).

A full (epoch 0) response lists every requested partition; an incremental one only partitions with
records, an error, or acknowledgements in the request.  An unknown topic id is UNKNOWN_TOPIC_ID, an
unknown partition UNKNOWN_TOPIC_OR_PARTITION, per partition.

ShareAcknowledge applies acknowledgements in a session (it never opens one) and closes it at -1.

Releases: closing a session (epoch -1 on either API) or losing its connection releases the member's
acquired records of the session's partitions; the group side's member leave releases them at once
only when the member has no live session (``ShareFetchManager.member_left``).

Not done (differences a client could see): no quotas (``ThrottleTimeMs`` 0), ``NodeEndpoints`` and
``CurrentLeader`` stay at their defaults (one node, always the leader), ``MaxBytes`` is shared evenly
between the partitions of one request (Kafka's uniform strategy) without Kafka's per-partition
fetch lock across concurrent requests (the loop serialises them instead), records of forgotten
partitions are not released before their session ends or their locks expire, and the round-robin
rotation goes over the session's partitions in the order the session got them (Kafka keeps them in
another order, so the first partition at a given epoch can differ).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from minikafka.protocol import records as rec
from minikafka.protocol.errors import ErrorCode, KafkaError

from . import view
from .fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionError, ShareSessionCache
from .partition import BATCH_OPTIMIZED, LogBatch, SharePartition, ShareSettings, ShareError

log = logging.getLogger("minikafka.share.fetch")

NONE = ErrorCode.NONE
ZERO_UUID = uuid.UUID(int=0)


class ShareFetchManager:
    """The broker's share partitions and share sessions (Kafka's ``SharePartitionManager``)."""

    def __init__(self, broker) -> None:
        from minikafka.broker.clock import timer_scope

        self.broker = broker
        self.timer = timer_scope(broker, "share-locks")
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        max_sessions = _config(broker, "group.share.max.share.sessions", 2000)
        self.sessions = ShareSessionCache(int(max_sessions))
        # group -> (group_configs.changes() when built, settings): rebuilt after any GROUP config change.
        self._settings: dict[str, tuple[int, ShareSettings]] = {}

    # -- settings ------------------------------------------------------------------------------

    def settings(self, group_id: str) -> ShareSettings:
        from minikafka.broker import group_configs

        version = group_configs.changes(self.broker)
        cached = self._settings.get(group_id)
        if cached is None or cached[0] != version:
            cached = (version, ShareSettings.from_config(view.share_config(self.broker, group_id)))
            self._settings[group_id] = cached
        return cached[1]

    # -- partitions ----------------------------------------------------------------------------

    def partition(self, group_id: str, topic: str, topic_id: uuid.UUID, index: int) -> SharePartition:
        key = (group_id, topic_id, index)
        sp = self.partitions.get(key)
        if sp is None:
            plog = self.broker.controller.log(topic, index)
            sp = SharePartition(group_id, topic, topic_id, index, persister=view.persister(self.broker),
                                timer=self.timer, log_view=plog, settings=lambda: self.settings(group_id),
                                on_available=lambda: self.broker.append_waiters.notify(_wake_key(group_id, topic, index)))
            sp.maybe_load()
            self.partitions[key] = sp
        return sp

    def existing(self, group_id: str, topic_id: uuid.UUID, index: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic_id, index))

    def of_group(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in self.partitions.items() if g == group_id]

    def release_member(self, group_id: str, member_id: str, only=None) -> None:
        for sp in self.of_group(group_id):
            if only is not None and (sp.topic_id, sp.partition) not in only:
                continue
            sp.release_member(member_id)

    def member_left(self, group_id: str, member_id: str) -> None:
        """The group side removed the member (leave heartbeat, session timeout, fencing).  While its
        share session is alive the session's end releases the records: a consumer that closes sends
        its leave heartbeat and its final acknowledgements at once, on two connections, and the
        acknowledgements must not find the records already released (Kafka 4.2 accepts them; the
        confluent-kafka suite's close tests check it).  Without a session: released now."""
        if self.sessions.get(group_id, member_id) is None:
            self.release_member(group_id, member_id)

    def expire_member(self, group_id: str, member_id: str) -> None:
        """The member is gone for good (its session timed out on request of the control API): its share
        session ends and every record it holds acquired is available again."""
        self.sessions.close(group_id, member_id)
        self.release_member(group_id, member_id)

    def forget_group(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            self.partitions.pop(key).close()
        for session in self.sessions.of_group(group_id):
            self.sessions.close(session.group_id, session.member_id)
        self._settings.pop(group_id, None)

    def forget_topic(self, topic_id: uuid.UUID) -> None:
        """The topic is gone (deleted, perhaps re-created under its name with a new id): its share
        partitions leave the cache, their locks cancelled, as Kafka drops a deleted partition's
        share partitions (the share coordinator tombstones their state)."""
        for key in [k for k in self.partitions if k[1] == topic_id]:
            self.partitions.pop(key).close()

    def connection_lost(self, connection) -> None:
        for session in self.sessions.of_connection(connection):
            self.sessions.close(session.group_id, session.member_id)
            self.release_member(session.group_id, session.member_id, only=session.partitions)

    def close(self) -> None:
        for sp in self.partitions.values():
            sp.close()
        self.partitions.clear()


def manager(broker) -> ShareFetchManager:
    m = getattr(broker, "share_fetch", None)
    if m is None:
        m = broker.share_fetch = ShareFetchManager(broker)
    return m


def _config(broker, name: str, default):
    try:
        return broker.config.get(name)
    except Exception:
        return default


def _wake_key(group_id: str, topic: str, index: int) -> tuple:
    return ("share-available", group_id, topic, index)


# -- request helpers ---------------------------------------------------------------------------

def _validate_ack_batches(batches, renew: bool) -> bool:
    """Kafka's validation of a partition's acknowledgement batches: first <= last, one type or one
    per offset, known types (RENEW only with IsRenewAck), and no batch starting before the previous
    one's last offset (touching or overlapping batches pass; the share partition judges them)."""
    prev_last = None
    for b in batches:
        first, last, types = b["first_offset"], b["last_offset"], b.get("acknowledge_types") or []
        if first > last or not types:
            return False
        if len(types) != 1 and len(types) != last - first + 1:
            return False
        if prev_last is not None and first < prev_last:
            return False
        if any(t < 0 or t > 4 or (t == 4 and not renew) for t in types):
            return False
        prev_last = last
    return True


def _leader(broker) -> dict:
    # Kafka 4.2 leaves CurrentLeader at its defaults unless a partition answers NOT_LEADER_OR_FOLLOWER.
    return {"leader_id": 0, "leader_epoch": 0}


def _read_batches(plog, offset: int, max_bytes: int, upper: int, stop_at: int | None = None):
    """(LogBatch, view) of the whole batches from the one holding ``offset`` up to ``upper``, within
    ``max_bytes``; headers are parsed only up to the batch holding ``stop_at`` (the last offset the
    acquisition can use: no need to look at 50 MB of batches to acquire 500 records)."""
    out = []
    for chunk in plog.read(offset, max(max_bytes, 0), upper):
        for pos, h in rec.iter_batches(chunk):
            if out and stop_at is not None and out[-1][0].last_offset >= stop_at:
                return out
            view_ = chunk[pos:pos + h.size]
            abort = False
            if h.is_control:
                try:
                    first = next(rec.iter_records(view_), None)
                    abort = first is not None and rec.control_record_type(first) == rec.CONTROL_ABORT
                except Exception:
                    abort = False
            out.append((LogBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional,
                                 h.is_control, abort), view_))
    return out


class _Target:
    __slots__ = ("topic_id", "name", "index", "error", "sp", "plog", "fresh")

    def __init__(self, topic_id, name, index, error=NONE, sp=None, plog=None, fresh=False):
        self.topic_id, self.name, self.index, self.error, self.sp, self.plog = topic_id, name, index, error, sp, plog
        self.fresh = fresh  # the share partition was loaded by this request (Kafka: still initializing)


def _resolve(broker, mgr: ShareFetchManager, group_id: str, topic_id, index: int, create: bool = True) -> _Target:
    controller = broker.controller
    info = controller.topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
    if info is None:
        mgr.forget_topic(topic_id)
        return _Target(topic_id, None, index, ErrorCode.UNKNOWN_TOPIC_ID)
    if not 0 <= index < info.num_partitions:
        return _Target(topic_id, info.name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    fresh = False
    try:
        plog = controller.log(info.name, index)
        sp = mgr.existing(group_id, topic_id, index)
        if sp is None and create:
            sp = mgr.partition(group_id, info.name, topic_id, index)
            fresh = True
    except ShareError as exc:
        return _Target(topic_id, info.name, index, exc.code)
    except KafkaError as exc:
        return _Target(topic_id, info.name, index, exc.code)
    if sp is None:
        return _Target(topic_id, info.name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _Target(topic_id, info.name, index, NONE, sp, plog, fresh)


def rotate(items: list, session_epoch: int) -> list:
    """Kafka's round-robin partition rotation: a share fetch of session epoch N >= 1 over n partitions
    starts at the (N mod n)-th one, so that MaxRecords does not always go to the same partitions first."""
    n = len(items)
    if n < 2 or session_epoch < 1:
        return items
    k = session_epoch % n
    return items[k:] + items[:k] if k else items


def _authorized_topics(ctx, topic_ids) -> set:
    """Topic ids the principal may READ (all when no authorizer is configured)."""
    from minikafka.broker.security import authorizer as az

    if not az.enabled(ctx.broker):
        return set(topic_ids)
    ok = set()
    for tid in topic_ids:
        info = ctx.broker.controller.topic_by_id(tid) if tid not in (None, ZERO_UUID) else None
        if info is None or az.authorize(ctx, az.READ, az.TOPIC, info.name):
            ok.add(tid)
    return ok


def _group_denied(ctx, group_id: str) -> bool:
    from minikafka.broker.security import authorizer as az

    return az.enabled(ctx.broker) and not az.authorize(ctx, az.READ, az.GROUP, group_id or "")


def _acknowledge(broker, mgr, group_id, member_id, topic_id, index, batches, renew=False) -> tuple[int, str | None]:
    """(error code, error message) of one partition's acknowledgements."""
    if not _validate_ack_batches(batches, renew):
        return ErrorCode.INVALID_REQUEST, None
    target = _resolve(broker, mgr, group_id, topic_id, index, create=False)
    if target.error:
        return target.error, None
    code = target.sp.acknowledge(member_id, [(b["first_offset"], b["last_offset"], list(b["acknowledge_types"]))
                                             for b in batches])
    return int(code), (target.sp.last_error_message if code else None)


def _top_error(code: int, lock_ms: int | None = None) -> dict:
    # Kafka 4.2 answers a top-level error with AcquisitionLockTimeoutMs 0.
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "responses": [],
            "node_endpoints": [], "acquisition_lock_timeout_ms": 0}


# -- ShareFetch --------------------------------------------------------------------------------

async def handle_share_fetch(ctx, body: dict) -> dict:
    broker = ctx.broker
    mgr = manager(broker)
    group_id = body.get("group_id")
    member_id = body.get("member_id")
    epoch = body.get("share_session_epoch", 0)
    settings = mgr.settings(group_id or "")
    lock_ms = settings.record_lock_duration_ms
    if not group_id or not member_id:
        return _top_error(ErrorCode.INVALID_REQUEST, lock_ms)
    if _group_denied(ctx, group_id):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, lock_ms)
    topics = body.get("topics") or []
    requested: list[tuple[uuid.UUID, int]] = []
    acks: dict[tuple[uuid.UUID, int], list] = {}
    for t in topics:
        for p in t.get("partitions") or ():
            tp = (t["topic_id"], p["partition_index"])
            requested.append(tp)
            if p.get("acknowledgement_batches"):
                acks[tp] = p["acknowledgement_batches"]
    forgotten = [(t["topic_id"], p) for t in body.get("forgotten_topics_data") or () for p in t.get("partitions") or ()]
    sessions = mgr.sessions
    try:
        if epoch == INITIAL_EPOCH:
            if acks:
                return _top_error(ErrorCode.INVALID_REQUEST, lock_ms)
            session = sessions.open(group_id, member_id, requested, ctx.connection)
            _watch_connection(ctx.connection, mgr)
            full = True
        else:
            session = sessions.check(group_id, member_id, epoch)
            full = False
    except SessionError as exc:
        return _top_error(exc.code, lock_ms)

    allowed = _authorized_topics(ctx, {tp[0] for tp in requested} | set(t for t, _ in session.partitions))
    results: dict[tuple[uuid.UUID, int], dict] = {}

    def entry(tp) -> dict:
        e = results.get(tp)
        if e is None:
            e = results[tp] = {"partition_index": tp[1], "error_code": NONE, "error_message": None,
                               "acknowledge_error_code": NONE, "acknowledge_error_message": None,
                               "current_leader": _leader(broker), "records": b"", "acquired_records": []}
        return e

    for tp, batches in acks.items():
        e = entry(tp)
        if tp[0] not in allowed:
            e["acknowledge_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        e["acknowledge_error_code"], e["acknowledge_error_message"] = _acknowledge(
            broker, mgr, group_id, member_id, tp[0], tp[1], batches, renew=body.get("is_renew_ack", False))

    if epoch == FINAL_EPOCH:
        closed = sessions.close(group_id, member_id)
        mgr.release_member(group_id, member_id, only=closed.partitions if closed else None)
        return _response(results, lock_ms, full=False, wanted=list(acks), acked=set(acks))

    if not full:
        sessions.advance(session, requested, forgotten)
    wanted = list(requested) if full else list(session.partitions)
    for tp in wanted:
        if tp[0] not in allowed:
            entry(tp)["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # Kafka rotates the session's partitions by the session epoch (round robin) before acquiring.
    fetchable = rotate([tp for tp in wanted if tp[0] in allowed], epoch)
    targets = []
    for tp in fetchable:
        target = _resolve(broker, mgr, group_id, tp[0], tp[1])
        if target.error:
            entry(tp)["error_code"] = target.error
        else:
            targets.append(target)

    max_records = body.get("max_records") or 500
    if max_records <= 0:
        max_records = 500
    batch_size = body.get("batch_size") or max_records
    if batch_size <= 0:
        batch_size = max_records
    mode = body.get("share_acquire_mode", BATCH_OPTIMIZED) if ctx.api_version >= 2 else BATCH_OPTIMIZED
    budget = min(body.get("max_bytes", 0x7FFFFFFF), broker.config.get("fetch.max.bytes"))
    any_error = any(e["error_code"] for e in results.values())
    max_wait_ms = body.get("max_wait_ms", 0)
    min_bytes = body.get("min_bytes", 1)
    waiting = max_wait_ms > 0 and bool(targets) and not any_error

    def attempt(among=targets) -> int:
        # Kafka's delayed share fetch acquires once MinBytes are there to acquire (or at the deadline).
        if waiting and min_bytes > 1 and _acquirable_bytes(among, settings, min_bytes) < min_bytes:
            return 0
        return _acquire_all(mgr, member_id, among, entry, max_records, batch_size, mode, budget, settings)

    # Share partitions this request loaded become acquirable one at a time, in the request's order:
    # Kafka initializes them in the background (a read of the share state each) and its delayed
    # share fetch completes as soon as one that finished has records, with the partitions ready by
    # then.  So a consumer's first fetch over partitions that all hold records gets the first one's.
    ready = [t for t in targets if not t.fresh]
    acquired = attempt(ready) if ready else 0
    for t in targets:
        if acquired or not t.fresh:
            continue
        t.fresh = False
        acquired = attempt([u for u in targets if not u.fresh])
    if not acquired and waiting:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        keys = [(t.name, t.index) for t in targets] + [_wake_key(group_id, t.name, t.index) for t in targets]
        waiters = broker.append_waiters
        while not acquired:
            remaining = deadline - loop.time()
            if remaining <= 0:
                if min_bytes > 1:  # at the deadline whatever there is goes out
                    acquired = _acquire_all(mgr, member_id, targets, entry, max_records, batch_size, mode,
                                            budget, settings)
                break
            await waiters.until(keys, loop, remaining)
            if sessions.get(group_id, member_id) is not session:
                break  # the session was closed or replaced meanwhile
            acquired = attempt()
    for t in targets:
        if not t.fresh:  # one still loading is not in Kafka's answer (its fetch did not include it)
            entry((t.topic_id, t.index))
    return _response(results, lock_ms, full=full, wanted=wanted, acked=set(acks))


def _acquire_all(mgr, member_id, targets, entry, max_records, batch_size, mode, budget, settings) -> int:
    """One pass over the partitions: acquire and attach records; returns how many were acquired."""
    remaining = max_records
    total = 0
    can = [t for t in targets if _prepare(t) and t.sp.can_acquire()]
    if not can:
        return 0
    share = max(budget // len(can), 1)
    for t in can:
        if remaining <= 0:
            break
        sp, plog = t.sp, t.plog
        upper = plog.last_stable_offset if settings.read_committed else plog.high_watermark
        offset = sp.next_fetch_offset()
        if offset >= upper:
            continue
        try:
            # New records are acquired from the share partition's end: enough batches to cover
            # ``remaining`` of them past it (released ones before it come along).
            read = _read_batches(plog, offset, share, upper, stop_at=max(offset, sp.next_offset) + remaining - 1)
        except KafkaError as exc:
            if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                sp.on_log_start_moved(plog.log_start_offset)
                continue
            entry((t.topic_id, t.index))["error_code"] = exc.code
            continue
        if not read:
            continue
        aborted = None
        if settings.read_committed:
            aborted = plog.aborted_transactions(read[0][0].base_offset, read[-1][0].last_offset + 1)
        got = sp.acquire(member_id, [b for b, _ in read], max_records=remaining, batch_size=batch_size,
                         fetch_offset=offset, mode=mode, aborted=aborted)
        if not got:
            continue
        lo, hi = got[0].first_offset, max(a.last_offset for a in got)
        e = entry((t.topic_id, t.index))
        e["records"] = [v for b, v in read if b.last_offset >= lo and b.base_offset <= hi]
        e["acquired_records"] = [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                  "delivery_count": a.delivery_count} for a in got]
        n = sum(a.last_offset - a.first_offset + 1 for a in got)
        remaining -= n
        total += n
    return total


def _acquirable_bytes(targets, settings, wanted: int) -> int:
    """Bytes of the log from each share partition's next fetch offset up to the HW/LSO, counted up
    to ``wanted`` (what MinBytes compares with)."""
    total = 0
    for t in targets:
        if total >= wanted or not t.sp.can_acquire():
            continue
        upper = t.plog.last_stable_offset if settings.read_committed else t.plog.high_watermark
        offset = t.sp.next_fetch_offset()
        if offset < upper:
            try:
                total += sum(len(c) for c in t.plog.read(offset, wanted - total, upper))
            except KafkaError:
                continue
    return total


def _prepare(t: _Target) -> bool:
    """Records below the log start are gone (retention, DeleteRecords): move the share partition on."""
    start = t.plog.log_start_offset
    if t.sp.start_offset < start:
        t.sp.on_log_start_moved(start)
    return True


def _response(results: dict, lock_ms: int, *, full: bool, wanted, acked=()) -> dict:
    by_topic: dict[uuid.UUID, list] = {}
    order = list(dict.fromkeys(list(wanted) + list(results)))
    for tp in order:
        e = results.get(tp)
        if e is None:
            continue
        if not full and not (e["acquired_records"] or e["error_code"] or tp in acked
                             or e["acknowledge_error_code"]):
            continue
        by_topic.setdefault(tp[0], []).append(e)
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()],
            "node_endpoints": []}


def _watch_connection(connection, mgr: ShareFetchManager) -> None:
    if connection is None:
        return
    hooks = getattr(connection, "on_lost", None)
    if hooks is None or getattr(connection, "_share_watched", False):
        return
    connection._share_watched = True
    hooks.append(lambda: mgr.connection_lost(connection))


# -- ShareAcknowledge ----------------------------------------------------------------------------

async def handle_share_acknowledge(ctx, body: dict) -> dict:
    broker = ctx.broker
    mgr = manager(broker)
    group_id = body.get("group_id")
    member_id = body.get("member_id")
    epoch = body.get("share_session_epoch", 0)
    lock_ms = mgr.settings(group_id or "").record_lock_duration_ms if ctx.api_version >= 2 else None
    if not group_id or not member_id:
        return _top_error(ErrorCode.INVALID_REQUEST, lock_ms)
    if _group_denied(ctx, group_id):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED, lock_ms)
    if epoch == INITIAL_EPOCH:
        return _top_error(ErrorCode.INVALID_SHARE_SESSION_EPOCH, lock_ms)
    try:
        session = mgr.sessions.check(group_id, member_id, epoch)
    except SessionError as exc:
        return _top_error(exc.code, lock_ms)
    if epoch != FINAL_EPOCH:
        mgr.sessions.advance(session)
    topics = body.get("topics") or []
    allowed = _authorized_topics(ctx, {t["topic_id"] for t in topics})
    responses = []
    for t in topics:
        parts = []
        for p in t.get("partitions") or ():
            if t["topic_id"] not in allowed:
                code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
            else:
                code, message = _acknowledge(broker, mgr, group_id, member_id, t["topic_id"], p["partition_index"],
                                             p.get("acknowledgement_batches") or [],
                                             renew=body.get("is_renew_ack", False))
            parts.append({"partition_index": p["partition_index"], "error_code": int(code), "error_message": message,
                          "current_leader": _leader(broker)})
        if parts:
            responses.append({"topic_id": t["topic_id"], "partitions": parts})
    if epoch == FINAL_EPOCH:
        closed = mgr.sessions.close(group_id, member_id)
        mgr.release_member(group_id, member_id, only=closed.partitions if closed else None)
    out = {"throttle_time_ms": 0, "error_code": NONE, "error_message": None, "responses": responses,
           "node_endpoints": []}
    if lock_ms is not None:
        out["acquisition_lock_timeout_ms"] = lock_ms
    return out


async def stop(broker) -> None:
    m = getattr(broker, "share_fetch", None)
    if m is not None:
        m.close()
