"""Data source objects without a SparkSession: pickling and schemas."""

import pickle
import socket

import pyarrow as pa
import pytest

from minikafka.pipeline.options import OffsetRange, OptionError, parse_source_options
from minikafka.pipeline.source import (
    KafkaDataSource,
    KafkaPartition,
    KafkaStreamReader,
    _arrow_schema,
    _check_write_schema,
    source_schema,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

HEADERS = ArrayType(StructType([StructField("key", StringType()),
                                StructField("value", BinaryType())]))


def schema(**cols) -> StructType:
    return StructType([StructField(name, dtype) for name, dtype in cols.items()])


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_stream_reader_with_a_live_client_pickles_without_it():
    opts = parse_source_options({"kafka.bootstrap.servers": f"127.0.0.1:{unused_port()}",
                                 "subscribe": "t"}, streaming=True)
    reader = KafkaStreamReader(opts, source_schema(False))
    reader._fetcher._client()  # the driver-side consumer exists now (it never connects here)
    try:
        clone = pickle.loads(pickle.dumps(reader))
    finally:
        reader.stop()
    assert clone._fetcher is None
    assert clone.opts == opts and clone.schema == reader.schema
    part = pickle.loads(pickle.dumps(KafkaPartition(OffsetRange("t", 1, 5, 9))))
    assert part.range == OffsetRange("t", 1, 5, 9)


def test_schema_follows_include_headers():
    assert KafkaDataSource({"includeheaders": "true"}).schema() == source_schema(True)
    assert KafkaDataSource({}).schema() == source_schema(False)
    arrow = _arrow_schema(source_schema(True))
    assert arrow.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("headers").type.value_type == pa.struct(
        [("key", pa.string()), ("value", pa.binary())])


def test_a_user_schema_is_refused():
    ds = KafkaDataSource({"kafka.bootstrap.servers": "h:1", "subscribe": "t"})
    with pytest.raises(OptionError, match="fixed schema"):
        ds.reader(schema(value=StringType()))


@pytest.mark.parametrize("cols, topic, fragment", [
    ({"key": StringType()}, "t", "needs a 'value' column"),
    ({"value": IntegerType()}, "t", "column 'value' must be string or binary"),
    ({"value": StringType()}, None, "needs a 'topic' column or the 'topic' option"),
    ({"value": StringType(), "topic": IntegerType()}, None, "column 'topic' must be a string"),
    ({"value": StringType(), "partition": LongType()}, "t", "column 'partition' must be an int"),
    ({"value": StringType(), "headers": ArrayType(StringType())}, "t",
     "column 'headers' must be"),
])
def test_write_schema_errors(cols, topic, fragment):
    with pytest.raises(OptionError, match=fragment):
        _check_write_schema(schema(**cols), topic)


def test_write_schema_accepts_sparks_sink_columns():
    _check_write_schema(schema(key=BinaryType(), value=StringType(), topic=StringType(),
                               partition=IntegerType(), headers=HEADERS), None)
