"""storage.producer_snapshot: the versioned, CRC-checked ``<offset>.snapshot`` files."""

import os

from minikafka.storage import producer_snapshot as ps


PRODUCERS = [{"producer_id": 7, "epoch": 2, "last_timestamp": 99, "batches": [[0, 4, 10, 14, 99]],
              "txn_first_offset": 12}]


def test_round_trip_keeps_unknown_keys_and_prunes_old_files(tmp_path):
    d = str(tmp_path)
    for offset in (10, 20, 30):
        ps.write_snapshot(d, offset, PRODUCERS)
    assert ps.list_snapshots(d) == [20, 30]
    assert ps.latest_snapshot(d, 100) == (30, PRODUCERS)
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]


def test_snapshots_above_the_log_end_are_deleted(tmp_path):
    d = str(tmp_path)
    ps.write_snapshot(d, 10, PRODUCERS)
    ps.write_snapshot(d, 50, [])
    assert ps.latest_snapshot(d, 40) == (10, PRODUCERS)
    assert ps.list_snapshots(d) == [10]
    assert ps.latest_snapshot(d, 5) is None


def test_corrupt_or_newer_files_are_skipped(tmp_path):
    d = str(tmp_path)
    ps.write_snapshot(d, 10, PRODUCERS)
    ps.write_snapshot(d, 20, [{"producer_id": 1}])
    path = ps.snapshot_path(d, 20)
    data = bytearray(open(path, "rb").read())
    data[-2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    assert ps.latest_snapshot(d, 100) == (10, PRODUCERS)
    newer = ps.encode(20, []).replace(ps.MAGIC + b"\x00\x01", ps.MAGIC + b"\x00\x09", 1)
    open(path, "wb").write(newer)
    assert ps.latest_snapshot(d, 100) == (10, PRODUCERS)
    open(path, "wb").write(b"MKP")
    assert ps.latest_snapshot(d, 100) == (10, PRODUCERS)
