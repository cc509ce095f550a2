"""Console helpers that need no browser: bounded reads, value views, consumer assignments."""

from __future__ import annotations

import struct

from minikafka.broker.http.console import _assignment, _duration, _ms_time, parse_time, read_messages, show
from minikafka.protocol.records import build_batch
from minikafka.storage.log import PartitionLog


class _Controller:
    def __init__(self, plog):
        self.plog = plog

    def log(self, topic, partition):
        return self.plog


class _Broker:
    def __init__(self, plog):
        self.controller = _Controller(plog)


def test_read_messages_pages_from_an_offset_and_stops_at_the_limit(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    for b in range(5):
        plog.append(build_batch([(None, b"v%d" % (b * 10 + i), [], 1000 + b * 10 + i) for i in range(10)]))
    broker = _Broker(plog)
    records, nxt = read_messages(broker, "t", 0, 13, 5)
    assert [r.offset for r in records] == [13, 14, 15, 16, 17] and nxt == 18
    assert records[0].value == b"v13"
    records, nxt = read_messages(broker, "t", 0, 48, 10)
    assert [r.offset for r in records] == [48, 49] and nxt == 50
    assert read_messages(broker, "t", 0, 50, 10) == ([], 50)
    plog.close()


def test_show_formats():
    assert show(b"<b>", "utf8") == "<b>"  # escaping is the template's job
    assert show(b'{"a":1}', "json") == '{\n  "a": 1\n}'
    assert show(b"not json", "json") == "not json"
    assert show(b"\x00\xff", "hex") == "00 ff"
    assert show(b"\xff", "utf8") == "\ufffd"
    assert show(None, "hex") is None


def test_parse_time():
    assert parse_time("1700000000000") == 1700000000000
    assert parse_time("1970-01-01T00:00:01") == 1000
    assert parse_time("nonsense") is None and parse_time("") is None


def test_assignment_decoding():
    topic = b"orders"
    data = struct.pack(">hih", 0, 1, len(topic)) + topic + struct.pack(">iii", 2, 0, 3) + struct.pack(">i", -1)
    assert _assignment(data) == "orders: 0,3"
    assert _assignment(b"") == ""
    assert _assignment(b"\x00\x00\x00\x00\x00\x05xx") == "(not a consumer assignment)"


def test_transaction_durations_and_times_read_as_a_person_would():
    assert _duration(0) == "0.000s"
    assert _duration(61_005) == "1m 1.005s"
    assert _duration(3_723_000) == "1h 2m 3.000s"
    assert _duration(-5) == "0.000s"  # a start time after "now" (clock steered back) shows no negative age
    assert _ms_time(-1) == ""
    assert _ms_time(0) == "1970-01-01 00:00:00.000"
