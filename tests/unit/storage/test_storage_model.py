"""A hypothesis state machine: the log against an in-memory model of its records.

Appends, clean and unclean reopens, rolls, time/size retention and DeleteRecords in any order; after
every step the log must serve exactly the model's records from its log start to its end, and
answer offset-by-time queries the way a scan of the model does.
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from minikafka.protocol.records import COMPRESSION_GZIP, read_header
from minikafka.storage import PartitionLog
from storagetest import FakeClock, batch, read_all, records_from

RETENTION_MS = 10_000


class LogModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="storage-model-")
        self.clock = FakeClock()
        self.records: list[tuple[int, bytes, int]] = []  # (offset, value, timestamp)
        self.log_start = 0
        self.leo = 0
        self.log = None
        self.config = None

    @initialize(segment_bytes=st.integers(200, 3000), retention_bytes=st.sampled_from([-1, 1500, 4000]),
                interval=st.sampled_from([0, 100, 4096]))
    def open(self, segment_bytes, retention_bytes, interval):
        self.config = {"segment.bytes": segment_bytes, "retention.ms": RETENTION_MS,
                       "retention.bytes": retention_bytes, "index.interval.bytes": interval}
        self.log = PartitionLog(self.dir, self.config, now_ms=self.clock)

    def teardown(self):
        if self.log is not None:
            for seg in self.log.segments:
                seg.release()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(n=st.integers(1, 6), size=st.integers(0, 200), compressed=st.booleans(),
          ts_skew=st.integers(-3000, 50), advance=st.integers(0, 2000))
    def append(self, n, size, compressed, ts_skew, advance):
        self.clock.advance(advance)
        ts = self.clock.now + ts_skew
        values = [b"%d:" % (self.leo + i) + b"x" * size for i in range(n)]
        info = self.log.append(batch(n, ts=ts, values=values, compression=COMPRESSION_GZIP if compressed else 0))
        assert info.base_offset == self.leo and info.last_offset == self.leo + n - 1
        for i, v in enumerate(values):
            self.records.append((self.leo + i, v, ts + i))
        self.leo += n

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close()
        else:
            for seg in self.log.segments:  # a crash: no flush, no checkpoint, no indexes written
                seg.release()
        self.log = PartitionLog(self.dir, self.config, now_ms=self.clock)
        assert self.log.recovered_bytes_cut == 0

    @rule()
    def roll(self):
        self.log.roll()

    @rule(advance=st.integers(0, 15_000))
    def retention(self, advance):
        self.clock.advance(advance)
        before = self.log_start
        self.log.apply_retention()
        new_start = self.log.log_start_offset
        assert before <= new_start <= self.leo
        deleted = [r for r in self.records if r[0] < new_start]
        if self.config["retention.bytes"] < 0:
            # only time retention: everything deleted was older than retention.ms
            assert all(self.clock.now - ts > RETENTION_MS for _, _, ts in deleted)
        self.records = [r for r in self.records if r[0] >= new_start]
        self.log_start = new_start

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data):
        target = data.draw(st.integers(self.log_start, self.leo))
        assert self.log.delete_records(target) == max(target, self.log_start)
        self.log_start = max(target, self.log_start)
        self.records = [r for r in self.records if r[0] >= self.log_start]

    @invariant()
    def offsets_match(self):
        if self.log is None:
            return
        assert self.log.log_start_offset == self.log_start
        assert self.log.log_end_offset == self.log.high_watermark == self.leo

    @invariant()
    def contents_match(self):
        if self.log is None:
            return
        got = [(r.offset, r.value, r.timestamp) for r in read_all(self.log, max_bytes=700)]
        assert got == self.records

    @rule(data=st.data())
    def time_lookup(self, data):
        if not self.records:
            assert self.log.offset_for_timestamp(0) is None
            return
        lo = min(ts for *_, ts in self.records) - 5
        hi = max(ts for *_, ts in self.records) + 5
        target = data.draw(st.integers(lo, hi))
        expected = next(((o, ts) for o, _, ts in self.records if ts >= target), None)
        assert self.log.offset_for_timestamp(target) == expected
        top = max(ts for *_, ts in self.records)
        assert self.log.max_timestamp_offset() == next((o, ts) for o, _, ts in self.records if ts == top)

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data(), max_bytes=st.integers(0, 600))
    def read_from_any_offset(self, data, max_bytes):
        offset = data.draw(st.integers(self.log_start, self.leo - 1))
        views = self.log.read(offset, max_bytes)
        got = records_from(views)
        assert got[0].offset <= offset <= got[-1].offset
        first_batch = read_header(views[0]).size
        assert sum(len(v) for v in views) <= max(max_bytes, first_batch)


LogModel.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
TestLogModel = LogModel.TestCase


class CompactedLogModel(RuleBasedStateMachine):
    """Keyed writes, tombstones, rolls, compaction and reopens: compaction may drop superseded
    records and expired tombstones, nothing else, and never moves a surviving record."""

    DELETE_RETENTION_MS = 5_000

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="storage-compact-model-")
        self.clock = FakeClock()
        self.config = {"cleanup.policy": "compact", "segment.bytes": 600, "index.interval.bytes": 100,
                       "delete.retention.ms": self.DELETE_RETENTION_MS}
        self.log = PartitionLog(self.dir, self.config, now_ms=self.clock)
        self.written: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset -> (key, value, ts)

    def teardown(self):
        for seg in self.log.segments:
            seg.release()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(keys=st.lists(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), min_size=1, max_size=4),
          tombstone=st.booleans(), compressed=st.booleans())
    def append(self, keys, tombstone, compressed):
        self.clock.advance(100)
        values = [None if tombstone and i == 0 else b"%d" % (self.log.log_end_offset + i) for i in range(len(keys))]
        info = self.log.append(batch(len(keys), ts=self.clock.now, keys=keys, values=values,
                                     compression=COMPRESSION_GZIP if compressed else 0))
        for i, (k, v) in enumerate(zip(keys, values)):
            self.written[info.base_offset + i] = (k, v, self.clock.now + i)

    @rule()
    def roll(self):
        self.log.roll()

    @rule(advance=st.integers(0, 8_000))
    def compact(self, advance):
        self.clock.advance(advance)
        self.log.compact()

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close()
        else:
            for seg in self.log.segments:
                seg.release()
        self.log = PartitionLog(self.dir, self.config, now_ms=self.clock)
        assert self.log.recovered_bytes_cut == 0

    @invariant()
    def only_superseded_records_or_old_tombstones_are_gone(self):
        got = {r.offset: (r.key, r.value, r.timestamp) for r in read_all(self.log)}
        assert self.log.log_end_offset == (max(self.written) + 1 if self.written else 0)
        latest = {}
        for offset in sorted(self.written):
            latest[self.written[offset][0]] = offset
        for offset, record in got.items():
            assert self.written[offset] == record  # never moved, never altered
        for key, offset in latest.items():
            k, value, ts = self.written[offset]
            if offset not in got:
                # only a tombstone, and only once it is old enough
                assert value is None and self.clock.now - ts > self.DELETE_RETENTION_MS
        active_base = self.log.active.base_offset
        assert {o for o in self.written if o >= active_base} <= set(got)


CompactedLogModel.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                               suppress_health_check=[HealthCheck.too_slow])
TestCompactedLogModel = CompactedLogModel.TestCase
