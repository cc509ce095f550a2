"""Incremental fetch sessions (KIP-227) around the Fetch handler.

A consumer of many partitions sends the whole partition list once (a *full* fetch, epoch 0);
the broker answers with a session id and remembers the partitions.  Each later request names
the session and the next epoch and carries only the partitions whose fetch position changed
(plus ``forgotten_topics_data`` for partitions it no longer wants); the response carries only
the partitions with something new: records, an error, or a changed high watermark, last
stable offset or log start offset.  With 1,000 idle partitions both requests and responses
shrink from ~1,000 entries to none.

Request metadata (session_id, session_epoch), as Kafka reads it:

- epoch -1 (FINAL): a sessionless full fetch; a named session is closed first.
- epoch 0 (INITIAL): a full fetch that opens a new session (a named session is closed
  first).  If the cache is full and nothing can be evicted, the response says session 0 and the
  client simply keeps sending full fetches.
- epoch > 0: incremental.  An unknown id gets FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH, a session opened by topic id (v13+) used by name or the reverse
  FETCH_SESSION_TOPIC_ID_ERROR; each is a top-level error with no partitions, after which the
  clients start over with a full fetch.  An incremental fetch that leaves the session empty
  closes it and is answered sessionless.

The cache (``max.incremental.fetch.session.cache.slots`` sessions) evicts as Kafka's
FetchSessionCache does when a new session needs a slot: first a session unused for longer than
the eviction time (Kafka fixes it at 120 s; ``fetch.session.eviction.ms`` here so tests can
shorten it), otherwise the smallest session if the new one has at least as many partitions
(on a tie the existing session stays).  There are no followers, so no session is privileged.

Partitions are keyed by (topic name, partition) for v7-12 and (topic id, partition) for v13+,
and a session opened one way refuses requests made the other way.  The read itself is the
unchanged sessionless handler.  An incremental fetch first reads, without waiting, only the
partitions that may have changed (a partition whose client is caught up and whose offsets
equal what was last sent is skipped: that is where the CPU saving is); if that read does not
complete the fetch (fewer than ``min_bytes``, no error) and the client asked to wait, the
handler is given every partition of the session and its long poll waits on all of them, as
Kafka's delayed fetch does.  Partitions that answered are moved to the end of the session so
that a ``max_bytes``-limited response rotates fairly across partitions.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from minikafka.protocol.errors import ErrorCode, KafkaError

from .leader_epoch import LEADER_EPOCH

log = logging.getLogger("minikafka.fetch.session")


INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT_MAX = 2147483647
FIRST_TOPIC_ID_VERSION = 13

_NOTHING_SENT = (-2, -2, -2)
_ERROR_SENT = (-1, -1, -1)

# Request fields a session remembers per partition (the rest of a FetchPartition).
_REQUEST_FIELDS = ("fetch_offset", "partition_max_bytes", "current_leader_epoch", "last_fetched_epoch",
                   "log_start_offset", "replica_directory_id")


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: the epoch after ``epoch`` wraps to 1, never 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT_MAX else epoch + 1


class CachedPartition:
    """What the session knows of one partition: the client's last fetch position and what the
    last response told the client (so unchanged partitions can be left out)."""

    __slots__ = ("request", "sent")

    def __init__(self, request: dict):
        self.request = {k: request[k] for k in _REQUEST_FIELDS if k in request}
        # (high watermark, last stable offset, log start offset) last sent to the client;
        # nothing sent yet: -2 differs from every value a response can carry, even -1.
        self.sent = _NOTHING_SENT

    def update_request(self, request: dict) -> None:
        for k in _REQUEST_FIELDS:
            if k in request:
                self.request[k] = request[k]

    def must_respond(self, resp: dict) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: decide and remember."""
        if resp.get("error_code"):  # any error (ErrorCode.NONE is 0); per partition, so no enum lookup
            # Remember invalid offsets so the partition is sent again once the error clears.
            self.sent = _ERROR_SENT
            return True
        offsets = (resp.get("high_watermark", -1), resp.get("last_stable_offset", -1),
                   resp.get("log_start_offset", -1))
        must = offsets != self.sent
        self.sent = offsets
        records = resp.get("records")
        if records and _size(records) > 0:
            must = True
        if resp.get("preferred_read_replica", -1) != -1:
            must = True
        diverging = resp.get("diverging_epoch")
        if diverging and diverging.get("epoch", -1) != -1:
            must = True
        return must


