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

Back-pressure: reading stops while ``queued.max.requests`` requests are pending or the transport's
write buffer is above its high-water mark (``pause_writing``), and resumes when both clear.

Errors: bytes we cannot parse (a bad frame size, a truncated header, an API version we do not
serve) close only this connection, after a log line naming the peer and client id, as Kafka does.
An ApiVersions request at a version we do not serve is answered with UNSUPPORTED_VERSION and a v0
body listing our ApiVersions range, so the client can retry at a version we speak.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Callable

from minikafka.protocol.errors import ProtocolError, UnsupportedVersionError
from minikafka.protocol.framing import FrameDecoder

from .context import RequestContext

log = logging.getLogger("minikafka.connection")

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


class _Slot:
    """A request's place in the response queue."""

    # t0/ts/t1/m: arrival, handler start, handler end, per-request data of broker.metrics.
    __slots__ = ("api_key", "api_version", "correlation_id", "done", "chunks", "t0", "ts", "t1", "m")

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.done = False
        self.chunks: list | None = None
        self.t0 = self.ts = self.t1 = self.m = None


def _default_codec():
    from minikafka.protocol import codec

    return codec.decode_request, codec.encode_response


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker, *, decode_request: Callable | None = None,
                 encode_response: Callable | None = None, max_in_flight: int | None = None,
                 write_high_water: int | None = None, max_frame_size: int | None = None):
        self.broker = broker
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
        self._pending: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task] = set()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "?"
        self.client_id: str | None = None
        self.closed = False
        self._reading_paused = False
        self._writing_paused = False
        self.requests_seen = 0
        self._metrics = None

    # -- asyncio.Protocol -------------------------------------------------------------------

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
        log.info("connection opened from %s", self.peer)

    def connection_lost(self, exc) -> None:
        if not self.closed:
            self.closed = True
        self.broker.connections.discard(self)
        # Handlers still running finish on their own (a parked JoinGroup must not be torn down
        # just because its socket died); their responses are dropped.
        self._pending.clear()
        log.info("connection closed from %s client_id=%s requests=%d%s", self.peer, self.client_id,
                 self.requests_seen, f" ({exc})" if exc else "")

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def data_received(self, data) -> None:
        if self.closed:
            return
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            self._violation(f"bad frame: {exc}")
            return
        for frame in frames:
            if self.closed:
                return
            self._handle_frame(frame)
        self._update_reading()

    def eof_received(self):
        return False  # close our side too; there is no half-closed Kafka conversation

    # -- requests ---------------------------------------------------------------------------

    def _handle_frame(self, frame) -> None:
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
        handler = self._lookup(request.api_key, request.api_version)
        if handler is None:
            self._violation(f"no handler for api {request.api_key} version {request.api_version}")
            return
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request api=%d v%d corr=%d client_id=%s from %s", request.api_key,
                      request.api_version, request.correlation_id, request.client_id, self.peer)
        slot = _Slot(request.api_key, request.api_version, request.correlation_id)
        self._pending.append(slot)
        if self._metrics is not None:
            self._metrics.on_request(slot, request)
        ctx = RequestContext(request.api_key, request.api_version, request.correlation_id,
                             request.client_id, self.client_host, self.broker, self)
        try:
            coro = handler(ctx, request.body)
        except Exception as exc:  # a synchronous failure building the coroutine
            self._handler_failed(slot, exc)
            return
        task = self.broker.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda t, s=slot: self._completed(s, t))

    def _lookup(self, api_key: int, api_version: int):
        try:
            return self.broker.registry.lookup(api_key, api_version)
        except (KeyError, LookupError, ProtocolError):
            return None

    def _answer_api_versions_fallback(self, correlation_id: int, version: int) -> None:
        lo, hi = self.broker.registry_range(API_VERSIONS)
        body = {"error_code": UNSUPPORTED_VERSION,
                "api_keys": [{"api_key": API_VERSIONS, "min_version": lo, "max_version": hi}]}
        log.info("ApiVersions v%d from %s client_id=%s: answering UNSUPPORTED_VERSION with v0",
                 version, self.peer, self.client_id)
        slot = _Slot(API_VERSIONS, 0, correlation_id)
        slot.chunks = self._encode(API_VERSIONS, 0, correlation_id, body)
        slot.done = True
        self._pending.append(slot)
        self._flush()

    def _completed(self, slot: _Slot, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            if not self.closed:
                self._violation(f"api {slot.api_key} handler cancelled")
            return
        exc = task.exception()
        if exc is not None:
            self._handler_failed(slot, exc)
            return
        if self.closed:
            return
        body = task.result()
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
        transport = self.transport
        while pending and pending[0].done:
            slot = pending.popleft()
            if slot.chunks is not None and not self.closed:
                transport.writelines(slot.chunks)
            if self._metrics is not None:
                self._metrics.on_sent(slot)
        self._update_reading()

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
        should_pause = self._writing_paused or len(self._pending) >= self.max_in_flight
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def _violation(self, reason: str) -> None:
        log.warning("closing connection from %s client_id=%s: %s", self.peer, self.client_id, reason)
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._pending.clear()
        if self.transport is not None:
            self.transport.close()

    def cancel_tasks(self) -> None:
        """Broker shutdown: stop handlers still waiting (long polls, parked joins)."""
        for task in list(self._tasks):
            task.cancel()
