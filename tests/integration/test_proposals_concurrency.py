"""Concurrent proposals over one HTTP client: exactly-once execution and budgets that hold."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping

import httpx

from adapters.demo import DemoBackend
from broker.plugins import Backend
from tests.conftest import BILLING, GLOBEX, Clock, credit
from tests.fakes import demo_config_with, pin_to_midday, retry_after, start_demo

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)


async def test_25_concurrent_requests_with_one_key_execute_once(make_broker: MakeBroker) -> None:
    url, demo = start_demo(make_broker, demo=DemoBackend(latency_s=0.2))
    async with httpx.AsyncClient(base_url=url, timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(
                client.post("/v1/proposals", json=credit(key="one"), headers=BILLING)
                for _ in range(25)
            )
        )
        after = await client.post("/v1/proposals", json=credit(key="one"), headers=BILLING)
    assert len(demo.credits) == 1
    statuses = Counter(answer.status_code for answer in answers)
    assert set(statuses) <= {200, 409}, [a.text for a in answers if a.status_code not in (200, 409)]
    originals = [a for a in answers if a.status_code == 200 and not a.json()["replayed"]]
    assert len(originals) == 1
    credit_id = originals[0].json()["execution"]["result"]["credit_id"]
    for answer in answers:
        body = answer.json()
        if answer.status_code == 409:
            assert body["code"] == "idempotency_in_progress"
            retry_after(answer)
        else:
            assert body["execution"]["result"]["credit_id"] == credit_id
    assert after.status_code == 200
    assert after.json()["replayed"] is True
    assert after.json()["execution"]["result"]["credit_id"] == credit_id


async def test_50_concurrent_credits_never_overspend_the_budget(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    config = demo_config_with(rate_limits__credit_calls__limit=1000)
    url, demo = start_demo(make_broker, config, demo=DemoBackend(latency_s=0.05))
    async with httpx.AsyncClient(base_url=url, timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(
                client.post("/v1/proposals", json=credit(key=f"k-{i}", amount=25), headers=BILLING)
                for i in range(50)
            )
        )
    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {200: 20, 429: 30}, statuses
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["code"] == "budget_exceeded"
            retry_after(answer)
    assert len(demo.credits) == 20
    assert sum(c["amount"] for c in demo.credits) <= 500


async def test_concurrent_tenants_have_separate_budgets(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    config = demo_config_with(rate_limits__credit_calls__limit=1000)
    url, demo = start_demo(make_broker, config)

    def globex(i: int) -> dict[str, object]:
        return credit(key=f"g-{i}", amount=100, order="O-80002")

    async with httpx.AsyncClient(base_url=url, timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(
                client.post("/v1/proposals", json=credit(key=f"a-{i}", amount=100), headers=BILLING)
                for i in range(8)
            ),
            *(client.post("/v1/proposals", json=globex(i), headers=GLOBEX) for i in range(8)),
        )
    assert Counter(a.status_code for a in answers) == {200: 10, 429: 6}
    per_tenant = Counter(c["tenant"] for c in demo.credits)
    assert per_tenant == {"acme": 5, "globex": 5}
