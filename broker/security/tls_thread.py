"""TLS off the event loop: one thread per TLS listener does its connections' handshakes,
encryption, decryption and socket I/O (issue 24; used when ``TlsServer.offload`` is True).

On the loop, TLS costs the broker's one thread about 1.1 ms per MB produced and 0.6 ms per MB
consumed on top of what it does anyway (bench/RESULTS.md, "tls2").  Here a listener's thread owns
its sockets under a selector and runs OpenSSL through memory BIOs (``ssl.SSLObject``):
one ``recv_into`` of up to 256 KiB of ciphertext per socket read (an ``SSLSocket`` reads each
16 KiB record with two ``read`` calls of its own), decryption record by record into a reused
buffer, and encryption of what the connection writes in steps of 256 KiB (whole records), each sent with
one ``send`` once the socket has taken the step before.
OpenSSL runs with the GIL released, beside the loop's work on the other core.  The loop sees a
plain ``asyncio.Transport`` (``ThreadTlsTransport``): decrypted bytes arrive in batches of up to
``READ_BYTES`` (``data_received``, by ``call_soon_threadsafe``; the protocol reads them during
the call, as KafkaConnection does, and the buffer goes back to the thread's pool), and what the
connection writes is handed to the thread, which encrypts and sends it.

What stays as it was: the handshake's failures close only that connection with the same log line
(a plaintext client, garbage, an untrusted or missing client certificate on a listener that
requires one); a mutual-TLS client's certificate becomes its principal (``get_extra_info
("ssl_object").getpeercert()``, taken by the thread right after the handshake); SASL_SSL runs its
exchange over the decrypted stream as before; flow control in both directions (``pause_reading``
stops the thread reading that socket, and bytes not yet sent beyond the high-water mark call the
protocol's ``pause_writing``).

Cost (bench/RESULTS.md, "tls2"): the loop's own work per MB produced over TLS falls below
PLAINTEXT's (0.8 against 1.9 ms/MB on the loop's path), but the thread spends 1.2 ms/MB: OpenSSL
~0.5, and per 16 KiB record one ``SSLObject.read`` that drops and retakes the GIL the loop is
holding, plus the copies into and out of the memory BIOs.  In all it costs what the loop's path
costs, so it is faster only where a core is free for it; on a 2-core machine that also runs the
clients it was no faster for produce and 15% slower for consume, and ``TlsServer.offload`` is off
by default.

Threads: each connection's SSL object is used by the listener's thread only; the loop and the
thread talk through a queue of calls (``TlsWorker.call``, woken through a socket pair) one way
and ``call_soon_threadsafe`` the other.  Counters shared between them are each written by one
thread only; the pool of read buffers is a deque (append and pop are atomic).
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

READ_BYTES = 256 * 1024  # ciphertext per socket read, and decrypted bytes per delivery, at most
HANDSHAKE_TIMEOUT_S = 10.0
_WRITE_HIGH = 4 * 1024 * 1024
# Plaintext encrypted per step, when the socket has taken the previous step's ciphertext: a 10 MB
# Fetch answer is not encrypted into memory all at once (OpenSSL's memory BIO would grow, and
# copy and clear itself, along the way), and a step is whole 16 KiB records.
ENCRYPT_BYTES = 256 * 1024
_RECORD = 16 * 1024
_AHEAD = 8  # decrypted buffers of one connection handed to the loop and not yet read by it, at most
_POOL = 16  # read buffers kept for reuse per listener


class _PeerInfo:
    """What ``get_extra_info("ssl_object")`` offers once the handshake is done (taken on the TLS
    thread: the SSL object itself is not to be used from the loop)."""

    __slots__ = ("_cert", "_cipher", "_version")

    def __init__(self, ssl_object: ssl.SSLObject) -> None:
        try:
            self._cert = ssl_object.getpeercert()
        except ValueError:
            self._cert = None
        self._cipher = ssl_object.cipher()
        self._version = ssl_object.version()

    def getpeercert(self, binary_form: bool = False):
        return None if binary_form else self._cert

    def cipher(self):
        return self._cipher

    def version(self):
        return self._version


class _Conn:
    """A connection as the TLS thread sees it."""

    __slots__ = ("sock", "tls", "incoming", "outgoing", "peer", "transport", "plain", "out", "events", "deadline",
                 "open", "reading", "closing", "sent_total", "delivered", "stalled")

    def __init__(self, sock: socket.socket, tls: ssl.SSLObject, incoming, outgoing, peer: str) -> None:
        self.sock = sock
        self.tls = tls
        self.incoming = incoming  # ssl.MemoryBIO: ciphertext read from the socket
        self.outgoing = outgoing  # ssl.MemoryBIO: ciphertext to send
        self.peer = peer
        self.transport: ThreadTlsTransport | None = None
        self.plain: collections.deque = collections.deque()  # written by the loop, not yet encrypted
        # Ciphertext not yet sent: [bytes or memoryview, plaintext bytes it carries] pairs.
        self.out: collections.deque = collections.deque()
        self.events = 0
        self.deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        self.open = False  # handshake done
        self.reading = True
        self.closing = False  # close once everything queued is sent
        self.sent_total = 0  # plaintext bytes whose ciphertext has left; written by the TLS thread only
        # Buffers handed to the loop (written by the thread only; the transport counts those it
        # gave back): the thread stops reading this socket while _AHEAD are out, so a loop that
        # is behind holds the client back through TCP instead of piling up decrypted bytes.
        self.delivered = 0
        self.stalled = False


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
        self._returned = 0  # buffers of this connection given back (written by the loop only)

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
        self._worker.call(self._worker.send, self._conn, views, size)
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

    def _data(self, buf: bytearray, n: int) -> None:
        try:
            if self._lost:
                return
            if self._paused_reading:
                self._held.append(bytes(memoryview(buf)[:n]))  # kept: the buffer goes back to the pool
                return
            with memoryview(buf) as view, view[:n] as data:
                self._protocol.data_received(data)  # read during the call (KafkaConnection copies)
        finally:
            worker = self._worker
            worker.give_back(buf)
            self._returned += 1
            if self._conn.stalled:
                worker.call(worker.unstall, self._conn)

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
        self._cipher_view: memoryview | None = None  # the thread's socket reads land here
        self._pool: collections.deque = collections.deque()  # decrypted-data buffers to reuse
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

    def give_back(self, buf: bytearray) -> None:
        """A delivered buffer, read by its protocol: the thread may fill it again."""
        if len(self._pool) < _POOL:
            self._pool.append(buf)

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

    def _tell(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the loop."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed (the broker stopped): nobody to tell
            pass

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
        if conn.reading and not conn.stalled or not conn.open:
            events |= selectors.EVENT_READ
        if conn.out or conn.plain:
            events |= selectors.EVENT_WRITE
        self._want(conn, events)

    def _handshake_failed(self, conn: _Conn, exc) -> None:
        reason = str(exc) or type(exc).__name__
        log.warning("TLS handshake from %s on listener %s failed: %s; closing the connection",
                    conn.peer, self.listener.name, reason)
        self._queue_outgoing(conn, 0)  # the alert, if OpenSSL wrote one: best effort
        if conn.out:
            try:
                conn.sock.send(conn.out[0][0])
            except OSError:
                pass
        self._forget(conn)

    def _start_handshake(self, sock: socket.socket, address) -> None:
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = self.context.wrap_bio(incoming, outgoing, server_side=True)
        except (OSError, ValueError) as exc:
            log.warning("TLS handshake from %s on listener %s failed: %s; closing the connection",
                        peer, self.listener.name, exc)
            sock.close()
            return
        conn = _Conn(sock, tls, incoming, outgoing, peer)
        if self._cipher_view is None:  # at the first connection: an idle listener holds no buffer
            self._cipher_view = memoryview(bytearray(READ_BYTES))
        self._conns.add(conn)
        self._handshaking += 1
        self._update_events(conn)

    def _handshake(self, conn: _Conn, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            self._flush(conn)
            if conn not in self._conns:
                return
        if mask & selectors.EVENT_READ:
            try:
                n = conn.sock.recv_into(self._cipher_view)
            except (BlockingIOError, InterruptedError):
                n = None
            except OSError as exc:
                self._handshake_failed(conn, exc)
                return
            if n == 0:
                conn.incoming.write_eof()
            elif n:
                conn.incoming.write(self._cipher_view[:n])
        try:
            conn.tls.do_handshake()
        except ssl.SSLWantReadError:
            self._queue_outgoing(conn, 0)
            self._flush(conn)
            return
        except (OSError, ValueError) as exc:
            self._handshake_failed(conn, exc)
            return
        conn.open = True
        self._handshaking -= 1
        sock = conn.sock
        peer = _PeerInfo(conn.tls)
        extra = {"peername": _safe(sock.getpeername), "sockname": _safe(sock.getsockname),
                 "ssl_object": peer, "peercert": peer.getpeercert(), "socket": None}
        # Made here, so that whatever the thread tells the loop about this connection later
        # (data, loss) finds it; the loop gives it its protocol first (calls keep their order).
        conn.transport = ThreadTlsTransport(self, conn, None, extra)
        self._tell(self._made, conn.transport)
        # TLS 1.3's session tickets, and whatever the client sent after its Finished.
        self._queue_outgoing(conn, 0)
        self._decrypt(conn)
        if conn in self._conns:
            self._queue_outgoing(conn, 0)
            self._flush(conn)

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
            self._handshake(conn, mask)
            return
        if mask & selectors.EVENT_WRITE:
            self._flush(conn)
            if conn not in self._conns:
                return
        if mask & selectors.EVENT_READ and conn.reading:
            self._read(conn)

    def _read(self, conn: _Conn) -> None:
        """One socket read of ciphertext, decrypted and handed to the loop."""
        try:
            n = conn.sock.recv_into(self._cipher_view)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.drop(conn, exc)
            return
        if n == 0:
            conn.incoming.write_eof()
        else:
            conn.incoming.write(self._cipher_view[:n])
        self._decrypt(conn)
        if n == 0:  # the end of the stream: _decrypt has dropped it, or will once unstalled
            if conn in self._conns and not conn.stalled:
                self.drop(conn, None)
        elif conn in self._conns and conn.outgoing.pending:  # e.g. an answer to a key update
            self._queue_outgoing(conn, 0)
            self._flush(conn)

    def _decrypt(self, conn: _Conn) -> None:
        """Decrypt every whole record the incoming BIO holds, in batches of up to READ_BYTES."""
        read = conn.tls.read
        transport = conn.transport
        eof = None
        while True:
            if conn.delivered - transport._returned >= _AHEAD:
                conn.stalled = True  # then look again: the loop may have given one back meanwhile
                if conn.delivered - transport._returned >= _AHEAD:
                    self._update_events(conn)
                    return
                conn.stalled = False
            pool = self._pool
            buf = pool.pop() if pool else bytearray(READ_BYTES)
            got = 0
            with memoryview(buf) as view:
                while got < READ_BYTES:
                    try:
                        k = read(READ_BYTES - got, view[got:])
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLZeroReturnError:  # the client's close_notify
                        eof = True
                        break
                    except (OSError, ValueError) as exc:  # a bad record, or the end of the stream
                        eof = True if isinstance(exc, ssl.SSLEOFError) else exc
                        break
                    if not k:
                        eof = True
                        break
                    got += k
            if got:
                conn.delivered += 1
                self._tell(transport._data, buf, got)
            else:
                self.give_back(buf)
            if eof is not None:
                self.drop(conn, None if eof is True else eof)
                return
            if got < READ_BYTES:
                return

    def _queue_outgoing(self, conn: _Conn, plain: int) -> None:
        """Move the ciphertext OpenSSL wrote to the outgoing BIO to the send queue."""
        if conn.outgoing.pending:
            conn.out.append([conn.outgoing.read(), plain])
        elif plain:
            conn.sent_total += plain

    def send(self, conn: _Conn, views: list, size: int) -> None:
        if conn not in self._conns:
            return
        conn.plain.extend(views)
        if not conn.out:  # else the socket is busy: its next writable event goes on
            self._flush(conn)

    def _encrypt(self, conn: _Conn) -> bool:
        """Encrypt about ENCRYPT_BYTES of the queued plaintext into one piece of ciphertext (False:
        the connection failed and is dropped)."""
        plain = conn.plain
        write = conn.tls.write
        size = 0
        try:
            while plain and size < ENCRYPT_BYTES:
                chunk = plain[0]
                n = len(chunk)
                take = max((ENCRYPT_BYTES - size) // _RECORD * _RECORD, _RECORD)
                if n > take:  # a large chunk goes in whole records, a step at a time
                    view = chunk if isinstance(chunk, memoryview) else memoryview(chunk)
                    write(view[:take])
                    plain[0] = view[take:]
                    size += take
                else:
                    write(chunk)
                    plain.popleft()
                    size += n
        except (OSError, ValueError) as exc:
            self.drop(conn, exc)
            return False
        self._queue_outgoing(conn, size)
        return True

    def _flush(self, conn: _Conn) -> None:
        out = conn.out
        sock = conn.sock
        sent = 0
        while True:
            if not out:
                if not conn.plain or not conn.open or not self._encrypt(conn):
                    break
            item = out[0]
            chunk = item[0]
            try:
                n = sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if conn.open:
                    self.drop(conn, exc)
                else:
                    self._handshake_failed(conn, exc)
                return
            if n < len(chunk):
                item[0] = memoryview(chunk)[n:]
                break
            out.popleft()
            sent += item[1]
        if conn not in self._conns:
            return
        if sent:
            conn.sent_total += sent
            transport = conn.transport
            if transport is not None and transport._paused_writing:
                self._tell(transport._maybe_resume_writing)
        if not out and not conn.plain and conn.closing:
            self._close_notify(conn)
            self.drop(conn, None)
            return
        self._update_events(conn)

    def _close_notify(self, conn: _Conn) -> None:
        """Tell the client we are done (best effort: one send, no waiting for its answer)."""
        try:
            conn.tls.unwrap()
        except (ssl.SSLWantReadError, OSError, ValueError):
            pass
        if conn.outgoing.pending:
            try:
                conn.sock.send(conn.outgoing.read())
            except OSError:
                pass

    def unstall(self, conn: _Conn) -> None:
        """The loop gave back a buffer of a connection that had too many out: read on."""
        if conn not in self._conns or not conn.stalled:
            return
        if conn.delivered - conn.transport._returned >= _AHEAD:
            return
        conn.stalled = False
        self._decrypt(conn)  # what the incoming BIO still holds first
        if conn in self._conns:
            self._update_events(conn)

    def set_reading(self, conn: _Conn, reading: bool) -> None:
        if conn in self._conns:
            conn.reading = reading
            self._update_events(conn)

    def close_after_flush(self, conn: _Conn) -> None:
        if conn not in self._conns:
            return
        conn.closing = True
        if not conn.out and not conn.plain:
            self._close_notify(conn)
            self.drop(conn, None)

    def drop(self, conn: _Conn, exc) -> None:
        """Close the socket now and tell the loop."""
        if conn not in self._conns:
            return
        self._forget(conn)
        transport = conn.transport
        if transport is not None:
            self._tell(transport._connection_lost, exc)

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
        conn.plain.clear()
        try:
            conn.sock.close()
        except OSError:
            pass


def _safe(fn):
    try:
        return fn()
    except OSError:
        return None