def _size(records) -> int:
    if isinstance(records, (list, tuple)):
        return sum(len(c) for c in records)
    return len(records)


class FetchSession:
    __slots__ = ("id", "epoch", "uses_topic_ids", "partitions", "created_ms", "last_used_ms", "_topics")

    def __init__(self, session_id: int, uses_topic_ids: bool, now_ms: float):
        self.id = session_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.uses_topic_ids = uses_topic_ids
        self.partitions: dict[tuple, CachedPartition] = {}  # insertion order is the read order
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self._topics: list[dict] | None = None  # request_topics, until the session changes

    def __len__(self) -> int:
        return len(self.partitions)

    def update(self, topics, forgotten, topic_key: str) -> tuple[int, int, int]:
        """Apply an incremental request: add/update its partitions, then drop the forgotten."""
        added = updated = removed = 0
        if topics or forgotten:
            self._topics = None
        for topic in topics or ():
            tk = topic.get(topic_key)
            for p in topic.get("partitions") or ():
                key = (tk, p["partition"])
                cached = self.partitions.get(key)
                if cached is None:
                    self.partitions[key] = CachedPartition(p)
                    added += 1
                else:
                    cached.update_request(p)
                    updated += 1
        for topic in forgotten or ():
            tk = topic.get(topic_key)
            for index in topic.get("partitions") or ():
                if self.partitions.pop((tk, index), None) is not None:
                    removed += 1
        return added, updated, removed

    def request_topics(self, topic_key: str) -> list[dict]:
        """Every session partition as request topics, consecutive partitions of a topic grouped."""
        if self._topics is not None:
            return self._topics
        topics: list[dict] = []
        last = object()
        for (tk, index), cached in self.partitions.items():
            if tk != last:
                topics.append({topic_key: tk, "partitions": []})
                last = tk
            topics[-1]["partitions"].append(dict(cached.request, partition=index))
        self._topics = topics
        return topics

    def move_to_end(self, keys) -> None:
        for key in keys:
            self.partitions[key] = self.partitions.pop(key)
        if keys:
            self._topics = None

    def changed_topics(self, controller, topic_key: str, read_committed: bool) -> list[dict]:
        """Request topics of the partitions that may have something to say: all but those
        whose client is caught up (fetch offset at the high watermark, or the LSO under
        read_committed) and whose offsets equal what was last sent.  Anything doubtful (unknown
        topic, a leader epoch to check) is kept, so the read reports it."""
        topics: list[dict] = []
        last = object()
        names: dict = {}
        for (tk, index), cached in self.partitions.items():
            request = cached.request
            sent = cached.sent
            if sent[0] >= 0 and request.get("current_leader_epoch", -1) in (-1, LEADER_EPOCH):
                name = names.get(tk, last)
                if name is last:
                    if topic_key == "topic":
                        name = tk
                    else:
                        info = controller.topic_by_id(tk)
                        name = info.name if info is not None else None
                    names[tk] = name
                plog = None
                if name is not None:
                    try:
                        plog = controller.log(name, index)
                    except KafkaError:
                        plog = None
                if plog is not None:
                    hw, lso = plog.high_watermark, plog.last_stable_offset
                    if (request.get("fetch_offset") == (lso if read_committed else hw)
                            and sent == (hw, lso, plog.log_start_offset)):
                        continue
            if not topics or topics[-1][topic_key] != tk:
                topics.append({topic_key: tk, "partitions": []})
            topics[-1]["partitions"].append(dict(request, partition=index))
        return topics


