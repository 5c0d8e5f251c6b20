"""Two real broker processes on one Redis: an approved action executes exactly once however many
approvers' clicks race on both, and an approval nobody decides is expired by one process's
sweeper, its budget given back, without anyone reading it.

What executed is judged by the demo backend's effects file (shared by both processes)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.procs import (
    BILLING,
    REDIS_SERVER,
    REDIS_URL,
    Launcher,
    PrivateRedis,
    credit,
    eventually,
    launcher_for,
    redis_reachable,
)
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
APPROVER = {"Authorization": "Bearer demo-approver-token"}
CLICKS = 8
"""Approve calls per process, all at once."""


def approval_only(data: dict[str, Any]) -> None:
    """The demo without guarded_billing's policy (issue 24, tested in test_policy_*): these
    tests are about approval alone."""
    data.pop("policy", None)
    data["routes"]["guarded_billing"].pop("require_session_id", None)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


async def simultaneous_clicks(
    ports: list[int], path: str, body: dict[str, Any]
) -> list[tuple[int, dict[str, Any]]]:
    """POST ``body`` to ``path`` on every port at one instant: the connections are opened
    first, then every request is written in one loop (an HTTP client's own work per request
    would spread them over milliseconds, longer than the race being tested)."""
    payload = json.dumps(body).encode()
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {APPROVER['Authorization']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode() + payload
    streams = [await asyncio.open_connection("127.0.0.1", port) for port in ports]
    for _, writer in streams:
        writer.write(request)
    await asyncio.gather(*(writer.drain() for _, writer in streams))
    answers = []
    for reader, writer in streams:
        raw = await asyncio.wait_for(reader.read(), timeout=20)
        writer.close()
        head, _, content = raw.partition(b"\r\n\r\n")
        answers.append((int(head.split()[1]), json.loads(content)))
    return answers


async def test_racing_approvals_on_two_processes_execute_the_action_once(
    launcher: Launcher,
) -> None:
    setup = launcher.config(
        latency_s=0.3, edit=approval_only
    )  # a slow backend widens the window of a race
    first, second = launcher.start(setup, 2)
    body = credit("race-approve", amount=150)
    async with httpx.AsyncClient(timeout=20) as http:
        pending = await http.post(f"{first.url}/v1/proposals", json=body, headers=GUARDED)
        assert pending.status_code == 202, pending.text
        approval = pending.json()["approval"]
        answers = await simultaneous_clicks(
            [first.port, second.port] * CLICKS,
            f"/v1/approvals/{approval['id']}/approve",
            {"digest": approval["digest"]},
        )
        assert {status for status, _ in answers} == {200}, answers
        assert {answer["status"] for _, answer in answers} == {"approved"}

        async def executed() -> dict[str, Any]:
            seen = await http.get(f"{second.url}/v1/approvals/{approval['id']}", headers=APPROVER)
            return seen.json() if seen.json()["execution"] == "done" else {}

        await eventually(executed, timeout_s=10)
        assert setup.effects_per_key()[("acme", "race-approve")] == 1
        for broker in (first, second):  # the agent's retry, on either process
            final = await http.post(f"{broker.url}/v1/proposals", json=body, headers=GUARDED)
            assert final.status_code == 200, final.text
            assert final.json()["execution"]["status"] == "succeeded"
    assert setup.effects_per_key()[("acme", "race-approve")] == 1


def _sample(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_an_undecided_approval_is_expired_once_by_a_sweeper_and_gives_back_its_budget(
    launcher: Launcher,
) -> None:
    def short_expiry(data: dict[str, Any]) -> None:
        approval_only(data)
        data["tools"]["issue_credit"]["approval"]["expires_s"] = 1

    setup = launcher.config(edit=short_expiry)
    brokers = launcher.start(setup, 2)
    async with httpx.AsyncClient(timeout=20) as http:
        pending = await http.post(
            f"{brokers[0].url}/v1/proposals", json=credit("sweep-1", amount=400), headers=GUARDED
        )
        assert pending.status_code == 202, pending.text
        held = await http.post(
            f"{brokers[1].url}/v1/proposals", json=credit("b-1", amount=150), headers=BILLING
        )
        assert held.status_code == 429, held.text  # 400 of 500 are held

        expired = 'broker_approval_decisions_total{outcome="expired"}'

        async def swept() -> float:
            texts = [(await http.get(f"{b.url}/metrics")).text for b in brokers]
            return sum(_sample(t, expired) for t in texts)

        assert await eventually(swept, timeout_s=10) == 1.0  # one process took the expiry
        await asyncio.sleep(1.5)  # more sweeps on both: still one
        assert await swept() == 1.0
        gauges = [
            _sample((await http.get(f"{b.url}/metrics")).text, "broker_approvals_pending")
            for b in brokers
        ]
        assert gauges == [0.0, 0.0]
        fits = await http.post(
            f"{brokers[1].url}/v1/proposals", json=credit("b-2", amount=150), headers=BILLING
        )
        assert fits.status_code == 200, fits.text
        retry = await http.post(
            f"{brokers[1].url}/v1/proposals", json=credit("sweep-1", amount=400), headers=GUARDED
        )
        assert retry.status_code == 403
        assert retry.json()["code"] == "approval_expired"
    assert setup.effects_per_key()[("acme", "sweep-1")] == 0


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if not Path(REDIS_SERVER).exists():
        missing_redis(f"no redis-server at {REDIS_SERVER}")
    server = PrivateRedis(tmp_path / "redis", persistent=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_with_redis_down_an_approval_fails_closed_then_executes_once_it_is_back(
    launcher: Launcher, private_redis: PrivateRedis
) -> None:
    setup = launcher.config(redis_url=private_redis.url, shared_numbers=False, edit=approval_only)
    (broker,) = launcher.start(setup, 1)
    body = credit("outage-1", amount=150)
    async with httpx.AsyncClient(base_url=broker.url, timeout=20) as http:
        pending = await http.post("/v1/proposals", json=body, headers=GUARDED)
        assert pending.status_code == 202, pending.text
        approval = pending.json()["approval"]
        decision = {"digest": approval["digest"], "comment": "ok"}
        private_redis.stop()
        down = await http.post(
            f"/v1/approvals/{approval['id']}/approve", json=decision, headers=APPROVER
        )
        assert down.status_code == 503, down.text
        assert down.json()["code"] == "store_unavailable"
        assert setup.effects_per_key()[("acme", "outage-1")] == 0
        private_redis.start()

        async def approved() -> httpx.Response | None:
            answer = await http.post(
                f"/v1/approvals/{approval['id']}/approve", json=decision, headers=APPROVER
            )
            return answer if answer.status_code == 200 else None

        back = await eventually(approved, timeout_s=10)
        assert back.json()["execution"] == "done"
        final = await http.post("/v1/proposals", json=body, headers=GUARDED)
        assert final.status_code == 200, final.text
    assert setup.effects_per_key()[("acme", "outage-1")] == 1
