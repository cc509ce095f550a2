"""TLS off the event loop: one thread per TLS listener does its connections' handshakes,
encryption, decryption and socket I/O (issue 24).

On the loop, TLS cost the broker as much CPU as everything else it does for a produce: uvloop's
SSL protocol decrypts each 16 KiB record with a Python-level ``SSLObject.read`` through a
``MemoryBIO``, on the one thread that also validates, appends and answers (bench/RESULTS.md,
issue 12).  Here a listener's thread owns its sockets as non-blocking ``ssl.SSLSocket``\\s under a
selector: OpenSSL reads from and writes to the socket itself, and the encryption and decryption
run with the GIL released, beside the loop's work on the other core.  The loop sees a plain
``asyncio.Transport`` (``ThreadTlsTransport``): decrypted bytes arrive in batches of up to 256 KiB
(``data_received``, by ``call_soon_threadsafe``), and what the connection writes is handed to the
thread, which encrypts and sends it.

What stays as it was: the handshake's failures close only that connection with the same log line
(a plaintext client, garbage, an untrusted or missing client certificate on a listener that
requires one); a mutual-TLS client's certificate becomes its principal (``get_extra_info
("ssl_object").getpeercert()``, taken by the thread right after the handshake); SASL_SSL runs its
exchange over the decrypted stream as before; flow control in both directions (``pause_reading``
stops the thread reading that socket, and bytes not yet sent beyond the high-water mark call the
protocol's ``pause_writing``).

Threads: each connection's SSL object is used by the listener's thread only; the loop and the
thread talk through a queue of calls (``TlsWorker.call``, woken through a socket pair) one way
and ``call_soon_threadsafe`` the other.  Counters shared between them are each written by one
thread only.
"""

from __future__ import annotations

import collections
import logging
import selectors
import socket
import ssl
import threading
import time

log = logging.getLogger("minikafka.tls")

READ_BYTES = 256 * 1024  # decrypted bytes handed to the loop per delivery, at most
HANDSHAKE_TIMEOUT_S = 10.0
_WRITE_HIGH = 4 * 1024 * 1024


class _PeerInfo:
    """What ``get_extra_info("ssl_object")`` offers once the handshake is done (taken on the TLS
    thread: the SSL object itself is not to be used from the loop)."""

    __slots__ = ("_cert", "_cipher", "_version")

    def __init__(self, sock: ssl.SSLSocket) -> None:
        try:
            self._cert = sock.getpeercert()
        except ValueError:
            self._cert = None
        self._cipher = sock.cipher()
        self._version = sock.version()

    def getpeercert(self, binary_form: bool = False):
        return None if binary_form else self._cert

    def cipher(self):
        return self._cipher

    def version(self):
        return self._version


