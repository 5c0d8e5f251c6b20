"""``HttpPool``: the process's pooled outbound HTTP client, behind the URL policy and the cap.

Two clients, chosen per process with the environment variable ``BROKER_HTTP_CLIENT``:

* ``httpx`` (the default): httpx's own client and transport (:mod:`adapters.http_client`), the
  checked address pinned and the proxy environment honoured as httpx honours it.
* ``http1``, an explicit opt-in: :class:`adapters.http_transport.Http1Transport`, a hand-built
  HTTP/1.1 transport, handed each request's bytes. In one run of ``bench/bench_http_adapter.py
  --http-client httpx,http1`` a proposal calling a loopback backend answered in 0.71 ms at p50
  with it and in 1.67 ms with the default (the client alone: 0.31 ms a call against 1.25 ms).
  It makes direct connections only: the proxy variables are not read (the pool logs a warning
  when they are set), and there is no HTTP/2.

Both follow no redirects (a 3xx is an answer), connect only to the address the allowlist
checked (TLS verifying the URL's name), read the answer as it arrives and refuse it once it
passes the cap, counted after any ``Content-Encoding`` is decoded (a small compressed answer
cannot expand past it), and report transport faults as retryable ``ProviderError``\\ s whose
message names the fault's class only (transport errors can echo URLs and headers).
"""

from __future__ import annotations

import functools
import logging
from typing import NamedTuple
from urllib.request import getproxies

import httpx

from adapters.backend_detail import exception_detail
from adapters.http_client import USER_AGENT, outbound_client
from adapters.http_transport import (
    Http1Transport,
    Origin,
    ResponseTooLarge,
    header_lines,
    message,
    origin_of,
)
from broker.plugins import (
    CLIENT_ENV,
    Allowlist,
    HttpClientKind,
    ProviderError,
    RefusedURL,
    Resolved,
    crash_point,
)

__all__ = ["BackendReply", "HttpPool"]

_log = logging.getLogger("broker.outbound")
_MAX_TARGETS = 1024


class BackendReply(NamedTuple):
    """A backend's answer: its status, its (capped) body, and its ``Retry-After`` if it failed."""

    status: int
    body: bytes
    retry_after: str | None = None


def _retry_after(status: int, headers: list[tuple[bytes, bytes]]) -> str | None:
    if status < 400:
        return None
    for name, value in headers:
        if name.lower() == b"retry-after":
            return value.decode("latin-1")
    return None


class HttpPool:
    """One pooled outbound client per process (see the module docstring).

    ``transport`` replaces the default client's pinned transport and proxies (tests).
    """

    def __init__(
        self,
        allowlist: Allowlist,
        *,
        max_response_bytes: int = 1_048_576,
        client: HttpClientKind = "httpx",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.allowlist = allowlist
        self.max_response_bytes = max_response_bytes
        self.client: HttpClientKind = client
        # Both built now, not on the first call (they load the CA certificates); nothing in
        # them is bound to an event loop until they connect.
        self._http1: Http1Transport | None = None
        self._httpx: httpx.AsyncClient | None = None
        if client == "http1":
            if transport is not None:
                raise ValueError("a transport replaces the httpx client's, not http1's")
            if any(getproxies().get(scheme) for scheme in ("http", "https", "all")):
                _log.warning(
                    "%s=http1 connects directly: the proxy settings are ignored", CLIENT_ENV
                )
            self._http1 = Http1Transport(
                max_connections=200, max_keepalive=50, max_response_bytes=max_response_bytes
            )
        else:
            self._httpx = outbound_client(allowlist, transport=transport)
        # http1 only: what every request to one target shares, prepared once per decision of
        # the allowlist (which renews it when its DNS answer expires).
        self._target = functools.lru_cache(maxsize=_MAX_TARGETS)(_target_of)

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], *, timeout_s: float
    ) -> tuple[int, bytes]:
        """``POST`` and read at most the cap; :class:`ProviderError` for policy and transport."""
        reply = await self.post_reply(url, body, headers, timeout_s=timeout_s)
        return reply.status, reply.body

    async def post_reply(
        self, url: str, body: bytes, headers: dict[str, str], *, timeout_s: float
    ) -> BackendReply:
        """:meth:`post`, with the answer's ``Retry-After`` (read on failures only: 4xx, 5xx)."""
        try:
            # Checked for every call, proxied or not; the connection goes to this decision's
            # address (for httpx, the pinned transport asks the allowlist for it again: cached).
            resolved = await self.allowlist.resolve(url)
            if self._http1 is not None:
                return await self._post_http1(resolved, body, headers, timeout_s)
            assert self._httpx is not None  # noqa: S101 - one of the two is built
            request = self._httpx.build_request(
                "POST", url, content=body, headers=headers, timeout=timeout_s
            )
            response = await self._httpx.send(request, stream=True)
            crash_point("after_send")
            try:
                status = response.status_code
                retry_after = response.headers.get("retry-after") if status >= 400 else None
                return BackendReply(status, await self._read(response), retry_after)
            finally:
                await response.aclose()
        except RefusedURL as exc:  # why (an address, a rule) is for the operator, not the agent
            raise ProviderError("the broker may not call this backend", detail=str(exc)) from exc
        except ResponseTooLarge as exc:
            raise ProviderError(f"the backend's answer exceeds {exc.limit} bytes") from exc
        except httpx.TransportError as exc:
            raise ProviderError(
                "the backend could not be reached",
                retryable=True,
                unavailable=True,
                detail=exception_detail(exc),
            ) from exc

    async def _post_http1(
        self, resolved: Resolved, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> BackendReply:
        assert self._http1 is not None  # noqa: S101 - only called then
        target = self._target(resolved)
        fields = [(name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()]
        status, answer_headers, content = await self._http1.send(
            target.origin,
            message(target.start, fields, body),
            pool=timeout_s,
            connect=timeout_s,
            read=timeout_s,
        )
        crash_point("after_send")
        if any(name.lower() == b"content-encoding" for name, _ in answer_headers):
            # Decoded by httpx, and capped as it decodes (``stream=``: ``content=`` would decode
            # the whole answer at once, however far it expands).
            compressed = httpx.Response(
                status, headers=answer_headers, stream=httpx.ByteStream(content)
            )
            return BackendReply(
                status, await self._read(compressed), _retry_after(status, answer_headers)
            )
        # The body is capped by the transport, built with this pool's cap.
        return BackendReply(status, content, _retry_after(status, answer_headers))

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, cut off once it exceeds the cap (counted after any content decoding)."""
        parts: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise ProviderError(f"the backend's answer exceeds {self.max_response_bytes} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def aclose(self) -> None:
        self._target.cache_clear()
        if self._http1 is not None:
            await self._http1.aclose()
        if self._httpx is not None:
            await self._httpx.aclose()


class _Target(NamedTuple):
    """What every http1 request to one allowed target shares."""

    origin: Origin
    """Where :class:`Http1Transport` connects: the checked address, and the TLS name."""
    start: bytes
    """The request line, ``Host`` and ``User-Agent``: the start of every request's bytes."""


def _target_of(resolved: Resolved) -> _Target:
    url = httpx.URL(resolved.url)
    host = resolved.host_header or url.netloc.decode("ascii")
    start = b"POST %s HTTP/1.1\r\n" % url.raw_path + header_lines(
        [(b"Host", host.encode("ascii")), (b"User-Agent", USER_AGENT.encode("ascii"))]
    )
    return _Target(origin_of(url, resolved.sni_hostname), start)
