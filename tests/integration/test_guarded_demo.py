"""The demo's guarded_billing route as the contract describes it: policy and approval together
(a session_id, a lookup of the order first, then a credit above 100 waits for a person)."""

from __future__ import annotations

import httpx

from adapters.demo import DemoBackend
from tests.conftest import credit

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
APPROVER = {"Authorization": "Bearer demo-approver-token"}


async def test_a_looked_up_large_credit_waits_for_approval_then_executes(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    body = {**credit("guarded-1", amount=150), "session_id": "chat-1"}
    order = body["args"]["order_id"]
    unchecked = await client.post("/v1/proposals", json=body, headers=GUARDED)
    assert unchecked.status_code == 409, unchecked.text
    assert unchecked.json()["failed_check"] == {"kind": "policy", "name": "demo.lookup_first"}

    lookup = {"tool": "lookup_order", "args": {"order_id": order}, "session_id": "chat-1"}
    assert (await client.post("/v1/proposals", json=lookup, headers=GUARDED)).status_code == 200
    body = {**body, "idempotency_key": "guarded-2"}
    waiting = await client.post("/v1/proposals", json=body, headers=GUARDED)
    assert waiting.status_code == 202, waiting.text
    approval = waiting.json()["approval"]
    assert demo.credits == []

    approved = await client.post(
        f"/v1/approvals/{approval['id']}/approve",
        json={"digest": approval["digest"], "comment": "ok"},
        headers=APPROVER,
    )
    assert approved.status_code == 200, approved.text
    final = await client.post("/v1/proposals", json=body, headers=GUARDED)
    assert final.status_code == 200, final.text
    assert final.json()["replayed"] is True
    assert len(demo.credits) == 1
