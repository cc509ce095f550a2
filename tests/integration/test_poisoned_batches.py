"""No batch Kafka would reject is ever stored (issue 15): poisoned batches with valid CRCs,
decompression bombs and a full disk, each checked with raw requests and real consumers."""

from __future__ import annotations

import os
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer

from conftest import BrokerProcess, RawClient, start_broker
from minikafka.protocol.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    build_batch,
    set_crc,
)

pytestmark = pytest.mark.minikafka_only(reason=(
        "minikafka-only settings (decompression.max.ratio, maintenance.interval.ms), a full disk "
        "and the broker's memory"))

TS = int(time.time() * 1000)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    # A bound of 8 x max.message.bytes, so that a snappy bomb (snappy compresses at most ~21:1,
    # so under 1 MB it inflates to ~20 MB) is past it too.
    handle = start_broker(tmp_path_factory.mktemp("poison"), **{"decompression.max.ratio": "8"})
    yield handle
    handle.stop()


def create(client: RawClient, topic: str, configs: dict | None = None) -> None:
    body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000, "validate_only": False}
    assert client.request(19, 7, body)["topics"][0]["error_code"] == 0


def produce(client: RawClient, topic: str, records: bytes, version: int = 9) -> dict:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    return client.request(0, version, body)["responses"][0]["partition_responses"][0]


def good(n=2, value=b"fine"):
    return bytes(build_batch([(b"k", value, [], TS + i) for i in range(n)]))


def with_valid_crc(buf: bytearray) -> bytes:
    set_crc(buf)
    return bytes(buf)


def poisoned() -> dict[str, bytes]:
    codec7 = bytearray(good(1))
    struct.pack_into(">h", codec7, 21, 7)
    garbage = bytearray(good(1))
    garbage[61:] = b"\xfe" * (len(garbage) - 61)
    count = bytearray(good(3))
    struct.pack_into(">i", count, 57, 2)
    struct.pack_into(">i", count, 23, 1)
    control = bytearray(build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], TS)],
                                    control=True, transactional=True, producer_id=1, producer_epoch=0))
    return {"codec 7": with_valid_crc(codec7), "garbage records": with_valid_crc(garbage),
            "wrong record count": with_valid_crc(count), "control bit from a client": bytes(control)}


