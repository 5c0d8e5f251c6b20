"""The outbound URL policy: entries, URL matching, and the addresses names may resolve to."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from broker.allowlist import Allowlist, RefusedURL, parse_entry


@pytest.mark.parametrize(
    "entry",
    [
        "http://127.0.0.1:*",
        "https://api.example.com",
        "https://*.billing.internal:8443/api/",
        "http://[::1]:9000",
        "http://*:*",
        "http://localhost:8080/hooks*",
    ],
)
def test_good_entries_parse(entry: str) -> None:
    assert parse_entry(entry).text == entry


@pytest.mark.parametrize(
    "entry",
    [
        "127.0.0.1:*",
        "ftp://x",
        "http://user@host",
        "http://host:99999",
        "http://bad_host",
        "http://h/a/../b",
        "http://h?q",
    ],
)
def test_bad_entries_say_why(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_entry(entry)


ALLOW = Allowlist(
    ["http://127.0.0.1:*", "https://*.billing.internal/api", "https://api.example.com:8443/v1/*"]
)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/tools/x",
        "http://127.0.0.1/",
        "https://pay.billing.internal/api",
        "https://pay.billing.internal/api/refund",
        "https://api.example.com:8443/v1/x",
        "HTTP://127.0.0.1:1/",
    ],
)
def test_urls_the_list_allows(url: str) -> None:
    ALLOW.match(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:80@169.254.169.254/",  # userinfo: the host is not 127.0.0.1
        "http://user:pw@127.0.0.1:9000/",
        "https://127.0.0.1:9000/",  # scheme differs
        "http://127.0.0.2:9000/",
        "https://billing.internal/api",  # *.suffix does not match the apex
        "https://pay.billing.internal/apix",  # whole segments only
        "https://pay.billing.internal/api/../admin",
        "https://pay.billing.internal/api/%2e%2e/admin",
        "https://api.example.com/v1/x",  # default port 443, not 8443
        "http://127.0.0.1:9000/#frag",
        "file:///etc/passwd",
        "http://[::1]:9000/",
        "not a url",
    ],
)
def test_urls_the_list_refuses(url: str) -> None:
    with pytest.raises(RefusedURL):
        ALLOW.match(url)


def test_wildcards_never_reach_loopback_link_local_or_private_addresses() -> None:
    anywhere = Allowlist(["http://*:*"])
    for url in (
        "http://169.254.169.254/",
        "http://127.0.0.1/",
        "http://10.0.0.5/",
        "http://[::ffff:127.0.0.1]/",
    ):
        with pytest.raises(RefusedURL):
            anywhere.match(url)
    anywhere.match("http://93.184.216.34/")
    Allowlist(["http://169.254.169.254/latest"]).match("http://169.254.169.254/latest/x")


def _resolver(monkeypatch: pytest.MonkeyPatch, address: str) -> list[str]:
    asked: list[str] = []

    async def getaddrinfo(self: Any, host: str, port: int, **kwargs: Any) -> list[Any]:
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr("asyncio.base_events.BaseEventLoop.getaddrinfo", getaddrinfo)
    return asked


async def test_a_name_that_resolves_to_metadata_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolver(monkeypatch, "169.254.169.254")
    with pytest.raises(RefusedURL, match=r"169\.254\.169\.254"):
        await Allowlist(["https://*.billing.internal"]).resolve("https://evil.billing.internal/")


async def test_a_name_is_pinned_to_the_address_that_was_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _resolver(monkeypatch, "10.1.2.3")
    allow = Allowlist(["https://*.billing.internal"])
    target = await allow.resolve("https://pay.billing.internal/refund?x=1")
    assert target.url == "https://10.1.2.3:443/refund?x=1"
    assert target.host_header == "pay.billing.internal"
    assert target.sni_hostname == "pay.billing.internal"
    await allow.resolve("https://pay.billing.internal/other")
    assert asked == ["pay.billing.internal"]  # cached


async def test_literal_addresses_are_not_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _resolver(monkeypatch, "10.9.9.9")
    target = await Allowlist(["http://127.0.0.1:*"]).resolve("http://127.0.0.1:9000/x")
    assert target.url == "http://127.0.0.1:9000/x" and target.host_header is None
    assert asked == []
