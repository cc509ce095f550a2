"""Helpers for the storage tests: a fake clock, batch builders and record-level views of a log."""

from __future__ import annotations

from minikafka.protocol.records import build_batch, iter_batches, iter_records
from minikafka.storage import PartitionLog


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(n: int = 1, ts: int = 1_700_000_000_000, key: bytes | None = b"k", value: bytes = b"v" * 20,
          compression: int = 0, keys=None, values=None, **kw) -> bytearray:
    """A batch of ``n`` records; timestamps ts, ts+1, ...; keys/values may be given per record."""
    recs = []
    for i in range(n):
        k = keys[i] if keys is not None else (None if key is None else key + str(i).encode())
        v = values[i] if values is not None else value
        recs.append((k, v, [], ts + i))
    return build_batch(recs, compression=compression, **kw)


def records_from(views) -> list:
    out = []
    for view in views:
        for pos, h in iter_batches(view):
            out.extend(iter_records(view[pos:pos + h.size]))
    return out


def read_all(log: PartitionLog, start: int | None = None, max_bytes: int = 1 << 20) -> list:
    """Every record from ``start`` (default: log start) to the end, via the read path."""
    offset = log.log_start_offset if start is None else start
    out = []
    while offset < log.log_end_offset:
        views = log.read(offset, max_bytes)
        if not views:
            break
        recs = records_from(views)
        out.extend(r for r in recs if r.offset >= offset)
        headers = [h for v in views for _, h in iter_batches(v)]
        offset = headers[-1].next_offset
    return out
