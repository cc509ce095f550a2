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
        self._size_bytes = bytearray()  # a size prefix split across chunks
        self._frame: bytearray | None = None  # the frame being filled, once its size is known
        self._need = 0
        self.frames_started = 0  # counts frames that arrived in pieces: a new one has a new number

    @property
    def partial_size(self) -> int:
        """Declared size of the frame being received in pieces, 0 when there is none."""
        return self._need if self._frame is not None else 0

    @property
    def buffered(self) -> int:
        return len(self._size_bytes) + (len(self._frame) if self._frame is not None else 0)

    def feed(self, data) -> list[bytearray]:
        """Add bytes and return the frames they complete, without their size prefix.

        Each byte is copied once, straight into the frame it belongs to, and the frame grows
        only as its bytes arrive, so a size field alone never reserves memory.  Frames are
        bytearrays on purpose: a Produce request's record batches are then writable
        memoryviews, so the broker patches base offsets in place instead of copying the batch.
        """
        frames = []
        view = memoryview(data)
        pos = 0
        end = len(view)
        while pos < end:
            if self._frame is None and not self._size_bytes and end - pos >= 4:
                # Common case: a whole frame inside this chunk; one slice copy, no state.
                size = _SIZE.unpack_from(view, pos)[0]
                if size < 0 or size > self.max_size:
                    raise ProtocolError(f"frame size {size} outside [0, {self.max_size}]")
                if end - pos - 4 >= size:
                    frames.append(bytearray(view[pos + 4 : pos + 4 + size]))
                    pos += 4 + size
                    continue
            if self._frame is None:
                take = min(4 - len(self._size_bytes), end - pos)
                self._size_bytes += view[pos : pos + take]
                pos += take
                if len(self._size_bytes) < 4:
                    break
                size = _SIZE.unpack(self._size_bytes)[0]
                self._size_bytes.clear()
                if size < 0 or size > self.max_size:
                    raise ProtocolError(f"frame size {size} outside [0, {self.max_size}]")
                self._frame = bytearray()
                self._need = size
                self.frames_started += 1
            take = min(self._need - len(self._frame), end - pos)
            self._frame += view[pos : pos + take]
            pos += take
            if len(self._frame) == self._need:
                frames.append(self._frame)
                self._frame = None
        return frames


def frame(payload) -> bytes:
    """Prefix one payload with its size (used by tests and tools that speak raw Kafka)."""
    return _SIZE.pack(len(payload)) + bytes(payload)
