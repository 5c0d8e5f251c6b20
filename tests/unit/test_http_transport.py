"""The hand-built HTTP/1.1 transport (the ``BROKER_HTTP_CLIENT=http1`` opt-in) against a loopback
server that answers byte for byte (``tests/raw_backend.py``): framing, reuse, failures, TLS.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from adapters.http_transport import Http1Transport, ResponseTooLarge, message, origin_of
from tests.raw_backend import OK, Serve, serve, tls_pair

__all__ = ["serve"]  # the fixture, used by name


async def _post(
    transport: Http1Transport,
    url: str,
    body: bytes = b'{"x":1}',
    headers: dict[str, str] | None = None,
    **extensions: object,
) -> httpx.Response:
    request = httpx.Request("POST", url, content=body, headers=headers or {})
    request.extensions.update(extensions)
    response = await transport.handle_async_request(request)
    await response.aread()
    return response


async def test_a_request_goes_out_framed_and_its_answer_comes_back(serve: Serve) -> None:
    backend = await serve(lambda n, request: OK)
    transport = Http1Transport()
    try:
        response = await _post(
            transport,
            f"http://127.0.0.1:{backend.port}/tools/a?q=1",
            headers={"X-Broker-Tenant": "acme", "Content-Length": "999"},
        )
    finally:
        await transport.aclose()
    assert response.status_code == 200
    assert response.content == b'{"ok":true}'
    assert response.headers["content-type"] == "application/json"
    request = backend.requests[0]
    assert request.startswith(b"POST /tools/a?q=1 HTTP/1.1\r\n")
    assert b"\r\nX-Broker-Tenant: acme\r\n" in request
    # The caller's wrong length is replaced by the body's own.
    assert b"999" not in request and b"\r\nContent-Length: 7\r\n" in request
    assert request.endswith(b'\r\n\r\n{"x":1}')


async def test_keep_alive_reuses_one_connection(serve: Serve) -> None:
    backend = await serve(lambda n, request: OK)
    transport = Http1Transport()
    try:
        for _ in range(5):
            assert (await _post(transport, f"http://127.0.0.1:{backend.port}/")).status_code == 200
    finally:
        await transport.aclose()
    assert backend.connections == 1 and len(backend.requests) == 5


async def test_send_takes_the_request_as_bytes(serve: Serve) -> None:
    """The pool's way in: a whole message, no httpx objects; the same framing and pooling."""
    backend = await serve(lambda n, request: OK)
    transport = Http1Transport()
    origin = origin_of(httpx.URL(f"http://127.0.0.1:{backend.port}/"))
    payload = message(b"POST /t HTTP/1.1\r\n", [(b"X-Broker-Tenant", b"acme")], b"{}")
    try:
        for _ in range(2):
            status, headers, content = await transport.send(
                origin, payload, pool=1.0, connect=1.0, read=1.0
            )
            assert (status, content) == (200, b'{"ok":true}')
            assert (b"Content-Type", b"application/json") in headers
    finally:
        await transport.aclose()
    assert backend.connections == 1
    assert (
        backend.requests
        == [b"POST /t HTTP/1.1\r\nX-Broker-Tenant: acme\r\nContent-Length: 2\r\n\r\n{}"] * 2
    )


async def test_an_answered_request_leaves_no_read_deadline_behind(serve: Serve) -> None:
    """The read timer belongs to one exchange: it must not fire later on the kept connection."""
    backend = await serve(lambda n, request: OK)
    transport = Http1Transport()
    url = f"http://127.0.0.1:{backend.port}/"
    timeout = {"connect": 1.0, "read": 0.05, "write": 0.05, "pool": 1.0}
    try:
        await _post(transport, url, timeout=timeout)
        await asyncio.sleep(0.15)  # past the first request's read deadline
        assert (await _post(transport, url, timeout=timeout)).status_code == 200
    finally:
        await transport.aclose()
    assert backend.connections == 1


async def test_connection_close_and_expired_idle_connections_are_not_reused(serve: Serve) -> None:
    closing = OK.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
    backend = await serve(lambda n, request: closing if n == 1 else OK)
    transport = Http1Transport(keepalive_expiry=0.05)
    url = f"http://127.0.0.1:{backend.port}/"
    try:
        await _post(transport, url)  # answered with Connection: close
        await _post(transport, url)  # a new connection, kept alive
        await asyncio.sleep(0.1)
        await _post(transport, url)  # the kept one expired: a third
    finally:
        await transport.aclose()
    assert backend.connections == 3


async def test_an_idle_connection_the_server_closed_is_replaced(serve: Serve) -> None:
    backend = await serve(lambda n, request: OK)
    transport = Http1Transport()
    url = f"http://127.0.0.1:{backend.port}/"
    try:
        await _post(transport, url)
        backend.writers[0].close()  # the server ends the kept-alive connection
        await asyncio.sleep(0.05)
        assert (await _post(transport, url)).status_code == 200
    finally:
        await transport.aclose()
    assert backend.connections == 2


