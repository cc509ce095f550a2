"""Client quotas: Kafka's byte-rate and request-percentage quotas, measured and enforced.

The quotas themselves are metadata (``Controller.client_quotas``, written by AlterClientQuotas
as ``client_quota`` records).  This module measures each client and computes throttle times the
way Kafka's ClientQuotaManager does:

* Which quota applies (Kafka's DefaultQuotaCallback): the first of these entities that sets the
  key, for the connection's user (``ANONYMOUS`` without authentication) and client id:
  user+client, user+default client, user, default user+client, default user+default client,
  default user, client, default client.  Clients that resolve to the same entity share one
  measurement; a default entity is measured per user / per client id it stands for.
* The measurement is a rate over ``quota.window.num`` (11) samples of
  ``quota.window.size.seconds`` (1 s); as in Kafka's ``Rate``, the window is never taken shorter
  than ``num - 1`` samples, so a burst right after start is not over-counted.
* produce: bytes of the request frame; fetch: bytes of record data in the response (the rest
  of a response is small against it); request: the time this request's handler spent running
  on the event loop (each step of its coroutine, not time parked in a long poll), as a
  percentage of one second, so 100 is the whole loop (Kafka: one request thread).
* When the rate exceeds the bound, the throttle time is ``(rate - bound) / bound * window``
  (QuotaUtils.throttleTime); for the request quota it is capped at one sample window (1 s),
  as Kafka's ClientRequestQuotaManager does.
* A throttled Fetch gets an empty response and its bytes are not counted (Kafka returns no data
  rather than data the client may not have yet), and a Fetch never asks for more than the
  quota allows in ``num - 1`` windows, so a consumer always progresses.
* The response carries ``throttle_time_ms`` (the larger of the bandwidth and request throttles).
  From the versions of KIP-219 the client is trusted to wait and the broker stops reading the
  connection for that long; for older versions the broker delays the response instead.
"""

from __future__ import annotations

import asyncio
import logging
import time

from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

PRODUCE, FETCH = 0, 1
ANONYMOUS = "ANONYMOUS"
# Requests that are not counted nor throttled: authentication comes before the principal.
EXEMPT = frozenset({17, 36})
# KIP-219: from these versions the client throttles itself and the broker mutes the connection;
# below them the broker delays the response.  APIs not listed throttle client-side at every
# version we serve.
CLIENT_THROTTLES_FROM = {0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2,
                         16: 2, 18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 23: 3, 24: 1, 25: 1, 26: 1, 28: 1,
                         32: 1, 33: 1, 34: 1, 35: 1, 37: 1, 42: 1, 43: 1, 44: 1}


class Rate:
    """A sampled rate per second, as Kafka's ``Rate`` over a ``SampledStat``."""

    __slots__ = ("samples", "window_ms", "_starts", "_values")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._starts: list[float] = []
        self._values: list[float] = []

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._starts and self._starts[0] < horizon:
            self._starts.pop(0)
            self._values.pop(0)

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        if not self._starts or now_ms - self._starts[-1] >= self.window_ms:
            self._starts.append(now_ms)
            self._values.append(0.0)
            if len(self._starts) > self.samples:
                self._starts.pop(0)
                self._values.pop(0)
        self._values[-1] += value

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        elapsed = now_ms - self._starts[0] if self._starts else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        window = self.window_size_ms(now_ms)
        return sum(self._values) / (window / 1000.0) if window > 0 else 0.0

    @property
    def idle(self) -> bool:
        return not self._starts


def resolve(quotas: dict, key: str, user: str, client_id: str):
    """(bound, measurement key) of the quota ``key`` for this user and client, or None."""
    if not quotas:
        return None
    candidates = (
        ((("client-id", client_id), ("user", user)), (user, client_id)),
        ((("client-id", None), ("user", user)), (user, client_id)),
        ((("user", user),), (user, "")),
        ((("client-id", client_id), ("user", None)), (user, client_id)),
        ((("client-id", None), ("user", None)), (user, client_id)),
        ((("user", None),), (user, "")),
        ((("client-id", client_id),), ("", client_id)),
        ((("client-id", None),), ("", client_id)),
    )
    for entity, tags in candidates:
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None


class _Timed:
    """Awaits a coroutine and adds up the time each of its steps runs on the loop."""

    __slots__ = ("coro", "elapsed")

    def __init__(self, coro) -> None:
        self.coro = coro
        self.elapsed = 0.0

    def __await__(self):
        coro = self.coro
        send, value, error = coro.send, None, None
        while True:
            t0 = time.perf_counter()
            try:
                yielded = coro.throw(error) if error is not None else send(value)
            except StopIteration as stop:
                self.elapsed += time.perf_counter() - t0
                return stop.value
            except BaseException:
                self.elapsed += time.perf_counter() - t0
                raise
            self.elapsed += time.perf_counter() - t0
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go into the coroutine
                value, error = None, exc


