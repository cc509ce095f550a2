"""The per-partition gauges of /metrics, written as text by PartitionGauges (issue 24), read the
same as prometheus_client's rendering of the same samples, and follow changes between scrapes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from minikafka.broker.http.metrics import PartitionGauges


@dataclass
class FakeLog:
    log_start_offset: int = 0
    log_end_offset: int = 0
    last_stable_offset: int = 0
    size_bytes: int = 0
    segments: list = field(default_factory=lambda: [object()])

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset


@dataclass
class FakeTopic:
    num_partitions: int


class FakeController:
    def __init__(self, logs: dict[tuple[str, int], FakeLog]):
        self.logs = logs
        counts: dict[str, int] = {}
        for topic, partition in logs:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        self.topics = {t: FakeTopic(n) for t, n in counts.items()}

    def log(self, topic, partition):
        return self.logs[(topic, partition)]


class FakeBroker:
    def __init__(self, logs):
        self.controller = FakeController(logs)


def reference(broker) -> bytes:
    """The same samples through prometheus_client's families, as /metrics wrote them before."""
    class Collector:
        def collect(self):
            fams = [GaugeMetricFamily(name, doc, labels=["topic", "partition"]) for name, doc in PartitionGauges.FAMILIES]
            for topic in sorted(broker.controller.topics):
                for p in range(broker.controller.topics[topic].num_partitions):
                    plog = broker.controller.log(topic, p)
                    values = (plog.log_start_offset, plog.log_end_offset, plog.high_watermark,
                              plog.last_stable_offset, plog.size_bytes, len(plog.segments))
                    for fam, value in zip(fams, values):
                        fam.add_metric([topic, str(p)], value)
            yield from fams

    registry = CollectorRegistry()
    registry.register(Collector())
    return generate_latest(registry)


offsets = st.integers(min_value=-1, max_value=2**62)
logs = st.dictionaries(
    st.tuples(st.sampled_from(["a", "orders", "t.x", "t_y", "weird\"name\\"]), st.integers(0, 3)),
    st.builds(FakeLog, offsets, offsets, offsets, st.integers(0, 2**40),
              st.lists(st.just(object()), min_size=1, max_size=3)),
    max_size=12)


@settings(max_examples=200, deadline=None)
@given(logs)
def test_the_text_is_prometheus_clients(partitions):
    # Fill the gaps so every topic's partitions 0..n-1 exist.
    for topic, p in list(partitions):
        for q in range(p):
            partitions.setdefault((topic, q), FakeLog())
    broker = FakeBroker(partitions)
    gauges = PartitionGauges()
    assert gauges.render(broker) == reference(broker)
    assert gauges.render(broker) == reference(broker)  # from the kept lines


def test_lines_follow_changes_and_topics_that_go():
    partitions = {("a", 0): FakeLog(0, 5, 5, 100), ("a", 1): FakeLog(0, 0, 0, 0), ("b", 0): FakeLog(2, 9, 9, 7)}
    broker = FakeBroker(partitions)
    gauges = PartitionGauges()
    first = gauges.render(broker)
    assert b'kafka_log_log_logendoffset{partition="0",topic="a"} 5.0\n' in first
    partitions[("a", 0)].log_end_offset = 7_500_000  # Go's float format from seven digits on
    partitions[("a", 0)].segments.append(object())
    del partitions[("b", 0)]
    broker = FakeBroker(partitions)
    second = gauges.render(broker)
    assert second == reference(broker)
    assert b'kafka_log_log_logendoffset{partition="0",topic="a"} 7.5e+06\n' in second
    assert b'kafka_log_log_numlogsegments{partition="0",topic="a"} 2.0\n' in second
    assert b'topic="b"' not in second


def test_process_metrics_count_descriptors_only_when_due(tmp_path):
    from minikafka.broker.http.metrics import _ProcessCollector

    collector = _ProcessCollector()

    def values():
        return {m.name: m.samples[0].value for m in collector.collect()}

    first = values()
    # prometheus_client's names (a counter family drops its _total suffix in .name)
    assert set(first) == {"process_virtual_memory_bytes", "process_resident_memory_bytes",
                          "process_start_time_seconds", "process_cpu_seconds", "process_open_fds",
                          "process_max_fds"}
    files = [open(tmp_path / f"f{i}", "w") for i in range(20)]
    try:
        collector._fds_until = float("inf")  # a listing still fresh: reused
        assert values()["process_open_fds"] == first["process_open_fds"]
        collector._fds_until = 0.0  # due: counted again
        assert values()["process_open_fds"] >= first["process_open_fds"] + 20
    finally:
        for f in files:
            f.close()


