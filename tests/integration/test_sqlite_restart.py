"""The embedded default store across a crash: real ``broker serve`` processes, no Redis at all.

Each broker runs the demo config without ``redis_url`` (so the SQLite file beside the ledger is
its store), is killed with SIGKILL, and is started again on the same data directory. What it
executed is counted where it happened: the demo backend's effects file and a loopback HTTP
backend that records every call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import (
    ADMIN,
    BILLING,
    Launcher,
    Setup,
    credit,
    eventually,
    launcher_for,
)
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration

LEASE_MARGIN_S = 0.5
SLOW_TIMEOUT_S = 2.0


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend(behaviours={"/tools/slow": "hang"})
    with running(loopback) as url:
        yield url, loopback


def _embedded(data: dict[str, Any]) -> None:
    """No Redis anywhere: the store is the default, the SQLite file beside the ledger."""
    del data["service"]["redis_url"]
    data["service"]["http_allowlist"] = ["http://127.0.0.1:*"]


def _config(launcher: Launcher) -> Setup:
    return launcher.config(edit=_embedded, shared_numbers=False, lease_margin_s=LEASE_MARGIN_S)


async def _post(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    return await http.post(url + "/v1/proposals", json=body, headers=BILLING)


async def test_a_crash_forgets_no_key_no_budget_and_no_registration(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    setup = _config(launcher)
    (broker,) = launcher.start(setup, 1)
    slow_tool = registration("billing.slow", backend_url + "/tools/slow")
    slow_tool["adapter"]["timeout_s"] = SLOW_TIMEOUT_S
    slow = {"tool": "billing.slow", "args": {"payment_id": "P-1"}, "idempotency_key": "slow-1"}
    credits = [credit(f"crash-credit-{i}", amount=100) for i in range(3)]
    async with httpx.AsyncClient(timeout=30) as http:
        created = await http.post(broker.url + "/v1/tools", json=slow_tool, headers=ADMIN)
        assert created.status_code == 201, created.text
        first: list[dict[str, Any]] = []
        for body in credits:
            answer = await _post(http, broker.url, body)
            assert answer.status_code == 200, answer.text
            first.append(answer.json())

        # A non-idempotent call reaches its backend, and the process dies under it.
        in_flight = asyncio.create_task(_post(http, broker.url, slow))
        await eventually(lambda: loopback.hits_on("/tools/slow"), timeout_s=10, what="the call")
        broker.kill()
        with contextlib.suppress(httpx.HTTPError):
            await in_flight

    (broker,) = launcher.start(setup, 1)
    async with httpx.AsyncClient(timeout=30) as http:
        for body, before in zip(credits, first, strict=True):
            again = await _post(http, broker.url, body)
            assert again.status_code == 200, again.text
            assert again.headers.get("idempotent-replayed") == "true"
            assert again.json()["execution"] == before["execution"]  # the same credit, replayed

        # 300 of the day's 500 were spent before the crash: 250 more is refused, 200 fits.
        over = await _post(http, broker.url, credit("after-crash-250", amount=250))
        assert over.status_code == 429 and over.json()["code"] == "budget_exceeded", over.text
        fits = await _post(http, broker.url, credit("after-crash-200", amount=200))
        assert fits.status_code == 200, fits.text

        # The claim of the killed call was committed before the call: first still in progress,
        # then outcome_unknown once its lease is over. Never run again.
        early = await _post(http, broker.url, slow)
        assert early.status_code == 409, early.text
        assert early.json()["code"] in ("idempotency_in_progress", "outcome_unknown")

        async def unknown() -> bool:
            answer = await _post(http, broker.url, slow)
            return answer.status_code == 409 and answer.json()["code"] == "outcome_unknown"

        await eventually(unknown, timeout_s=SLOW_TIMEOUT_S + 10, what="outcome_unknown")
        tool = await http.get(broker.url + "/v1/tools/billing.slow", headers=ADMIN)
        assert tool.status_code == 200, tool.text  # the registration survived too

    assert len(loopback.hits_on("/tools/slow")) == 1
    executed = setup.effects_per_key()
    assert all(count == 1 for count in executed.values()), executed
    assert {key for _, key in executed} == {
        *(body["idempotency_key"] for body in credits),
        "after-crash-200",
    }


async def test_a_second_process_on_the_same_data_directory_is_refused(
    launcher: Launcher,
) -> None:
    setup = _config(launcher)
    (first,) = launcher.start(setup, 1)
    with pytest.raises(RuntimeError) as refused:
        launcher.start(setup, 1)
    message = str(refused.value)
    assert "refusing to start" in message
    assert f"in use by another broker process (pid {first.proc.pid})" in message
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await _post(http, first.url, credit("still-serving"))
        assert answer.status_code == 200, answer.text


async def test_a_damaged_store_refuses_to_start_and_is_left_as_it_was(
    launcher: Launcher,
) -> None:
    setup = _config(launcher)
    store = setup.config_path.parent / "state.sqlite3"
    damaged = b"this was a SQLite file before the disk ate it" * 100
    store.write_bytes(damaged)
    with pytest.raises(RuntimeError) as refused:
        launcher.start(setup, 1)
    assert f"{store}: not a readable SQLite database" in str(refused.value)
    assert store.read_bytes() == damaged
