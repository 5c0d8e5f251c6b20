"""An adapter that can say what happened to a call (``outcome_of``) is asked before the broker
declares the outcome unknown; over real HTTP, the backend's call log says what ran."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from adapters.python import FunctionBackend
from broker.execution.outcome_probe import AskedOutcome
from broker.plugins import AdapterContext, Backend
from tests.fakes import FAKE, SleepRecorder, _tool, fake_config

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


class HangingButTraceable:
    """Never answers a call, but knows afterwards what happened to each key (as a backend that
    deduplicates by idempotency key does)."""

    def __init__(self, known: dict[str, AskedOutcome | None]) -> None:
        self.known = known
        self.calls: list[str | None] = []
        self.asked: list[str | None] = []

    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        self.calls.append(ctx.idempotency_key)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def outcome_of(self, args: dict[str, Any], ctx: AdapterContext) -> AskedOutcome:
        self.asked.append(ctx.idempotency_key)
        answer = self.known.get(ctx.idempotency_key or "")
        if answer is None:
            await asyncio.Event().wait()  # the backend does not answer this either
        assert answer is not None
        return answer


@pytest.fixture
def probed(make_broker: MakeBroker) -> tuple[str, HangingButTraceable]:
    adapter = HangingButTraceable(
        {
            "done": AskedOutcome("succeeded", {"ticket_id": "T-1"}),
            "refused": AskedOutcome("failed"),
            "never-arrived": AskedOutcome("not_executed"),
            "no-idea": AskedOutcome("unknown"),
        }
    )
    config = fake_config({"traceable": _tool("hang", timeout_s=0.2)}, preconditions={})
    url, _ = make_broker(
        config, backends={"fake": FunctionBackend({"hang": adapter})}, sleep=SleepRecorder()
    )
    return url, adapter


def call(key: str) -> dict[str, Any]:
    return {"tool": "traceable", "args": {"n": 1}, "idempotency_key": key}


async def twice(client: httpx.AsyncClient, key: str) -> tuple[httpx.Response, httpx.Response]:
    first = await client.post("/v1/proposals", json=call(key), headers=FAKE)
    again = await client.post("/v1/proposals", json=call(key), headers=FAKE)
    return first, again


async def test_a_backend_that_knows_turns_a_timeout_into_its_real_outcome(
    probed: tuple[str, HangingButTraceable],
) -> None:
    url, adapter = probed
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        first, again = await twice(client, "done")
        assert first.status_code == 200, first.text
        assert first.json()["execution"]["result"] == {"ticket_id": "T-1"}
        assert again.headers["idempotent-replayed"] == "true"

        first, again = await twice(client, "refused")
        assert first.status_code == 502
        assert first.json()["code"] == "provider_error"
        assert again.headers["idempotent-replayed"] == "true"

        first, again = await twice(client, "never-arrived")
        assert first.status_code == 504  # the timeout, but the key is released...
        assert again.status_code == 504
        assert "idempotent-replayed" not in again.headers  # ...so the retry ran again
    assert adapter.calls.count("done") == 1
    assert adapter.calls.count("refused") == 1
    assert adapter.calls.count("never-arrived") == 2


@pytest.mark.parametrize("key", ["no-idea", "silent"])
async def test_without_a_clear_answer_the_outcome_stays_unknown(
    probed: tuple[str, HangingButTraceable], key: str
) -> None:
    url, adapter = probed
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        first, again = await twice(client, key)
        assert first.status_code == 504
        assert again.status_code == 409
        assert again.json()["code"] == "outcome_unknown"
    assert adapter.asked == [key]
    assert adapter.calls == [key]
