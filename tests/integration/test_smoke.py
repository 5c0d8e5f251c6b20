from __future__ import annotations

import httpx

from adapters.demo import DemoBackend
from tests.conftest import BILLING, credit


async def test_the_worked_example_issues_one_credit(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    response = await client.post("/v1/proposals", json=credit(), headers=BILLING)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["decision"] == "approved"
    assert body["execution"]["result"]["credit_id"] == "CR-1001"
    assert len(demo.credits) == 1
