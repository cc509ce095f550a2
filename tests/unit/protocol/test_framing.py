import random
import struct

import pytest
from hypothesis import given, strategies as st

from minikafka.protocol.errors import ProtocolError
from minikafka.protocol.framing import FrameDecoder, frame


@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_frames_survive_any_split(payloads, cuts):
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    out = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += decoder.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert [bytes(f) for f in out] == payloads
    assert decoder.buffered == 0


def test_frames_are_writable():
    (f,) = FrameDecoder().feed(frame(b"abc"))
    memoryview(f)[0] = ord("z")
    assert f == b"zbc"


@pytest.mark.parametrize("size", [-1, -(2**31), 1025])
def test_bad_sizes_raise_before_buffering(size):
    decoder = FrameDecoder(max_size=1024)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", size))
    assert decoder.buffered == 0


def test_random_garbage_raises_only_protocol_error_and_stays_bounded():
    rng = random.Random(1234)
    for _ in range(3000):
        decoder = FrameDecoder(max_size=4096)
        try:
            for _ in range(rng.randint(1, 6)):
                decoder.feed(rng.randbytes(rng.randint(0, 600)))
                assert decoder.buffered <= 4096 + 4 + 600
        except ProtocolError:
            pass


def test_a_size_field_alone_reserves_no_memory():
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", 50 * 1024 * 1024) + b"abc") == []
    assert decoder.buffered == 3


def test_a_large_frame_in_many_chunks_then_a_small_one():
    payload = bytes(range(256)) * 4096
    stream = frame(payload) + frame(b"tail")
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(stream), 4093):
        out += decoder.feed(stream[i : i + 4093])
    assert [bytes(f) for f in out] == [payload, b"tail"]