class FetchSessionCache:
    """Sessions by id, bounded by ``max_slots``, evicting as Kafka's FetchSessionCache does."""

    def __init__(self, max_slots: int = 1000, eviction_ms: float = 120000,
                 clock: Callable[[], float] | None = None, rng: "random.Random | None" = None):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock or (lambda: time.monotonic() * 1000.0)
        if rng is None:
            import random  # with the first fetch session, not at every broker start

            rng = random.Random()
        self._rng = rng
        self.sessions: dict[int, FetchSession] = {}
        self.created = 0
        self.evicted = 0
        self.incremental = 0

    @classmethod
    def from_config(cls, config, clock: Callable[[], float] | None = None) -> "FetchSessionCache":
        return cls(config.get("max.incremental.fetch.session.cache.slots"),
                   config.get("fetch.session.eviction.ms"), clock)

    def now_ms(self) -> float:
        return self._clock()

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: float) -> None:
        session.last_used_ms = now_ms

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, INT_MAX)
            if candidate not in self.sessions:
                return candidate

    def _try_evict(self, size: int, now_ms: float) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            victim = stalest
        else:
            smallest = min(self.sessions.values(), key=lambda s: (len(s), s.id))
            # Kafka compares (size, id) with the new session's id taken as 0: an equal-sized
            # existing session is worth as much, so it stays.
            if (size, 0) < (len(smallest), smallest.id):
                return False
            victim = smallest
        del self.sessions[victim.id]
        self.evicted += 1
        log.debug("fetch session %d evicted (%d partitions, unused for %.0f ms)",
                  victim.id, len(victim), now_ms - victim.last_used_ms)
        return True

    def maybe_create(self, uses_topic_ids: bool, size: int, now_ms: float) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots and not self._try_evict(size, now_ms):
            return None
        session = FetchSession(self._new_id(), uses_topic_ids, now_ms)
        self.sessions[session.id] = session
        self.created += 1
        return session


# A throttled fetch (client quotas) is answered without its partitions, as Kafka does; the
# quota code then calls response[UNDO_KEY]() so the session does not count them as sent.
UNDO_KEY = "_fetch_session_undo"


def _restore(before) -> None:
    for cached, sent in before:
        cached.sent = sent


def _answers(response: dict, min_bytes: int) -> bool:
    """Whether a read completes a fetch at once: enough bytes, or a partition error."""
    total = 0
    for topic in response.get("responses") or ():
        for p in topic.get("partitions") or ():
            if p.get("error_code"):  # any error (ErrorCode.NONE is 0)
                return True
            records = p.get("records")
            if records:
                total += _size(records)
    return total >= min_bytes


def _error(code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "session_id": INVALID_SESSION_ID, "responses": []}


def _cache_of(broker) -> FetchSessionCache:
    cache = getattr(broker, "fetch_sessions", None)
    if cache is None:
        # Broker time (broker/clock.py), so an advanced clock ages sessions like every other timeout.
        cache = FetchSessionCache.from_config(broker.config, getattr(broker, "now_ms", None))
        broker.fetch_sessions = cache
    return cache


def _topic_key(version: int) -> str:
    return "topic_id" if version >= FIRST_TOPIC_ID_VERSION else "topic"


def _iter_response(response: dict, topic_key: str):
    for topic in response.get("responses") or ():
        tk = topic.get(topic_key)
        for p in topic.get("partitions") or ():
            yield tk, topic, p


def _regroup(entries, template_of) -> list[dict]:
    """Response topics from (topic key, partition response) pairs, consecutive ones grouped."""
    out: list[dict] = []
    last = object()
    for tk, topic, p in entries:
        if tk != last:
            out.append(template_of(topic))
            last = tk
        out[-1]["partitions"].append(p)
    return out


def _template(topic: dict) -> dict:
    return {k: v for k, v in topic.items() if k != "partitions"} | {"partitions": []}


