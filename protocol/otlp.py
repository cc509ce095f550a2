"""Just enough of the OpenTelemetry metrics protobuf (OTLP ``MetricsData``) to read what clients
push with KIP-714's PushTelemetry: metric names, their latest data point and attributes, and the
resource attributes (client software, ids).  Sans-IO, no protobuf library.

Wire format (protobuf): each field is a varint key ``(number << 3) | wire_type``; wire types 0
varint, 1 fixed64, 2 length-delimited, 5 fixed32.  The messages read (field numbers from
opentelemetry-proto's ``metrics/v1/metrics.proto`` and ``common/v1/common.proto``):

    MetricsData     1: ResourceMetrics*
    ResourceMetrics 1: Resource, 2: ScopeMetrics*
    Resource        1: KeyValue*
    ScopeMetrics    2: Metric*
    Metric          1: name, 5: Gauge, 7: Sum, 9: Histogram, 10: ExponentialHistogram, 11: Summary
    Gauge / Sum     1: NumberDataPoint*
    Histogram       1: HistogramDataPoint*   (4: count, 5: sum)
    NumberDataPoint 3: time (fixed64), 4: as_double (fixed64), 6: as_int (sfixed64), 7: KeyValue*
    KeyValue        1: key, 2: AnyValue (1 string, 2 bool, 3 int, 4 double)

Anything else is skipped, so a newer client's extra fields do no harm.  Malformed input raises
``ValueError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .errors import ProtocolError
from .primitives import read_uvarint

_DOUBLE = struct.Struct("<d")
_INT64 = struct.Struct("<q")


def _varint(buf, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, 10)  # protobuf varints are unsigned LEB128 of up to 64 bits
    except ProtocolError as exc:
        raise ValueError(str(exc)) from None


def fields(buf):
    """(field number, wire type, value) of one message; value is an int or a memoryview."""
    buf = memoryview(buf)
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise ValueError("truncated fixed64")
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("truncated length-delimited field")
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            if pos + 4 > end:
                raise ValueError("truncated fixed32")
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _any_value(buf):
    for number, wire, value in fields(buf):
        if number == 1 and wire == 2:
            return bytes(value).decode("utf-8", "replace")
        if number == 2 and wire == 0:
            return bool(value)
        if number == 3 and wire == 0:
            return value - (1 << 64) if value >= 1 << 63 else value
        if number == 4 and wire == 1:
            return _DOUBLE.unpack(value)[0]
    return None


def _attributes(values) -> dict:
    out = {}
    for raw in values:
        key, val = None, None
        for number, wire, value in fields(raw):
            if number == 1 and wire == 2:
                key = bytes(value).decode("utf-8", "replace")
            elif number == 2 and wire == 2:
                val = _any_value(value)
        if key is not None:
            out[key] = val
    return out


@dataclass
class Point:
    name: str
    kind: str  # gauge, sum, histogram, ...
    value: float | int | None
    time_unix_nano: int = 0
    attributes: dict = field(default_factory=dict)


@dataclass
class Metrics:
    resource: dict = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)


_KINDS = {5: "gauge", 7: "sum", 9: "histogram", 10: "exponential_histogram", 11: "summary"}


def _number_point(buf) -> tuple[float | int | None, int, dict]:
    value, ts, attrs = None, 0, []
    for number, wire, raw in fields(buf):
        if number == 3 and wire == 1:
            ts = _INT64.unpack(raw)[0]
        elif number == 4 and wire == 1:
            value = _DOUBLE.unpack(raw)[0]
        elif number == 6 and wire == 1:
            value = _INT64.unpack(raw)[0]
        elif number == 7 and wire == 2:
            attrs.append(raw)
    return value, ts, _attributes(attrs)


def _histogram_point(buf) -> tuple[float | None, int, dict]:
    total, ts, attrs = None, 0, []
    for number, wire, raw in fields(buf):
        if number == 3 and wire == 1:
            ts = _INT64.unpack(raw)[0]
        elif number == 5 and wire == 1:
            total = _DOUBLE.unpack(raw)[0]
        elif number == 9 and wire == 2:
            attrs.append(raw)
    return total, ts, _attributes(attrs)


def _metric(buf, out: list[Point]) -> None:
    name, data = "", []
    for number, wire, value in fields(buf):
        if number == 1 and wire == 2:
            name = bytes(value).decode("utf-8", "replace")
        elif number in _KINDS and wire == 2:
            data.append((_KINDS[number], value))
    for kind, raw in data:
        for number, wire, point in fields(raw):
            if number != 1 or wire != 2:
                continue
            if kind in ("gauge", "sum"):
                value, ts, attrs = _number_point(point)
            else:
                value, ts, attrs = _histogram_point(point)
            out.append(Point(name, kind, value, ts, attrs))


def decode_metrics_data(buf) -> Metrics:
    result = Metrics()
    for number, wire, rm in fields(buf):
        if number != 1 or wire != 2:
            continue
        for n2, w2, value in fields(rm):
            if n2 == 1 and w2 == 2:
                result.resource.update(_attributes(v for k, w, v in fields(value) if k == 1 and w == 2))
            elif n2 == 2 and w2 == 2:
                for n3, w3, metric in fields(value):
                    if n3 == 2 and w3 == 2:
                        _metric(metric, result.points)
    return result


# -- encoding, for tests and tools --------------------------------------------------------------

def _uv(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(number: int, payload: bytes) -> bytes:
    return _uv(number << 3 | 2) + _uv(len(payload)) + payload


def _kv(key: str, value: str) -> bytes:
    return _ld(1, key.encode()) + _ld(2, _ld(1, value.encode()))


def encode_gauges(points: dict[str, float], resource: dict[str, str] | None = None, time_ns: int = 0) -> bytes:
    """A MetricsData with one gauge per name (double values): what tests push."""
    metrics = b""
    for name, value in points.items():
        point = _uv(3 << 3 | 1) + _INT64.pack(time_ns) + _uv(4 << 3 | 1) + _DOUBLE.pack(float(value))
        metrics += _ld(2, _ld(1, name.encode()) + _ld(5, _ld(1, point)))
    res = b"".join(_ld(1, _kv(k, v)) for k, v in (resource or {}).items())
    return _ld(1, _ld(1, res) + _ld(2, metrics))
