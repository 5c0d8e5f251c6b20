"""Where the broker may send requests: URL patterns it allows, and the addresses they may reach.

An entry is ``scheme://host[:port][/path]``: ``host`` is a name, ``*.suffix`` (any subdomain),
``*`` (any host) or an IP literal; ``port`` is a number or ``*`` (omitted: the scheme's default);
``path`` is a prefix (a trailing ``*`` makes it a raw prefix, otherwise it matches whole
segments). URLs are parsed, never matched as text, so ``http://127.0.0.1:80@evil.example/`` is
refused (it carries userinfo) instead of matching ``http://127.0.0.1:*``.

Matching the text is not enough: a name can resolve anywhere. Every address a host resolves to
is checked, and the connection goes to the checked address (no second lookup to rebind):

* loopback, link-local (cloud metadata lives there), unspecified, multicast and reserved
  addresses are reachable only through an entry that names that very address (or ``localhost``
  for loopback);
* private addresses (RFC 1918, unique local) need an entry that names a host, not ``*``;
* anything else passes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["AllowEntry", "Allowlist", "RefusedURL", "Resolved", "parse_entry"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ENTRY = re.compile(
    r"^(?P<scheme>https?)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9*._-]+)"
    r"(?::(?P<port>\*|[0-9]{1,5}))?(?P<path>/[^?#\s]*)?$"
)
_HOST_LABELS = re.compile(
    r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
)
_METADATA = {ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}
_DNS_TTL_S = 30.0
# Spaces and C0/DEL controls (CR, LF, tab, NUL...) never belong in a URL (RFC 3986 percent-encodes
# them), and urlsplit silently strips some of them, so such a URL is refused, never "cleaned".
_UNSAFE_CHAR = re.compile(r"[\x00-\x20\x7f]")


class RefusedURL(ValueError):
    """The URL is not allowed, or resolves to an address it may not reach."""


@dataclass(frozen=True, slots=True)
class AllowEntry:
    text: str
    scheme: str
    host: str
    """Lower case; ``*``, ``*.suffix``, a name, or an IP literal (without brackets)."""
    port: int | None
    """``None`` for ``*``."""
    path: str
    literal: IPAddress | None

    def matches(self, scheme: str, host: str, port: int, path: str) -> bool:
        if scheme != self.scheme or (self.port is not None and port != self.port):
            return False
        if not _host_matches(self.host, host):
            return False
        if self.path.endswith("*"):
            return path.startswith(self.path[:-1])
        prefix = self.path.rstrip("/")
        return not prefix or path == prefix or path.startswith(prefix + "/")


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where to connect for one request: the checked address, and how to name the host."""

    url: str
    """The URL with its host replaced by the checked address."""
    host_header: str | None
    """The ``Host`` header to send when the URL named a host (``None`` for IP literals)."""
    sni_hostname: str | None
    """For https to a named host: the name TLS verifies."""


def parse_entry(text: str) -> AllowEntry:
    """Parse one allowlist entry; :class:`ValueError` says what is wrong with it."""
    match = _ENTRY.match(text.strip())
    if match is None:
        raise ValueError(
            'use "http(s)://host[:port][/path]" (host may be *, *.domain or an IP; port may be *)'
        )
    host = match["host"].lower().strip("[]")
    literal = _ip(host)
    if literal is None and host != "*" and not _HOST_LABELS.match(host):
        raise ValueError(f"{host!r} is not a host name, *.domain, * or an IP address")
    port_text = match["port"]
    if port_text is None:
        port: int | None = _DEFAULT_PORTS[match["scheme"]]
    elif port_text == "*":
        port = None
    else:
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError(f"port {port} is out of range")
    path = match["path"] or "/"
    if _has_dot_segments(path.rstrip("*")):
        raise ValueError("the path may not contain . or .. segments")
    return AllowEntry(text, match["scheme"], host, port, path, literal)


