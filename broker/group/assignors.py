"""Server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range`` (Kafka's names).

An assignor is a pure function: members (id -> subscribed topic ids), the topics' partition counts and
the previous target assignment in, a new target assignment (member id -> topic id -> partitions) out.

* ``uniform`` spreads all partitions of the subscribed topics evenly over the members that subscribe to
  them, keeping each partition where the previous target put it while that member is below its share
  (sticky, so a join moves as few partitions as possible).  Kafka's UniformAssignor balances
  heterogeneous subscriptions more carefully; here a partition goes to the least loaded subscriber.
* ``range`` gives each member a contiguous range of every topic it subscribes to, members sorted by id,
  the first ``partitions % members`` one partition more (co-partitioned topics land together).
"""

from __future__ import annotations

import uuid
from typing import Callable

Assignment = dict[uuid.UUID, set[int]]


def uniform(members: dict[str, set[uuid.UUID]], partitions: dict[uuid.UUID, int],
            previous: dict[str, Assignment]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {m: {} for m in members}
    load = {m: 0 for m in members}
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in sorted(members):
        for t in members[m]:
            if t in partitions:
                subscribers.setdefault(t, []).append(m)
    total = sum(partitions[t] for t in subscribers)
    eligible = len([m for m in members if any(t in subscribers for t in members[m])]) or 1
    floor, extra = divmod(total, eligible)  # ``extra`` members may hold floor + 1
    # First pass: stickiness.  Previous owners keep up to ``floor``, then the first ``extra`` of them
    # one more.
    unassigned: list[tuple[uuid.UUID, int]] = []
    over: list[tuple[uuid.UUID, int, str]] = []
    for t in sorted(subscribers, key=str):
        for p in range(partitions[t]):
            owner = next((m for m in subscribers[t] if p in previous.get(m, {}).get(t, ())), None)
            if owner is not None and load[owner] < floor:
                result[owner].setdefault(t, set()).add(p)
                load[owner] += 1
            elif owner is not None:
                over.append((t, p, owner))
            else:
                unassigned.append((t, p))
    for t, p, owner in over:
        if load[owner] == floor and extra > 0:
            result[owner].setdefault(t, set()).add(p)
            load[owner] += 1
            extra -= 1
        else:
            unassigned.append((t, p))
    # Second pass: the rest to the least loaded subscriber.
    for t, p in unassigned:
        owner = min(subscribers[t], key=lambda m: (load[m], m))
        result[owner].setdefault(t, set()).add(p)
        load[owner] += 1
    return result


def range_(members: dict[str, set[uuid.UUID]], partitions: dict[uuid.UUID, int],
           previous: dict[str, Assignment]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {m: {} for m in members}
    topics = {t for subscribed in members.values() for t in subscribed if t in partitions}
    for t in topics:
        subs = sorted(m for m in members if t in members[m])
        count = partitions[t]
        base, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = base + (1 if i < extra else 0)
            if n:
                result[m][t] = set(range(start, start + n))
            start += n
    return result


ASSIGNORS: dict[str, Callable] = {"uniform": uniform, "range": range_}