def with_sessions(handle_sessionless):
    """Wrap a sessionless Fetch handler (any version) so that it serves KIP-227 sessions."""

    async def handle_fetch(ctx, body: dict) -> dict:
        session_id = body.get("session_id", INVALID_SESSION_ID) or INVALID_SESSION_ID
        epoch = body.get("session_epoch", FINAL_EPOCH)
        if ctx.api_version < 7 or body.get("replica_id", -1) >= 0:
            return await handle_sessionless(ctx, body)
        cache = _cache_of(ctx.broker)
        topic_key = _topic_key(ctx.api_version)
        uses_ids = ctx.api_version >= FIRST_TOPIC_ID_VERSION
        now = cache.now_ms()
        plain = dict(body, session_id=INVALID_SESSION_ID, session_epoch=FINAL_EPOCH)

        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID and cache.remove(session_id) is not None:
                log.debug("fetch session %d closed by a full fetch", session_id)
            if epoch == FINAL_EPOCH and log.isEnabledFor(logging.DEBUG):
                log.debug("fetch without a session (epoch -1) from client %s", getattr(ctx, "client_id", None))
            response = await handle_sessionless(ctx, plain)
            if epoch == FINAL_EPOCH or response.get("error_code", ErrorCode.NONE) != ErrorCode.NONE:
                response["session_id"] = INVALID_SESSION_ID
                return response
            size = sum(len(t.get("partitions") or ()) for t in body.get("topics") or ())
            session = cache.maybe_create(uses_ids, size, cache.now_ms())
            if session is None:
                response["session_id"] = INVALID_SESSION_ID
                return response
            session.update(body.get("topics"), (), topic_key)
            for tk, _topic, p in _iter_response(response, topic_key):
                cached = session.partitions.get((tk, p["partition_index"]))
                if cached is not None:
                    cached.must_respond(p)
            response["session_id"] = session.id
            response[UNDO_KEY] = lambda: _restore([(c, _NOTHING_SENT) for c in session.partitions.values()])
            log.debug("fetch session %d created with %d partitions (client %s)", session.id, len(session),
                      getattr(ctx, "client_id", None))
            return response

        session = cache.get(session_id)
        if session is None:
            log.debug("fetch session %d not found (epoch %d)", session_id, epoch)
            return _error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            log.debug("fetch session %d: epoch %d, expected %d", session_id, epoch, session.epoch)
            return _error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return _error(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(body.get("topics"), body.get("forgotten_topics_data"), topic_key)
        if not session.partitions:
            cache.remove(session_id)
            log.debug("fetch session %d closed: no partitions left", session_id)
            response = await handle_sessionless(ctx, dict(plain, topics=[], forgotten_topics_data=[]))
            response["session_id"] = INVALID_SESSION_ID
            return response
        cache.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        expected = session.epoch
        cache.incremental += 1
        # Read only the partitions that may have changed, without waiting.  If that does not
        # answer the request (fewer than min_bytes, no error) it has to wait as Kafka's delayed
        # fetch does: on every partition of the session, so the full read below parks on them all.
        changed = session.changed_topics(ctx.broker.controller, topic_key, body.get("isolation_level", 0) == 1)
        response = await handle_sessionless(ctx, dict(plain, topics=changed, forgotten_topics_data=[], max_wait_ms=0))
        if (body.get("max_wait_ms", 0) > 0 and response.get("error_code", ErrorCode.NONE) == ErrorCode.NONE
                and not _answers(response, body.get("min_bytes", 1))):
            response = await handle_sessionless(
                ctx, dict(plain, topics=session.request_topics(topic_key), forgotten_topics_data=[]))
        if response.get("error_code", ErrorCode.NONE) != ErrorCode.NONE:
            return response
        if session.epoch != expected:
            # Another request of this session was answered while this one waited.
            return _error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        kept, moved, before = [], [], []
        for tk, topic, p in _iter_response(response, topic_key):
            key = (tk, p["partition_index"])
            cached = session.partitions.get(key)
            if cached is not None:
                before.append((cached, cached.sent))
            if cached is None or cached.must_respond(p):
                kept.append((tk, topic, p))
                if cached is not None:
                    moved.append(key)
        session.move_to_end(moved)
        response["responses"] = _regroup(kept, _template)
        response["session_id"] = session.id
        response[UNDO_KEY] = lambda: _restore(before)
        cache.touch(session, cache.now_ms())
        if log.isEnabledFor(logging.DEBUG):
            log.debug("fetch session %d epoch %d: incremental, %d of %d partitions in the response",
                      session.id, epoch, len(kept), len(session))
        return response

    return handle_fetch