class Allowlist:
    """The outbound URL policy of one broker (``[service] http_allowlist``)."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.entries = tuple(parse_entry(entry) for entry in entries)
        self._dns: dict[tuple[str, int], tuple[float, tuple[IPAddress, ...]]] = {}
        self._resolved: dict[str, tuple[float, Resolved]] = {}
        """Decisions by URL (tools call the same few URLs): until the DNS answer expires."""

    def match(self, url: str) -> AllowEntry:
        """The entry that allows ``url``; :class:`RefusedURL` when none does."""
        scheme, host, port, path = _parts(url)
        for entry in self.entries:
            if entry.matches(scheme, host, port, path):
                literal = _ip(host)
                if literal is not None:
                    _check_address(entry, literal)
                return entry
        raise RefusedURL(f"{_safe(url)} is not in the broker's http_allowlist")

    async def resolve(self, url: str) -> Resolved:
        """Check ``url`` and every address its host resolves to; where to connect."""
        now = time.monotonic()
        cached = self._resolved.get(url)
        if cached is not None and cached[0] > now:
            return cached[1]
        resolved = await self._resolve(url)
        if len(self._resolved) > 4096:
            self._resolved.clear()
        self._resolved[url] = (now + _DNS_TTL_S, resolved)
        return resolved

    async def _resolve(self, url: str) -> Resolved:
        entry = self.match(url)
        scheme, host, port, _ = _parts(url)
        literal = _ip(host)
        if literal is not None:
            return Resolved(url, None, None)
        addresses = await self._lookup(host, port)
        for address in addresses:
            _check_address(entry, address)
        chosen = addresses[0]
        netloc = f"[{chosen}]" if chosen.version == 6 else str(chosen)
        split = urlsplit(url)
        pinned = split._replace(netloc=f"{netloc}:{port}").geturl()
        default = _DEFAULT_PORTS[scheme] == port
        return Resolved(
            pinned, host if default else f"{host}:{port}", host if scheme == "https" else None
        )

    async def _lookup(self, host: str, port: int) -> tuple[IPAddress, ...]:
        now = time.monotonic()
        cached = self._dns.get((host, port))
        if cached is not None and cached[0] > now:
            return cached[1]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise RefusedURL(f"cannot resolve {host!r}: {exc.strerror or exc}") from exc
        addresses = tuple(dict.fromkeys(_unmapped(ipaddress.ip_address(i[4][0])) for i in infos))
        if not addresses:
            raise RefusedURL(f"{host!r} resolves to no address")
        if len(self._dns) > 1024:
            self._dns.clear()
        self._dns[(host, port)] = (now + _DNS_TTL_S, addresses)
        return addresses


def _parts(url: str) -> tuple[str, str, int, str]:
    unsafe = _UNSAFE_CHAR.search(url)
    if unsafe is not None:
        raise RefusedURL(
            f"the URL contains {unsafe.group()!r} at index {unsafe.start()}: spaces and control "
            "characters (CR, LF, tab...) must be percent-encoded"
        )
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError as exc:
        raise RefusedURL(f"not a valid URL: {exc}") from exc
    scheme = split.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise RefusedURL("only http and https URLs are allowed")
    if split.username is not None or split.password is not None or "@" in split.netloc:
        raise RefusedURL("URLs may not carry credentials (user@host)")
    if split.fragment:
        raise RefusedURL("URLs may not carry a #fragment")
    host = (split.hostname or "").lower()
    if not host:
        raise RefusedURL("the URL has no host")
    path = split.path or "/"
    if "\\" in path or _has_dot_segments(path):
        raise RefusedURL("the URL path may not contain . or .. segments or backslashes")
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme], path


def _has_dot_segments(path: str) -> bool:
    return any(segment in (".", "..") for segment in unquote(path).split("/"))


def _host_matches(pattern: str, host: str) -> bool:
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    literal, wanted = _ip(pattern), _ip(host)
    if literal is not None or wanted is not None:
        return literal == wanted
    return pattern == host


def _check_address(entry: AllowEntry, address: IPAddress) -> None:
    address = _unmapped(address)
    sensitive = (
        address.is_loopback
        or address.is_link_local
        or address.is_unspecified
        or address.is_multicast
        or address.is_reserved
        or address in _METADATA
    )
    if sensitive:
        named = entry.literal is not None and _unmapped(entry.literal) == address
        localhost = entry.host == "localhost" and address.is_loopback
        if not (named or localhost):
            raise RefusedURL(
                f"{entry.host} resolves to {address}, which only an allowlist entry naming "
                "that address may reach"
            )
    elif address.is_private and entry.host == "*":
        raise RefusedURL(f"private address {address} needs an allowlist entry naming its host")


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _safe(url: str) -> str:
    """A URL for messages: no query (it may carry tokens), bounded length."""
    split = urlsplit(url)
    return split._replace(query="", fragment="").geturl()[:200]
