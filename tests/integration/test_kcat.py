"""kcat (librdkafka's command-line client) against minikafka and Apache Kafka."""

import subprocess
import uuid

import pytest

from minikafka.protocol.records import iter_batches

from clienttools import require_tool

pytestmark = pytest.mark.integration


def kcat(*args, input=None):
    proc = subprocess.run(
        [require_tool("kcat"), *args], input=input, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_and_consume(any_broker, codec):
    broker = any_broker
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:8]}"
    # Compressible values: librdkafka sends a batch uncompressed when compression would not shrink it.
    filler = "abc" * 100
    lines = "".join(f"k{i}:value {i} {filler}\n" for i in range(20))
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec, input=lines)
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %k=%s\n")
    assert out.splitlines() == [f"{i} k{i}=value {i} {filler}" for i in range(20)]

    # The batches are stored exactly as kcat sent them, compressed or not.
    segment = next((broker.data_dir / f"{topic}-0").glob("*.log"))
    data = segment.read_bytes()
    codecs = {h.compression for _, h in iter_batches(data)}
    assert codecs == {["none", "gzip", "snappy", "lz4", "zstd"].index(codec)}


def test_kcat_metadata_listing(any_broker):
    topic = f"kcat-meta-{uuid.uuid4().hex[:8]}"
    kcat("-b", any_broker.bootstrap, "-P", "-t", topic, input="x\n")
    out = kcat("-b", any_broker.bootstrap, "-L", "-t", topic)
    assert "1 brokers:" in out
    assert f'topic "{topic}" with 1 partitions' in out
