"""Registered tools under the operator's budgets and rate limits, over real HTTP.

A registration may name the config's budgets and rate limits; a backend token only those granted
to its namespace (``namespaces = [...]`` under ``[budgets.NAME]`` / ``[rate_limits.NAME]``).
Unknown or ungranted names are a 422 with a JSON Pointer each, and nothing is stored. What a
registered tool names is enforced on its proposals exactly as for a config tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

from broker.config import parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, Clock
from tests.fakes import assert_problem, pin_to_midday
from tests.loopback import LoopbackBackend, running
from tests.registrations import BACKEND, registration, registration_raw

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


@pytest.fixture
async def http(make_broker: StartBroker, clock: Clock) -> AsyncIterator[httpx.AsyncClient]:
    pin_to_midday(clock)
    raw = registration_raw()
    raw["budgets"]["refunds_per_day"] = {
        "kind": "count",
        "limit": 2,
        "window_s": 86_400,
        "per": ["tenant"],
        "namespaces": ["billing"],
    }
    raw["rate_limits"]["refund_calls"] = {
        "limit": 1,
        "window_s": 60,
        "per": ["tenant", "route"],
        "namespaces": ["billing"],
    }
    url, _ = make_broker(parse_config(raw))
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        yield client


def refund(key: str) -> dict[str, Any]:
    return {"tool": "billing.refund", "args": {"payment_id": "P-1"}, "idempotency_key": key}


async def register(
    http: httpx.AsyncClient,
    backend: tuple[str, LoopbackBackend],
    headers: dict[str, str],
    **extra: Any,
) -> httpx.Response:
    backend_url, loopback = backend
    body = registration("billing.refund", backend_url + "/tools/refund", **extra)
    answer = await http.post("/v1/tools", json=body, headers=headers)
    if answer.status_code == 201:
        loopback.secrets["/tools/refund"] = answer.json()["signing_secret"]
    return answer


async def test_a_backend_registers_a_tool_under_a_budget_granted_to_its_namespace(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    created = await register(http, backend, BACKEND, budgets=["refunds_per_day"])
    assert created.status_code == 201, created.text
    assert created.json()["tool"]["budgets"] == ["refunds_per_day"]
    answers = [
        await http.post("/v1/proposals", json=refund(f"r-{i}"), headers=BILLING) for i in range(3)
    ]
    assert [a.status_code for a in answers[:2]] == [200, 200], answers[0].text
    assert_problem(answers[2], 429, "budget_exceeded", "PRECONDITION")
    assert int(answers[2].headers["retry-after"]) >= 1
    assert len(backend[1].hits_on("/tools/refund")) == 2  # the third never reached the backend


async def test_a_registered_tool_is_rate_limited(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    created = await register(http, backend, BACKEND, rate_limits=["refund_calls"])
    assert created.status_code == 201, created.text
    first = await http.post("/v1/proposals", json=refund("a"), headers=BILLING)
    assert first.status_code == 200, first.text
    second = await http.post("/v1/proposals", json=refund("b"), headers=BILLING)
    assert_problem(second, 429, "rate_limited", "PRECONDITION")
    assert len(backend[1].hits_on("/tools/refund")) == 1


async def test_unknown_or_ungranted_limits_are_refused_with_pointers(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    refused = await register(
        http,
        backend,
        BACKEND,
        budgets=["refunds_per_day", "credits_per_day", "no_such_budget"],
        rate_limits=["credit_calls", "no_such_limit"],
    )
    problem = assert_problem(refused, 422, "schema_invalid", "SCHEMA")
    errors = {e["path"]: e["message"] for e in problem["errors"]}
    assert set(errors) == {"/budgets/1", "/budgets/2", "/rate_limits/0", "/rate_limits/1"}
    assert "not granted to namespace 'billing'" in errors["/budgets/1"]
    assert "unknown budget" in errors["/budgets/2"]
    assert "not granted" in errors["/rate_limits/0"]
    assert "unknown rate limit" in errors["/rate_limits/1"]
    # Nothing was stored.
    assert (await http.get("/v1/tools/billing.refund", headers=ADMIN)).status_code == 404


async def test_an_admin_may_name_any_budget_that_fits_the_tool(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    # credits_per_day adds up "amount" per "currency": this tool has neither.
    misfit = await register(http, backend, ADMIN, budgets=["credits_per_day"])
    problem = assert_problem(misfit, 422, "schema_invalid", "SCHEMA")
    assert {e["path"] for e in problem["errors"]} == {"/budgets/0"}
    fits = await register(
        http, backend, ADMIN, budgets=["refunds_per_day"], rate_limits=["credit_calls"]
    )
    assert fits.status_code == 201, fits.text
