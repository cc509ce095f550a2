"""One object per client socket: frames in, handlers run, responses out in request order.

Kafka clients pair responses with requests first-in first-out (Java's ``InFlightRequests``,
aiokafka's ``CorrelationIdError``), so although many requests of one connection run at the same
time (a parked JoinGroup, a long-poll Fetch, several Produce requests), their responses leave in
the order the requests arrived.  Each request takes a slot in ``_pending``; a finished handler
fills its slot, and ``_flush`` writes every filled slot at the head of the queue.  A Produce with
acks=0 fills its slot with nothing, so it only advances the queue.

Handlers start in arrival order (tasks run FIFO) and the Produce handler appends before its first
``await``, so appends from one connection land in the log in request order, which idempotent
producers with several requests in flight rely on.

Back-pressure: reading stops while ``queued.max.requests`` requests are pending, while the bytes
of this connection's received-but-unanswered requests reach
``queued.max.request.bytes.per.connection``, while those of all connections reach
``queued.max.request.bytes`` (Kafka's memory pool for requests), or while the transport's write
buffer is above its high-water mark (``pause_writing``); it resumes when all clear.  A connection
with nothing pending always reads, so one request larger than a limit still gets served and the
total overshoots by at most one frame per connection.

Logging: opens and closes are DEBUG, as in Kafka (a CI run opens thousands); ``ConnectionStats``
counts them for the broker's periodic INFO summary.  Protocol violations are WARNING.

Reading: the connection is a ``BufferedProtocol``.  The transport receives (plain TCP) or
decrypts (TLS: uvloop's and asyncio's SSL protocols) straight into one read buffer, which the frame
decoder copies into frames at once.  As a plain ``Protocol`` every read was a new bytes object
(under TLS one 256 KiB allocation per TLS record, then a join of the records), and the decoder
copied it again.  The buffer belongs to the broker (``Broker.read_buffer``): a read is handed over
before the loop does anything else, so its connections take turns with it, and 10,000 idle
connections do not hold 10,000 buffers.

Errors: bytes we cannot parse (a bad frame size, a truncated header, an API version we do not
serve) close only this connection, after a log line naming the peer and client id, as Kafka does.
An ApiVersions request at a version we do not serve is answered with UNSUPPORTED_VERSION and a v0
body listing our ApiVersions range, so the client can retry at a version we speak.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Coroutine
from typing import Callable

from minikafka.protocol.errors import CloseConnection, ErrorCode, ProtocolError, UnsupportedVersionError
from minikafka.protocol.framing import FrameDecoder

from .context import RequestContext

log = logging.getLogger("minikafka.connection")

API_VERSIONS = 18
# uvloop's own read size (and its SSL protocol's largest decrypted read).
READ_BUFFER_BYTES = 256 * 1024


# The largest TLS record's payload.
TLS_RECORD_BYTES = 16 * 1024


def new_read_buffer() -> memoryview:
    return memoryview(bytearray(READ_BUFFER_BYTES))


def coalesce_small(chunks: list) -> list:
    """Join runs of chunks smaller than a TLS record into one buffer of up to a record's size.

    An SSL transport encrypts each chunk it is given as at least one TLS record of its own (an
    encryption call, 22-29 bytes of header and tag, a decryption call in the client); a response
    is a handful of headers and small fields between its large record-batch chunks, which pass
    through uncopied."""
    out: list = []
    run: bytearray | None = None
    for chunk in chunks:
        if len(chunk) >= TLS_RECORD_BYTES:
            if run is not None:
                out.append(run)
                run = None
            out.append(chunk)
            continue
        if run is None:
            run = bytearray(chunk)
        else:
            run += chunk
        if len(run) >= TLS_RECORD_BYTES:
            out.append(run)
            run = None
    if run is not None:
        out.append(run)
    return out


class _Slot:
    """A request's place in the response queue."""

    # size: bytes of the request frame, held until the response leaves (queued.max.request.bytes);
    # t0/ts/t1/m: arrival, handler start, handler end, per-request data of broker.metrics.
    __slots__ = ("api_key", "api_version", "correlation_id", "done", "chunks", "size", "t0", "ts", "t1", "m",
                 "close_after", "woken")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, size: int = 0):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.done = False
        self.chunks: list | None = None
        self.size = size  # bytes of the request frame, held until the response leaves
        self.t0 = self.ts = self.t1 = self.m = None
        self.close_after = False  # the handler raised CloseConnection: close once earlier answers left
        self.woken = None  # AppendWaiters.woken when the handler started, while it has not waited


