"""The default outbound client (httpx's own): the checked address pinned, names kept for Host and
TLS, connections pooled per TLS name, the proxy environment honoured, no cookies kept."""

from __future__ import annotations

import contextlib
import logging
import ssl
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import httpx
import pytest

from adapters.http_client import PinnedTransport, outbound_client, proxy_mounts
from adapters.http_pool import HttpPool
from broker.allowlist import Allowlist, RefusedURL, Resolved
from broker.outbound import http_client_from_environment
from broker.plugins import CLIENT_ENV
from broker.taxonomy import ConfigError
from tests.raw_backend import OK, Serve, serve, tls_pair

__all__ = ["serve"]  # the fixture, used by name

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


class _Decided:
    """Stands in for the allowlist: every named host was checked and resolved to ``port`` on
    127.0.0.1 (so these names need no DNS: a connection can only reach the checked address)."""

    def __init__(self, port: int, refused: tuple[str, ...] = ()) -> None:
        self.port = port
        self.refused = refused
        self.asked: list[str] = []

    async def resolve(self, url: str) -> Resolved:
        self.asked.append(url)
        split = urlsplit(url)
        host = split.hostname or ""
        if host in self.refused:
            raise RefusedURL(f"{host} is refused")
        pinned = split._replace(netloc=f"127.0.0.1:{self.port}").geturl()
        return Resolved(pinned, split.netloc, host if split.scheme == "https" else None)


def _pinned(decided: _Decided, tls: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    transport = PinnedTransport(
        cast(Allowlist, decided), ssl_context=tls or ssl.create_default_context()
    )
    return httpx.AsyncClient(transport=transport)


async def test_a_named_host_is_called_at_the_checked_address_with_its_name_as_host(
    serve: Serve,
) -> None:
    backend = await serve(lambda n, request: OK)
    decided = _Decided(backend.port)
    async with _pinned(decided) as client:
        for _ in range(2):
            answer = await client.post("http://backend.test:8443/tools/x", content=b"{}")
            assert answer.json() == {"ok": True}
    assert decided.asked == ["http://backend.test:8443/tools/x"] * 2
    assert backend.connections == 1  # kept alive
    for request in backend.requests:
        assert request.startswith(b"POST /tools/x HTTP/1.1\r\n")
        assert b"\r\nHost: backend.test:8443\r\n" in request


async def test_a_refused_decision_sends_nothing(serve: Serve) -> None:
    backend = await serve(lambda n, request: OK)
    async with _pinned(_Decided(backend.port, refused=("evil.test",))) as client:
        with pytest.raises(RefusedURL):
            await client.post("http://evil.test/x", content=b"{}")
    assert backend.connections == 0


async def test_tls_verifies_the_name_and_never_reuses_a_connection_across_names(
    serve: Serve, tmp_path: Path
) -> None:
    server_tls, client_tls = tls_pair(tmp_path, "backend.test")
    backend = await serve(lambda n, request: OK, tls=server_tls)
    async with _pinned(_Decided(backend.port), client_tls) as client:
        answer = await client.post("https://backend.test/x", content=b"{}")
        assert answer.status_code == 200
        # Same address and port, and a verified connection to it is idle in a pool: a request
        # for another name must still get its own handshake, which this certificate fails.
        with pytest.raises(httpx.ConnectError):
            await client.post("https://other.test/x", content=b"{}")
    assert len(backend.requests) == 1
    assert b"\r\nHost: backend.test\r\n" in backend.requests[0]


async def test_an_http_proxy_from_the_environment_gets_the_request_by_name(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await serve(lambda n, request: OK)
    backend = await serve(lambda n, request: OK)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    async with outbound_client(cast(Allowlist, _Decided(backend.port))) as client:
        answer = await client.post("http://backend.test:9000/x", content=b"{}")
    assert answer.json() == {"ok": True}
    (request,) = proxy.requests
    assert request.startswith(b"POST http://backend.test:9000/x HTTP/1.1\r\n")
    assert backend.requests == []


@pytest.mark.parametrize("no_proxy", ["backend.test", ".test", "*", "other.test,backend.test"])
async def test_no_proxy_hosts_are_called_directly_at_the_checked_address(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    proxy = await serve(lambda n, request: OK)
    backend = await serve(lambda n, request: OK)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    async with outbound_client(cast(Allowlist, _Decided(backend.port))) as client:
        answer = await client.post("http://backend.test:9000/x", content=b"{}")
    assert answer.status_code == 200
    assert proxy.requests == []
    assert len(backend.requests) == 1


def test_the_proxy_environment_becomes_httpx_mounts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost, 10.0.0.1,::1,.corp.example,api.example,https://x.y")
    mounts = proxy_mounts(ssl.create_default_context())
    assert isinstance(mounts.pop("https://"), httpx.AsyncHTTPTransport)
    assert mounts == {
        "all://localhost": None,
        "all://10.0.0.1": None,
        "all://[::1]": None,
        "all://*.corp.example": None,  # subdomains only
        "all://*api.example": None,  # the name and its subdomains
        "https://x.y": None,
    }
    monkeypatch.setenv("NO_PROXY", "*")
    assert proxy_mounts(ssl.create_default_context()) == {}


async def test_cookies_a_backend_sets_are_never_sent_back_nor_urls_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={}, headers={"Set-Cookie": "session=tenant-a; Path=/"})

    pool = HttpPool(Allowlist(["http://127.0.0.1:9/"]), transport=httpx.MockTransport(handler))
    try:
        for _ in range(2):
            await pool.post("http://127.0.0.1:9/x?key=s3cret", b"{}", {}, timeout_s=5)
    finally:
        await pool.aclose()
    assert [request.headers.get("cookie") for request in seen] == [None, None]
    assert not [record for record in caplog.records if "s3cret" in record.getMessage()]


def test_http1_warns_that_it_ignores_the_proxy_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    HttpPool(Allowlist([]), client="http1")
    assert any("proxy settings are ignored" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("value", "kind"), [(None, "httpx"), ("", "httpx"), ("httpx", "httpx"), (" HTTP1 ", "http1")]
)
def test_the_client_is_chosen_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, kind: str
) -> None:
    if value is None:
        monkeypatch.delenv(CLIENT_ENV, raising=False)
    else:
        monkeypatch.setenv(CLIENT_ENV, value)
    assert http_client_from_environment() == kind


def test_an_unknown_client_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLIENT_ENV, "fast")
    with pytest.raises(ConfigError, match="must be httpx or http1"):
        http_client_from_environment()


@pytest.mark.parametrize(
    "no_proxy",
    ["", "backend.test", ".test", "test", "ckend.test", "other.test", "*", "http://backend.test"],
)
async def test_the_proxy_is_used_exactly_when_httpx_itself_would_use_it(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    proxy = await serve(lambda n, request: OK)
    backend = await serve(lambda n, request: OK)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    url = "http://backend.test:9000/x"
    async with httpx.AsyncClient(trust_env=True) as stock:
        with contextlib.suppress(httpx.ConnectError):  # direct: backend.test resolves nowhere
            await stock.post(url, content=b"{}")
    stock_proxied = len(proxy.requests)
    async with outbound_client(cast(Allowlist, _Decided(backend.port))) as client:
        await client.post(url, content=b"{}")
    assert len(proxy.requests) - stock_proxied == stock_proxied  # both, or neither
    assert len(backend.requests) == 1 - stock_proxied