@pytest.mark.parametrize(
    ("answer", "content"),
    [
        (
            b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n',
            b'{"a":1}',
        ),
        (b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + OK, b'{"ok":true}'),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["chunked", "interim-answer-first", "no-content"],
)
async def test_framings(serve: Serve, answer: bytes, content: bytes) -> None:
    backend = await serve(lambda n, request: answer)
    transport = Http1Transport()
    try:
        response = await _post(transport, f"http://127.0.0.1:{backend.port}/")
        assert response.content == content
        await _post(transport, f"http://127.0.0.1:{backend.port}/")
    finally:
        await transport.aclose()
    assert backend.connections == 1  # each framing left the connection reusable
    assert "link" not in response.headers  # the interim answer's headers are not the answer's


async def test_an_answer_without_a_length_ends_with_the_connection(serve: Serve) -> None:
    backend = await serve(lambda n, request: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{}")
    transport = Http1Transport()
    try:
        response = await _post(transport, f"http://127.0.0.1:{backend.port}/")
    finally:
        await transport.aclose()
    assert (response.status_code, response.content) == (200, b"{}")


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (None, httpx.RemoteProtocolError),  # hung up without answering
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\nConnection: close\r\n\r\n{",
            httpx.RemoteProtocolError,
        ),
        (b"NOT HTTP AT ALL\r\n\r\n", httpx.RemoteProtocolError),
    ],
    ids=["no-answer", "cut-mid-body", "malformed"],
)
async def test_broken_answers_are_transport_errors(
    serve: Serve, answer: bytes | None, error: type[Exception]
) -> None:
    backend = await serve(lambda n, request: answer)
    transport = Http1Transport()
    try:
        with pytest.raises(error) as caught:
            await _post(transport, f"http://127.0.0.1:{backend.port}/")
    finally:
        await transport.aclose()
    assert caught.value.request.url.port == backend.port


async def test_an_answer_past_the_cap_is_cut_off(serve: Serve) -> None:
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000
    backend = await serve(lambda n, request: big if n == 1 else OK)
    transport = Http1Transport(max_response_bytes=1000)
    url = f"http://127.0.0.1:{backend.port}/"
    try:
        with pytest.raises(ResponseTooLarge, match="exceeds 1000 bytes"):
            await _post(transport, url)
        assert (await _post(transport, url)).status_code == 200
    finally:
        await transport.aclose()
    assert backend.connections == 2  # the oversized answer's connection was dropped


async def test_timeouts_and_refusals_raise_httpx_errors(serve: Serve) -> None:
    hanging = asyncio.Event()

    def never(n: int, request: bytes) -> bytes | None:
        hanging.set()
        return b""  # writes nothing, keeps the connection open

    backend = await serve(never)
    transport = Http1Transport(max_connections=1)
    url = f"http://127.0.0.1:{backend.port}/"
    timeout = {"connect": 1.0, "read": 0.2, "write": 0.2, "pool": 0.1}
    try:
        with pytest.raises(httpx.ReadTimeout):
            await _post(transport, url, timeout=timeout)
        hanging.clear()
        slow = asyncio.create_task(_post(transport, url, timeout={**timeout, "read": 1.0}))
        await hanging.wait()
        with pytest.raises(httpx.PoolTimeout):  # the only slot is taken by the slow call
            await _post(transport, url, timeout=timeout)
        with pytest.raises(httpx.ReadTimeout):
            await slow
        with pytest.raises(httpx.ConnectError):
            await _post(transport, "http://127.0.0.1:9/")  # the discard port: nothing listens
    finally:
        await transport.aclose()


async def test_a_header_that_could_split_the_message_is_refused_before_sending(
    serve: Serve,
) -> None:
    backend = await serve(lambda n, request: OK)
    transport = Http1Transport()
    request = httpx.Request("POST", f"http://127.0.0.1:{backend.port}/", content=b"{}")
    request.headers["X-Evil"] = "a"
    request.headers._list[-1] = (b"X-Evil", b"x-evil", b"a\r\nX-Injected: 1")
    try:
        with pytest.raises(httpx.LocalProtocolError):
            await transport.handle_async_request(request)
    finally:
        await transport.aclose()
    assert backend.requests == []


async def test_https_verifies_the_certificate_for_the_sni_name(
    serve: Serve, tmp_path: Path
) -> None:
    server_tls, client_tls = tls_pair(tmp_path, "backend.test")
    backend = await serve(lambda n, request: OK, tls=server_tls)
    url = f"https://127.0.0.1:{backend.port}/"
    transport = Http1Transport(ssl_context=client_tls)
    try:
        response = await _post(transport, url, sni_hostname="backend.test")
        assert response.status_code == 200
        with pytest.raises(httpx.ConnectError):  # the certificate does not name this host
            await _post(transport, url, sni_hostname="other.test")
    finally:
        await transport.aclose()