def _record_bytes(response: dict) -> int:
    total = 0
    for topic in response.get("responses") or ():
        for p in topic.get("partitions") or ():
            recs = p.get("records")
            if recs is None:
                continue
            if isinstance(recs, (bytes, bytearray, memoryview)):
                total += len(recs)
            else:
                total += sum(len(c) for c in recs)
    return total


class ClientQuotas:
    def __init__(self, broker) -> None:
        self.broker = broker
        config = broker.config
        self.samples = config.get("quota.window.num")
        self.window_ms = config.get("quota.window.size.seconds") * 1000
        self._rates: dict[tuple, Rate] = {}
        self.throttled: dict[str, int] = {PRODUCER_BYTE_RATE: 0, CONSUMER_BYTE_RATE: 0, REQUEST_PERCENTAGE: 0}

    @property
    def active(self) -> bool:
        return bool(self.broker.controller.client_quotas)

    def _rate(self, key: str, tags: tuple) -> Rate:
        rate = self._rates.get((key, tags))
        if rate is None:
            if len(self._rates) > 100_000:
                self._rates = {k: r for k, r in self._rates.items() if not r.idle}
            rate = self._rates[(key, tags)] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record ``value`` and return the throttle time in ms (0 when within the quota)."""
        found = resolve(self.broker.controller.client_quotas, key, user, client_id)
        if found is None:
            return 0
        bound, tags = found
        rate = self._rate(key, tags)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if bound <= 0 or observed <= bound:
            return 0
        throttle = (observed - bound) / bound * rate.window_size_ms(now_ms)
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self.window_ms)
        return int(round(throttle))

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> None:
        found = resolve(self.broker.controller.client_quotas, key, user, client_id)
        if found is not None:
            self._rate(key, found[1]).record(-value, now_ms)

    def max_fetch_bytes(self, user: str, client_id: str) -> float | None:
        found = resolve(self.broker.controller.client_quotas, CONSUMER_BYTE_RATE, user, client_id)
        if found is None:
            return None
        return found[0] * (self.samples - 1) * self.window_ms / 1000.0

    async def run(self, handler, ctx, body: dict, request_size: int):
        """Run a handler under the quotas of its client."""
        api = ctx.api_key
        if api in EXEMPT:
            return await handler(ctx, body)
        conn = ctx.connection
        principal = getattr(conn, "principal", None)
        user = str(getattr(principal, "name", principal) or ANONYMOUS)
        client_id = ctx.client_id or ""
        if api == FETCH:
            cap = self.max_fetch_bytes(user, client_id)
            if cap is not None and body.get("max_bytes", 0x7FFFFFFF) > cap:
                body = dict(body, max_bytes=max(1, int(cap)))
        timed = _Timed(handler(ctx, body))
        response = await timed
        now = self.broker.now_ms()
        bandwidth, kind = 0, REQUEST_PERCENTAGE
        if api == PRODUCE:
            bandwidth = self.record(PRODUCER_BYTE_RATE, user, client_id, request_size, now)
            kind = PRODUCER_BYTE_RATE
        elif api == FETCH and response is not None:
            fetched = _record_bytes(response)
            bandwidth = self.record(CONSUMER_BYTE_RATE, user, client_id, fetched, now)
            kind = CONSUMER_BYTE_RATE
        request = self.record(REQUEST_PERCENTAGE, user, client_id, timed.elapsed * 100.0, now)
        throttle = max(bandwidth, request)
        if throttle <= 0:
            return response
        self.throttled[kind if bandwidth >= request else REQUEST_PERCENTAGE] += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("throttling api %d of user=%s client_id=%s for %d ms", api, user, client_id, throttle)
        if api == FETCH and response is not None:
            # Kafka answers a throttled fetch with no data, and does not count the data it dropped.
            self.unrecord(CONSUMER_BYTE_RATE, user, client_id, fetched, now)
            undo = response.get("_fetch_session_undo")  # fetch_session.UNDO_KEY: unsent stays unsent
            if undo is not None:
                undo()
            response = {"throttle_time_ms": throttle, "error_code": ErrorCode.NONE,
                        "session_id": response.get("session_id", 0), "responses": []}
        elif isinstance(response, dict) and "throttle_time_ms" in response:
            response["throttle_time_ms"] = max(response["throttle_time_ms"] or 0, throttle)
        if ctx.api_version >= CLIENT_THROTTLES_FROM.get(api, 0) and conn is not None and hasattr(conn, "mute_for"):
            conn.mute_for(throttle / 1000.0)
        else:
            await asyncio.sleep(throttle / 1000.0)
        return response
