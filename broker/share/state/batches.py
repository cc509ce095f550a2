"""Combining the state batches of successive writes, as Kafka's share coordinator does.

The rule (Kafka's PersisterStateBatchCombiner, stated as what it computes): batches that end before the
start offset are dropped and a batch the start offset cuts keeps only its part from the start offset on;
then, for every offset, the batch covering it with the highest (delivery count, delivery state) wins, and
neighbouring offsets with the same (count, state) form one batch.  A share partition's records only ever
move up that order (a delivery count grows when a record is acquired; ACKNOWLEDGED 2 and ARCHIVED 4 rank
above AVAILABLE 0), so combining a write with the state so far never undoes a later change.

The result is sorted and non-overlapping.  Lists that already are (the state so far, and a share
partition's write) are combined in one linear pass; any other list is first put in that form by a
sweep over its batch boundaries (O(n log n) in the number of batches, whatever the offsets).
"""

from __future__ import annotations

import heapq
from typing import Iterable

from .records import Batch


def combine(so_far: Iterable[Batch], new: Iterable[Batch], start_offset: int) -> list[Batch]:
    a = _pruned(so_far, start_offset)
    b = _pruned(new, start_offset)
    if not _ordered(a):
        a = _sweep(a)
    if not _ordered(b):
        b = _sweep(b)
    if not a:
        return _coalesced(b)
    if not b:
        return _coalesced(a)
    return _merge(a, b)


def _pruned(batches: Iterable[Batch], start_offset: int) -> list[Batch]:
    out = []
    for b in batches:
        if start_offset != -1:
            if b.last_offset < start_offset:
                continue
            if b.first_offset < start_offset:
                b = Batch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        if b.first_offset <= b.last_offset:
            out.append(b)
    return out


def _ordered(batches: list[Batch]) -> bool:
    """Sorted and non-overlapping (what every combined list, and a share partition's write, is)."""
    return all(x.last_offset < y.first_offset for x, y in zip(batches, batches[1:]))


def _coalesced(batches: list[Batch]) -> list[Batch]:
    out: list[Batch] = []
    for b in batches:
        _emit(out, b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
    return out


def _emit(out: list[Batch], first: int, last: int, state: int, count: int) -> None:
    if out:
        prev = out[-1]
        if prev.last_offset + 1 == first and prev.delivery_count == count and prev.delivery_state == state:
            out[-1] = Batch(prev.first_offset, last, state, count)
            return
    out.append(Batch(first, last, state, count))


def _merge(a: list[Batch], b: list[Batch]) -> list[Batch]:
    """Two sorted, non-overlapping lists: one pass, the better (count, state) where they overlap."""
    out: list[Batch] = []
    i = j = 0
    ha, hb = a[0], b[0]
    while ha is not None or hb is not None:
        if hb is None or (ha is not None and ha.last_offset < hb.first_offset):
            _emit(out, ha.first_offset, ha.last_offset, ha.delivery_state, ha.delivery_count)
            i += 1
            ha = a[i] if i < len(a) else None
            continue
        if ha is None or hb.last_offset < ha.first_offset:
            _emit(out, hb.first_offset, hb.last_offset, hb.delivery_state, hb.delivery_count)
            j += 1
            hb = b[j] if j < len(b) else None
            continue
        # they overlap: first the part only one of them covers, then the common part
        if ha.first_offset != hb.first_offset:
            lo, hi = (ha, hb) if ha.first_offset < hb.first_offset else (hb, ha)
            _emit(out, lo.first_offset, hi.first_offset - 1, lo.delivery_state, lo.delivery_count)
            rest = Batch(hi.first_offset, lo.last_offset, lo.delivery_state, lo.delivery_count)
            if lo is ha:
                ha = rest
            else:
                hb = rest
            continue
        end = min(ha.last_offset, hb.last_offset)
        win = ha if (ha.delivery_count, ha.delivery_state) >= (hb.delivery_count, hb.delivery_state) else hb
        _emit(out, ha.first_offset, end, win.delivery_state, win.delivery_count)
        if ha.last_offset > end:
            ha = Batch(end + 1, ha.last_offset, ha.delivery_state, ha.delivery_count)
        else:
            i += 1
            ha = a[i] if i < len(a) else None
        if hb.last_offset > end:
            hb = Batch(end + 1, hb.last_offset, hb.delivery_state, hb.delivery_count)
        else:
            j += 1
            hb = b[j] if j < len(b) else None
    return out


def _sweep(batches: list[Batch]) -> list[Batch]:
    """Any list (unsorted, overlapping): a sweep over its boundaries, the best open batch winning."""
    if len(batches) < 2:
        return list(batches)
    batches = sorted(batches, key=lambda b: b.first_offset)
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
        if heap:
            _emit(out, lo, hi - 1, -heap[0][1], -heap[0][0])
    return out
