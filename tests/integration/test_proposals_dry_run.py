"""Dry runs per request, per route (config) and globally (``create_app(dry_run=True)``).

The whole chain runs (schema, authz, preconditions, limits) and its rejections stand; nothing is
executed; the answer carries the adapter's preview; no budget, rate or idempotency state is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.plugins import Backend
from tests.conftest import BILLING, SCHEDULING, Clock, credit, ticket
from tests.fakes import assert_problem, demo_config_with, pin_to_midday, start_demo

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
Mode = str  # "request" | "route" | "global"
MODES = ["request", "route", "global"]


def start(make_broker: MakeBroker, mode: Mode) -> tuple[str, DemoBackend]:
    if mode == "route":
        return start_demo(make_broker, demo_config_with(routes__billing_help__dry_run=True))
    if mode == "global":
        return start_demo(make_broker, dry_run=True)
    return start_demo(make_broker)


def dry(body: dict[str, Any], mode: Mode) -> dict[str, Any]:
    return {**body, "dry_run": True} if mode == "request" else body


@pytest.mark.parametrize("mode", MODES)
async def test_a_dry_run_executes_nothing_and_previews(make_broker: MakeBroker, mode: Mode) -> None:
    url, demo = start(make_broker, mode)
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/v1/proposals", json=dry(credit(), mode), headers=BILLING)
        made_ticket = await client.post("/v1/proposals", json=dry(ticket(), mode), headers=BILLING)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["decision"] == "approved"
    assert body["dry_run"] is True
    assert body["replayed"] is False
    assert body["execution"]["status"] == "dry_run"
    assert body["execution"]["result"] == {"would_issue": {"order_id": "O-55300", "amount": 25}}
    assert made_ticket.status_code == 200, made_ticket.text
    assert made_ticket.json()["execution"]["status"] == "dry_run"
    assert made_ticket.json()["execution"]["result"]["would_create"]["customer_id"] == "C-10429"
    assert demo.credits == []
    assert demo.tickets == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_dry_run_still_rejects_bad_proposals(make_broker: MakeBroker, mode: Mode) -> None:
    url, demo = start(make_broker, mode)
    bad_args = credit()
    bad_args["args"]["amount"] = "lots"
    async with httpx.AsyncClient(base_url=url) as client:
        schema = await client.post("/v1/proposals", json=dry(bad_args, mode), headers=BILLING)
        unpaid = await client.post(
            "/v1/proposals", json=dry(credit(order="O-60000"), mode), headers=BILLING
        )
        unknown = await client.post(
            "/v1/proposals", json=dry({"tool": "nope", "args": {}}, mode), headers=BILLING
        )
        keyless = {k: v for k, v in credit().items() if k != "idempotency_key"}
        missing_key = await client.post("/v1/proposals", json=dry(keyless, mode), headers=BILLING)
    problem = assert_problem(schema, 422, "schema_invalid", "SCHEMA")
    assert problem["dry_run"] is True
    assert [e["path"] for e in problem["errors"]] == ["/args/amount"]
    assert_problem(unpaid, 409, "precondition_failed", "PRECONDITION")
    assert_problem(unknown, 422, "unknown_tool", "SCHEMA")
    assert_problem(missing_key, 400, "idempotency_key_missing", "IDEMPOTENCY")
    assert demo.credits == []


@pytest.mark.parametrize("mode", ["request", "global"])
async def test_a_dry_run_still_checks_authorization(make_broker: MakeBroker, mode: Mode) -> None:
    url, demo = start(make_broker, mode)
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/v1/proposals", json=dry(credit(), mode), headers=SCHEDULING)
        anonymous = await client.post("/v1/proposals", json=dry(credit(), mode))
    assert_problem(response, 403, "tool_not_allowed", "AUTHZ")
    assert_problem(anonymous, 401, "unauthenticated", "AUTHZ")
    assert demo.credits == []


@pytest.mark.parametrize("mode", MODES)
async def test_dry_runs_spend_no_budget_rate_or_keys(
    make_broker: MakeBroker, clock: Clock, mode: Mode
) -> None:
    pin_to_midday(clock)
    url, demo = start(make_broker, mode)
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(30):
            response = await client.post(
                "/v1/proposals", json=dry(credit(key=f"k-{i}", amount=25), mode), headers=BILLING
            )
            assert response.status_code == 200, (i, response.text)
            assert response.json()["execution"]["status"] == "dry_run"
        # The same key with other args is not a reuse: a dry run claims nothing.
        other = await client.post(
            "/v1/proposals", json=dry(credit(key="k-0", amount=26), mode), headers=BILLING
        )
        assert other.status_code == 200, other.text
    assert demo.credits == []


async def test_a_dry_run_route_leaves_other_routes_live(make_broker: MakeBroker) -> None:
    config = demo_config_with(routes__scheduling__dry_run=True)
    url, demo = start_demo(make_broker, config)
    async with httpx.AsyncClient(base_url=url) as client:
        live = await client.post("/v1/proposals", json=credit(), headers=BILLING)
        lookup = await client.post(
            "/v1/proposals",
            json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
            headers=SCHEDULING,
        )
    assert live.status_code == 200
    assert live.json()["dry_run"] is False
    assert live.json()["execution"]["status"] == "succeeded"
    assert lookup.json()["dry_run"] is True
    assert lookup.json()["execution"]["status"] == "dry_run"
    assert len(demo.credits) == 1


async def test_dry_run_false_in_the_body_cannot_escape_a_dry_run_route(
    make_broker: MakeBroker,
) -> None:
    url, demo = start(make_broker, "route")
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/proposals", json={**credit(), "dry_run": False}, headers=BILLING
        )
    assert response.status_code == 200
    assert response.json()["dry_run"] is True
    assert demo.credits == []


async def test_a_dry_run_after_the_budget_is_spent_is_refused_like_the_real_run(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    url, demo = start(make_broker, "request")
    async with httpx.AsyncClient(base_url=url) as client:
        spent = await client.post(
            "/v1/proposals", json=credit(key="all", amount=500), headers=BILLING
        )
        assert spent.status_code == 200, spent.text
        response = await client.post(
            "/v1/proposals", json={**credit(key="more", amount=1), "dry_run": True}, headers=BILLING
        )
    problem = assert_problem(response, 429, "budget_exceeded", "PRECONDITION")
    assert problem["dry_run"] is True
    assert len(demo.credits) == 1
