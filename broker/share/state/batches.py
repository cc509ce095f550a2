"""Combining the state batches of successive writes, as Kafka's share coordinator does.

The rule (Kafka's PersisterStateBatchCombiner, stated as what it computes): batches that end before the
start offset are dropped and a batch the start offset cuts keeps only its part from the start offset on;
then, for every offset, the batch covering it with the highest (delivery count, delivery state) wins, and
neighbouring offsets with the same (count, state) form one batch.  A share partition's records only ever
move up that order (a delivery count grows when a record is acquired; ACKNOWLEDGED 2 and ARCHIVED 4 rank
above AVAILABLE 0), so combining a write with the state so far never undoes a later change.

The result is sorted and non-overlapping.  ``combine`` is a sweep over the batch boundaries:
O(n log n) in the number of batches, whatever the offsets.
"""

from __future__ import annotations

import heapq
from typing import Iterable

from .records import Batch


def combine(so_far: Iterable[Batch], new: Iterable[Batch], start_offset: int) -> list[Batch]:
    batches = []
    for b in list(so_far) + list(new):
        if start_offset != -1:
            if b.last_offset < start_offset:
                continue
            if b.first_offset < start_offset:
                b = Batch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        if b.first_offset <= b.last_offset:
            batches.append(b)
    if len(batches) < 2:
        return batches
    # Sweep: at each boundary the winner is the best batch still open.
    batches.sort(key=lambda b: b.first_offset)
    points = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    out: list[Batch] = []
    heap: list[tuple[int, int, int, int]] = []  # (-count, -state, -last, index)
    i = 0
    for lo, hi in zip(points, points[1:]):
        while i < len(batches) and batches[i].first_offset <= lo:
            b = batches[i]
            heapq.heappush(heap, (-b.delivery_count, -b.delivery_state, -b.last_offset, i))
            i += 1
        while heap and -heap[0][2] < lo:
            heapq.heappop(heap)
        if not heap:
            continue
        count, state = -heap[0][0], -heap[0][1]
        last = hi - 1
        if out and out[-1].last_offset + 1 == lo and out[-1].delivery_count == count \
                and out[-1].delivery_state == state:
            out[-1] = Batch(out[-1].first_offset, last, state, count)
        else:
            out.append(Batch(lo, last, state, count))
    return out
