"""confluent-kafka glue for the data source: metadata and offsets on the driver, exact range
reads into Arrow batches and at-least-once writes on the executors.

Every client is created inside the function that uses it and closed before it returns, so
nothing here ends up in a pickled reader or writer.
"""

from __future__ import annotations

import time
from typing import Iterable, Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .options import (
    OffsetRange,
    SinkOptions,
    SourceOptions,
    TopicPartition,
)

# Records fetched per consume() call: large enough that the per-call cost vanishes, small enough
# that one Arrow batch stays a few MB for 100 B records.
CONSUME_BATCH = 20_000

# librdkafka reports the timestamp kind as 0 unavailable, 1 create time, 2 log append time;
# Spark's timestampType column uses Kafka's own numbering (0 create, 1 log append).
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}


class KafkaUnavailableError(RuntimeError):
    """The cluster could not be reached within the configured timeout."""


class KafkaReadError(RuntimeError):
    """A planned offset range could not be read as planned."""


class KafkaWriteError(RuntimeError):
    """Records were not acknowledged by the cluster."""


def consumer_config(opts: SourceOptions) -> dict:
    conf = {
        "bootstrap.servers": opts.bootstrap_servers,
        "group.id": opts.group_id(),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Out-of-range seeks must surface as errors, never as a silent jump elsewhere.
        "auto.offset.reset": "error",
        # The end of a range is detected by offset, or by this event when the range ends on a
        # gap (transaction markers, compaction) where no record carries the last offset.
        "enable.partition.eof": True,
        # librdkafka defaults to read_committed; Spark's connector (Java client) reads
        # uncommitted unless kafka.isolation.level says otherwise.
        "isolation.level": "read_uncommitted",
        # Bigger fetches: one task reads one partition, and the default 1 MB per partition
        # costs a round trip per ~10k small records.
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "queued.max.messages.kbytes": 256 * 1024,
        "socket.connection.setup.timeout.ms": min(opts.metadata_timeout_ms, 30_000),
        "client.id": "minikafka-spark-source",
    }
    conf.update(opts.client)
    return conf


def producer_config(opts: SinkOptions) -> dict:
    conf = {
        "bootstrap.servers": opts.bootstrap_servers,
        "acks": "all",
        # Java's partitioner (murmur2) so that keyed records land where format("kafka") would
        # put them.
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "client.id": "minikafka-spark-sink",
    }
    conf.update(opts.client)
    return conf


def _client_error(exc: Exception, servers: str, timeout_ms: int, what: str) -> Exception:
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is not None and err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                          KafkaError._ALL_BROKERS_DOWN,
                                          KafkaError._RESOLVE):
        return KafkaUnavailableError(
            f"cannot reach Kafka at {servers}: {what} did not complete within {timeout_ms} ms "
            f"({err.str()}); check kafka.bootstrap.servers and that the broker is running")
    return KafkaUnavailableError(f"{what} failed against {servers}: {exc}")


def _new_consumer(opts: SourceOptions) -> Consumer:
    try:
        return Consumer(consumer_config(opts))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ValueError(f"invalid kafka.* client setting: {exc}") from None


