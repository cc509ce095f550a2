"""read_range's edge cases against a scripted fake consumer (no broker, no Spark)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from minikafka.pipeline.client import KafkaReadError, read_range
from minikafka.pipeline.options import OffsetRange, parse_source_options
from minikafka.pipeline.source import _arrow_schema, source_schema

SCHEMA = _arrow_schema(source_schema(True))


class Err:
    def __init__(self, code, fatal=False):
        self._code, self._fatal = code, fatal

    def code(self):
        return self._code

    def fatal(self):
        return self._fatal

    def str(self):
        return f"error {self._code}"


class Msg:
    def __init__(self, offset, error=None):
        self._offset, self._error = offset, error

    def error(self):
        return self._error

    def offset(self):
        return self._offset

    def key(self):
        return None if self._error else b"k%d" % self._offset

    def value(self):
        return b"v%d" % self._offset

    def timestamp(self):
        return (1, 1_700_000_000_000 + self._offset)

    def headers(self):
        return [("n", b"%d" % self._offset)] if self._offset % 2 else None


def eof(offset):
    return Msg(offset, Err(KafkaError._PARTITION_EOF))


class FakeConsumer:
    """Replays scripted consume() results, then returns nothing; advances a fake clock."""

    def __init__(self, script, clock, low=0):
        self.script = list(script)
        self.clock = clock
        self.low = low
        self.assigned = []
        self.calls = 0
        self.closed = False

    def assign(self, tps):
        self.assigned.append([(tp.topic, tp.partition, tp.offset) for tp in tps])

    def consume(self, num_messages, timeout):
        self.calls += 1
        assert self.calls < 100, "read_range kept polling"
        self.clock.now += timeout
        return self.script.pop(0) if self.script else []

    def get_watermark_offsets(self, tp, timeout, cached):
        return (self.low, 1000)

    def close(self):
        self.closed = True


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def run(script, rng, low=0, **options):
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                 "kafkaConsumer.pollTimeoutMs": "3000", **options},
                                streaming=False)
    clock = Clock()
    consumer = FakeConsumer(script, clock, low)
    batches = list(read_range(opts, rng, SCHEMA, clock=clock,
                              new_consumer=lambda _opts: consumer))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    return offsets, batches, consumer


def test_a_fetch_straddling_both_ends_is_cut_to_the_range():
    offsets, batches, consumer = run([[Msg(o) for o in range(3, 11)]], OffsetRange("t", 0, 5, 8))
    assert offsets == [5, 6, 7]
    assert consumer.assigned == [[("t", 0, 5)]] and consumer.calls == 1 and consumer.closed
    b = batches[0]
    assert b.schema == SCHEMA
    assert b.column("value").to_pylist() == [b"v5", b"v6", b"v7"]
    assert b.column("partition").to_pylist() == [0, 0, 0]
    assert b.column("timestampType").to_pylist() == [0, 0, 0]
    assert b.column("timestamp").cast("int64").to_pylist()[0] == (1_700_000_000_000 + 5) * 1000
    assert b.column("headers").to_pylist()[0] == [{"key": "n", "value": b"5"}]
    assert b.column("headers").to_pylist()[1] is None


def test_a_range_ending_on_a_gap_ends_at_the_eof_event():
    # Offsets 3 and 4 are transaction markers: no record carries them.
    offsets, _, consumer = run([[Msg(0), Msg(1)], [Msg(2), eof(5)]], OffsetRange("t", 0, 0, 5))
    assert offsets == [0, 1, 2] and consumer.calls == 2


def test_a_log_shorter_than_planned_is_data_loss():
    with pytest.raises(KafkaReadError, match="ends at offset 2 but the batch was planned up to 5"):
        run([[Msg(0), Msg(1), eof(2)]], OffsetRange("t", 0, 0, 5))
    offsets, _, _ = run([[Msg(0), Msg(1), eof(2)]], OffsetRange("t", 0, 0, 5),
                        failOnDataLoss="false")
    assert offsets == [0, 1]


def test_deleted_offsets_fail_or_are_skipped():
    gone = [[Msg(0, Err(KafkaError._AUTO_OFFSET_RESET))]]
    with pytest.raises(KafkaReadError, match="offset 0 of t-0 is no longer available"):
        run(gone, OffsetRange("t", 0, 0, 6))
    offsets, _, consumer = run(gone + [[Msg(4), Msg(5)]], OffsetRange("t", 0, 0, 6), low=4,
                               failOnDataLoss="false")
    assert offsets == [4, 5]
    assert consumer.assigned == [[("t", 0, 0)], [("t", 0, 4)]]


def test_no_progress_fails_after_the_poll_timeout():
    with pytest.raises(KafkaReadError, match=r"no records from t-1 for 3000 ms while reading "
                                             r"\[2, 9\).*pollTimeoutMs"):
        run([[Msg(0), Msg(1)]], OffsetRange("t", 1, 0, 9))


def test_transient_errors_are_left_to_librdkafka():
    offsets, _, _ = run([[Msg(0), Msg(0, Err(KafkaError._TRANSPORT))], [Msg(1)]],
                        OffsetRange("t", 0, 0, 2))
    assert offsets == [0, 1]
    with pytest.raises(KafkaReadError, match="failed: error"):
        run([[Msg(0, Err(KafkaError._FATAL, fatal=True))]], OffsetRange("t", 0, 0, 2))


def test_an_empty_range_opens_no_consumer():
    def refuse(_opts):
        raise AssertionError("no consumer expected")

    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"},
                                streaming=False)
    assert list(read_range(opts, OffsetRange("t", 0, 4, 4), SCHEMA, new_consumer=refuse)) == []