class RequestBytes:
    """Bytes of received requests not yet answered, across the broker's connections.

    ``limit`` < 0 means unbounded (Kafka's ``queued.max.request.bytes=-1``).  Connections that
    paused because the total was reached wait in ``waiting`` and are resumed when it drops."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: set = set()

    def full(self) -> bool:
        return 0 <= self.limit <= self.used

    def release(self, size: int) -> None:
        was_full = self.full()
        self.used -= size
        if was_full and not self.full() and self.waiting:
            for conn in list(self.waiting):
                conn._update_reading()


class ConnectionStats:
    """Counters for the broker's periodic connection summary (INFO, only when they moved)."""

    __slots__ = ("opened", "closed", "violations")

    def __init__(self) -> None:
        self.opened = self.closed = self.violations = 0


def _default_codec():
    from minikafka.protocol import codec, fast

    return codec.decode_request, fast.encode_response


# Python 3.12+ starts a task eagerly itself (its first step runs inside the constructor, as the
# current task); 3.11 gets the same effect from _Resumed.
_EAGER_TASKS = sys.version_info >= (3, 12)


_STARTED = object()


class _Resumed(Coroutine):
    """A coroutine already stepped once by hand, handed to a task from where it stopped.

    ``first`` is what its first step yielded (the future it waits on, or None for a bare
    yield): the task's first ``send`` gets that back; every later send, and every throw (a
    cancellation even before the task's first step), goes to the coroutine itself."""

    __slots__ = ("coro", "first")

    def __init__(self, coro, first) -> None:
        self.coro = coro
        self.first = first

    def send(self, value):
        first = self.first
        if first is not _STARTED:
            self.first = _STARTED
            return first
        return self.coro.send(value)

    def __next__(self):
        return self.send(None)

    def throw(self, typ, val=None, tb=None):
        self.first = _STARTED
        if val is None and tb is None:
            return self.coro.throw(typ)
        return self.coro.throw(typ, val, tb)

    def close(self) -> None:
        self.first = _STARTED
        self.coro.close()

    def __await__(self):
        return self


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker, *, decode_request: Callable | None = None,
                 encode_response: Callable | None = None, max_in_flight: int | None = None,
                 write_high_water: int | None = None, max_frame_size: int | None = None,
                 listener=None):
        self.broker = broker
        # Security (broker/security/): the listener the client came in on, its principal, and
        # the SASL state on a SASL listener (set in connection_made by security.session.attach).
        self.listener = listener
        self.principal = "User:ANONYMOUS"
        self.sasl = None
        self.close_when_flushed = False
        config = broker.config
        if decode_request is None or encode_response is None:
            default_decode, default_encode = _default_codec()
            decode_request = decode_request or default_decode
            encode_response = encode_response or default_encode
        self._decode = decode_request
        self._encode = encode_response
        self.max_in_flight = max_in_flight or config.get("queued.max.requests")
        self.write_high_water = write_high_water or config.get("socket.send.buffer.high.water.bytes")
        self._decoder = FrameDecoder(max_frame_size or config.get("socket.request.max.bytes"))
        self.max_queued_bytes = config.get("queued.max.request.bytes.per.connection")
        self.queued_bytes = 0
        self._budget: RequestBytes = getattr(broker, "request_bytes", None) or RequestBytes(
            config.get("queued.max.request.bytes"))
        self._stats: ConnectionStats | None = getattr(broker, "connection_stats", None)
        self._pending: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task] = set()
        # The broker's set of every running handler task, this connection's among them, kept
        # after the connection is lost (its handlers finish on their own) so that a stopping
        # broker can cancel and await them all (``Broker.stop``).
        self._broker_tasks: set[asyncio.Task] | None = getattr(broker, "handler_tasks", None)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "?"
        self.client_id: str | None = None
        self.closed = False
        # Called once when the connection is lost (share sessions release their records).
        self.on_lost: list[Callable[[], None]] = []
        self._reading_paused = False
        self._writing_paused = False
        self._muted = False  # a client quota's throttle (KIP-219): not read until it ends
        self._muted_until = 0.0
        self.requests_seen = 0
        self.last_active = 0.0  # loop time of the last bytes in or out (connections.max.idle.ms)
        self._partial_reserved = 0  # bytes of queued.max.request.bytes held for a half-received frame
        self._partial_serial = 0
        self._partial_blocked = False
        self._metrics = None
        self._read_buffer: memoryview | None = getattr(broker, "read_buffer", None)
        self._waiters = getattr(broker, "append_waiters", None)
        self._tls = listener is not None and listener.uses_tls

    # -- asyncio.BufferedProtocol -------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.client_host, self.peer = str(peer[0]), f"{peer[0]}:{peer[1]}"
        try:
            # Low mark at a quarter so resume_writing does not flap around one threshold.
            transport.set_write_buffer_limits(high=self.write_high_water, low=self.write_high_water // 4)
        except (AttributeError, NotImplementedError):
            pass
        self.broker.connections.add(self)
        self._metrics = getattr(self.broker, "metrics", None)
        self.last_active = self.broker.loop.time() if self.broker.loop is not None else 0.0
        if self._stats is not None:
            self._stats.opened += 1
        log.debug("connection opened from %s", self.peer)
        if self.listener is not None:
            from .security.session import attach

            attach(self, transport)

    def connection_lost(self, exc) -> None:
        if not self.closed:
            self.closed = True
        self.broker.connections.discard(self)
        hooks, self.on_lost = self.on_lost, []
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.error("connection-lost hook failed", exc_info=True)
        # Handlers still running finish on their own (a parked JoinGroup must not be torn down
        # just because its socket died); their responses are dropped.
        self._drop_pending()
        if self._stats is not None:
            self._stats.closed += 1
        log.debug("connection closed from %s client_id=%s requests=%d%s", self.peer, self.client_id,
                 self.requests_seen, f" ({exc})" if exc else "")

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._read_buffer is None:
            self._read_buffer = new_read_buffer()
        return self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read_buffer[:nbytes])

    def data_received(self, data) -> None:
        """Bytes from the client; ``data`` is only read during this call (it may be the shared
        read buffer)."""
        if self.closed:
            return
        self.last_active = self.broker.loop.time()
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            self._violation(f"bad frame: {exc}")
            return
        self._release_partial()  # a completed frame is counted as a queued request from here on
        for frame in frames:
            if self.closed:
                return
            self._handle_frame(frame)
        self._reserve_partial()
        self._update_reading()

    # A frame that arrives in pieces counts against queued.max.request.bytes with its declared
    # size from its first piece, as Kafka's memory pool allocates a request's buffer when its
    # size is read.  When the pool cannot take it, this connection stops reading (holding at
    # most one read's worth of the frame) until memory is released.  Without this, thousands
    # of clients each sending most of a 100 MB frame would hold it all in half-received bytes.

    def _release_partial(self) -> None:
        if self._partial_reserved and self._decoder.frames_started != self._partial_serial \
                or self._partial_reserved and not self._decoder.partial_size:
            self._budget.release(self._partial_reserved)
            self._partial_reserved = 0

    def _reserve_partial(self) -> None:
        size = self._decoder.partial_size
        self._partial_blocked = False
        if not size or self._partial_reserved:
            return
        budget = self._budget
        if 0 <= budget.limit < budget.used + size and budget.used > 0:
            self._partial_blocked = True  # _update_reading pauses us and joins the waiting list
            return
        budget.used += size
        self._partial_reserved = size
        self._partial_serial = self._decoder.frames_started

    def eof_received(self):
        return False  # close our side too; there is no half-closed Kafka conversation

    # -- requests ---------------------------------------------------------------------------

    def _handle_frame(self, frame) -> None:
        if self.sasl is not None and self.sasl.raw_expected:
            self.sasl.raw_frame(self, frame)  # a SaslHandshake v0 token: no Kafka header
            return
        try:
            request = self._decode(frame)
        except UnsupportedVersionError as exc:
            correlation_id = getattr(exc, "correlation_id", None)
            if exc.api_key == API_VERSIONS and correlation_id is not None:
                self._answer_api_versions_fallback(correlation_id, exc.api_version)
            else:
                self._violation(f"unsupported api {exc.api_key} version {exc.api_version}")
            return
        except ProtocolError as exc:
            self._violation(f"malformed request: {exc}")
            return
        self.requests_seen += 1
        if request.client_id is not None:
            self.client_id = request.client_id
        if self.sasl is not None and not self.sasl.admits(self, request.api_key):
            return
        handler = self._lookup(request.api_key, request.api_version)
        if handler is None:
            self._violation(f"no handler for api {request.api_key} version {request.api_version}")
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request api=%d v%d corr=%d client_id=%s from %s", request.api_key,
                      request.api_version, request.correlation_id, request.client_id, self.peer)
        slot = _Slot(request.api_key, request.api_version, request.correlation_id, len(frame))
        self._pending.append(slot)
        self.queued_bytes += slot.size
        budget = self._budget
        was_full = budget.full()
        budget.used += slot.size
        if not was_full and budget.full():
            # Just reached: the other connections holding requests stop reading too.
            for conn in self.broker.connections:
                if conn is not self:
                    conn._update_reading()
        if self._metrics is not None:
            self._metrics.on_request(slot, request)
        ctx = RequestContext(request.api_key, request.api_version, request.correlation_id,
                             request.client_id, self.client_host, self.broker, self)
        try:
            coro = None
            faults = getattr(self.broker, "faults", None)
            if faults is not None and faults.active:  # test faults (broker/faults.py)
                coro = faults.intercept(handler, ctx, request.body)
            if coro is None:
                quotas = getattr(self.broker, "quotas", None)
                if quotas is not None and quotas.active:
                    coro = quotas.run(handler, ctx, request.body, slot.size)
                else:
                    coro = handler(ctx, request.body)
        except Exception as exc:  # a synchronous failure building the coroutine
            self._handler_failed(slot, exc)
            return
        self._start(slot, coro)

    def _start(self, slot: _Slot, coro) -> None:
        """Run the handler now, up to its first real wait; only a handler that waits gets a task.

        Most requests (Produce among them) never wait, so they are answered here without a
        task, a loop iteration and a done-callback hop (issue 24's latency).  Arrival order is
        kept: frames are handled one after the other, each handler's first step before the next
        frame is decoded."""
        waiters = self._waiters
        held = False
        if waiters is not None:
            slot.woken = waiters.woken
            # Long polls this request wakes (a Produce's appends) are resumed when its first
            # step is over, all at once, here: no loop iteration between (server.LongPoll).
            held = waiters.hold()
        run = self._run(slot, coro)
        try:
            if _EAGER_TASKS:
                task = asyncio.Task(run, loop=self.broker.loop, eager_start=True)
                if task.done():
                    return
            else:
                try:
                    first = run.send(None)
                except StopIteration:
                    return  # answered (or failed) inside _run
                task = self.broker.loop.create_task(_Resumed(run, first))
        finally:
            if held:
                waiters.release()
        slot.woken = None  # it waited: whatever it woke is not this request's doing alone
        self._tasks.add(task)
        if self._broker_tasks is not None:
            self._broker_tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _run(self, slot: _Slot, coro) -> None:
        try:
            body = await coro
        except asyncio.CancelledError:
            if not self.closed:
                self._violation(f"api {slot.api_key} handler cancelled")
            raise
        except CloseConnection as exc:
            log.warning("closing connection from %s client_id=%s after api %d v%d: %s", self.peer,
                        self.client_id, slot.api_key, slot.api_version, exc)
            slot.done = slot.close_after = True
            self._flush()
            return
        except Exception as exc:
            self._handler_failed(slot, exc)
            return
        if slot.woken is not None and slot.woken != self._waiters.woken:
            # Answered without waiting, and woke parked fetches (a Produce, as a rule): their
            # answers, the latency that matters, go out first (resumed when _start releases
            # them, or scheduled before this call); this one follows in the next loop step.
            self.broker.loop.call_soon(self._answer, slot, body)
        else:
            self._answer(slot, body)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if self._broker_tasks is not None:
            self._broker_tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: _run has dealt with it

    def _lookup(self, api_key: int, api_version: int):
        try:
            return self.broker.registry.lookup(api_key, api_version)
        except (KeyError, LookupError, ProtocolError):
            return None

    def _answer_api_versions_fallback(self, correlation_id: int, version: int) -> None:
        lo, hi = self.broker.registry_range(API_VERSIONS)
        body = {"error_code": ErrorCode.UNSUPPORTED_VERSION,
                "api_keys": [{"api_key": API_VERSIONS, "min_version": lo, "max_version": hi}]}
        log.info("ApiVersions v%d from %s client_id=%s: answering UNSUPPORTED_VERSION with v0",
                 version, self.peer, self.client_id)
        slot = _Slot(API_VERSIONS, 0, correlation_id)
        slot.chunks = self._encode(API_VERSIONS, 0, correlation_id, body)
        slot.done = True
        self._pending.append(slot)
        self._flush()

    def send_raw_frame(self, data: bytes) -> None:
        """A bare size-prefixed frame in response order (SASL v0 tokens have no Kafka header)."""
        slot = _Slot(-1, 0, -1)
        slot.chunks = [len(data).to_bytes(4, "big"), data]
        slot.done = True
        self._pending.append(slot)
        self._flush()

    def _answer(self, slot: _Slot, body) -> None:
        if self.closed:
            return
        if body is not None:
            try:
                slot.chunks = self._encode(slot.api_key, slot.api_version, slot.correlation_id, body)
            except Exception as exc:
                self._handler_failed(slot, exc)
                return
        if self._metrics is not None:
            self._metrics.on_response(slot, body)
        slot.done = True
        self._flush()

    def _handler_failed(self, slot: _Slot, exc: BaseException) -> None:
        # Kafka answers an unexpected handler failure with a generic error; without a generic
        # error body per API we close the connection (the client reconnects and retries).
        log.error("api %d v%d corr=%d from %s client_id=%s failed; closing the connection",
                  slot.api_key, slot.api_version, slot.correlation_id, self.peer, self.client_id,
                  exc_info=exc)
        self.close()

    def _flush(self) -> None:
        pending = self._pending
        released = 0
        out: list = []
        close_now = False
        while pending and pending[0].done:
            slot = pending.popleft()
            released += slot.size
            if slot.chunks is not None and not self.closed:
                out += slot.chunks
            if self._metrics is not None:
                self._metrics.on_sent(slot)
            if slot.close_after:
                close_now = True  # nothing after this request is answered, as in Kafka
                break
        if out:
            # Every ready response in one write: one send for several pipelined answers.
            if self._tls:
                out = coalesce_small(out)
            self.transport.writelines(out)
            self.last_active = self.broker.loop.time()
        if released:
            self.queued_bytes -= released
            self._budget.release(released)
        if (close_now or self.close_when_flushed and not pending) and not self.closed:
            self.close()  # e.g. after a failed SASL authentication's answer (transport drains it)
        self._update_reading()

    def _drop_pending(self) -> None:
        released = self.queued_bytes + self._partial_reserved
        self._partial_reserved = 0
        self._partial_blocked = False
        self._pending.clear()
        self.queued_bytes = 0
        self._budget.waiting.discard(self)
        if released:
            self._budget.release(released)

    # -- flow control and closing ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def reading_paused(self) -> bool:
        return self._reading_paused

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        if self._partial_blocked:
            self._reserve_partial()  # woken by a release: maybe there is room now
        queued = self.queued_bytes
        over_total = queued > 0 and self._budget.full() or self._partial_blocked
        should_pause = (self._writing_paused or self._muted or len(self._pending) >= self.max_in_flight
                        or over_total
                        or 0 <= self.max_queued_bytes <= queued and queued > 0)
        if over_total:
            self._budget.waiting.add(self)
        else:
            self._budget.waiting.discard(self)
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def idle_for(self, now: float) -> float:
        """Seconds without bytes in or out and with nothing in flight (0 while a request is)."""
        if self._pending or self._tasks:
            return 0.0
        return now - self.last_active

    def mute_for(self, seconds: float) -> None:
        """Stop reading for ``seconds``: a quota throttle the client was told about, or the delay
        after a failed authentication."""
        if self.closed or seconds <= 0:
            return
        loop = self.broker.loop
        until = loop.time() + seconds
        if self._muted and until <= self._muted_until:
            return
        self._muted, self._muted_until = True, until
        self._update_reading()
        loop.call_at(until, self._unmute, until)

    def _unmute(self, until: float) -> None:
        if self._muted and until >= self._muted_until:
            self._muted = False
            self._update_reading()

    def _violation(self, reason: str) -> None:
        log.warning("closing connection from %s client_id=%s: %s", self.peer, self.client_id, reason)
        if self._stats is not None:
            self._stats.violations += 1
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._drop_pending()
        if self.transport is not None:
            self.transport.close()

    def cancel_tasks(self) -> None:
        """Broker shutdown: stop handlers still waiting (long polls, parked joins)."""
        for task in list(self._tasks):
            task.cancel()
