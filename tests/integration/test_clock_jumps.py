"""A wall clock two hours off (``BROKER_TEST_WALL_OFFSET_S``, ``broker.clock``) moves no lease and
no window: real broker processes, counted at a loopback backend.

* On Redis, brokers take Redis's time: one two hours ahead does not see a live claim of
  another as abandoned (which for an idempotent tool means running it a second time), one two
  hours behind does not leave claims the others see as abandoned, and its rate-limit entries
  count in everyone's window.
* On the embedded SQLite store, a restart on a clock that went back two hours starts from the
  store file's last write: a claim left by the crashed process lapses after its lease, not two
  hours later.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.clock import WALL_OFFSET_ENV
from tests.integration.procs import (
    ADMIN,
    BILLING,
    REDIS_URL,
    BrokerProcess,
    Launcher,
    credit,
    eventually,
    launcher_for,
    redis_reachable,
)
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration

TWO_HOURS = 7200
SLOW_TIMEOUT_S = 4.0
LEASE_MARGIN_S = 0.5
AHEAD = {WALL_OFFSET_ENV: str(TWO_HOURS)}
BEHIND = {WALL_OFFSET_ENV: str(-TWO_HOURS)}

needs_redis = pytest.mark.skipif(not redis_reachable(REDIS_URL), reason=f"no Redis at {REDIS_URL}")


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend(behaviours={"/tools/slow": "hang"})
    with running(loopback) as url:
        yield url, loopback


def _slow_tool(backend_url: str, *, idempotent: bool) -> dict[str, Any]:
    tool = registration("billing.slow", backend_url + "/tools/slow", idempotent=idempotent)
    tool["adapter"]["timeout_s"] = SLOW_TIMEOUT_S
    return tool


def _slow(key: str) -> dict[str, Any]:
    return {"tool": "billing.slow", "args": {"payment_id": "P-1"}, "idempotency_key": key}


async def _post(http: httpx.AsyncClient, broker: BrokerProcess, body: Any) -> httpx.Response:
    return await http.post(broker.url + "/v1/proposals", json=body, headers=BILLING)


async def _knows_tool(http: httpx.AsyncClient, broker: BrokerProcess) -> bool:
    found = await http.get(broker.url + "/v1/tools/billing.slow", headers=ADMIN)
    return found.status_code == 200


@needs_redis
@pytest.mark.parametrize(
    ("holder_env", "retrier_env"),
    [
        pytest.param({}, AHEAD, id="retrier-2h-ahead"),
        pytest.param(BEHIND, {}, id="holder-2h-behind"),
    ],
)
async def test_on_redis_a_live_claim_stays_live_whatever_a_brokers_clock_says(
    launcher: Launcher,
    backend: tuple[str, LoopbackBackend],
    holder_env: dict[str, str],
    retrier_env: dict[str, str],
) -> None:
    backend_url, loopback = backend
    setup = launcher.config(shared_numbers=False, lease_margin_s=LEASE_MARGIN_S)
    (holder,) = launcher.start(setup, 1, env=holder_env)
    (retrier,) = launcher.start(setup, 1, env=retrier_env)
    async with httpx.AsyncClient(timeout=30) as http:
        tool = _slow_tool(backend_url, idempotent=True)
        created = await http.post(holder.url + "/v1/tools", json=tool, headers=ADMIN)
        assert created.status_code == 201, created.text
        await eventually(lambda: _knows_tool(http, retrier), timeout_s=10, what="the tool")

        in_flight = asyncio.create_task(_post(http, holder, _slow("jump-1")))
        await eventually(lambda: loopback.hits_on("/tools/slow"), timeout_s=10, what="the call")
        # The holder's call is 0.x s into a 4.5 s lease: live, by Redis's clock, for everyone.
        retried = await _post(http, retrier, _slow("jump-1"))
        assert retried.status_code == 409, retried.text
        assert retried.json()["code"] == "idempotency_in_progress", retried.text
        with contextlib.suppress(httpx.HTTPError):
            await in_flight
    assert len(loopback.hits_on("/tools/slow")) == 1


@needs_redis
async def test_on_redis_a_rate_limit_counts_the_calls_of_a_broker_two_hours_behind(
    launcher: Launcher,
) -> None:
    setup = launcher.config(shared_numbers=False, credit_rate_limit=4)
    (steady,) = launcher.start(setup, 1)
    (behind,) = launcher.start(setup, 1, env=BEHIND)
    async with httpx.AsyncClient(timeout=30) as http:
        for i, broker in enumerate((steady, steady, behind, behind)):
            answer = await _post(http, broker, credit(f"rate-{i}"))
            assert answer.status_code == 200, answer.text
        over = await _post(http, steady, credit("rate-4"))
        assert over.status_code == 429, over.text
        assert over.json()["code"] == "rate_limited", over.text
    assert len(setup.effects()) == 4


async def test_on_sqlite_a_restart_on_a_clock_gone_back_2h_still_ends_the_lease(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend

    def embedded(data: dict[str, Any]) -> None:
        del data["service"]["redis_url"]
        data["service"]["completer_interval_s"] = 0.2

    setup = launcher.config(edit=embedded, shared_numbers=False, lease_margin_s=LEASE_MARGIN_S)
    (crashed,) = launcher.start(setup, 1)
    tool = _slow_tool(backend_url, idempotent=False)
    tool["adapter"]["timeout_s"] = 1.0
    async with httpx.AsyncClient(timeout=30) as http:
        created = await http.post(crashed.url + "/v1/tools", json=tool, headers=ADMIN)
        assert created.status_code == 201, created.text
        in_flight = asyncio.create_task(_post(http, crashed, _slow("restart-1")))
        await eventually(lambda: loopback.hits_on("/tools/slow"), timeout_s=10, what="the call")
        crashed.kill()
        with contextlib.suppress(httpx.HTTPError):
            await in_flight

    (restarted,) = launcher.start(setup, 1, env=BEHIND)
    async with httpx.AsyncClient(timeout=30) as http:

        async def unknown() -> bool:
            answer = await _post(http, restarted, _slow("restart-1"))
            return answer.status_code == 409 and answer.json()["code"] == "outcome_unknown"

        # The 1.5 s lease ends 1.5 s after the claim, not 2 h and 1.5 s later.
        await eventually(unknown, timeout_s=10, interval_s=0.2, what="the lease to lapse")
    assert len(loopback.hits_on("/tools/slow")) == 1
