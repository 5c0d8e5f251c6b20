"""When the ledger cannot be written, nothing that changes the world executes (503)."""

from __future__ import annotations

from pathlib import Path

import httpx

from adapters.demo import DemoBackend
from tests.conftest import BILLING, credit


async def test_a_missing_ledger_file_refuses_world_changing_tools(
    client: httpx.AsyncClient, demo: DemoBackend, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    assert (
        await client.post("/v1/proposals", json=credit("a"), headers=BILLING)
    ).status_code == 200
    ledger.rename(tmp_path / "moved-away.jsonl")  # someone removed the file under us

    refused = await client.post("/v1/proposals", json=credit("b", amount=5), headers=BILLING)
    assert refused.status_code == 503
    assert refused.headers["Retry-After"]
    body = refused.json()
    assert body["code"] == "store_unavailable"
    # The claim the broker could not record: a program sees the key's check, unnamed.
    assert body["failed_check"] == {"kind": "idempotency", "name": None}
    assert body["execution"] is None
    assert len(demo.credits) == 1  # only the first, recorded one

    ready = await client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["checks"]["ledger"] == "unavailable"
    metrics = (await client.get("/metrics")).text
    assert "broker_ledger_unavailable 1.0" in metrics

    # A retry of the refused proposal is not blocked by a leftover claim once the ledger is back.
    (tmp_path / "moved-away.jsonl").rename(ledger)
    retried = await client.post("/v1/proposals", json=credit("b", amount=5), headers=BILLING)
    assert retried.status_code == 200, retried.text
    assert len(demo.credits) == 2
