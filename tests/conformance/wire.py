"""A blocking raw-socket Kafka client built on minikafka's own codec (protocol.codec).

``Conn.call(api_key, version, body)`` returns an :class:`Outcome`: the decoded response body, or
``closed`` when the broker closed the connection instead of answering (what Kafka does for a
version it does not serve), or ``timeout``.  After ``closed`` or ``timeout`` the next call opens a
new connection.  ApiVersions beyond the highest version the codec knows is encoded with that
version's fields and, like every ApiVersions error answer, decoded as a v0 body.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from minikafka.protocol import codec, specs

CLIENT_ID = "conformance"


@dataclass
class Outcome:
    kind: str  # "response" | "closed" | "timeout"
    body: dict | None = None

    def __getitem__(self, key):
        if self.body is None:
            raise KeyError(f"no response body ({self.kind})")
        return self.body[key]

    def get(self, key, default=None):
        return default if self.body is None else self.body.get(key, default)


def max_spec_version(api_key: int) -> int:
    spec = specs.message(api_key, "request")
    return spec.valid[1] if spec is not None else -1


class Conn:
    def __init__(self, host: str, port: int, timeout: float = 15.0):
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self.correlation = 0

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionResetError("closed")
            buf += chunk
        return bytes(buf)

    def send_raw(self, frame: bytes, timeout: float | None = None) -> bytes | str:
        """Send one size-prefixed frame; return the response frame (without size) or
        "closed"/"timeout"."""
        sock = self._connect()
        sock.settimeout(timeout or self.timeout)
        try:
            sock.sendall(frame)
            (size,) = struct.unpack(">i", self._recv_exact(4))
            return self._recv_exact(size)
        except socket.timeout:
            self.close()
            return "timeout"
        except (ConnectionError, OSError):
            self.close()
            return "closed"

    def encode(self, api_key: int, version: int, body: dict, client_id: str | None = CLIENT_ID) -> bytes:
        self.correlation += 1
        return codec.encode_request(api_key, version, self.correlation, client_id, body)

    def call(self, api_key: int, version: int, body: dict, *, timeout: float | None = None,
             client_id: str | None = CLIENT_ID, no_response: bool = False) -> Outcome:
        frame = self.encode(api_key, version, body, client_id)
        if no_response:  # Produce acks=0: nothing comes back
            self._connect().sendall(frame)
            return Outcome("response", {})
        answer = self.send_raw(frame, timeout)
        if isinstance(answer, str):
            return Outcome(answer)
        decode_version = version
        if api_key == 18 and (version > max_spec_version(18) or _error_code(answer) == 35):
            decode_version = 0
        cid, body = codec.decode_response(api_key, decode_version, answer)
        if cid != self.correlation:
            self.close()
            raise AssertionError(f"correlation id {cid} != {self.correlation}")
        return Outcome("response", _plain(body))


def _error_code(frame: bytes) -> int:
    # ApiVersions responses: header v0 (correlation id), then error_code int16 first in every version.
    return struct.unpack_from(">h", frame, 4)[0] if len(frame) >= 6 else 0


def _plain(value: Any) -> Any:
    """memoryviews -> bytes, so responses outlive their frames and compare by value."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value
