"""``GET /metrics``: the broker's metrics in the Prometheus text format (prometheus_client).

Each broker has its own ``CollectorRegistry`` (several brokers may share a process in tests).
Names are Kafka's JMX names translated the way the JMX exporter's common Kafka rules and
kafka_exporter do (``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce``
becomes ``kafka_network_requestmetrics_requests_total{request="Produce"}``); README.md lists them.

Counters and histograms of requests are recorded by three calls in broker/connection.py
(``on_request``, ``on_response``, ``on_sent``); everything else (partition offsets, groups,
lag, connections) is read at scrape time from the broker's public surfaces, so it costs
nothing between scrapes.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left

from minikafka.protocol.specs import API_NAMES

from . import views

PRODUCE, FETCH = 0, 1
# Request latencies span sub-millisecond requests to long polls of several seconds.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)
FSYNC_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)

_perf = time.perf_counter


def _error_names() -> dict[int, str]:
    from minikafka.protocol.errors import ErrorCode

    return {int(e): e.name for e in ErrorCode}


def _count_errors(obj: dict, counts: dict) -> None:
    """Every ``error_code`` in a response body (top level and per topic/partition/...)."""
    for key, value in obj.items():
        if key == "error_code":
            counts[value] = counts.get(value, 0) + 1
        elif type(value) is list:
            for item in value:
                if type(item) is dict:
                    _count_errors(item, counts)


class Counter:
    """A labelled counter kept as a dict (label values -> count).  Recording costs a dict update and
    needs nothing from prometheus_client, which is imported only when /metrics is scraped: the
    counters run from the broker's start, the HTTP application loads with its first request."""

    __slots__ = ("name", "doc", "labelnames", "values")

    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...]) -> None:
        self.name, self.doc, self.labelnames = name, doc, labelnames
        self.values: dict[tuple, float] = {}

    def inc(self, labels: tuple, amount: float = 1) -> None:
        values = self.values
        values[labels] = values.get(labels, 0) + amount

    def total(self) -> float:
        return sum(self.values.values())

    def family(self):
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.doc, labels=list(self.labelnames))
        for labels, value in list(self.values.items()):
            family.add_metric(list(labels), value)
        return family


class Histogram:
    """A labelled histogram kept as bucket counts per label values (see Counter)."""

    __slots__ = ("name", "doc", "labelnames", "buckets", "values")

    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...], buckets: tuple[float, ...]) -> None:
        self.name, self.doc, self.labelnames, self.buckets = name, doc, labelnames, buckets
        self.values: dict[tuple, list] = {}  # labels -> [per-bucket counts (+Inf last), sum]

    def observe(self, labels: tuple, value: float) -> None:
        entry = self.values.get(labels)
        if entry is None:
            entry = self.values[labels] = [[0] * (len(self.buckets) + 1), 0.0]
        entry[0][bisect_left(self.buckets, value)] += 1  # a bucket counts values <= its bound
        entry[1] += value

    def family(self):
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        family = HistogramMetricFamily(self.name, self.doc, labels=list(self.labelnames))
        bounds = [floatToGoString(b) for b in self.buckets] + ["+Inf"]
        for labels, (counts, total) in list(self.values.items()):
            cumulative, running = [], 0
            for bound, count in zip(bounds, counts):
                running += count
                cumulative.append((bound, running))
            family.add_metric(list(labels), cumulative, total)
        return family


