"""A tool registered through one broker process is callable through another at once: before
answering ``unknown_tool`` a process compares the store's catalog version (one round trip) and
reloads if it moved, instead of waiting for pub/sub or its poll.

Real ``python -m broker serve`` processes on one Redis (unique key prefix), a real backend on
loopback; ``registry_poll_s`` is set far longer than the test, so only pub/sub or the catch-up
can make a registration visible.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from broker.stores import RegisteredTool
from broker.stores.redis_catalog import RedisCatalog
from broker.stores.redis_keys import KeySpace
from broker.stores.redis_scripts import script_sources
from broker.stores.redis_transport import StockTransport
from tests.integration.procs import (
    ADMIN,
    BILLING,
    REDIS_URL,
    Launcher,
    launcher_for,
    redis_reachable,
)
from tests.loopback import LoopbackBackend, running
from tests.redis_helpers import connected_redis, missing_redis
from tests.registrations import registration

pytestmark = pytest.mark.redis

POLL_S = 120.0


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


def _slow_poll(data: dict[str, Any]) -> None:
    data["service"]["http_allowlist"] = ["http://127.0.0.1:*"]
    data["service"]["registry_poll_s"] = POLL_S


class _LostAnnouncements(KeySpace):
    """Keys of the brokers' prefix, but announcements go to a channel nobody listens to: a
    registration whose PUBLISH was lost (a reconnecting subscriber misses it just the same)."""

    def registry_channel(self) -> str:
        return self.prefix + ":nobody-listens"


async def test_a_registration_whose_announcement_was_lost_is_callable_at_once(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    setup = launcher.config(edit=_slow_poll)
    a, b = launcher.start(setup, 2)
    body = registration("billing.refund", backend_url + "/tools/refund", risk="read")
    proposal = {"tool": "billing.refund", "args": {"payment_id": "P-1"}}
    client = await connected_redis()
    transport = StockTransport(client, script_sources())
    try:
        catalog = RedisCatalog(client, _LostAnnouncements(setup.prefix), transport)
        secret = "s" * 43
        await catalog.put(
            RegisteredTool(
                name="billing.refund",
                spec=msgspec.json.encode(body),
                signing_secret=secret,
                updated_at=time.time(),
                updated_by="test",
            ),
            keep_secret=False,
        )
    finally:
        await transport.close()
        await client.aclose()
    loopback.secrets["/tools/refund"] = secret
    async with httpx.AsyncClient(timeout=10) as http:
        for broker in (a, b):
            answer = await http.post(broker.url + "/v1/proposals", json=proposal, headers=BILLING)
            assert answer.status_code == 200, answer.text
        # Still unknown after the catch-up: unknown_tool, as before.
        other = {"tool": "billing.nothing", "args": {}}
        missing = await http.post(a.url + "/v1/proposals", json=other, headers=BILLING)
        assert missing.json()["code"] == "unknown_tool"
    assert not loopback.refused


async def test_registered_through_one_process_called_at_once_through_another(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    setup = launcher.config(edit=_slow_poll)
    a, b = launcher.start(setup, 2)
    async with httpx.AsyncClient(timeout=10) as http:
        for i in range(10):  # pub/sub races the call; the catch-up must win every time
            name = f"billing.refund{i}"
            path = f"/tools/refund{i}"
            body = registration(name, backend_url + path, risk="read")
            created = await http.post(a.url + "/v1/tools", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            loopback.secrets[path] = created.json()["signing_secret"]
            proposal = {"tool": name, "args": {"payment_id": "P-1"}}
            answer = await http.post(b.url + "/v1/proposals", json=proposal, headers=BILLING)
            assert answer.status_code == 200, (i, answer.text)
    assert not loopback.refused
