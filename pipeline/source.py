"""A Spark 4 Python Data Source for Kafka, on confluent-kafka (format name ``minikafka``).

Reads (batch and streaming) and writes (batch and streaming) use the options and columns of
Spark's own connector, so ``format("minikafka")`` and ``format("kafka")`` (with the
spark-sql-kafka jar on the class path) are interchangeable; see pipeline/README.md.

Streaming reads are replayable: an offset is Spark's JSON ``{"topic": {"0": 23}}`` stored in
the checkpoint, ``partitions(start, end)`` is a pure function of the two offsets, and each task
reads exactly ``[from, until)`` of one partition with assign + seek. A restarted query therefore
re-reads exactly the ranges of an unfinished batch and nothing else.
"""

from __future__ import annotations

from typing import Iterator

import pyspark

# Admission control (latestOffset(start, limit), ReadLimit) and Trigger.AvailableNow for Python
# streaming sources arrived in Spark 4.2, Arrow stream writers in 4.1.
if tuple(int(x) for x in pyspark.__version__.split(".")[:2]) < (4, 2):
    raise ImportError(f"the {__name__} data source needs pyspark >= 4.2, found "
                      f"{pyspark.__version__}")

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (  # noqa: E402
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .options import (  # noqa: E402
    FORMAT_NAME,
    Offsets,
    OffsetRange,
    OptionError,
    SourceOptions,
    cap_offsets,
    from_checkpoint,
    parse_sink_options,
    parse_source_options,
    plan_ranges,
    resolve,
    to_checkpoint,
)

HEADERS_TYPE = ArrayType(StructType([
    StructField("key", StringType()),
    StructField("value", BinaryType()),
]))


def source_schema(include_headers: bool) -> StructType:
    """The columns of Spark's Kafka source, in its order."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class KafkaPartition(InputPartition):
    """One task: an exact offset range of one topic partition."""

    def __init__(self, rng: OffsetRange):
        super().__init__(rng)
        self.range = rng


class KafkaDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("minikafka")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        opts = {str(k).lower(): v for k, v in self.options.items()}
        include = str(opts.get("includeheaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> "KafkaBatchReader":
        opts = parse_source_options(self.options, streaming=False)
        _check_read_schema(schema, opts)
        return KafkaBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        opts = parse_source_options(self.options, streaming=True)
        _check_read_schema(schema, opts)
        return KafkaStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> "KafkaBatchWriter":
        opts = parse_sink_options(self.options)
        _check_write_schema(schema, opts.topic)
        return KafkaBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "KafkaStreamWriter":
        opts = parse_sink_options(self.options)
        _check_write_schema(schema, opts.topic)
        return KafkaStreamWriter(opts)


def _check_read_schema(schema: StructType, opts: SourceOptions) -> None:
    expected = source_schema(opts.include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != \
            [(f.name, f.dataType) for f in expected.fields]:
        raise OptionError(
            f"the {FORMAT_NAME} source has a fixed schema ({expected.simpleString()}); "
            f"a user-specified schema ({schema.simpleString()}) is not supported")


def _is(dt: DataType, *types: type) -> bool:
    return isinstance(dt, types)


def _check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's sink rules: value required; key/value string or binary; topic from the column
    or the ``topic`` option; partition int; headers array<struct<key string, value binary>>."""
    cols = {f.name: f.dataType for f in schema.fields}
    if "value" not in cols:
        raise OptionError("writing to Kafka needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in cols and not _is(cols[name], StringType, BinaryType):
            raise OptionError(
                f"column '{name}' must be string or binary to be written to Kafka, "
                f"got {cols[name].simpleString()}")
    if topic_option is None:
        if "topic" not in cols:
            raise OptionError(
                "writing to Kafka needs a 'topic' column or the 'topic' option")
        if not _is(cols["topic"], StringType):
            raise OptionError(
                f"column 'topic' must be a string, got {cols['topic'].simpleString()}")
    if "partition" in cols and not _is(cols["partition"], IntegerType):
        raise OptionError(
            f"column 'partition' must be an int, got {cols['partition'].simpleString()}")
    if "headers" in cols:
        dt = cols["headers"]
        ok = (_is(dt, ArrayType) and _is(dt.elementType, StructType)
              and [f.name for f in dt.elementType.fields] == ["key", "value"]
              and _is(dt.elementType["key"].dataType, StringType)
              and _is(dt.elementType["value"].dataType, BinaryType))
        if not ok:
            raise OptionError(
                "column 'headers' must be array<struct<key:string,value:binary>>, got "
                f"{dt.simpleString()}")


# ---------------------------------------------------------------------------------------------
# Reads


def _arrow_schema(schema: StructType):
    from pyspark.sql.pandas.types import to_arrow_schema

    # The worker compares yielded batches with exactly this conversion of the schema.
    return to_arrow_schema(schema, timezone="UTC")


def _read(opts: SourceOptions, schema: StructType, partition: InputPartition) -> Iterator:
    from .client import read_range

    if not isinstance(partition, KafkaPartition):
        # Spark substitutes one InputPartition(None) when a batch plans no ranges at all.
        return iter(())
    return read_range(opts, partition.range, _arrow_schema(schema))


class KafkaBatchReader(DataSourceReader):
    """``spark.read``: one task per partition between startingOffsets and endingOffsets."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[KafkaPartition]:
        from .client import OffsetFetcher

        fetcher = OffsetFetcher(self.opts)
        try:
            tps = fetcher.partitions()
            marks = fetcher.watermarks(tps)
        finally:
            fetcher.close()
        start = resolve(self.opts.starting, tps, marks, name="startingOffsets",
                        fail_on_data_loss=self.opts.fail_on_data_loss)
        end = resolve(self.opts.ending, tps, marks, name="endingOffsets",
                      fail_on_data_loss=self.opts.fail_on_data_loss)
        bad = [tp for tp in tps if end[tp] < start[tp]]
        if bad:
            raise OptionError(
                "endingOffsets is before startingOffsets for "
                + ", ".join(f"{t}-{p} ({start[(t, p)]} > {end[(t, p)]})" for t, p in bad))
        ranges = plan_ranges(start, end, min_partitions=self.opts.min_partitions)
        return [KafkaPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator:
        return _read(self.opts, self.schema, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: offsets per partition in the checkpoint, exact ranges per task."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        from .client import OffsetFetcher

        self.opts = opts
        self.schema = schema
        # Lives in the driver's long-running planner process; dropped when pickled.
        self._fetcher = OffsetFetcher(opts)
        self._available_now: Offsets | None = None
        self._reported: dict | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fetcher"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _discover(self) -> tuple[list, dict]:
        tps = self._fetcher.partitions()
        return tps, self._fetcher.watermarks(tps)

    def initialOffset(self) -> dict:
        tps, marks = self._discover()
        start = resolve(self.opts.starting, tps, marks, name="startingOffsets",
                        fail_on_data_loss=self.opts.fail_on_data_loss)
        return to_checkpoint(start)

    def _latest(self, start: Offsets) -> Offsets:
        tps, marks = self._discover()
        latest = {tp: marks[tp][1] for tp in tps}
        self._reported = to_checkpoint(latest)
        for tp in tps:
            # A partition that appeared after the query started is read from its beginning.
            start.setdefault(tp, marks[tp][0])
        # Partitions that vanished (topic deleted) keep their last offset: never move back.
        for tp, off in start.items():
            latest.setdefault(tp, off)
            latest[tp] = max(latest[tp], off)
        if self._available_now is not None:
            # Trigger.AvailableNow: never beyond what existed when the query started.
            latest = {tp: max(start[tp], min(off, self._available_now.get(tp, start[tp])))
                      for tp, off in latest.items()}
        return latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_checkpoint(start)
        latest = self._latest(begin)
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return to_checkpoint(cap_offsets(begin, latest, cap))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        # Progress reporting only: the watermarks latestOffset() just fetched are recent
        # enough, and a second round of look-ups per trigger is not.
        return self._reported

    def prepareForTriggerAvailableNow(self) -> None:
        tps, marks = self._discover()
        self._available_now = {tp: marks[tp][1] for tp in tps}

    def partitions(self, start: dict, end: dict) -> list[KafkaPartition]:
        begin = from_checkpoint(start)
        until = from_checkpoint(end)
        fresh = [tp for tp in until if tp not in begin]
        new_start = {}
        if fresh:
            new_start = {tp: low for tp, (low, _) in self._fetcher.watermarks(fresh).items()}
        ranges = plan_ranges(begin, until, min_partitions=self.opts.min_partitions,
                             new_partition_start=new_start)
        return [KafkaPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator:
        return _read(self.opts, self.schema, partition)

    def commit(self, end: dict) -> None:
        # Offsets live in Spark's checkpoint only; nothing is committed to Kafka.
        pass

    def stop(self) -> None:
        if self._fetcher is not None:
            self._fetcher.close()


# ---------------------------------------------------------------------------------------------
# Writes


class KafkaCommitMessage(WriterCommitMessage):
    def __init__(self, count: int):
        self.count = count


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: every task produces its rows and waits for their acknowledgements."""

    def __init__(self, opts):
        self.opts = opts

    def write(self, iterator) -> KafkaCommitMessage:
        from .client import write_batches

        return KafkaCommitMessage(write_batches(self.opts, iterator))

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        # Records already acknowledged stay written: at-least-once, as Spark's Kafka sink.
        pass


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``: at-least-once; a replayed micro-batch writes its rows again."""

    def __init__(self, opts):
        self.opts = opts

    def write(self, iterator) -> KafkaCommitMessage:
        from .client import write_batches

        return KafkaCommitMessage(write_batches(self.opts, iterator))

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


def register(spark) -> str:
    """Register the source with ``spark`` and return its format name.

    Spark's Python workers unpickle the source by module name. When this package was shipped
    as a zip (``python -m minikafka.pipeline.pack``, then ``spark-submit --py-files``) the
    zip is also added with ``addPyFile``: the driver-side planner workers of Python data
    sources do not see ``--py-files`` in Spark 4 and would fail with
    ``No module named 'minikafka'``.
    """
    import zipfile
    from pathlib import Path

    container = Path(__file__).resolve().parents[2]  # the zip holding minikafka/pipeline/
    if container.is_file() and zipfile.is_zipfile(container):
        spark.sparkContext.addPyFile(str(container))
    spark.dataSource.register(KafkaDataSource)
    return FORMAT_NAME