class OffsetFetcher:
    """Driver-side metadata and watermarks through one lazily created consumer.

    The consumer is dropped on pickling and on ``close()``: readers carry their options, never
    a live client.
    """

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self._consumer: Consumer | None = None

    def __getstate__(self):
        return {"opts": self.opts, "_consumer": None}

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = _new_consumer(self.opts)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription selects right now (from fresh metadata)."""
        timeout_s = self.opts.metadata_timeout_ms / 1000
        try:
            md = self._client().list_topics(timeout=timeout_s)
        except KafkaException as exc:
            raise _client_error(exc, self.opts.bootstrap_servers, self.opts.metadata_timeout_ms,
                                "fetching metadata") from None
        available = {name: len(t.partitions) for name, t in md.topics.items()
                     if t.error is None or t.error.code() == KafkaError.NO_ERROR}
        chosen = self.opts.subscription.select(available)
        if self.opts.subscription.assigned:
            missing = [tp for tp in chosen if available.get(tp[0], 0) <= tp[1]]
            if missing:
                raise ValueError(
                    "option 'assign' names partitions that do not exist: "
                    + ", ".join(f"{t}-{p}" for t, p in missing))
        return chosen

    def watermarks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition,
                                                                       tuple[int, int]]:
        """``(low, high)`` per partition; high is the LSO under read_committed."""
        timeout_s = self.opts.metadata_timeout_ms / 1000
        out = {}
        client = self._client()
        for topic, part in partitions:
            try:
                low, high = client.get_watermark_offsets(
                    KafkaTopicPartition(topic, part), timeout=timeout_s, cached=False)
            except KafkaException as exc:
                raise _client_error(exc, self.opts.bootstrap_servers,
                                    self.opts.metadata_timeout_ms,
                                    f"listing offsets of {topic}-{part}") from None
            out[(topic, part)] = (low, high)
        return out


# ---------------------------------------------------------------------------------------------
# Executor side: one exact offset range into Arrow batches


def read_range(opts: SourceOptions, rng: OffsetRange, schema: pa.Schema,
               *, clock=time.monotonic, new_consumer=None) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets in [from, until)) as Arrow batches of ``schema``.

    Assign + seek, no group: the same range always yields the same records. The range ends at
    ``until`` exactly, even when a fetch returns a whole stored batch that straddles either end,
    and a range that ends on a gap ends at the partition-EOF event instead of waiting. A range
    with no progress for ``kafkaConsumer.pollTimeoutMs`` fails with the range in the message.
    ``clock`` and ``new_consumer(opts)`` are injectable for tests.
    """
    if rng.until_offset <= rng.from_offset:
        return
    consumer = (new_consumer or _new_consumer)(opts)
    try:
        consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, rng.from_offset)])
        want = rng.from_offset
        until = rng.until_offset
        stall_limit = opts.poll_timeout_ms / 1000
        last_progress = clock()
        with_headers = "headers" in schema.names
        read_committed = opts.client.get("isolation.level") == "read_committed"
        eof_at = None
        while want < until:
            msgs = consumer.consume(num_messages=min(CONSUME_BATCH, until - want), timeout=0.5)
            records = []
            reseek = None
            for m in msgs:
                err = m.error()
                if err is None:
                    records.append(m)
                    continue
                code = err.code()
                if code == KafkaError._PARTITION_EOF:
                    eof_at = m.offset()
                elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    if opts.fail_on_data_loss:
                        raise KafkaReadError(
                            f"offset {want} of {rng.topic}-{rng.partition} is no longer "
                            f"available ({err.str()}); records were deleted before they "
                            "were read (set failOnDataLoss=false to skip them)")
                    reseek = consumer.get_watermark_offsets(
                        KafkaTopicPartition(rng.topic, rng.partition),
                        timeout=opts.metadata_timeout_ms / 1000, cached=False)[0]
                    break
                elif err.fatal():
                    raise KafkaReadError(
                        f"reading {rng.topic}-{rng.partition} [{want}, {until}) failed: "
                        f"{err.str()}")
                # Other errors (transport, retriable) are retried by librdkafka itself; the
                # stall timeout below bounds how long that may take.
            if records:
                batch = _to_arrow(records, rng, want, until, schema, with_headers)
                if batch is not None:
                    want = batch.column(4)[-1].as_py() + 1
                    last_progress = clock()
                    yield batch
            if reseek is not None:
                if reseek >= until:
                    return
                want = max(want, reseek)
                consumer.assign([KafkaTopicPartition(rng.topic, rng.partition, want)])
                continue
            if eof_at is not None and eof_at >= until:
                # Nothing below `until` is left: the range ends on a gap (transaction markers,
                # compacted records) that no record carries.
                return
            if eof_at is not None and eof_at < until and eof_at <= want and not read_committed:
                # The log ends before the planned end, which only deletion or truncation after
                # planning explains (under read_committed the end may just be an open
                # transaction, so that case waits instead).
                if not opts.fail_on_data_loss:
                    return
                raise KafkaReadError(
                    f"{rng.topic}-{rng.partition} ends at offset {eof_at} but the batch was "
                    f"planned up to {until}: records were deleted or the partition truncated "
                    "since planning (set failOnDataLoss=false to skip them)")
            if clock() - last_progress > stall_limit:
                ended = "" if eof_at is None else f" (the partition ends at offset {eof_at}: " \
                    "data lost since planning?)"
                raise KafkaReadError(
                    f"no records from {rng.topic}-{rng.partition} for {opts.poll_timeout_ms} "
                    f"ms while reading [{want}, {until}) from {opts.bootstrap_servers}{ended}; "
                    "is the broker reachable? (kafkaConsumer.pollTimeoutMs)")
    finally:
        consumer.close()


