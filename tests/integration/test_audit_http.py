"""Every proposal lands in the ledger before it is answered, and the trail can be read and verified."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec

from broker.config import BrokerConfig
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, GLOBEX, credit, ticket

CANARY = "canary-4111-1111-1111-1111"


def with_card_number(config: BrokerConfig) -> BrokerConfig:
    """issue_credit takes an optional card_number, a globally sensitive field."""
    tool = config.tools["issue_credit"]
    schema = dict(tool.input_schema)
    schema["properties"] = {**schema["properties"], "card_number": {"type": "string"}}
    tools = {**config.tools, "issue_credit": msgspec.structs.replace(tool, input_schema=schema)}
    return msgspec.structs.replace(config, tools=tools)


async def test_every_outcome_is_recorded_and_the_chain_verifies(client: httpx.AsyncClient) -> None:
    outcomes = [
        await client.post("/v1/proposals", json=credit(), headers=BILLING),  # approved
        await client.post("/v1/proposals", json=credit(), headers=BILLING),  # replayed
        await client.post("/v1/proposals", json=ticket("C-20001"), headers=BILLING),  # rejected
        await client.post(
            "/v1/proposals", json={**credit("dry"), "dry_run": True}, headers=BILLING
        ),
    ]
    assert [r.status_code for r in outcomes] == [200, 200, 409, 200]
    audits = [r.json()["audit"] for r in outcomes]
    # The replay repeats the original body, audit reference included.
    assert audits[1] == audits[0]
    assert [a["seq"] for a in (audits[0], audits[2], audits[3])] == [1, 3, 4]

    report = (await client.get("/v1/audit/verify", headers=ADMIN)).json()
    assert report == {
        "ok": True,
        "records": 4,
        "head": report["head"],
        "first_bad_seq": None,
        "reason": None,
        "unsigned_tail": 4,  # the checkpoint signed at start covers none of them yet
    }
    assert report["head"] == audits[3]["hash"]


async def test_a_trace_reads_back_plan_decision_and_outcome(client: httpx.AsyncClient) -> None:
    await client.post("/v1/proposals", json={**credit(), "trace_id": "x-9af3"}, headers=BILLING)
    trail = await client.get("/v1/traces/x-9af3", headers=BILLING)
    assert trail.status_code == 200
    (record,) = trail.json()["records"]
    assert record["tool"] == "issue_credit"
    assert record["decision"] == "approved"
    assert record["execution_status"] == "succeeded"
    assert record["args_redacted"] == {"order_id": "O-55300", "amount": 25, "currency": "USD"}
    assert record["result_redacted"]["credit_id"] == "CR-1001"
    assert [v["name"] for v in record["validators"]] == [
        "mediation",
        "tool_authz",
        "schema",
        "idempotency_key",
        "preconditions",
        "admission",
    ]
    # Another tenant's token sees nothing of it, exactly as for an unknown trace.
    other = await client.get("/v1/traces/x-9af3", headers=GLOBEX)
    unknown = await client.get("/v1/traces/no-such-trace", headers=GLOBEX)
    assert other.status_code == unknown.status_code == 404
    assert (await client.get("/v1/traces/x-9af3", headers=ADMIN)).status_code == 200


async def test_verify_needs_an_admin(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/audit/verify", headers=BILLING)
    assert response.status_code == 403


async def test_a_sensitive_argument_never_reaches_the_ledger(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]],
    demo_config: BrokerConfig,
    tmp_path: Path,
) -> None:
    url, _ = make_broker(with_card_number(demo_config))
    body: dict[str, Any] = credit()
    body["args"]["card_number"] = CANARY
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/v1/proposals", json=body, headers=BILLING)
        assert response.status_code == 200
        assert (await client.get("/v1/audit/verify", headers=ADMIN)).json()["ok"] is True
    stored = (tmp_path / "ledger.jsonl").read_text()
    assert CANARY not in stored
    assert '"card_number":"[REDACTED]"' in stored


async def test_a_rejection_is_read_back_from_the_ledger_exactly_as_it_was_answered(
    client: httpx.AsyncClient,
) -> None:
    bad = credit("bad-args", amount=5000)
    bad["args"]["currency"] = "XX"
    answered = await client.post("/v1/proposals", json=bad, headers=BILLING)
    assert answered.status_code == 422
    read = await client.get(f"/v1/proposals/{answered.json()['proposal_id']}", headers=BILLING)
    assert read.status_code == 200
    assert read.json() == answered.json()  # errors and remediation included
    assert [e["path"] for e in read.json()["errors"]] == ["/args/amount", "/args/currency"]
