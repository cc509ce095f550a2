"""The broker's one notion of time, and the timer service every timeout runs on.

``BrokerClock.now_ms()`` is epoch milliseconds read off the monotonic clock: anchored to the wall
clock once at start, then advanced by ``time.monotonic_ns``, so an NTP step or a suspended laptop
never moves broker time backwards.  On top of that sits an ``offset`` that only ``advance(ms)``
moves: a test that advances the clock by 45 s sees session timeouts, rebalance timeouts, offset
expiry and retention act as if 45 s had passed, at once.  Timestamps written into records
(LogAppendTime, commit timestamps, metadata records) read this clock too, so retention and offset
expiry judge them consistently.

``TimerService`` keeps keyed timeouts with deadlines in broker time (Kafka's ``CoordinatorTimer``
semantics: scheduling again under a key replaces the previous timeout).  One ``loop.call_at`` is
armed for the earliest deadline; ``advance()`` fires every timeout whose deadline has passed, in
deadline order, without the loop waiting.  ``scope(name)`` hands a coordinator its own key space
with ``cancel_all()`` for its shutdown; a scope satisfies ``Timer``.

The coordinators (group/, txn/) are sans-IO state machines: they never read the wall clock nor
sleep, but ask a ``Clock`` for the time and a ``Timer`` for callbacks (the two protocols below).
In the broker those are the broker (``now_ms``) and a scope of its timer service
(``timer_scope``); unit tests drive them with ``MockTimer`` over a ``FakeClock``, whose
``advance(ms)`` fires every expired timeout in deadline order, setting the clock to each deadline
as it fires, so a test can assert what happens at exactly a timeout and not a millisecond earlier.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from typing import Callable, Hashable, Protocol

log = logging.getLogger("minikafka.clock")

Callback = Callable[[], None]


class Clock(Protocol):
    def now_ms(self) -> int: ...


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def is_scheduled(self, key: Hashable) -> bool: ...


class BrokerClock:
    def __init__(self) -> None:
        self._anchor_ms = time.time_ns() // 1_000_000
        self._mono0 = time.monotonic_ns()
        self.offset_ms = 0
        self._listeners: list[Callable[[int], None]] = []

    def now_ms(self) -> int:
        return self._anchor_ms + (time.monotonic_ns() - self._mono0) // 1_000_000 + self.offset_ms

    def __call__(self) -> float:
        """Seconds, for callers that want ``time.time()``'s shape."""
        return self.now_ms() / 1000.0

    def on_advance(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    def advance(self, ms: int) -> int:
        """Move broker time forward by ``ms`` (>= 0) and let the listeners (timers, maintenance)
        act on the new time; returns the new ``now_ms``."""
        if ms < 0:
            raise ValueError("the broker clock does not go backwards")
        self.offset_ms += int(ms)
        now = self.now_ms()
        for listener in list(self._listeners):
            try:
                listener(now)
            except Exception:
                log.error("clock listener failed", exc_info=True)
        return now


class CallableClock(BrokerClock):
    """A broker clock over a ``() -> seconds`` function (the older ``Broker(clock=time.time)``
    argument, and tests that drive time by hand)."""

    def __init__(self, fn: Callable[[], float]) -> None:
        super().__init__()
        self._fn = fn

    def now_ms(self) -> int:
        return int(self._fn() * 1000) + self.offset_ms


class KeyedDeadlines:
    """Callbacks under keys with deadlines, earliest first; scheduling under a key again replaces
    its entry (Kafka's ``CoordinatorTimer`` semantics).  Replaced and cancelled entries stay in the
    heap until they reach its top, where a sequence number tells them apart from the live one.
    Shared by the broker's timer service and the tests' ``MockTimer``; they differ only in
    how they read the time while firing."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, Callback]] = {}
        self._seq = itertools.count()

    def put(self, key: Hashable, deadline: int, callback: Callback) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def keys(self) -> list[Hashable]:
        return list(self._live)

    def earliest(self) -> int | None:
        """The earliest live deadline, dropping dead entries off the top on the way."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return deadline
            heapq.heappop(self._heap)
        return None

    def pop_due(self, now_ms: int) -> tuple[int, Hashable, Callback] | None:
        """Remove and return the earliest live entry whose deadline is at or before ``now_ms``."""
        deadline = self.earliest()
        if deadline is None or deadline > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        return deadline, key, self._live.pop(key)[2]

    def clear(self) -> None:
        self._live.clear()
        self._heap.clear()


class TimerService:
    def __init__(self, clock: BrokerClock, loop=None,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        self.clock = clock
        self._loop = loop
        self._deadlines = KeyedDeadlines()
        self._handle = None
        self._armed_for: int | None = None
        self._on_error = on_error
        clock.on_advance(lambda _now: self.run_due())

    def bind(self, loop) -> None:
        self._loop = loop
        self._arm()

    # -- the Timer interface -----------------------------------------------------------------

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        deadline = self.clock.now_ms() + max(int(delay_ms), 0)
        self._deadlines.put(key, deadline, callback)
        if self._armed_for is None or deadline < self._armed_for:
            self._arm()

    def cancel(self, key: Hashable) -> None:
        self._deadlines.cancel(key)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._deadlines

    def deadline(self, key: Hashable) -> int | None:
        return self._deadlines.deadline(key)

    def keys(self) -> list[Hashable]:
        return self._deadlines.keys()

    def scope(self, name: str) -> "TimerScope":
        return TimerScope(self, name)

    # -- firing -------------------------------------------------------------------------------

    def run_due(self) -> int:
        """Fire every live timeout whose deadline has passed, earliest first; returns how many."""
        fired = 0
        while (due := self._deadlines.pop_due(self.clock.now_ms())) is not None:
            _, key, callback = due
            fired += 1
            try:
                callback()
            except Exception as exc:  # one failing timeout must not stop the others
                if self._on_error is not None:
                    self._on_error(exc)
                else:
                    log.error("timer %r failed", key, exc_info=exc)
        self._arm()
        return fired

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = None
        if self._loop is None or self._loop.is_closed():
            return
        deadline = self._deadlines.earliest()
        if deadline is not None:
            self._armed_for = deadline
            self._handle = self._loop.call_later(max(deadline - self.clock.now_ms(), 0) / 1000.0, self._on_alarm)

    def _on_alarm(self) -> None:
        self._handle = None
        self._armed_for = None
        self.run_due()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadlines.clear()


class TimerScope:
    """One component's keys on the shared timer service (keys are wrapped with the scope name)."""

    def __init__(self, service: TimerService, name: str) -> None:
        self.service = service
        self.name = name
        self.clock = service.clock

    def now_ms(self) -> int:
        return self.service.clock.now_ms()

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        self.service.schedule((self.name, key), delay_ms, callback)

    def cancel(self, key: Hashable) -> None:
        self.service.cancel((self.name, key))

    def is_scheduled(self, key: Hashable) -> bool:
        return self.service.is_scheduled((self.name, key))

    def deadline(self, key: Hashable) -> int | None:
        return self.service.deadline((self.name, key))

    def keys(self) -> list[Hashable]:
        return [k[1] for k in self.service.keys() if isinstance(k, tuple) and len(k) == 2 and k[0] == self.name]

    def cancel_all(self) -> None:
        for key in self.keys():
            self.cancel(key)


def timer_scope(broker, name: str) -> TimerScope:
    """A coordinator's timer: a scope of the broker's timer service, so that advancing the broker
    clock fires its timeouts at once.  A broker object without the service (a test's stand-in)
    gets a service of its own on its loop."""
    timers = getattr(broker, "timers", None)
    if timers is None:
        timers = TimerService(BrokerClock(), broker.loop,
                              on_error=lambda exc: log.error("%s timer failed", name, exc_info=exc))
    return timers.scope(name)


# -- for tests: time that moves only when told --------------------------------------------------

class FakeClock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("a clock does not go backwards")
        self._now = now_ms


class MockTimer:
    """A deterministic timer over a FakeClock, for the coordinators' unit tests."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self._deadlines = KeyedDeadlines()

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        self._deadlines.put(key, self.clock.now_ms() + max(delay_ms, 0), callback)

    def cancel(self, key: Hashable) -> None:
        self._deadlines.cancel(key)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._deadlines

    def deadline(self, key: Hashable) -> int | None:
        return self._deadlines.deadline(key)

    def keys(self) -> list[Hashable]:
        return self._deadlines.keys()

    def advance(self, ms: int = 0) -> int:
        """Move time forward by ``ms`` and fire expired timeouts in order; returns how many fired."""
        target = self.clock.now_ms() + ms
        fired = 0
        while (due := self._deadlines.pop_due(target)) is not None:
            deadline, _, callback = due
            self.clock.set(max(deadline, self.clock.now_ms()))
            callback()
            fired += 1
        self.clock.set(target)
        return fired
