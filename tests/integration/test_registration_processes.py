"""Registrations live in the store: every broker process sharing it sees them, and they survive.

Real ``python -m broker serve`` processes on one Redis (unique key prefix), a real backend on
loopback. The staleness bound under test is ``[service] registry_poll_s``: a tool registered
through process A is callable through process B within it (pub/sub usually makes it far less).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import (
    ADMIN,
    BILLING,
    REDIS_URL,
    Launcher,
    launcher_for,
    redis_reachable,
)
from tests.loopback import LoopbackBackend, running
from tests.redis_helpers import missing_redis
from tests.registrations import registration

pytestmark = pytest.mark.redis

POLL_S = 1.0


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


def _open_to_loopback(data: dict[str, Any]) -> None:
    data["service"]["http_allowlist"] = ["http://127.0.0.1:*"]
    data["service"]["registry_poll_s"] = POLL_S


async def _listed(http: httpx.AsyncClient, broker: str) -> set[str]:
    tools = (await http.get(broker + "/v1/tools", headers=BILLING)).json()["tools"]
    return {t["name"] for t in tools}


async def _until(condition: Any, timeout_s: float) -> float:
    """Seconds until ``await condition()`` holds; fails after ``timeout_s``."""
    started = time.monotonic()
    while not await condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s}s")
        await asyncio.sleep(0.005)
    return time.monotonic() - started


async def test_a_tool_registered_through_one_process_is_callable_through_another(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    setup = launcher.config(edit=_open_to_loopback)
    a, b = launcher.start(setup, 2)
    body = registration(
        "billing.refund", backend_url + "/tools/refund", risk="read", idempotent=True
    )
    proposal = {"tool": "billing.refund", "args": {"payment_id": "P-1"}}
    async with httpx.AsyncClient(timeout=10) as http:
        assert "billing.refund" not in await _listed(http, b.url)
        created = await http.post(a.url + "/v1/tools", json=body, headers=ADMIN)
        assert created.status_code == 201, created.text
        loopback.secrets["/tools/refund"] = created.json()["signing_secret"]
        seen_after = await _until(
            lambda: _callable(http, b.url + "/v1/proposals", proposal), POLL_S + 0.5
        )
        assert seen_after <= POLL_S + 0.5
        assert not loopback.refused

        # Removal reaches the other process within the same bound.
        assert (
            await http.delete(b.url + "/v1/tools/billing.refund", headers=ADMIN)
        ).status_code == 204
        await _until(lambda: _absent(http, a.url), POLL_S + 0.5)

        # And a registration outlives every process that served it.
        created = await http.post(a.url + "/v1/tools", json=body, headers=ADMIN)
        loopback.secrets["/tools/refund"] = created.json()["signing_secret"]
    for process in (a, b):
        process.stop()
    (c,) = launcher.start(setup, 1)
    async with httpx.AsyncClient(timeout=10) as http:
        assert "billing.refund" in await _listed(http, c.url)
        answer = await http.post(c.url + "/v1/proposals", json=proposal, headers=BILLING)
        assert answer.status_code == 200, answer.text
    assert not loopback.refused  # the same secret signs after the restart


async def _callable(http: httpx.AsyncClient, url: str, proposal: dict[str, Any]) -> bool:
    return (await http.post(url, json=proposal, headers=BILLING)).status_code == 200


async def _absent(http: httpx.AsyncClient, broker: str) -> bool:
    return "billing.refund" not in await _listed(http, broker)
