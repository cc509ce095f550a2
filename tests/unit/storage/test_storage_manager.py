"""LogManager (directories, configs, tick) and MetadataLog (durable records, torn tails)."""

from __future__ import annotations

import os
import uuid

import pytest

from minikafka.storage import LogConfig, LogManager, MetadataLog
from minikafka.storage.metadata_log import decode_frames, encode_frame
from storagetest import batch, read_all


def test_manager_creates_reopens_and_recovers_partitions(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {"log.segment.bytes": 600}, now_ms=clock)
    assert mgr.default_config.segment_bytes == 600
    a0, a1 = mgr.open_topic("my-topic.v2", 2, {"retention.ms": "1000"})
    assert a0.config.retention_ms == 1000 and a0.config.segment_bytes == 600
    b = mgr.get_or_create("other", 0)
    for _ in range(10):
        a1.append(batch(2))
    b.append(batch(1))
    assert mgr.get("my-topic.v2", 1) is a1 and mgr.get("nope", 0) is None
    assert set(mgr.logs()) == {("my-topic.v2", 0), ("my-topic.v2", 1), ("other", 0)}
    assert sorted(os.listdir(tmp_path)) == [".lock", "my-topic.v2-0", "my-topic.v2-1", "other-0"]
    mgr.close()
    (tmp_path / "metadata.log").write_bytes(b"")  # a plain file is never taken for a partition
    (tmp_path / "old-3-delete").mkdir()
    mgr2 = LogManager(str(tmp_path), {"log.segment.bytes": 600}, now_ms=clock)
    assert set(mgr2.logs()) == {("my-topic.v2", 0), ("my-topic.v2", 1), ("other", 0)}
    assert mgr2.get("my-topic.v2", 1).log_end_offset == 20
    assert mgr2.topics() == {"my-topic.v2", "other"}


def test_update_config_and_delete_topic(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {}, now_ms=clock)
    logs = mgr.open_topic("t", 3)
    mgr.update_config("t", {"cleanup.policy": "compact", "segment.bytes": "1000"})
    assert all(log.config.compact and log.config.segment_bytes == 1000 for log in logs)
    assert mgr.get_or_create("t", 3).config.compact  # a new partition gets the topic's settings
    with pytest.raises(ValueError):
        mgr.update_config("t", {"segment.bytes": "many"})
    mgr.delete_topic("t")
    assert mgr.logs() == {} and os.listdir(tmp_path) == [".lock"]


def test_tick_rolls_flushes_applies_retention_and_compacts(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {"segment.ms": 1000, "retention.ms": 5000, "flush.ms": 100}, now_ms=clock)
    deleting = mgr.get_or_create("d", 0)
    compacting = mgr.get_or_create("c", 0, {"cleanup.policy": "compact", "segment.ms": 1000})
    deleting.append(batch(1, ts=clock.now))
    for i in range(4):
        compacting.append(batch(1, ts=clock.now, keys=[b"same"], values=[b"%d" % i]))
    clock.advance(100)
    mgr.tick()
    assert not deleting.active.unsynced  # flushed by flush.ms
    clock.advance(1000)
    mgr.tick()
    assert deleting.active.base_offset == 1 and compacting.active.base_offset == 4  # rolled by age
    mgr.tick()  # compacts one log: the compacted topic had all its records in a closed segment
    assert [r.value for r in read_all(compacting)] == [b"3"]
    clock.advance(5000)
    mgr.tick()
    assert deleting.log_start_offset == 1 and len(read_all(deleting)) == 0
    assert compacting.log_start_offset == 0  # compact-only: no time retention


