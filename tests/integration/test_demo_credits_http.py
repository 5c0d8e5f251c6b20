"""The demo's credits over real HTTP: a credit must fit its order, and budgets count per currency.

A credit above what is left of the order's total, or in another currency than the order's, is a
failed precondition (nothing executes, nothing is spent). ``credits_per_day`` is kept per
``currency`` (``per_arg``): 500 USD and 500 EUR a day, never one sum of both. The budget runs on
every store the broker can use (memory, SQLite, Redis), each chosen by the config.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig
from broker.plugins import Backend
from tests.conftest import BILLING, Clock
from tests.fakes import assert_problem, pin_to_midday
from tests.integration.procs import Launcher, launcher_for, redis_reachable
from tests.redis_helpers import REDIS_URL, connected_redis, forget_prefix, missing_redis

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


def credit(key: str, order: str, amount: float, currency: str) -> dict[str, Any]:
    return {
        "tool": "issue_credit",
        "args": {"order_id": order, "amount": amount, "currency": currency},
        "idempotency_key": key,
    }


@pytest.fixture
async def demo_http(
    make_broker: StartBroker, clock: Clock
) -> AsyncIterator[tuple[httpx.AsyncClient, DemoBackend]]:
    pin_to_midday(clock)
    demo = DemoBackend()
    url, _ = make_broker(backends={"demo": demo})
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        yield client, demo


async def test_a_credit_above_the_orders_total_is_refused(
    demo_http: tuple[httpx.AsyncClient, DemoBackend],
) -> None:
    client, demo = demo_http
    # O-55291 is 120.00 USD.
    over = await client.post(
        "/v1/proposals", json=credit("over", "O-55291", 150, "USD"), headers=BILLING
    )
    problem = assert_problem(over, 409, "precondition_failed", "PRECONDITION")
    assert "120" in problem["reason"]
    assert problem["remediation"] == "REPLAN: credit at most 120 USD"
    assert demo.credits == []


async def test_earlier_credits_count_against_the_orders_total(
    demo_http: tuple[httpx.AsyncClient, DemoBackend],
) -> None:
    client, demo = demo_http
    first = await client.post(
        "/v1/proposals", json=credit("c1", "O-55291", 100, "USD"), headers=BILLING
    )
    assert first.status_code == 200, first.text
    second = await client.post(
        "/v1/proposals", json=credit("c2", "O-55291", 30, "USD"), headers=BILLING
    )
    problem = assert_problem(second, 409, "precondition_failed", "PRECONDITION")
    assert problem["remediation"] == "REPLAN: credit at most 20 USD"
    rest = await client.post(
        "/v1/proposals", json=credit("c3", "O-55291", 20, "USD"), headers=BILLING
    )
    assert rest.status_code == 200, rest.text
    assert sum(c["amount"] for c in demo.credits) == 120


async def test_a_credit_in_another_currency_than_the_orders_is_refused(
    demo_http: tuple[httpx.AsyncClient, DemoBackend],
) -> None:
    client, demo = demo_http
    answer = await client.post(
        "/v1/proposals", json=credit("eur", "O-55291", 10, "EUR"), headers=BILLING
    )
    problem = assert_problem(answer, 409, "precondition_failed", "PRECONDITION")
    assert "USD" in problem["reason"]
    assert problem["remediation"] == "REPLAN: issue the credit in USD"
    assert demo.credits == []


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def store_config(
    request: pytest.FixtureRequest, demo_config: BrokerConfig, tmp_path: Path
) -> AsyncIterator[BrokerConfig]:
    """The demo config on one kind of store (Redis under a prefix of its own, deleted after)."""
    kind = request.param
    changes: dict[str, Any] = {"store": kind}
    if kind == "sqlite":
        changes["store_path"] = str(tmp_path / "state.sqlite3")
    prefix = f"test-per-arg-{secrets.token_hex(6)}"
    if kind == "redis":
        client = await connected_redis()  # skips (fails under CI) when Redis is not there
        changes.update(redis_url=REDIS_URL, key_prefix=prefix)
    service = msgspec.structs.replace(demo_config.service, **changes)
    yield msgspec.structs.replace(demo_config, service=service)
    if kind == "redis":
        await forget_prefix(client, prefix)
        await client.aclose()


async def test_the_daily_budget_is_kept_per_currency(
    make_broker: StartBroker, clock: Clock, store_config: BrokerConfig
) -> None:
    pin_to_midday(clock)
    demo = DemoBackend()
    url, _ = make_broker(store_config, backends={"demo": demo})
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        # O-55300 is 900 USD and O-55400 900 EUR: the orders leave room, the budget does not.
        usd = await client.post(
            "/v1/proposals", json=credit("u1", "O-55300", 500, "USD"), headers=BILLING
        )
        assert usd.status_code == 200, usd.text
        eur = await client.post(
            "/v1/proposals", json=credit("e1", "O-55400", 400, "EUR"), headers=BILLING
        )
        assert eur.status_code == 200, eur.text  # not 900 "units" against one limit of 500
        more_usd = await client.post(
            "/v1/proposals", json=credit("u2", "O-55300", 1, "USD"), headers=BILLING
        )
        assert_problem(more_usd, 429, "budget_exceeded", "PRECONDITION")
        assert int(more_usd.headers["retry-after"]) >= 1
        more_eur = await client.post(
            "/v1/proposals", json=credit("e2", "O-55400", 100, "EUR"), headers=BILLING
        )
        assert more_eur.status_code == 200, more_eur.text
        over_eur = await client.post(
            "/v1/proposals", json=credit("e3", "O-55400", 0.01, "EUR"), headers=BILLING
        )
        assert_problem(over_eur, 429, "budget_exceeded", "PRECONDITION")
    assert sorted((c["currency"], c["amount"]) for c in demo.credits) == [
        ("EUR", 100),
        ("EUR", 400),
        ("USD", 500),
    ]


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


@pytest.mark.redis
async def test_two_processes_never_credit_more_than_the_order_together(
    launcher: Launcher,
) -> None:
    """Two real broker processes on one Redis: what one credited counts in the other, and
    concurrent credits that each fit alone never exceed the order between them."""
    setup = launcher.config(latency_s=0.05, credit_rate_limit=1000)
    first, second = launcher.start(setup, 2)
    async with httpx.AsyncClient(timeout=20) as client:
        done = await client.post(
            first.url + "/v1/proposals", json=credit("mp-1", "O-55291", 100, "USD"), headers=BILLING
        )
        assert done.status_code == 200, done.text
        over = await client.post(
            second.url + "/v1/proposals", json=credit("mp-2", "O-55291", 30, "USD"), headers=BILLING
        )
        problem = assert_problem(over, 409, "precondition_failed", "PRECONDITION")
        assert problem["remediation"] == "REPLAN: credit at most 20 USD"
        # 8 credits of 10 at once, spread over both processes: only 2 fit what is left.
        racing = await asyncio.gather(
            *(
                client.post(
                    (first, second)[i % 2].url + "/v1/proposals",
                    json=credit(f"race-{i}", "O-55291", 10, "USD"),
                    headers=BILLING,
                )
                for i in range(8)
            )
        )
    assert sum(1 for a in racing if a.status_code == 200) == 2, [a.text for a in racing]
    executed = [e for e in setup.effects() if e["order_id"] == "O-55291"]
    assert sum(e["amount"] for e in executed) == 120, launcher.logs()
