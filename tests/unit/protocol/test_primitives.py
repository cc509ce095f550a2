import pytest
from hypothesis import given, strategies as st

from minikafka.protocol.errors import ProtocolError
from minikafka.protocol.primitives import (
    java_string_hash,
    read_uvarint,
    read_varint,
    read_varlong,
    write_uvarint,
    write_varint,
    write_varlong,
)


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(n):
    data = write_uvarint(n)
    assert read_uvarint(data, 0) == (n, len(data))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n):
    data = write_varint(n)
    assert read_varint(b"xx" + data, 2) == (n, 2 + len(data))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n):
    data = write_varlong(n)
    assert read_varlong(data, 0) == (n, len(data))


def test_zigzag_golden_bytes():
    # The zigzag mapping interleaves signs: 0->0, -1->1, 1->2, -2->3 ...
    assert write_varint(0) == b"\x00"
    assert write_varint(-1) == b"\x01"
    assert write_varint(1) == b"\x02"
    assert write_varint(-64) == b"\x7f"
    assert write_varint(64) == b"\x80\x01"
    assert write_uvarint(300) == b"\xac\x02"


@given(st.binary(max_size=12))
def test_readers_raise_only_protocol_error(data):
    for reader in (read_uvarint, read_varint, read_varlong):
        try:
            reader(data, 0)
        except ProtocolError:
            pass


def test_truncated_and_overlong_varints():
    with pytest.raises(ProtocolError):
        read_uvarint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(ProtocolError):
        read_varint(b"\xff\xff\xff\xff\x1f", 0)  # 35 bits: not an int32


@pytest.mark.parametrize(
    "s, expected",
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),
        ("console-consumer-12345", None),
        ("polygenelubricants", -2147483648),  # a well-known string whose hashCode is Integer.MIN_VALUE
        ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a non-BMP char counts as two UTF-16 code units
    ],
)
def test_java_string_hash(s, expected):
    h = java_string_hash(s)
    assert -(2**31) <= h < 2**31
    if expected is not None:
        assert h == expected


def test_crc32c_known_value():
    # The CRC-32C check value from RFC 3720 (iSCSI): the ASCII digits 1-9.
    from minikafka.protocol.primitives import crc32c

    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283
