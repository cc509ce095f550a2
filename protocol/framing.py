"""Kafka framing: every request and response is an int32 size followed by that many bytes.

``FrameDecoder`` is fed whatever chunks the transport delivers and hands back complete frames.
It enforces the size limit *before* buffering a frame, so a hostile size field can never make us
allocate more than ``max_size`` (Kafka's ``socket.request.max.bytes``).
"""

from __future__ import annotations

import struct

from .errors import ProtocolError

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

_SIZE = struct.Struct(">i")


class FrameDecoder:
    def __init__(self, max_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_size = max_size
        self._buf = bytearray()
        self._need = -1  # size of the frame being buffered, -1 while reading the size

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data) -> list[bytearray]:
        """Add bytes and return the frames they complete, without their size prefix.

        Frames are bytearrays on purpose: a Produce request's record batches are then writable
        memoryviews, so the broker patches base offsets in place instead of copying the batch.
        """
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                size = _SIZE.unpack_from(buf, pos)[0]
                if size < 0 or size > self.max_size:
                    self._buf = bytearray()
                    raise ProtocolError(f"frame size {size} outside [0, {self.max_size}]")
                self._need = size
                pos += 4
            if end - pos < self._need:
                break
            frames.append(buf[pos : pos + self._need])
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames


def frame(payload) -> bytes:
    """Prefix one payload with its size (used by tests and tools that speak raw Kafka)."""
    return _SIZE.pack(len(payload)) + bytes(payload)
