"""Clocks and keyed timers for the coordinator.

The state machine never reads the wall clock nor sleeps: it asks a ``Clock`` for the time and a ``Timer``
for callbacks.  A timeout is scheduled under a key; scheduling again under the same key replaces the
previous timeout (Kafka's ``CoordinatorTimer`` semantics), which is how "reset the session timer on
heartbeat" and "extend the initial rebalance delay" are expressed.

``AsyncioTimer`` backs the broker; ``MockTimer`` (with its ``FakeClock``) drives unit tests: ``advance(ms)``
moves time forward and fires every expired timeout in deadline order, setting the clock to each deadline
as it fires, so a test can assert what happens at exactly a timeout and not a millisecond earlier.

In the running broker, coordinators take their timer from the broker-wide timer service
(``broker.timers.scope(name)``, broker/clock.py) and their clock from ``broker`` (``now_ms``), so
the control API's ``clock.advance`` fires their timeouts at once; ``AsyncioTimer`` remains for a
broker object without a timer service.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable, Protocol

from minikafka.broker.clock import KeyedDeadlines

Callback = Callable[[], None]


class Clock(Protocol):
    def now_ms(self) -> int: ...


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def is_scheduled(self, key: Hashable) -> bool: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("a clock does not go backwards")
        self._now = now_ms


class AsyncioTimer:
    """Timeouts on an asyncio event loop (``loop.call_later``)."""

    def __init__(self, loop, on_error: Callable[[BaseException], None] | None = None) -> None:
        self._loop = loop
        self._handles: dict[Hashable, object] = {}
        self._on_error = on_error

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        self.cancel(key)

        def fire() -> None:
            # Only the handle still registered under the key may fire; a replaced one was cancelled.
            self._handles.pop(key, None)
            try:
                callback()
            except Exception as exc:  # a timer callback must not kill the loop's other work
                if self._on_error is not None:
                    self._on_error(exc)
                else:
                    raise

        self._handles[key] = self._loop.call_later(max(delay_ms, 0) / 1000.0, fire)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


class MockTimer:
    """A deterministic timer over a FakeClock, for tests."""

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
