"""The read cache shared through Redis: real ``python -m broker serve`` processes on one Redis
(a key prefix of their own), a real backend on loopback that counts the calls it gets. A read
answered by one process is a hit in the other; another tenant's is not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import (
    ADMIN,
    BILLING,
    GLOBEX,
    REDIS_URL,
    Launcher,
    launcher_for,
    redis_reachable,
)
from tests.integration.test_read_cache_http import SECRET, cached_tools
from tests.loopback import LoopbackBackend, running
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis


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


async def test_a_read_cached_by_one_process_is_a_hit_in_another(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend

    def edit(data: dict[str, Any]) -> None:
        cached_tools(data, backend_url)

    setup = launcher.config(edit=edit)
    first, second = launcher.start(setup, 2, env={"QUOTE_SECRET": SECRET})
    body = {"tool": "quote", "args": {"sku": "P-1"}, "trace_id": "two-processes"}
    async with httpx.AsyncClient(timeout=10) as http:
        stored = await http.post(f"{first.url}/v1/proposals", json=body, headers=BILLING)
        assert stored.status_code == 200, stored.text
        hit = await http.post(f"{second.url}/v1/proposals", json=body, headers=BILLING)
        assert hit.status_code == 200, hit.text
        assert hit.json()["cached"]["age_s"] >= 0
        assert hit.json()["execution"]["result"] == stored.json()["execution"]["result"]
        assert len(loopback.hits_on("/tools/quote")) == 1
        other = await http.post(f"{second.url}/v1/proposals", json=body, headers=GLOBEX)
        assert other.status_code == 200 and "cached" not in other.json()
        assert len(loopback.hits_on("/tools/quote")) == 2
        trace = await http.get(f"{first.url}/v1/traces/two-processes", headers=ADMIN)
        assert [r["cache"] for r in trace.json()["records"]] == ["stored", "hit", "stored"]
        verified = await http.get(f"{first.url}/v1/audit/verify", headers=ADMIN)
        assert verified.json()["ok"] is True, verified.text
