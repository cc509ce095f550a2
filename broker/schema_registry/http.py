"""A small HTTP/1.1 server on the broker's event loop, for the registry's listeners.

Why not aiohttp (which the broker's own HTTP server uses): importing it costs ~130 ms and ~10 MB,
more than the whole registry, and the registry needs only what REST clients send: a request line,
headers, a body by ``Content-Length`` or ``Transfer-Encoding: chunked`` (``Expect: 100-continue``
answered), keep-alive (HTTP/1.1 default, ``Connection: close`` honoured), answers with a
``Content-Length``.  Requests on one connection are answered in order, one at a time.

Routing is by path segments: ``/subjects/{subject}/versions`` matches a segment per ``{name}``, and
each segment is percent-decoded after the split, so a subject may contain ``/`` written as ``%2F``.
``Router.resolve`` raises ``NotFound``/``MethodNotAllowed``; middlewares are ``async (request,
handler) -> Response`` wrapped around the handler, the first outermost.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Awaitable, Callable
from urllib.parse import parse_qsl, unquote

log = logging.getLogger("minikafka.schema_registry")

MAX_HEADER_BYTES = 64 * 1024
REASONS = {100: "Continue", 200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
           413: "Payload Too Large", 422: "Unprocessable Entity", 500: "Internal Server Error"}


class NotFound(Exception):
    pass


class MethodNotAllowed(Exception):
    pass


class Query:
    """The query string: ``get(name, default)`` (first value) and ``getall(name, default)``."""

    def __init__(self, text: str) -> None:
        self.pairs = parse_qsl(text, keep_blank_values=True)

    def get(self, name: str, default=None):
        for key, value in self.pairs:
            if key == name:
                return value
        return default

    def getall(self, name: str, default=None):
        found = [value for key, value in self.pairs if key == name]
        return found if found else ([] if default is None else default)

    def __contains__(self, name: str) -> bool:
        return any(key == name for key, _ in self.pairs)


class Request:
    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        self.method = method
        raw_path, _, query = target.partition("?")
        self.raw_path = raw_path
        self.path = unquote(raw_path)
        self.query = Query(query)
        self.headers = headers  # lower-case names
        self.body = body
        self.match_info: dict[str, str] = {}
        self.route = "-"  # the pattern that matched, for metrics

    async def read(self) -> bytes:
        return self.body


class Response:
    def __init__(self, text: str | bytes = b"", status: int = 200, content_type: str = "application/json",
                 headers: dict[str, str] | None = None) -> None:
        self.body = text.encode() if isinstance(text, str) else text
        self.status = status
        self.content_type = content_type
        self.headers = dict(headers or {})

    def encode(self, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Status')}",
                 f"Content-Type: {self.content_type}", f"Content-Length: {len(self.body)}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        if not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def json_response(data, status: int = 200, content_type: str = "application/json") -> Response:
    return Response(json.dumps(data, ensure_ascii=False), status, content_type)


Handler = Callable[[Request], Awaitable[Response]]


class Router:
    def __init__(self) -> None:
        self._routes: list[tuple[str, list[str], str, Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, [s for s in pattern.split("/") if s], pattern, handler))

    def add_get(self, pattern, handler):
        self.add("GET", pattern, handler)

    def add_post(self, pattern, handler):
        self.add("POST", pattern, handler)

    def add_put(self, pattern, handler):
        self.add("PUT", pattern, handler)

    def add_delete(self, pattern, handler):
        self.add("DELETE", pattern, handler)

    def resolve(self, request: Request) -> Handler:
        segments = [s for s in request.raw_path.split("/") if s]
        trailing = request.raw_path.endswith("/") and request.raw_path != "/"
        allowed = False
        for method, parts, pattern, handler in self._routes:
            if len(parts) != len(segments) or trailing != (pattern.endswith("/") and pattern != "/"):
                continue
            match: dict[str, str] = {}
            for part, seg in zip(parts, segments):
                if part.startswith("{") and part.endswith("}"):
                    match[part[1:-1]] = unquote(seg)
                elif part != unquote(seg):
                    break
            else:
                if method != request.method:
                    allowed = True
                    continue
                request.match_info = match
                request.route = pattern
                return handler
        raise MethodNotAllowed() if allowed else NotFound()


class App:
    def __init__(self, middlewares: list | None = None, max_body: int = 16 * 1024 * 1024) -> None:
        self.router = Router()
        self.middlewares = list(middlewares or [])
        self.max_body = max_body

    async def handle(self, request: Request) -> Response:
        async def dispatch(req: Request) -> Response:
            return await self.router.resolve(req)(req)

        call = dispatch
        for middleware in reversed(self.middlewares):
            call = (lambda mw, nxt: (lambda req: mw(req, nxt)))(middleware, call)
        try:
            return await call(request)
        except NotFound:
            return json_response({"error_code": 404, "message": "HTTP 404 Not Found"}, 404)
        except MethodNotAllowed:
            return json_response({"error_code": 405, "message": "HTTP 405 Method Not Allowed"}, 405)


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Connection(asyncio.Protocol):
    def __init__(self, app: App, connections: set) -> None:
        self.app = app
        self.connections = connections
        self.buffer = bytearray()
        self.transport = None
        self.wakeup: asyncio.Event | None = None
        self.task: asyncio.Task | None = None
        self.closed = False
        self.paused = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.connections.add(self)
        self.wakeup = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > self.app.max_body + MAX_HEADER_BYTES and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self.wakeup.set()

    def eof_received(self):
        self.closed = True
        self.wakeup.set()
        return False

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.connections.discard(self)
        if self.wakeup is not None:
            self.wakeup.set()

    async def _need(self, predicate) -> bool:
        while not predicate():
            if self.closed:
                return False
            self.wakeup.clear()
            if self.paused:
                self.paused = False
                self.transport.resume_reading()
            await self.wakeup.wait()
        return True

    async def _read_body(self, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = bytearray()
            while True:
                if not await self._need(lambda: b"\r\n" in self.buffer):
                    raise ConnectionError
                line, _, _ = bytes(self.buffer).partition(b"\r\n")
                try:
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    raise _BadRequest(400, "bad chunk size") from None
                if len(body) + size > self.app.max_body:
                    raise _BadRequest(413, "request body too large")
                need = len(line) + 2 + size + 2
                if not await self._need(lambda: len(self.buffer) >= need):
                    raise ConnectionError
                body += self.buffer[len(line) + 2:len(line) + 2 + size]
                del self.buffer[:need]
                if size == 0:
                    return bytes(body)
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise _BadRequest(400, "bad Content-Length") from None
        if length < 0:
            raise _BadRequest(400, "bad Content-Length")
        if length > self.app.max_body:
            raise _BadRequest(413, "request body too large")
        if not await self._need(lambda: len(self.buffer) >= length):
            raise ConnectionError
        body = bytes(self.buffer[:length])
        del self.buffer[:length]
        return body

    async def _serve(self) -> None:
        try:
            while True:
                if not await self._need(lambda: b"\r\n\r\n" in self.buffer or len(self.buffer) > MAX_HEADER_BYTES):
                    return
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    self._send(Response(b'{"error_code":400,"message":"headers too large"}', 400), False)
                    return
                head = bytes(self.buffer[:end]).decode("latin-1")
                del self.buffer[:end + 4]
                request_line, *header_lines = head.split("\r\n")
                parts = request_line.split(" ")
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    self._send(Response(b'{"error_code":400,"message":"bad request line"}', 400), False)
                    return
                method, target, version = parts
                headers: dict[str, str] = {}
                for line in header_lines:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                connection = headers.get("connection", "").lower()
                keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
                if headers.get("expect", "").lower() == "100-continue":
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                try:
                    body = await self._read_body(headers)
                except _BadRequest as exc:
                    self._send(json_response({"error_code": exc.status, "message": str(exc)}, exc.status), False)
                    return
                request = Request(method.upper(), target, headers, body)
                try:
                    response = await self.app.handle(request)
                except Exception:
                    log.error("schema registry: %s %s failed", method, target, exc_info=True)
                    response = json_response({"error_code": 500, "message": "Internal Server Error"}, 500)
                self._send(response, keep_alive)
                if not keep_alive:
                    return
        except ConnectionError:
            return
        finally:
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

    def _send(self, response: Response, keep_alive: bool) -> None:
        if not self.transport.is_closing():
            self.transport.write(response.encode(keep_alive))


class HttpServer:
    """``await start(host, port, ssl)`` binds (port 0: a free one, see ``port``)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[_Connection] = set()

    async def start(self, host: str, port: int, ssl_context=None) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Connection(self.app, self.connections), host, port,
                                          ssl=ssl_context, reuse_address=True)
        self.servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
            if conn.task is not None:
                conn.task.cancel()
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=0.5)
            except (asyncio.TimeoutError, Exception):
                pass
        self.servers = []