class BrokerMetrics:
    """The broker's counters and histograms, recorded from its start (broker/connection.py's three
    hooks and storage's fsync observer), and the /metrics text.  Creating it imports nothing of
    prometheus_client; the first ``render()`` does."""

    def __init__(self, broker):
        self.broker = broker
        self._registry = None
        self._error_name = _error_names()
        self._api_name = dict(API_NAMES)
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests answered, per API and version "
                                "(Kafka: RequestMetrics RequestsPerSec).", ("request", "version"))
        self.errors = Counter("kafka_network_requestmetrics_errors", "Error codes in responses, per API and error "
                              "(Kafka: RequestMetrics ErrorsPerSec; NONE counts error-free ones).",
                              ("request", "error"))
        h = lambda name, doc: Histogram(name, doc, ("request",), LATENCY_BUCKETS)  # noqa
        self.queue_time = h("kafka_network_requestmetrics_requestqueuetime_seconds",
                            "From the request's arrival to its handler's start (Kafka: RequestQueueTimeMs).")
        self.local_time = h("kafka_network_requestmetrics_localtime_seconds",
                            "Handler time, long-poll and join waits included (Kafka: LocalTimeMs + RemoteTimeMs).")
        self.send_time = h("kafka_network_requestmetrics_responsesendtime_seconds",
                           "From the handler's end to the response written, ordering waits included "
                           "(Kafka: ResponseQueueTimeMs + ResponseSendTimeMs).")
        self.total_time = h("kafka_network_requestmetrics_totaltime_seconds", "Arrival to response written "
                            "(Kafka: TotalTimeMs).")
        t = lambda name, doc: Counter(name, doc, ("topic",))  # noqa
        self.bytes_in = t("kafka_server_brokertopicmetrics_bytesin", "Record bytes appended by produce requests "
                          "(Kafka: BrokerTopicMetrics BytesInPerSec).")
        self.messages_in = t("kafka_server_brokertopicmetrics_messagesin", "Records appended by produce requests "
                             "(Kafka: MessagesInPerSec).")
        self.bytes_out = t("kafka_server_brokertopicmetrics_bytesout", "Record bytes sent in fetch responses "
                           "(Kafka: BytesOutPerSec).")
        self.messages_out = t("kafka_server_brokertopicmetrics_messagesout", "Records in the batches sent in fetch "
                              "responses (whole batches, so it can exceed what the consumer asked for).")
        self.fsync = Histogram("kafka_log_logflushstats_logflush_seconds", "fsync of partition logs "
                               "(Kafka: LogFlushStats LogFlushRateAndTimeMs).", (), FSYNC_BUCKETS)
        self._fetch_waits = Histogram("kafka_server_delayedoperationpurgatory_wait_seconds",
                                      "Time fetches spent parked waiting for data (long polls that waited).",
                                      ("delayedOperation",), LATENCY_BUCKETS)
        self._recorded = (self.requests, self.errors, self.queue_time, self.local_time, self.send_time,
                          self.total_time, self.bytes_in, self.messages_in, self.bytes_out, self.messages_out,
                          self.fsync, self._fetch_waits)
        self.partitions = PartitionGauges()
        self._fsync_lock = threading.Lock()
        self._loop = broker.loop

    @property
    def registry(self):
        """The prometheus_client registry of /metrics (built, and prometheus_client imported, on first use)."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry, PlatformCollector

            registry = CollectorRegistry(auto_describe=True)
            registry.register(_ProcessCollector())
            PlatformCollector(registry=registry)
            registry.register(_Recorded(self._recorded))
            registry.register(_ScrapeCollector(self.broker))
            self._registry = registry
        return self._registry

    # -- hooks called by broker/connection.py: keep them cheap -------------------------------

    def on_request(self, slot, request) -> None:
        # The handler starts right after this call (broker/connection.py runs its first step at
        # once), so the request's queue time is what it waited for a free slot: none.
        slot.t0 = slot.ts = _perf()
        if request.api_key == PRODUCE:
            slot.m = _produce_sizes(request.body)

    def on_response(self, slot, body) -> None:
        slot.t1 = _perf()
        api = slot.api_key
        name = self._api_name.get(api) or f"Api{api}"
        if body is not None:
            counts: dict = {}
            _count_errors(body, counts)
            for code, n in counts.items():
                self.errors.inc((name, self._error_name.get(code) or str(code)), n)
            if api == FETCH:
                self._fetched(body)
            elif api == PRODUCE and slot.m:
                self._produced(slot.m, body)
        elif api == PRODUCE and slot.m:  # acks=0: no response, count what was sent
            for topic, _, nbytes, nrecords in slot.m:
                topic = self._topic_name(topic)
                self.bytes_in.inc((topic,), nbytes)
                self.messages_in.inc((topic,), nrecords)

    def on_sent(self, slot) -> None:
        t0 = getattr(slot, "t0", None)
        if t0 is None:
            return  # an answer the broker made up (ApiVersions fallback)
        now = _perf()
        name = self._api_name.get(slot.api_key) or f"Api{slot.api_key}"
        self.requests.inc((name, str(slot.api_version)))
        start = slot.ts or t0
        t1 = slot.t1 or now
        labels = (name,)
        self.queue_time.observe(labels, start - t0)
        self.local_time.observe(labels, t1 - start)
        self.send_time.observe(labels, now - t1)
        self.total_time.observe(labels, now - t0)
        if slot.api_key == FETCH and t1 - start > 0.002:
            self._fetch_waits.observe(("Fetch",), t1 - start)

    def on_fsync(self, seconds: float) -> None:
        # Called from storage's flusher thread too; the other hooks run on the loop only.
        with self._fsync_lock:
            self.fsync.observe((), seconds)

    def _fetched(self, body: dict) -> None:
        for t in body.get("responses") or ():
            nbytes = nrecords = 0
            for p in t["partitions"]:
                records = p.get("records")
                if records and type(records) is list:
                    for chunk in records:
                        nbytes += len(chunk)
                        nrecords += _records_in(chunk)
            if nbytes:
                topic = (t["topic"],)
                self.bytes_out.inc(topic, nbytes)
                self.messages_out.inc(topic, nrecords)

    def _topic_name(self, topic) -> str:
        if isinstance(topic, str):
            return topic
        info = self.broker.controller.topic_by_id(topic) if topic is not None else None
        return info.name if info is not None else str(topic)

    def _produced(self, sizes: list, body: dict) -> None:
        ok = {(t["topic_id"] if "topic_id" in t else t["name"], p["index"])
              for t in body.get("responses") or () for p in t["partition_responses"] if not p["error_code"]}  # NONE
        for topic, index, nbytes, nrecords in sizes:
            if (topic, index) in ok:
                topic = self._topic_name(topic)
                self.bytes_in.inc((topic,), nbytes)
                self.messages_in.inc((topic,), nrecords)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry) + self.partitions.render(self.broker)


def _produce_sizes(body: dict) -> list:
    out = []
    for t in body.get("topic_data") or ():
        for p in t.get("partition_data") or ():
            records = p.get("records")
            if records is not None and len(records) >= 61:
                # A v2 batch: record count is the int32 at byte 57.
                # Produce v13 names the topic by id only (resolved to its name when counted).
                topic = t["name"] if "name" in t else t.get("topic_id")
                out.append((topic, p["index"], len(records), int.from_bytes(records[57:61], "big")))
    return out


def _records_in(chunk) -> int:
    """Records in the whole v2 batches of a fetched chunk (headers only, nothing decoded)."""
    n = 0
    pos = 0
    size = len(chunk)
    while pos + 61 <= size:
        length = int.from_bytes(chunk[pos + 8:pos + 12], "big")
        n += int.from_bytes(chunk[pos + 57:pos + 61], "big")
        pos += 12 + length
    return n


class _Recorded:
    """The recorded counters and histograms as prometheus_client families, at scrape time."""

    def __init__(self, recorded) -> None:
        self._recorded = recorded

    def describe(self):
        return []

    def collect(self):
        for metric in self._recorded:
            yield metric.family()


class _ScrapeCollector:
    """Gauges computed when /metrics is scraped."""

    def __init__(self, broker):
        self.broker = broker

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        broker = self.broker

        def gauge(name, doc, labels=()):
            return GaugeMetricFamily(name, doc, labels=list(labels))

        conns = gauge("kafka_server_socketservermetrics_connection_count", "Open client connections "
                      "(Kafka: socket-server-metrics connection-count).")
        conns.add_metric([], len(broker.connections))
        yield conns
        pending = gauge("kafka_network_requestchannel_requestqueuesize", "Requests received and not yet answered "
                        "(Kafka: RequestChannel RequestQueueSize).")
        pending.add_metric([], sum(c.in_flight for c in list(broker.connections)))
        yield pending
        waiting = gauge("kafka_server_delayedoperationpurgatory_purgatorysize", "Delayed operations waiting "
                        "(Kafka: DelayedOperationPurgatory PurgatorySize): Fetch = fetches parked for data; "
                        "Rebalance = classic groups whose rebalance waits for members to (re)join, one per group "
                        "like Kafka's DelayedJoin whatever the JoinGroups it holds; Produce = produces waiting for "
                        "replication, always 0 with one replica.", ["delayedOperation"])
        # acks=-1 completes on the local append (one replica), as Kafka's produce purgatory does
        # when the ISR is the leader alone; the series exists so dashboards find it.
        waiting.add_metric(["Produce"], 0)
        waiting.add_metric(["Fetch"], _parked_fetches(broker))
        groups = views.groups(broker)
        waiting.add_metric(["Rebalance"], sum(1 for g in groups if g["group_state"] == "PreparingRebalance"))
        yield waiting
        uptime = gauge("minikafka_uptime_seconds", "Seconds since the broker started.")
        uptime.add_metric([], max(broker.clock() - broker.started_at, 0.0))
        yield uptime
        ready = gauge("minikafka_ready", "1 when the broker listens and every coordinator is loaded.")
        ready.add_metric([], 1.0 if views.coordinators_loaded(broker) else 0.0)
        yield ready

        if broker.controller is None:
            return
        topics = gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics (Kafka: GlobalTopicCount).")
        topics.add_metric([], len(broker.controller.topics))
        yield topics
        # The per-partition gauges are written by PartitionGauges (BrokerMetrics.render), not here.
        count = gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions "
                      "(Kafka: GlobalPartitionCount).")
        count.add_metric([], sum(info.num_partitions for info in broker.controller.topics.values()))
        yield count

        by_state = gauge("kafka_coordinator_group_groupmetadatamanager_numgroups", "Groups per state (Kafka: "
                         "GroupMetadataManager NumGroupsStable, NumGroupsEmpty, ...).", ["state"])
        members = gauge("kafka_consumergroup_members", "Members of a group (kafka_exporter).", ["consumergroup"])
        current = gauge("kafka_consumergroup_current_offset", "Committed offset (kafka_exporter).",
                        ["consumergroup", "topic", "partition"])
        lag = gauge("kafka_consumergroup_lag", "High watermark minus committed offset, computed by the broker "
                    "(kafka_exporter's name).", ["consumergroup", "topic", "partition"])
        lag_sum = gauge("kafka_consumergroup_lag_sum", "Lag summed over a group's partitions (kafka_exporter).",
                        ["consumergroup"])
        states: dict[str, int] = {s: 0 for s in ("PreparingRebalance", "CompletingRebalance", "Stable", "Empty",
                                                 "Dead")}
        for g in groups:
            gid = g["group_id"]
            if g.get("group_type") == "share":
                continue  # share groups have their own gauges (kafka_sharegroup_*, below)
            states[g["group_state"]] = states.get(g["group_state"], 0) + 1
            desc = views.describe_group(broker, gid)
            members.add_metric([gid], len(desc["members"]) if desc else 0)
            total = 0
            for row in views.group_lag(broker, gid):
                labels = [gid, row["topic"], str(row["partition"])]
                current.add_metric(labels, row["committed_offset"])
                lag.add_metric(labels, row["lag"])
                total += row["lag"]
            lag_sum.add_metric([gid], total)
        for state, n in states.items():
            by_state.add_metric([state], n)
        yield from (by_state, members, current, lag, lag_sum)
        from minikafka.broker.share.operator import metric_families as share_group_families

        yield from share_group_families(broker)


class _ProcessCollector:
    """The standard process metrics (the names of prometheus_client's ProcessCollector: CPU, memory,
    start time, open and maximum descriptors), with the open-descriptor count refreshed only as
    often as it is cheap.  Counting means listing /proc/self/fd, a few us per descriptor, and every
    partition keeps its segment files open (~35 ms per scrape with 10,000 partitions).  A count is
    reused until 100 times its listing's duration has passed, so listing costs at most 1% of the
    time; with few descriptors that is every scrape."""

    def __init__(self) -> None:
        import os

        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._boot = 0.0
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    self._boot = float(line.split()[1])
        self._fds = 0.0
        self._fds_until = 0.0

    def describe(self):
        return []

    def collect(self):
        import os

        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with open("/proc/self/stat", "rb") as f:
            parts = f.read().rsplit(b")", 1)[-1].split()
        yield GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", value=float(parts[20]))
        yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                                value=float(parts[21]) * self._page)
        yield GaugeMetricFamily("process_start_time_seconds", "Start time of the process since unix epoch in "
                                "seconds.", value=float(parts[19]) / self._ticks + self._boot)
        yield CounterMetricFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                                  value=(float(parts[11]) + float(parts[12])) / self._ticks)
        now = _perf()
        if now >= self._fds_until:
            self._fds = float(len(os.listdir("/proc/self/fd")))
            self._fds_until = now + 100 * (_perf() - now)
        yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", value=self._fds)
        with open("/proc/self/limits", "rb") as f:
            for line in f:
                if line.startswith(b"Max open files"):
                    yield GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.",
                                            value=float(line.split()[3]))
                    break


class PartitionGauges:
    """The six gauges of every partition, written as exposition text directly.

    prometheus_client's families cost ~28 us per partition and scrape (a Sample per value, then
    label escaping and float formatting per sample): a quarter of a core at one scrape per second
    with 10,000 partitions.  Here each partition keeps its lines from the previous scrape with the
    values they show, and only a partition whose values changed is formatted again; an idle
    partition costs reading its six values.  The text is what prometheus_client writes for the
    same samples (labels sorted, values as floats), so parsers and tests see no difference.

    Reading the six values of 10,000 partitions (each log's objects visited, its transaction
    index asked for the LSO) still cost ~25-45 ms per scrape (issue 24), so a partition whose log
    has not changed since the last scrape (its ``changes`` count) keeps its lines without being
    read; every partition is read again at least every ``FULL_READ_S``.
    """

    FAMILIES = (
        ("kafka_log_log_logstartoffset", "First offset in the log (Kafka: Log LogStartOffset)."),
        ("kafka_log_log_logendoffset", "Next offset to be written (Kafka: Log LogEndOffset)."),
        ("kafka_cluster_partition_highwatermark", "High watermark."),
        ("kafka_cluster_partition_laststableoffset", "Last stable offset (read_committed bound)."),
        ("kafka_log_log_size", "Bytes of the log's segments (Kafka: Log Size)."),
        ("kafka_log_log_numlogsegments", "Segments (Kafka: Log NumLogSegments)."),
    )

    # Every partition's values are read again at least this often, whatever its change count
    # says (a bound on staleness should a change ever not be counted).
    FULL_READ_S = 30.0

    def __init__(self, clock=time.monotonic) -> None:
        # topic -> (its TopicInfo, the partitions' logs, their change counts, their values, the
        # six families' lines of this topic joined, encoded)
        self._topics: dict[str, tuple] = {}
        self._clock = clock
        self._full_read_at = float("-inf")

    def render(self, broker) -> bytes:
        controller = broker.controller
        if controller is None:
            return b""
        now = self._clock()
        full = now - self._full_read_at >= self.FULL_READ_S
        if full:
            self._full_read_at = now
        previous, cached = self._topics, {}
        blocks: list[list[bytes]] = [[] for _ in self.FAMILIES]
        topics = controller.topics
        for topic in sorted(topics):
            info = topics[topic]
            entry = previous.get(topic)
            if (not full and entry is not None and entry[0] is info and len(entry[1]) == info.num_partitions
                    and [getattr(plog, "changes", None) for plog in entry[1]] == entry[2]
                    and None not in entry[2]):
                # A log counts the calls that may change it (storage/log.py ``changes``): the
                # same counts mean the same values, and an idle topic costs reading them.
                cached[topic] = entry
            else:
                entry = cached[topic] = self._read_topic(controller, topic, info, entry, full)
            for column, block in zip(blocks, entry[4]):
                column.append(block)
        self._topics = cached
        out = []
        for (name, doc), column in zip(self.FAMILIES, blocks):
            out.append(f"# HELP {name} {_escape_doc(doc)}\n# TYPE {name} gauge\n".encode())
            out.extend(column)
        return b"".join(out)

    def _read_topic(self, controller, topic: str, info, entry, full: bool) -> tuple:
        """A topic's entry again: each partition whose log changed (or all, on a full read) is
        read, and formatted only when its values differ from the lines it had."""
        same_topic = entry is not None and entry[0] is info
        old_changes = entry[2] if same_topic else ()
        old_rows = entry[3] if same_topic else ()
        plogs, changes, rows = [], [], []
        escaped = _escape(topic)
        for partition in range(info.num_partitions):
            plog = controller.log(topic, partition)
            count = getattr(plog, "changes", None)
            old = old_rows[partition] if partition < len(old_rows) else None
            if old is not None and not full and count is not None and old_changes[partition] == count:
                row = old
            else:
                values = (plog.log_start_offset, plog.log_end_offset, plog.high_watermark,
                          plog.last_stable_offset, plog.size_bytes, len(plog.segments))
                if old is not None and old[0] == values:
                    row = old
                else:
                    labels = f'{{partition="{partition}",topic="{escaped}"}} '
                    row = (values, tuple(name + labels + _number(v) + "\n"
                                         for (name, _), v in zip(self.FAMILIES, values)))
            plogs.append(plog)
            changes.append(count)
            rows.append(row)
        blocks = tuple("".join(row[1][i] for row in rows).encode() for i in range(len(self.FAMILIES)))
        return (info, plogs, changes, rows, blocks)


def _escape(value: str) -> str:
    """A label value as the exposition format wants it (topic names never need it: [a-zA-Z0-9._-])."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _escape_doc(doc: str) -> str:
    return doc.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value) -> str:
    """prometheus_client's float formatting (floatToGoString), with integers of up to six digits
    (the common case) formatted without it."""
    if type(value) is int and -1_000_000_000_000_000 < value < 1_000_000:
        return f"{value}.0"
    from prometheus_client.utils import floatToGoString

    return floatToGoString(value)


def _parked_fetches(broker) -> int:
    waiting = getattr(broker.append_waiters, "waiting", None)
    return waiting() if waiting is not None else 0


async def _metrics(request):
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST

    from .server import broker_key

    broker = request.app[broker_key()]
    body = broker.metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def start(broker) -> None:
    """Record from now on (the HTTP server calls this when it binds its port, before any request)."""
    from minikafka.storage import log as storage_log

    if broker.metrics is None:
        broker.metrics = BrokerMetrics(broker)
        storage_log.add_fsync_observer(broker.metrics.on_fsync)


def stop(broker) -> None:
    from minikafka.storage import log as storage_log

    if broker.metrics is not None:
        storage_log.remove_fsync_observer(broker.metrics.on_fsync)


def setup(app, broker) -> None:
    start(broker)  # already running unless the application was built directly
    app.router.add_get("/metrics", _metrics)
