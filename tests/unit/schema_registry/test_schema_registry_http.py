"""The registry's small HTTP/1.1 server, on raw sockets: keep-alive and pipelining in order, chunked
bodies, Expect: 100-continue, Connection: close and HTTP/1.0, size limits, bad requests, routing
with percent-encoded segments, 404/405."""

import asyncio
import json

import pytest

from minikafka.broker.schema_registry.http import App, HttpServer, json_response


@pytest.fixture
async def server():
    app = App(max_body=1000)

    async def echo(request):
        return json_response({"method": request.method, "match": request.match_info, "body": request.body.decode(),
                              "q": request.query.getall("k"), "route": request.route})

    app.router.add_post("/things/{name}", echo)
    app.router.add_get("/things/{name}", echo)
    app.router.add_get("/things/{name}/parts", echo)
    srv = HttpServer(app)
    port = await srv.start("127.0.0.1", 0)
    yield port
    await srv.stop()


async def _exchange(port: int, raw: bytes, responses: int = 1) -> list[tuple[int, dict, bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    out = []
    try:
        for _ in range(responses):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            lines = head.decode().split("\r\n")
            status = int(lines[0].split()[1])
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", 0))), 5)
            out.append((status, headers, body))
    finally:
        writer.close()
    return out


async def test_keep_alive_pipelined_requests_are_answered_in_order(server):
    raw = b"".join(f"GET /things/t{i} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for i in range(5))
    answers = await _exchange(server, raw, 5)
    assert [json.loads(b)["match"]["name"] for _, _, b in answers] == [f"t{i}" for i in range(5)]


async def test_chunked_body_and_expect_continue(server):
    raw = (b"POST /things/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
           b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    writer.write(raw)
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = int([l for l in head.decode().split("\r\n") if l.lower().startswith("content-length")][0].split(":")[1])
    body = json.loads(await reader.readexactly(length))
    writer.close()
    assert body["body"] == "hello world"


async def test_connection_close_and_http_1_0(server):
    (status, headers, _), = await _exchange(server, b"GET /things/a HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert status == 200 and headers["connection"] == "close"
    (status, headers, _), = await _exchange(server, b"GET /things/a HTTP/1.0\r\n\r\n")
    assert status == 200 and headers["connection"] == "close"


async def test_percent_encoded_segments_and_query(server):
    (status, _, body), = await _exchange(server, b"GET /things/a%2Fb%20c/parts?k=1&k=two HTTP/1.1\r\n\r\n")
    answer = json.loads(body)
    assert status == 200 and answer["match"] == {"name": "a/b c"} and answer["q"] == ["1", "two"]
    assert answer["route"] == "/things/{name}/parts"


async def test_limits_and_errors(server):
    (status, _, _), = await _exchange(server, b"POST /things/a HTTP/1.1\r\nContent-Length: 5000\r\n\r\n")
    assert status == 413
    (status, _, _), = await _exchange(server, b"NONSENSE\r\n\r\n")
    assert status == 400
    (status, _, _), = await _exchange(server, b"POST /things/a HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    assert status == 400
    (status, _, body), = await _exchange(server, b"GET /nothing HTTP/1.1\r\n\r\n")
    assert status == 404 and json.loads(body)["error_code"] == 404
    (status, _, _), = await _exchange(server, b"DELETE /things/a HTTP/1.1\r\n\r\n")
    assert status == 405


async def test_a_client_that_disconnects_mid_body_leaves_the_server_serving(server):
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    writer.write(b"POST /things/a HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort")
    await writer.drain()
    writer.close()
    (status, _, _), = await _exchange(server, b"GET /things/b HTTP/1.1\r\n\r\n")
    assert status == 200