observations = st.lists(st.tuples(st.sampled_from(["Produce", "Fetch", "Metadata"]),
                                  st.floats(min_value=0, max_value=60, allow_nan=False)), max_size=40)


@settings(max_examples=100, deadline=None)
@given(observations)
def test_recorded_counters_and_histograms_read_as_prometheus_clients(seen):
    # The broker records into plain dicts from its start (no prometheus_client until a scrape);
    # the text is prometheus_client's own for the same observations (but for its _created lines).
    import prometheus_client

    from minikafka.broker.http.metrics import LATENCY_BUCKETS, Counter, Histogram, _Recorded

    ours_c = Counter("reqs", "Requests.", ("request",))
    ours_h = Histogram("lat_seconds", "Latency.", ("request",), LATENCY_BUCKETS)
    registry = CollectorRegistry()
    registry.register(_Recorded((ours_c, ours_h)))
    theirs = CollectorRegistry()
    theirs_c = prometheus_client.Counter("reqs", "Requests.", ["request"], registry=theirs)
    theirs_h = prometheus_client.Histogram("lat_seconds", "Latency.", ["request"], buckets=LATENCY_BUCKETS,
                                           registry=theirs)
    for request, value in seen:
        ours_c.inc((request,), 2)
        ours_h.observe((request,), value)
        theirs_c.labels(request).inc(2)
        theirs_h.labels(request).observe(value)

    def lines(r):
        return sorted(line for line in generate_latest(r).decode().splitlines() if "_created" not in line)

    assert lines(registry) == lines(theirs)


@dataclass
class CountedLog(FakeLog):
    changes: int = 0
    reads: int = 0

    @property
    def high_watermark(self) -> int:
        self.reads += 1
        return self.log_end_offset


def test_an_unchanged_log_is_not_read_again_until_the_full_read_is_due():
    now = [0.0]
    partitions = {("a", 0): CountedLog(0, 5, 5, 100), ("a", 1): CountedLog(0, 1, 1, 10),
                  ("b", 0): CountedLog(0, 2, 2, 20)}
    broker = FakeBroker(partitions)
    gauges = PartitionGauges(clock=lambda: now[0])
    assert gauges.render(broker) == reference(broker)
    reads = {k: log.reads for k, log in partitions.items()}
    assert gauges.render(broker) == reference(broker)
    # reference() read each log once more; the gauges read none of them
    assert {k: log.reads for k, log in partitions.items()} == {k: n + 1 for k, n in reads.items()}
    # a counted change: that partition alone is read again, and shows its new values
    partitions[("a", 1)].log_end_offset = 3
    partitions[("a", 1)].changes += 1
    before = {k: log.reads for k, log in partitions.items()}
    text = gauges.render(broker)
    after = {k: log.reads for k, log in partitions.items()}
    assert after == {**before, ("a", 1): before[("a", 1)] + 1}
    assert b'kafka_log_log_logendoffset{partition="1",topic="a"} 3.0\n' in text
    # an uncounted change shows once the full read is due
    partitions[("b", 0)].log_end_offset = 9
    assert b'topic="b"} 9.0' not in gauges.render(broker)
    now[0] += PartitionGauges.FULL_READ_S
    assert gauges.render(broker) == reference(broker)


def test_a_partition_logs_change_count_moves_with_everything_the_gauges_show(tmp_path):
    from minikafka.protocol.records import build_batch
    from minikafka.storage import PartitionLog

    now = [1_000_000]
    log = PartitionLog(str(tmp_path), {"segment.bytes": 200, "retention.ms": 1000}, now_ms=lambda: now[0])
    seen = []

    def step():
        seen.append(log.changes)
        assert len(set(seen)) == len(seen), seen  # every step below moved the count

    step()
    log.append(build_batch([(b"k", b"v" * 100, [], now[0])]))
    step()
    log.append(build_batch([(b"k", b"v" * 100, [], now[0])]))  # rolls: the segment is full
    step()
    log.roll()
    step()
    log.delete_records(1)
    step()
    now[0] += 10_000
    log.apply_retention()
    step()
    log.close()