def test_metadata_log_round_trip_and_durability(tmp_path, clock):
    path = tmp_path / "metadata.log"
    mlog = MetadataLog(str(path), now_ms=clock)
    topic_id = uuid.uuid4()
    records = [
        {"type": "cluster", "cluster_id": "abc"},
        {"type": "topic", "name": "t", "topic_id": topic_id, "num_partitions": 3, "configs": {"a": "1"}},
        {"type": "partitions", "name": "t", "num_partitions": 5},
        {"type": "remove_topic", "name": "t"},
    ]
    for r in records:
        mlog.append(r)
    assert mlog.replay() == records
    records[0]["cluster_id"] = "changed"  # the log keeps its own copies
    assert mlog.replay()[0]["cluster_id"] == "abc"
    mlog.close()
    again = MetadataLog(str(path), now_ms=clock)
    assert again.records()[1]["topic_id"] == topic_id
    assert len(again.replay()) == 4 and again.truncated_bytes == 0


def test_metadata_log_cuts_a_torn_or_corrupt_tail_at_every_byte(tmp_path, clock):
    frames = [encode_frame({"type": "topic", "name": "t%d" % i, "n": i}, clock.now) for i in range(3)]
    whole = b"".join(frames)
    start_of_last = len(whole) - len(frames[-1])
    for cut in range(start_of_last, len(whole)):
        path = tmp_path / f"m{cut}.log"
        path.write_bytes(whole[:cut])
        mlog = MetadataLog(str(path), now_ms=clock)
        assert [r["n"] for r in mlog.replay()] == [0, 1]
        assert os.path.getsize(path) == start_of_last
        mlog.append({"type": "cluster", "n": 9})
        mlog.close()
        assert [r["n"] for r in MetadataLog(str(path)).replay()] == [0, 1, 9]
    for pos in range(start_of_last, len(whole)):
        damaged = bytearray(whole)
        damaged[pos] ^= 0x40
        records, valid = decode_frames(damaged)
        assert [r["n"] for r in records] == [0, 1] and valid == start_of_last


def test_log_config_defaults_match_kafka():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.retention_ms, c.retention_bytes) == (1 << 30, 604800000, 604800000, -1)
    assert (c.cleanup_policy, c.delete_retention_ms, c.index_interval_bytes) == ("delete", 86400000, 4096)
    assert c.max_message_bytes == 1048588 and c.segment_index_bytes == 10 * 1024 * 1024


def test_tick_leaves_unconfigured_logs_alone_until_the_broker_names_their_settings(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {"retention.ms": 1000}, now_ms=clock)
    offsets = mgr.get_or_create("__consumer_offsets", 0, {"cleanup.policy": "compact", "segment.bytes": 200})
    for i in range(5):
        offsets.append(batch(1, ts=clock.now, keys=[b"g%d" % i], values=[b"x" * 150]))
    mgr.close()
    clock.advance(10_000)
    mgr2 = LogManager(str(tmp_path), {"retention.ms": 1000}, now_ms=clock)
    mgr2.tick()  # the default policy (delete after 1 s) would wipe the log
    assert mgr2.get("__consumer_offsets", 0).log_start_offset == 0
    mgr2.open_topic("__consumer_offsets", 1, {"cleanup.policy": "compact", "segment.bytes": 200})
    mgr2.tick()
    assert mgr2.get("__consumer_offsets", 0).log_start_offset == 0
    assert len(read_all(mgr2.get("__consumer_offsets", 0))) == 5


def test_a_second_process_cannot_open_the_same_data_dir(tmp_path, clock):
    import subprocess
    import sys

    mgr = LogManager(str(tmp_path), {}, now_ms=clock)
    code = ("import sys\n"
            "from minikafka.storage.manager import LogManager, DataDirInUseError\n"
            "try:\n    LogManager(%r, {})\nexcept DataDirInUseError:\n    sys.exit(3)\n")
    assert subprocess.run([sys.executable, "-c", code % str(tmp_path)], timeout=60).returncode == 3
    again = LogManager(str(tmp_path), {}, now_ms=clock)  # the same process may reopen it
    again.close()
    mgr.close()
    assert subprocess.run([sys.executable, "-c", code % str(tmp_path)], timeout=60).returncode == 0
