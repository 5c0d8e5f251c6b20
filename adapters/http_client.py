"""The broker's outbound HTTP client: httpx's own, with the checked address pinned.

Direct calls go through :class:`PinnedTransport`, which wraps ``httpx.AsyncHTTPTransport`` (httpcore,
h11) and connects only to an address :class:`broker.allowlist.Allowlist` checked: it asks the
allowlist for its decision on the request's URL (the same cached decision the caller checked just
before, so no second lookup can rebind the name), sends the request to that address, and keeps
the name where the server sees it: the ``Host`` header, and for https the ``sni_hostname``
extension, so TLS verifies the certificate against the name, not the address. Connections are
pooled per TLS name (one httpx transport each, sharing one SSL context): httpcore pools by
scheme, address and port, and a connection whose certificate was verified for one name must never
carry a request meant for another name that happens to resolve to the same address.

Proxies are honoured as ``httpx.AsyncClient(trust_env=True)`` honours them: ``HTTP_PROXY``,
``HTTPS_PROXY``, ``ALL_PROXY`` (read by :func:`urllib.request.getproxies`, upper or lower case)
and ``NO_PROXY`` (``*``, names and ``.suffix`` per curl, IP addresses, ``localhost``, or
``scheme://host`` patterns) become httpx ``mounts``, so httpx's own URL-pattern matching picks
the transport. They are mounted here rather than left to ``trust_env`` because httpx reads the
environment only when the client builds its own default transport, and the default here is the
pinned one. Through a proxy the request names the host and the proxy resolves it and connects:
the broker has checked the URL against the allowlist and every address the name resolves to
from here, but not the address the proxy then connects to (that is the proxy's to restrict, as
egress proxies are there to do). ``NO_PROXY`` hosts are called directly, pinned.

What the client does not do: follow redirects (a 3xx is an answer), keep cookies (a backend's
``Set-Cookie`` for one tenant's call must not ride along on another's), read ``.netrc``, retry
(the executor retries within the tool's deadline), or log each request's URL.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.request import getproxies

import httpx

from broker.plugins import Allowlist

__all__ = ["USER_AGENT", "PinnedTransport", "outbound_client", "proxy_mounts"]

_LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50, keepalive_expiry=4.0)
"""Keep-alive shorter than common servers' own (uvicorn: 5 s), so a connection is rarely reused
just as its server closes it."""
USER_AGENT = "action-broker"


class PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address the allowlist checked for its URL (see module doc).

    Raises :class:`broker.allowlist.RefusedURL` for a URL the allowlist refuses (its decision
    can change when a cached DNS answer expires between the caller's check and this one).
    """

    def __init__(
        self,
        allowlist: Allowlist,
        *,
        ssl_context: ssl.SSLContext,
        limits: httpx.Limits = _LIMITS,
    ) -> None:
        self._allowlist = allowlist
        self._ssl = ssl_context
        self._limits = limits
        self._by_name: dict[str | None, httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resolved = await self._allowlist.resolve(str(request.url))
        extensions = dict(request.extensions)
        if resolved.sni_hostname is not None:
            extensions["sni_hostname"] = resolved.sni_hostname
        pinned = httpx.Request(
            request.method,
            resolved.url,
            headers=request.headers,  # carries Host: the name (and port) the URL gave
            stream=request.stream,
            extensions=extensions,
        )
        return await self._transport_for(resolved.sni_hostname).handle_async_request(pinned)

    def _transport_for(self, name: str | None) -> httpx.AsyncHTTPTransport:
        transport = self._by_name.get(name)
        if transport is None:
            transport = self._by_name[name] = httpx.AsyncHTTPTransport(
                verify=self._ssl, limits=self._limits, retries=0
            )
        return transport

    async def aclose(self) -> None:
        transports = list(self._by_name.values())
        self._by_name.clear()
        for transport in transports:
            await transport.aclose()


def proxy_mounts(
    ssl_context: ssl.SSLContext, limits: httpx.Limits = _LIMITS
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """The proxy environment as httpx ``mounts``: a proxy transport per scheme, and ``None``
    (the client's own, pinned transport) for every ``NO_PROXY`` entry."""
    found = getproxies()
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for scheme in ("http", "https", "all"):
        proxy = found.get(scheme)
        if proxy:
            url = proxy if "://" in proxy else f"http://{proxy}"
            mounts[f"{scheme}://"] = httpx.AsyncHTTPTransport(
                proxy=url, verify=ssl_context, limits=limits, retries=0
            )
    for entry in (part.strip() for part in found.get("no", "").split(",")):
        if entry == "*":
            return {}  # no proxy for anything
        if entry:
            mounts[_no_proxy_pattern(entry)] = None
    return mounts


def _no_proxy_pattern(entry: str) -> str:
    if "://" in entry:
        return entry  # already an httpx URL pattern
    try:
        address = ipaddress.ip_address(entry.split("/", 1)[0])
    except ValueError:
        address = None
    if address is not None:
        return f"all://[{entry}]" if address.version == 6 else f"all://{entry}"
    if entry.lower() == "localhost":
        return "all://localhost"
    # ".example.com" covers its subdomains only; "example.com" also covers itself (curl's rule).
    return f"all://*{entry}"


def outbound_client(
    allowlist: Allowlist, *, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The client :class:`adapters.http.HttpPool` sends through; ``transport`` replaces the
    pinned transport and the proxy environment (tests)."""
    # httpx logs every request's URL at INFO ("HTTP Request: POST ..."): the broker's JSON log
    # writes messages, and a URL can carry a secret in its query. Left alone if set already.
    quiet = logging.getLogger("httpx")
    if quiet.level == logging.NOTSET:
        quiet.setLevel(logging.WARNING)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    if transport is None:
        # Built once, now: loading the CA certificates takes 40-100 ms, which a tool's first
        # call would otherwise pay inside its own deadline. SSL_CERT_FILE/DIR are honoured.
        context = httpx.create_ssl_context(trust_env=True)
        transport = PinnedTransport(allowlist, ssl_context=context)
        mounts = proxy_mounts(context)
    return httpx.AsyncClient(
        transport=transport,
        mounts=mounts,
        trust_env=False,  # the environment's proxies are in ``mounts``; no .netrc
        follow_redirects=False,
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),  # keeps none
        headers={"User-Agent": USER_AGENT},
    )
