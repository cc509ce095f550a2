"""TLS on a listener thread (broker/security/tls_thread.py): handshake, both directions of data,
flow control, the client certificate, failed handshakes and closing, with real TLS clients on
127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time

import pytest

from minikafka.broker.security.certs import generate
from minikafka.broker.security.tls_thread import TlsWorker


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    out = tmp_path_factory.mktemp("certs")
    generate(out, ["127.0.0.1", "localhost"], ["alice"])
    return out


def server_context(certs, require_client: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "broker.pem")
    ctx.load_verify_locations(certs / "ca.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client else ssl.CERT_OPTIONAL
    return ctx


def client_context(certs, client: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client:
        ctx.load_cert_chain(certs / f"{client}.crt", certs / f"{client}.key")
    return ctx


class Listener:
    name = "SSL"


class Recorder(asyncio.BufferedProtocol):
    """Echoes what it receives (upper-cased) and records what happened to it."""

    def __init__(self, made: asyncio.Queue) -> None:
        self.made = made
        self.data = bytearray()
        self.lost = asyncio.get_running_loop().create_future()
        self.pauses = 0
        self.resumes = 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.made.put_nowait(self)

    def data_received(self, data) -> None:
        self.data += data
        self.transport.write(bytes(data).upper())

    def get_buffer(self, sizehint):  # not used: the thread hands over whole buffers
        raise AssertionError

    def buffer_updated(self, nbytes):
        raise AssertionError

    def pause_writing(self) -> None:
        self.pauses += 1

    def resume_writing(self) -> None:
        self.resumes += 1

    def connection_lost(self, exc) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


async def serve(ctx):
    loop = asyncio.get_running_loop()
    made: asyncio.Queue = asyncio.Queue()
    worker = TlsWorker(loop, ctx, Listener(), lambda: Recorder(made))
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    lsock.setblocking(False)

    async def accept():
        while True:
            conn, addr = await loop.sock_accept(lsock)
            worker.add(conn, addr)

    task = loop.create_task(accept())
    return worker, lsock, made, task


async def stop(worker, lsock, task):
    task.cancel()
    lsock.close()
    worker.stop()
    for _ in range(200):
        if not worker.alive():
            break
        await asyncio.sleep(0.01)
    assert not worker.alive()


async def test_round_trip_principal_and_close(certs):
    worker, lsock, made, task = await serve(server_context(certs))
    try:
        port = lsock.getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs, "alice"),
                                                      server_hostname="127.0.0.1")
        proto = await asyncio.wait_for(made.get(), 10)
        cert = proto.transport.get_extra_info("ssl_object").getpeercert()
        assert dict(x[0] for x in cert["subject"])["commonName"] == "alice"
        assert proto.transport.get_extra_info("peername")[0] == "127.0.0.1"
        writer.write(b"hello")
        assert await asyncio.wait_for(reader.readexactly(5), 10) == b"HELLO"
        # a large answer through the thread: every byte arrives, in order
        big = bytes(range(256)) * 8192  # 2 MiB
        proto.transport.writelines([big[:1000], memoryview(big)[1000:]])
        assert await asyncio.wait_for(reader.readexactly(len(big)), 30) == big
        proto.transport.close()
        assert await asyncio.wait_for(proto.lost, 10) is None
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    finally:
        await stop(worker, lsock, task)


async def test_reading_pauses_and_resumes_and_a_client_close_is_seen(certs):
    worker, lsock, made, task = await serve(server_context(certs))
    try:
        port = lsock.getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs),
                                                      server_hostname="127.0.0.1")
        proto = await asyncio.wait_for(made.get(), 10)
        assert proto.transport.get_extra_info("ssl_object").getpeercert() is None  # no client cert
        proto.transport.pause_reading()
        writer.write(b"abc")
        await writer.drain()
        await asyncio.sleep(0.3)
        assert proto.data == b""  # nothing delivered while paused
        proto.transport.resume_reading()
        assert await asyncio.wait_for(reader.readexactly(3), 10) == b"ABC"
        assert proto.data == b"abc"
        writer.close()
        assert await asyncio.wait_for(proto.lost, 10) is None
    finally:
        await stop(worker, lsock, task)


async def test_writing_pauses_above_the_high_water_mark_and_resumes_when_drained(certs):
    worker, lsock, made, task = await serve(server_context(certs))
    try:
        port = lsock.getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs),
                                                      server_hostname="127.0.0.1")
        proto = await asyncio.wait_for(made.get(), 10)
        proto.transport.set_write_buffer_limits(high=64 * 1024)
        payload = b"x" * (8 * 1024 * 1024)
        proto.transport.write(payload)
        assert proto.pauses == 1
        assert len(await asyncio.wait_for(reader.readexactly(len(payload)), 30)) == len(payload)
        for _ in range(100):
            if proto.resumes:
                break
            await asyncio.sleep(0.01)
        assert proto.resumes == 1 and proto.transport.get_write_buffer_size() == 0
        writer.close()
    finally:
        await stop(worker, lsock, task)


async def test_failed_handshakes_close_only_that_connection(certs, caplog):
    worker, lsock, made, task = await serve(server_context(certs, require_client=True))
    try:
        port = lsock.getsockname()[1]
        loop = asyncio.get_running_loop()
        with caplog.at_level(logging.WARNING, logger="minikafka.tls"):
            # plaintext bytes on a TLS port
            raw = socket.create_connection(("127.0.0.1", port))
            raw.sendall(b"\x00\x00\x00\x10not a tls hello!")
            raw.settimeout(10)
            try:  # closed: an end of stream, or a reset (our unread bytes were still in its buffer)
                assert await loop.run_in_executor(None, raw.recv, 100) == b""
            except ConnectionResetError:
                pass
            raw.close()
            # a client without the certificate the listener requires
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=client_context(certs), server_hostname="127.0.0.1")
                writer.write(b"x")
                assert await asyncio.wait_for(reader.read(), 10) == b""  # TLS 1.3: refused on first read
            except (ssl.SSLError, ConnectionError):
                pass
            for _ in range(200):
                if sum("TLS handshake from" in r.getMessage() for r in caplog.records) >= 2:
                    break
                await asyncio.sleep(0.02)
        failures = [r.getMessage() for r in caplog.records if "TLS handshake from" in r.getMessage()]
        assert len(failures) == 2 and all("on listener SSL failed" in m for m in failures)
        assert made.empty()
        # and the listener still serves a good client
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs, "alice"),
                                                      server_hostname="127.0.0.1")
        proto = await asyncio.wait_for(made.get(), 10)
        writer.write(b"ok")
        assert await asyncio.wait_for(reader.readexactly(2), 10) == b"OK"
        writer.close()
        await asyncio.wait_for(proto.lost, 10)
    finally:
        await stop(worker, lsock, task)


async def test_stopping_the_worker_ends_its_connections(certs):
    worker, lsock, made, task = await serve(server_context(certs))
    port = lsock.getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs),
                                                  server_hostname="127.0.0.1")
    proto = await asyncio.wait_for(made.get(), 10)
    await stop(worker, lsock, task)
    assert await asyncio.wait_for(proto.lost, 10) is None
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()


@pytest.mark.parametrize("offload", [True, False])
async def test_the_tls_server_hands_connections_to_its_thread_when_offloading(certs, offload, monkeypatch):
    # TlsServer started a worker but once never gave it a connection: every TLS connection ran on
    # the loop while the thread idled.  Both paths must serve, each through its own transport.
    from minikafka.broker.security.tls import TlsServer
    from minikafka.broker.security.tls_thread import ThreadTlsTransport

    class Either(Recorder):  # the loop's SSL transport fills a buffer of the protocol's
        buffer = memoryview(bytearray(65536))

        def get_buffer(self, sizehint):
            return self.buffer

        def buffer_updated(self, nbytes):
            self.data_received(self.buffer[:nbytes])

    monkeypatch.setattr(TlsServer, "offload", offload)
    loop = asyncio.get_running_loop()
    made: asyncio.Queue = asyncio.Queue()
    server = TlsServer(loop, server_context(certs), Listener(), lambda: Either(made))
    await server.start("127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(certs, "alice"),
                                                      server_hostname="127.0.0.1")
        proto = await asyncio.wait_for(made.get(), 10)
        assert isinstance(proto.transport, ThreadTlsTransport) is offload
        cert = proto.transport.get_extra_info("ssl_object").getpeercert()
        assert dict(x[0] for x in cert["subject"])["commonName"] == "alice"
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), 10) == b"PING"
        writer.close()
        await asyncio.wait_for(proto.lost, 10)
    finally:
        server.close()
        await server.wait_closed()
    if offload:
        assert not server._worker.alive()


async def test_a_loop_that_is_behind_stops_the_thread_reading_and_nothing_is_lost(certs):
    # The thread hands at most _AHEAD decrypted buffers of a connection to the loop before the loop
    # has read them; then it leaves the socket unread (TCP holds the client back) and reads on
    # when the loop catches up.  Here the loop is held in the first data_received until the
    # thread has stalled; every byte still arrives, in order.
    from minikafka.broker.security import tls_thread

    seen_stalled = []

    class Slow(Recorder):
        def data_received(self, data) -> None:
            if not seen_stalled:
                conn = self.transport._conn
                deadline = time.monotonic() + 10
                while not conn.stalled and time.monotonic() < deadline:
                    time.sleep(0.01)  # the loop is busy: the thread runs on
                seen_stalled.append(conn.stalled)
            self.data += data

    loop = asyncio.get_running_loop()
    made: asyncio.Queue = asyncio.Queue()
    worker = TlsWorker(loop, server_context(certs), Listener(), lambda: Slow(made))
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    payload = bytes(range(256)) * (4 * tls_thread._AHEAD * tls_thread.READ_BYTES // 256)

    def client() -> None:
        raw = socket.create_connection(lsock.getsockname(), timeout=30)
        with client_context(certs).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(payload)
            tls.recv(1)  # until the server closes

    try:
        sending = loop.run_in_executor(None, client)
        conn, addr = await loop.run_in_executor(None, lsock.accept)
        worker.add(conn, addr)
        proto = await asyncio.wait_for(made.get(), 10)
        deadline = loop.time() + 30
        while len(proto.data) < len(payload) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert seen_stalled == [True]
        assert proto.data == payload
        proto.transport.close()
        await asyncio.wait_for(sending, 10)
    finally:
        lsock.close()
        worker.stop()
        for _ in range(200):
            if not worker.alive():
                break
            await asyncio.sleep(0.01)