def consume_all_confluent(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.time() + 20
    try:
        while len(values) < expect and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_poisoned_batches_are_refused_and_the_partition_stays_readable(shared):
    topic = "poison"
    expected_codes = {"codec 7": 2, "garbage records": 87, "wrong record count": 87,
                      # A transactional (control) batch without a transactional id: Kafka 4.2 refuses
                      # the request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (tests/conformance).
                      "control bit from a client": 53}
    with RawClient(shared.port) as c:
        create(c, topic)
        assert produce(c, topic, good(1, b"before"))["error_code"] == 0
        for name, batch in poisoned().items():
            part = produce(c, topic, batch)
            assert part["error_code"] == expected_codes[name], (name, part)
            # Kafka 4.2 (tests/conformance produce_invalid_batches) words a message only for a
            # refusal that names records (record_errors).
            assert bool(part["error_message"]) == bool(part["record_errors"]), name
        assert produce(c, topic, good(1, b"after"))["error_code"] == 0
        # The connection is still usable, and nothing of the refused batches was stored.
        lo = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": 0}]}]})
        assert lo["topics"][0]["partitions"][0]["error_code"] == 0
        assert lo["topics"][0]["partitions"][0]["offset"] == 0
    assert consume_all_confluent(shared.bootstrap, topic, 2) == [b"before", b"after"]
    consumer = KafkaConsumer(bootstrap_servers=shared.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    from kafka import TopicPartition as KTP
    consumer.assign([KTP(topic, 0)])
    consumer.seek_to_beginning()
    assert [m.value for m in consumer][:2] == [b"before", b"after"]
    consumer.close()


def test_keyless_records_on_a_compacted_topic_name_the_records(shared):
    with RawClient(shared.port) as c:
        create(c, "compacted-keys", {"cleanup.policy": "compact"})
        batch = bytes(build_batch([(b"a", b"1", [], TS), (None, b"2", [], TS), (b"c", b"3", [], TS)]))
        part = produce(c, "compacted-keys", batch, version=8)
        assert part["error_code"] == 87
        assert [e["batch_index"] for e in part["record_errors"]] == [1]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to read the broker's RSS")
def test_decompression_bombs_are_refused_in_every_codec_without_memory_growth(shared):
    before = rss_kib(shared.proc.pid)
    with RawClient(shared.port, timeout=60) as c:
        create(c, "bombs")
        for codec in (COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD):
            # 200 MB of zeros: below 1 MB compressed in every codec but snappy, so send what fits.
            size = (16 << 20) if codec == COMPRESSION_SNAPPY else (200 << 20)
            bomb = bytes(build_batch([(b"k", b"\0" * size, [], TS)], compression=codec))
            assert len(bomb) < 1_048_588, (codec, len(bomb))
            part = produce(c, "bombs", bomb, version=9)
            assert part["error_code"] == 18, (codec, part)  # RECORD_LIST_TOO_LARGE
    grown_mb = (rss_kib(shared.proc.pid) - before) / 1024
    assert grown_mb < 150, f"broker RSS grew by {grown_mb:.0f} MB"


def _mount_tmpfs(path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mount_tmpfs(disk, "24m"):
        pytest.skip("mounting a small tmpfs needs root and a kernel that allows it")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=10)


def fill(disk, leave_bytes: int = 0):
    """Fill the file system, keeping ``leave_bytes`` free; returns the filler's path."""
    filler = disk / "filler"
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    with open(filler, "ab") as fh:
        remaining = free - leave_bytes
        while remaining > 0:
            chunk = min(remaining, 1 << 20)
            try:
                fh.write(b"\0" * chunk)
                fh.flush()
            except OSError:
                break
            remaining -= chunk
    return filler


def test_a_full_disk_gives_error_codes_and_recovers_without_restart(small_disk, tmp_path):
    (tmp_path / "full").mkdir()
    handle = BrokerProcess(tmp_path / "full", {"log.segment.bytes": "65536"}, data_dir=small_disk / "data")
    try:
        with RawClient(handle.port) as c:
            create(c, "full")
            assert produce(c, "full", good(50, b"x" * 1000))["error_code"] == 0
            filler = fill(small_disk)
            codes = set()
            for _ in range(5):  # 5 x 50 KB: a roll at 64 KB happens on the way
                codes.add(produce(c, "full", good(50, b"y" * 1000))["error_code"])
            assert codes == {56}, codes  # KAFKA_STORAGE_ERROR, never a closed connection
            # CreateTopics on the full disk: an error code, and no half topic left behind.
            body = {"topics": [{"name": "half", "num_partitions": 3, "replication_factor": 1, "assignments": [],
                                "configs": []}], "timeout_ms": 10000, "validate_only": False}
            assert c.request(19, 7, body)["topics"][0]["error_code"] == 56
            md = c.request(3, 12, {"topics": [{"name": "half", "topic_id": None}], "allow_auto_topic_creation": False})
            assert md["topics"][0]["error_code"] == 3
            # FindCoordinator that must create __consumer_offsets: retriable, not a disconnect.
            fc = c.request(10, 3, {"key": "g", "key_type": 0})
            assert fc["error_code"] == 15  # COORDINATOR_NOT_AVAILABLE
            filler.unlink()
            assert produce(c, "full", good(50, b"z" * 1000))["error_code"] == 0
            assert c.request(19, 7, body)["topics"][0]["error_code"] == 0
            assert c.request(10, 3, {"key": "g", "key_type": 0})["error_code"] == 0
        producer = Producer({"bootstrap.servers": handle.bootstrap, "message.timeout.ms": 10000})
        producer.produce("full", b"by librdkafka")
        assert producer.flush(15) == 0
        assert consume_all_confluent(handle.bootstrap, "full", 101)[-1] == b"by librdkafka"
        assert "Traceback" not in handle.read_log()
    finally:
        handle.stop()


def test_idle_connections_are_closed_and_busy_ones_kept(tmp_path):
    handle = start_broker(tmp_path, **{"connections.max.idle.ms": "600", "maintenance.interval.ms": "100"})
    try:
        idle = RawClient(handle.port)
        busy = RawClient(handle.port)
        deadline = time.time() + 3
        while time.time() < deadline:
            busy.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            time.sleep(0.1)  # the client's own pace; the broker closes idle peers at its
        assert idle.is_closed_by_peer(timeout=5)
        # Still served: it was never idle for 600 ms.
        assert busy.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0
        idle.close()
        busy.close()
    finally:
        handle.stop()


def test_a_wrong_max_timestamp_is_stored_corrected(shared):
    """Kafka writes a CreateTime batch's max timestamp from its records; so ListOffsets -3."""
    with RawClient(shared.port) as c:
        create(c, "max-ts")
        batch = build_batch([(b"k", b"a", [], TS), (b"k", b"b", [], TS + 500), (b"k", b"c", [], TS + 5)])
        struct.pack_into(">q", batch, 35, TS + 1)  # the client claims a smaller max
        assert produce(c, "max-ts", with_valid_crc(batch))["error_code"] == 0
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "max-ts", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]}
        part = c.request(2, 7, body)["topics"][0]["partitions"][0]
        assert (part["offset"], part["timestamp"]) == (1, TS + 500)


def test_a_client_base_offset_other_than_zero_is_refused(shared):
    """Kafka 4.2 answers INVALID_RECORD with the log start offset and no message (checked against
    it); nothing is stored and the partition keeps serving."""
    topic = f"base-offset-{uuid.uuid4().hex[:8]}"
    with RawClient(shared.port) as client:
        create(client, topic)
        assert produce(client, topic, good(2, b"first"))["error_code"] == 0
        answer = produce(client, topic, bytes(build_batch([(b"k", b"later", [], TS)] * 2, base_offset=1234)))
        assert (answer["error_code"], answer["log_start_offset"], answer["error_message"]) == (87, 0, None)
    assert consume_all_confluent(shared.bootstrap, topic, 2) == [b"first", b"first"]
