"""Backends under stress across real broker processes: a breaker shared through Redis, and a
graceful shutdown with 20 calls in flight against a slow loopback backend, then a verify.

Each broker is ``python -m broker serve`` (``tests.integration.procs``); the backend is a
:class:`~tests.loopback.LoopbackBackend` in this process, whose request log is the ground truth.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis

from broker.ledger.checkpoints import checkpoint_path_for
from tests.integration.procs import (
    BILLING,
    REDIS_URL,
    ROOT,
    Launcher,
    Setup,
    launcher_for,
    redis_reachable,
)
from tests.loopback import LoopbackBackend, running

pytestmark = pytest.mark.skipif(not redis_reachable(REDIS_URL), reason="needs Redis")

SECRET_ENV = "STRESS_BACKEND_SECRET"
SECRET = "stress-backend-secret-0123456789"


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    yield from launcher_for(tmp_path)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, LoopbackBackend]]:
    monkeypatch.setenv(SECRET_ENV, SECRET)  # the brokers inherit it: the tool's signing secret
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


def with_lookup(backend_url: str, path: str, *, timeout_s: float, **service: Any) -> Any:
    """A config edit adding ``remote_lookup``, an http tool at ``backend_url + path``."""

    def edit(data: dict[str, Any]) -> None:
        data["service"].update(http_allowlist=["http://127.0.0.1:*"], **service)
        data["tools"]["remote_lookup"] = {
            "description": "Look an order up in the remote system.",
            "risk": "read",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["order_id"],
                "properties": {"order_id": {"type": "string"}},
            },
            "idempotent": True,
            "timeout_s": timeout_s,
            "retry": {"attempts": 1},
            "adapter": {
                "kind": "http",
                "url": backend_url + path,
                "signing_secret": f"env:{SECRET_ENV}",
            },
        }
        data["routes"]["billing_help"]["tools"].append("remote_lookup")

    return edit


def lookup(n: int) -> dict[str, Any]:
    return {"tool": "remote_lookup", "args": {"order_id": f"O-{n}"}}


async def test_an_open_breaker_is_shared_by_every_process_on_redis(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/tools/lookup"] = "status:503"
    loopback.secrets["/tools/lookup"] = SECRET
    setup = launcher.config(
        edit=with_lookup(backend_url, "/tools/lookup", timeout_s=2.0, breaker_open_s=1.5)
    )
    first, second = launcher.start(setup, n=2)
    async with httpx.AsyncClient(timeout=10) as http:
        for n in range(5):
            answer = await http.post(first.url + "/v1/proposals", json=lookup(n), headers=BILLING)
            assert answer.status_code == 503, answer.text
        assert len(loopback.hits_on("/tools/lookup")) == 5
        key = f"{setup.prefix}:breaker:{backend_url}"
        with Redis.from_url(REDIS_URL) as redis:
            assert await_key(redis, key) > 0  # open-until, on Redis's clock
        # The other process never saw a failure, yet does not call the backend either.
        for n in range(3):
            answer = await http.post(second.url + "/v1/proposals", json=lookup(n), headers=BILLING)
            assert answer.status_code == 503, answer.text
            assert "circuit open" in answer.json()["reason"]
            assert answer.json()["execution"]["attempts"] == 0
            assert int(answer.headers["retry-after"]) >= 1
        assert len(loopback.hits_on("/tools/lookup")) == 5
        # Recovery: after open_s, one probe through the second process closes it for both.
        loopback.behaviours["/tools/lookup"] = "ok"
        await asyncio.sleep(1.6)
        probe = await http.post(second.url + "/v1/proposals", json=lookup(9), headers=BILLING)
        assert probe.status_code == 200, probe.text
        with Redis.from_url(REDIS_URL) as redis:
            assert redis.exists(key) == 0
        after = await http.post(first.url + "/v1/proposals", json=lookup(10), headers=BILLING)
        assert after.status_code == 200, after.text
        assert len(loopback.hits_on("/tools/lookup")) == 7


def await_key(redis: Redis, key: str) -> int:
    """The key's remaining milliseconds, waiting briefly for the process to publish it."""
    deadline = time.monotonic() + 2
    while (ttl := int(redis.pttl(key))) < 0:
        assert time.monotonic() < deadline, f"{key} was never written"
        time.sleep(0.01)
    return ttl


async def test_sigterm_drains_calls_in_flight_then_the_ledger_verifies(
    launcher: Launcher, backend: tuple[str, LoopbackBackend]
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/tools/slow"] = "slow:2.0"
    loopback.secrets["/tools/slow"] = SECRET
    setup = launcher.config(
        edit=with_lookup(backend_url, "/tools/slow", timeout_s=10.0, shutdown_grace_s=15.0)
    )
    (broker,) = launcher.start(setup, n=1)
    limits = httpx.Limits(max_connections=40)
    async with httpx.AsyncClient(base_url=broker.url, timeout=20, limits=limits) as http:
        calls = [
            asyncio.create_task(http.post("/v1/proposals", json=lookup(n), headers=BILLING))
            for n in range(20)
        ]
        deadline = time.monotonic() + 10
        while loopback.in_flight < 20:  # all 20 reached the backend and wait for it
            assert time.monotonic() < deadline, f"only {loopback.in_flight} in flight"
            await asyncio.sleep(0.01)
        broker.proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        # New work is refused while the 20 finish: 503 with Retry-After, nothing executed.
        refused = await http.post("/v1/proposals", json=lookup(99), headers=BILLING)
        assert refused.status_code == 503, refused.text
        assert refused.json()["code"] == "service_unavailable"
        assert int(refused.headers["retry-after"]) >= 1
        ready = await http.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["load"] == "draining"
        answers = await asyncio.gather(*calls)
    assert [a.status_code for a in answers] == [200] * 20, [a.text for a in answers]
    assert broker.proc.wait(timeout=15) is not None
    assert len(loopback.hits_on("/tools/slow")) == 20  # the refused one never reached it
    assert_ledger_verifies(setup, executed=20)


def assert_ledger_verifies(setup: Setup, *, executed: int) -> None:
    """``broker ledger verify`` passes; the final checkpoint signs the last record."""
    ledger = setup.config_path.parent / f"{setup.prefix}.ledger.jsonl"
    key = setup.config_path.parent / f"{setup.prefix}.ledger-key.pem"
    public = subprocess.run(
        [sys.executable, "-m", "broker", "ledger", "public-key", "--key", str(key)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    public_path = key.with_suffix(".pub")
    public_path.write_text(public, encoding="utf-8")
    verified = subprocess.run(
        [
            *(sys.executable, "-m", "broker", "ledger", "verify", "--path", str(ledger)),
            *("--public-key", str(public_path), "--json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] is True
    records = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]
    # Every call in flight was executed and recorded; the refused one left no record at all.
    assert [r["execution_status"] for r in records] == ["succeeded"] * executed
    lines = checkpoint_path_for(ledger).read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    assert last["seq"] == records[-1]["seq"], "no final checkpoint over the last record"