def _to_arrow(records: list, rng: OffsetRange, want: int, until: int, schema: pa.Schema,
              with_headers: bool) -> pa.RecordBatch | None:
    # A fetch returns whole stored batches; records before the seek point or past the range end
    # can come along and must not leak into this task (the neighbouring task owns them).
    if records[0].offset() < want or records[-1].offset() >= until:
        records = [m for m in records if want <= m.offset() < until]
        if not records:
            return None
    n = len(records)
    stamps = [m.timestamp() for m in records]
    arrays = [
        pa.array([m.key() for m in records], pa.binary()),
        pa.array([m.value() for m in records], pa.binary()),
        pa.repeat(pa.scalar(rng.topic, pa.string()), n),
        pa.repeat(pa.scalar(rng.partition, pa.int32()), n),
        pa.array([m.offset() for m in records], pa.int64()),
        pa.array([s[1] * 1000 for s in stamps], pa.int64()).cast(schema.field(5).type),
        pa.array([_TIMESTAMP_TYPE.get(s[0], -1) for s in stamps], pa.int32()),
    ]
    if with_headers:
        arrays.append(pa.array([m.headers() for m in records], schema.field(7).type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ---------------------------------------------------------------------------------------------
# Executor side: writes


def write_batches(opts: SinkOptions, batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row of ``batches``; returns the count once all are acknowledged.

    At-least-once like Spark's sink: a failed task is retried by Spark and may write again.
    """
    try:
        producer = Producer(producer_config(opts))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ValueError(f"invalid kafka.* client setting: {exc}") from None
    failures: list[str] = []

    def on_delivery(err, msg):
        if err is not None and len(failures) < 5:
            failures.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")
        elif err is not None:
            failures.append("")

    sent = 0
    for batch in batches:
        cols = batch.schema.names
        n = batch.num_rows
        values = batch.column(cols.index("value")).to_pylist()
        keys = batch.column(cols.index("key")).to_pylist() if "key" in cols else [None] * n
        if opts.topic is not None:
            topics = [opts.topic] * n
        else:
            topics = batch.column(cols.index("topic")).to_pylist()
        parts = (batch.column(cols.index("partition")).to_pylist() if "partition" in cols
                 else [None] * n)
        headers = (batch.column(cols.index("headers")).to_pylist() if "headers" in cols
                   else [None] * n)
        for topic, key, value, part, hdrs in zip(topics, keys, values, parts, headers):
            if topic is None:
                raise KafkaWriteError("a row has a null topic and no 'topic' option is set")
            kwargs = {}
            if part is not None:
                kwargs["partition"] = part
            if hdrs:
                kwargs["headers"] = [(h["key"], h["value"]) for h in hdrs]
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery,
                                     **kwargs)
                    break
                except BufferError:
                    # Local queue full: let deliveries drain. Bounded by message.timeout.ms,
                    # after which queued records fail and free the space.
                    producer.poll(0.1)
            sent += 1
        producer.poll(0)
    left = producer.flush(opts.flush_timeout_ms / 1000)
    if left:
        raise KafkaWriteError(
            f"{left} records were not acknowledged by {opts.bootstrap_servers} within "
            f"{opts.flush_timeout_ms} ms (flushTimeoutMs)")
    if failures:
        shown = "; ".join(f for f in failures if f)
        raise KafkaWriteError(f"{len(failures)} records failed to be written: {shown}")
    return sent