class _Conn:
    """A connection as the TLS thread sees it."""

    __slots__ = ("sock", "peer", "transport", "out", "events", "deadline", "open", "reading",
                 "closing", "sent_total", "want_write_for_read")

    def __init__(self, sock: ssl.SSLSocket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.transport: ThreadTlsTransport | None = None
        self.out: collections.deque = collections.deque()
        self.events = 0
        self.deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        self.open = False  # handshake done
        self.reading = True
        self.closing = False  # close once everything queued is sent
        self.sent_total = 0  # written by the TLS thread only
        self.want_write_for_read = False


class ThreadTlsTransport:
    """The loop's side of a connection served by a ``TlsWorker`` (the asyncio.Transport surface
    KafkaConnection and the security session use)."""

    def __init__(self, worker: "TlsWorker", conn: _Conn, protocol, extra: dict) -> None:
        self._worker = worker
        self._conn = conn
        self._protocol = protocol
        self._extra = extra
        self._closing = False
        self._lost = False
        self._paused_reading = False
        self._held: list = []  # data that arrived while reading was paused
        self._queued_total = 0  # written by the loop only
        self._high = _WRITE_HIGH
        self._low = _WRITE_HIGH // 4
        self._paused_writing = False

    # -- asyncio.Transport ----------------------------------------------------------------------

    def get_extra_info(self, name: str, default=None):
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        if high is None:
            high = _WRITE_HIGH
        if low is None:
            low = high // 4
        self._high, self._low = high, low

    def get_write_buffer_size(self) -> int:
        return self._queued_total - self._conn.sent_total

    def write(self, data) -> None:
        self.writelines((data,))

    def writelines(self, chunks) -> None:
        if self._closing:
            return
        views = []
        size = 0
        for chunk in chunks:
            n = len(chunk)
            if n:
                views.append(chunk)
                size += n
        if not size:
            return
        self._queued_total += size
        self._worker.call(self._worker.send, self._conn, views)
        if not self._paused_writing and self.get_write_buffer_size() > self._high:
            self._paused_writing = True
            self._protocol.pause_writing()

    def pause_reading(self) -> None:
        if not self._paused_reading and not self._closing:
            self._paused_reading = True
            self._worker.call(self._worker.set_reading, self._conn, False)

    def resume_reading(self) -> None:
        if self._paused_reading and not self._closing:
            self._paused_reading = False
            held, self._held = self._held, []
            for data in held:
                if self._lost:
                    return
                self._protocol.data_received(data)
            if not self._paused_reading:
                self._worker.call(self._worker.set_reading, self._conn, True)

    def is_reading(self) -> bool:
        return not self._paused_reading

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._worker.call(self._worker.close_after_flush, self._conn)

    def abort(self) -> None:
        self._closing = True
        self._worker.call(self._worker.drop, self._conn, None)

    def can_write_eof(self) -> bool:
        return False

    # -- called on the loop by the TLS thread -----------------------------------------------------

    def _data(self, data) -> None:
        if self._lost:
            return
        if self._paused_reading:
            self._held.append(data)
            return
        self._protocol.data_received(data)

    def _maybe_resume_writing(self) -> None:
        if self._paused_writing and self.get_write_buffer_size() <= self._low and not self._lost:
            self._paused_writing = False
            self._protocol.resume_writing()

    def _connection_lost(self, exc) -> None:
        if self._lost:
            return
        self._lost = self._closing = True
        self._held = []
        if self._protocol is not None:
            self._protocol.connection_lost(exc)


class TlsWorker:
    """The thread of one TLS listener: accepted sockets in, ``ThreadTlsTransport``\\s out."""

    def __init__(self, loop, context: ssl.SSLContext, listener, make_connection) -> None:
        self.loop = loop
        self.context = context
        self.listener = listener
        self.make_connection = make_connection
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._inbox: collections.deque = collections.deque()
        self._woken = False
        self._conns: set[_Conn] = set()
        self._handshaking = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"minikafka-tls-{listener.name}", daemon=True)
        self._thread.start()

    # -- from the loop ----------------------------------------------------------------------------

    def call(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the TLS thread."""
        self._inbox.append((fn, args))
        if not self._woken:
            self._woken = True
            try:
                self._wake_w.send(b"\0")
            except OSError:  # the pair is full (the thread is behind, and will look) or closed
                pass

    def add(self, sock: socket.socket, address) -> None:
        self.call(self._start_handshake, sock, address)

    def stop(self) -> None:
        self.call(self._stop)

    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- on the TLS thread ------------------------------------------------------------------------

    def _run(self) -> None:
        select = self._selector.select
        try:
            while not self._stopping:
                timeout = 0.5 if self._handshaking else None  # handshake deadlines
                for key, mask in select(timeout):
                    conn = key.data
                    if conn is None:
                        self._drain_wakeups()
                    elif conn in self._conns:
                        self._on_events(conn, mask)
                self._run_inbox()
                if timeout is not None:
                    self._expire_handshakes()
        except Exception:
            log.error("TLS thread of listener %s failed", self.listener.name, exc_info=True)
        finally:
            for conn in list(self._conns):
                self.drop(conn, None)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        self._woken = False

    def _run_inbox(self) -> None:
        inbox = self._inbox
        while inbox:
            fn, args = inbox.popleft()
            fn(*args)

    def _stop(self) -> None:
        self._stopping = True

    def _want(self, conn: _Conn, events: int) -> None:
        if events == conn.events:
            return
        if conn.events == 0:
            self._selector.register(conn.sock, events, conn)
        elif events == 0:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

    def _update_events(self, conn: _Conn) -> None:
        events = 0
        if conn.reading or conn.want_write_for_read:
            events |= selectors.EVENT_READ
        if conn.out:
            events |= selectors.EVENT_WRITE
        self._want(conn, events)

    def _start_handshake(self, sock: socket.socket, address) -> None:
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            tls = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError) as exc:
            log.warning("TLS handshake from %s on listener %s failed: %s; closing the connection",
                        peer, self.listener.name, exc)
            sock.close()
            return
        conn = _Conn(tls, peer)
        self._conns.add(conn)
        self._handshaking += 1
        self._handshake(conn)

    def _handshake(self, conn: _Conn) -> None:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            log.warning("TLS handshake from %s on listener %s failed: %s; closing the connection",
                        conn.peer, self.listener.name, reason)
            self._forget(conn)
            return
        conn.open = True
        self._handshaking -= 1
        sock = conn.sock
        peer = _PeerInfo(sock)
        extra = {"peername": _safe(sock.getpeername), "sockname": _safe(sock.getsockname),
                 "ssl_object": peer, "peercert": peer.getpeercert(), "socket": None}
        # Made here, so that whatever the thread tells the loop about this connection later
        # (data, loss) finds it; the loop gives it its protocol first (calls keep their order).
        conn.transport = ThreadTlsTransport(self, conn, None, extra)
        self._update_events(conn)
        self.loop.call_soon_threadsafe(self._made, conn.transport)

    def _made(self, transport: "ThreadTlsTransport") -> None:
        """On the loop: the connection's protocol."""
        try:
            protocol = self.make_connection()
            transport._protocol = protocol
            protocol.connection_made(transport)
        except Exception:
            log.error("connection set-up on listener %s failed", self.listener.name, exc_info=True)
            transport.abort()

    def _expire_handshakes(self) -> None:
        now = time.monotonic()
        for conn in list(self._conns):
            if not conn.open and now > conn.deadline:
                log.warning("TLS handshake from %s on listener %s failed: timed out after %.0f s; "
                            "closing the connection", conn.peer, self.listener.name, HANDSHAKE_TIMEOUT_S)
                self._forget(conn)

    def _on_events(self, conn: _Conn, mask: int) -> None:
        if not conn.open:
            self._handshake(conn)
            return
        if mask & selectors.EVENT_WRITE or conn.want_write_for_read and mask & selectors.EVENT_READ:
            self._flush(conn)
            if conn not in self._conns:
                return
        if mask & selectors.EVENT_READ and conn.reading:
            self._read(conn)

    def _read(self, conn: _Conn) -> None:
        buf = bytearray(READ_BYTES)
        view = memoryview(buf)
        got = 0
        eof = None
        sock = conn.sock
        while got < READ_BYTES:
            try:
                n = sock.recv_into(view[got:])
            except ssl.SSLWantReadError:
                break
            except ssl.SSLWantWriteError:
                conn.want_write_for_read = True
                self._update_events(conn)
                break
            except ssl.SSLZeroReturnError:
                eof = True
                break
            except (OSError, ValueError) as exc:
                eof = exc
                break
            if n == 0:
                eof = True
                break
            got += n
        view.release()
        transport = conn.transport
        if got and transport is not None:
            del buf[got:]
            self.loop.call_soon_threadsafe(transport._data, buf)
        if eof is not None:
            self.drop(conn, None if eof is True else eof)

    def send(self, conn: _Conn, views: list) -> None:
        if conn not in self._conns:
            return
        conn.out.extend(views)
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        out = conn.out
        sock = conn.sock
        sent = 0
        conn.want_write_for_read = False
        while out:
            chunk = out[0]
            try:
                n = sock.send(chunk)
            except ssl.SSLWantWriteError:
                break
            except ssl.SSLWantReadError:
                conn.want_write_for_read = True
                break
            except (OSError, ValueError) as exc:
                self.drop(conn, exc)
                return
            sent += n
            if n < len(chunk):
                out[0] = memoryview(chunk)[n:]
            else:
                out.popleft()
        if sent:
            conn.sent_total += sent
            transport = conn.transport
            if transport is not None and transport._paused_writing:
                self.loop.call_soon_threadsafe(transport._maybe_resume_writing)
        if not out and conn.closing:
            self.drop(conn, None)
            return
        self._update_events(conn)

    def set_reading(self, conn: _Conn, reading: bool) -> None:
        if conn in self._conns:
            conn.reading = reading
            self._update_events(conn)

    def close_after_flush(self, conn: _Conn) -> None:
        if conn not in self._conns:
            return
        conn.closing = True
        if not conn.out:
            self.drop(conn, None)

    def drop(self, conn: _Conn, exc) -> None:
        """Close the socket now and tell the loop."""
        if conn not in self._conns:
            return
        self._forget(conn)
        transport = conn.transport
        if transport is not None:
            try:
                self.loop.call_soon_threadsafe(transport._connection_lost, exc)
            except RuntimeError:  # the loop is closed: nobody to tell
                pass

    def _forget(self, conn: _Conn) -> None:
        if conn not in self._conns:
            return
        self._conns.discard(conn)
        if not conn.open:
            self._handshaking -= 1
        if conn.events:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
            conn.events = 0
        conn.out.clear()
        try:
            conn.sock.close()
        except OSError:
            pass


def _safe(fn):
    try:
        return fn()
    except OSError:
        return None
