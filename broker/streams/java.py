"""Iteration orders of the Java collections Kafka's streams coordinator uses, where they show.

Kafka's messages list topics in the order a ``HashMap``/``HashSet`` of strings iterates them ("Internal
topics are missing: a, b"), and its sticky assignor breaks ties between equally loaded processes and
members by the order of a ``java.util.PriorityQueue`` filled from such maps.  To answer as Kafka 4.2
does, those orders are computed here from their definitions: ``String.hashCode`` over UTF-16 code units,
the spread ``h ^ (h >>> 16)``, power-of-two tables that double past a 0.75 load factor (a bucket keeps
insertion order, also across a resize), and the binary heap's sift-up / sift-down.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Iterable, TypeVar

T = TypeVar("T")


def string_hash(s: str) -> int:
    """``java.lang.String.hashCode`` as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def table_size_for(capacity: int) -> int:
    n = 1
    while n < capacity:
        n <<= 1
    return max(n, 1)


def hashmap_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """The iteration order of a ``HashMap<String, ?>`` (or ``HashSet``) into which ``keys`` were put in
    this order (duplicates ignored), created with ``initial_capacity``."""
    seen: dict[str, None] = {}
    for k in keys:
        seen.setdefault(k, None)
    cap = table_size_for(initial_capacity)
    size = 0
    for _ in seen:
        size += 1
        if size > cap * 0.75:
            cap *= 2
    order = {k: i for i, k in enumerate(seen)}
    return sorted(seen, key=lambda k: (_spread(string_hash(k)) & (cap - 1), order[k]))


def hashset_copy_capacity(n: int) -> int:
    """The capacity ``new HashSet<>(collection)`` starts with."""
    return max(int(n / 0.75) + 1, 16)


class PriorityQueue(Generic[T]):
    """``java.util.PriorityQueue`` with a comparator key: the same binary heap, so that equal elements
    come out in Java's order."""

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._key = key
        self._heap: list[T] = []

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, item: T) -> None:
        heap, key = self._heap, self._key
        k = len(heap)
        heap.append(item)
        x = key(item)
        while k > 0:
            parent = (k - 1) >> 1
            if x >= key(heap[parent]):
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = item

    def add_all(self, items: Iterable[T]) -> None:
        for item in items:
            self.add(item)

    def poll(self) -> T | None:
        heap, key = self._heap, self._key
        if not heap:
            return None
        result = heap[0]
        last = heap.pop()
        n = len(heap)
        if n:
            x = key(last)
            k = 0
            half = n >> 1
            while k < half:
                child = 2 * k + 1
                right = child + 1
                if right < n and key(heap[child]) > key(heap[right]):
                    child = right
                if x <= key(heap[child]):
                    break
                heap[k] = heap[child]
                k = child
            heap[k] = last
        return result
