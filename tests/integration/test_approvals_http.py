"""Human approval over real HTTP (the demo's ``guarded_billing`` route, the SQLite store): each
outcome from the agent's 202 to its retry, the approver's refusals, budgets held and given back,
and the ledger read back and verified.

What executed is judged by the demo backend's own list of credits, never by the broker's answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import msgspec
import pytest

from adapters.demo import DemoBackend
from broker.approvals.model import action_digest
from broker.config import BrokerConfig
from broker.config.model import PolicyConfig
from broker.ledger import JsonlLedgerSink, verify
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, Clock, credit
from tests.front_doors.test_mcp_server import mcp_session

GUARDED = {"Authorization": "Bearer demo-guarded-token"}
APPROVER = {"Authorization": "Bearer demo-approver-token"}
GLOBEX = {"Authorization": "Bearer demo-globex-token"}

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture(scope="module", params=["routed", "fast_path"])
def ingress(request: pytest.FixtureRequest) -> str:
    """Both ways POST /v1/proposals is answered (see tests/conftest.py): the 202 is the same."""
    return str(request.param)


@pytest.fixture
def broker(make_broker: MakeBroker, demo_config: BrokerConfig) -> tuple[str, DemoBackend]:
    """The demo without guarded_billing's policy (issue 24, tested in test_policy_*): these
    tests are about approval alone."""
    routes = dict(demo_config.routes)
    routes["guarded_billing"] = msgspec.structs.replace(
        routes["guarded_billing"], require_session_id=False
    )
    config = msgspec.structs.replace(demo_config, policy=PolicyConfig(), routes=routes)
    url, backends = make_broker(config)
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    return url, demo


@pytest.fixture
def demo(broker: tuple[str, DemoBackend]) -> DemoBackend:
    return broker[1]


@pytest.fixture
async def http(broker: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=broker[0], timeout=10) as client:
        yield client


async def propose(http: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await http.post("/v1/proposals", json=body, headers=GUARDED)


async def pending(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    answer = await propose(http, body)
    assert answer.status_code == 202, answer.text
    decided = answer.json()
    assert decided["decision"] == "pending_approval"
    return decided


async def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    sink = JsonlLedgerSink(tmp_path / "ledger.jsonl")
    try:
        assert (await verify(sink)).ok
        return [msgspec.structs.asdict(r) async for r in sink.read()]
    finally:
        await sink.close()


async def test_a_large_credit_waits_then_executes_once_approved(
    http: httpx.AsyncClient, demo: DemoBackend, tmp_path: Path
) -> None:
    body = credit("big-1", amount=150)
    first = await pending(http, body)
    approval = first["approval"]
    assert approval["id"].startswith("apr_")
    assert approval["status"] == "pending"
    assert approval["digest"] == action_digest(
        tenant="acme",
        route="guarded_billing",
        tool="issue_credit",
        args=body["args"],
        idempotency_key="big-1",
    )
    assert first["execution"] is None
    assert demo.credits == []  # nothing executes yet

    again = await propose(http, body)  # the agent's retry while pending: the same 202
    assert again.status_code == 202
    assert again.json()["approval"] == approval
    assert again.json()["replayed"] is True
    shown = await http.get(f"/v1/proposals/{first['proposal_id']}", headers=GUARDED)
    assert shown.json()["decision"] == "pending_approval"

    listed = await http.get("/v1/approvals?status=pending", headers=APPROVER)
    assert [a["id"] for a in listed.json()["approvals"]] == [approval["id"]]
    seen = (await http.get(f"/v1/approvals/{approval['id']}", headers=APPROVER)).json()
    assert seen["tool"] == "issue_credit"
    assert seen["args"] == body["args"]
    assert seen["route"] == "guarded_billing"

    approved = await http.post(
        f"/v1/approvals/{approval['id']}/approve",
        json={"digest": seen["digest"], "comment": "checked the order"},
        headers=APPROVER,
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "approved"
    assert approved.json()["execution"] == "done"
    assert [c["amount"] for c in demo.credits] == [150]

    final = await propose(http, body)  # the agent's retry gets the executed result
    assert final.status_code == 200, final.text
    assert final.json()["replayed"] is True
    assert final.json()["execution"]["status"] == "succeeded"
    shown = await http.get(f"/v1/proposals/{first['proposal_id']}", headers=GUARDED)
    assert shown.json()["execution"]["result"]["status"] == "issued"

    twice = await http.post(  # a second click: the same state, nothing runs again
        f"/v1/approvals/{approval['id']}/approve",
        json={"digest": seen["digest"]},
        headers=APPROVER,
    )
    assert twice.status_code == 200
    assert twice.json()["status"] == "approved"
    assert len(demo.credits) == 1

    trace = await http.get(f"/v1/traces/{first['trace_id']}", headers=GUARDED)
    shown_in_order = [r["decision"] for r in trace.json()["records"] if not r["replayed"]]
    assert shown_in_order == ["pending_approval", "approval_approved", "approved"]
    metrics = (await http.get("/metrics")).text
    assert 'broker_approval_decisions_total{outcome="approved"} 1.0' in metrics
    assert 'broker_approval_decision_seconds_count{outcome="approved"} 1.0' in metrics

    records = [r for r in await ledger(tmp_path) if r["trace_id"] == first["trace_id"]]
    decisions = [r["decision"] for r in records if not r["replayed"]]
    assert decisions == ["pending_approval", "approval_approved", "approved"]
    (note,) = [r for r in records if r["decision"] == "approval_approved"]
    assert note["service_account"] == "approver:demo-approver"
    assert note["reason"] == "checked the order"
    assert records[-1]["execution_status"] == "succeeded"


async def test_small_credits_and_the_billing_route_never_wait(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    small = await propose(http, credit("small-1", amount=100))
    assert small.status_code == 200, small.text
    unguarded = await http.post("/v1/proposals", json=credit("b-1", amount=150), headers=BILLING)
    assert unguarded.status_code == 200, unguarded.text
    assert [c["amount"] for c in demo.credits] == [100, 150]


async def test_denied_answers_approval_denied_and_gives_the_budget_back(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await pending(http, credit("deny-1", amount=400))
    # 400 of the day's 500 are held: 150 more does not fit meanwhile.
    held = await http.post("/v1/proposals", json=credit("b-2", amount=150), headers=BILLING)
    assert held.status_code == 429, held.text
    assert held.json()["code"] == "budget_exceeded"

    approval_id = first["approval"]["id"]
    missing = await http.post(f"/v1/approvals/{approval_id}/deny", json={}, headers=APPROVER)
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["path"] == "/comment"
    denied = await http.post(
        f"/v1/approvals/{approval_id}/deny", json={"comment": "too large"}, headers=APPROVER
    )
    assert denied.status_code == 200, denied.text
    assert denied.json()["status"] == "denied"

    retry = await propose(http, credit("deny-1", amount=400))
    assert retry.status_code == 403, retry.text
    assert retry.json()["code"] == "approval_denied"
    assert retry.json()["category"] == "AUTHZ"
    assert "too large" in retry.json()["reason"]
    assert demo.credits == []

    given_back = await http.post("/v1/proposals", json=credit("b-3", amount=150), headers=BILLING)
    assert given_back.status_code == 200, given_back.text

    same = await http.post(
        f"/v1/approvals/{approval_id}/deny", json={"comment": "again"}, headers=APPROVER
    )
    assert same.status_code == 200 and same.json()["status"] == "denied"
    other = await http.post(
        f"/v1/approvals/{approval_id}/approve",
        json={"digest": first["approval"]["digest"]},
        headers=APPROVER,
    )
    assert other.status_code == 409, other.text
    assert other.json()["code"] == "approval_conflict"
    assert [c["amount"] for c in demo.credits] == [150]  # only the unguarded credit ran


async def test_expired_answers_approval_expired_and_gives_the_budget_back(
    http: httpx.AsyncClient, demo: DemoBackend, clock: Clock, tmp_path: Path
) -> None:
    first = await pending(http, credit("exp-1", amount=400))
    clock.advance(3601)  # past expires_s (3600): the broker expires it on the next read
    retry = await propose(http, credit("exp-1", amount=400))
    assert retry.status_code == 403, retry.text
    assert retry.json()["code"] == "approval_expired"
    seen = await http.get(f"/v1/approvals/{first['approval']['id']}", headers=APPROVER)
    assert seen.json()["status"] == "expired"
    late = await http.post(
        f"/v1/approvals/{first['approval']['id']}/approve",
        json={"digest": first["approval"]["digest"]},
        headers=APPROVER,
    )
    assert late.status_code == 409
    assert demo.credits == []
    fits = await http.post("/v1/proposals", json=credit("b-4", amount=150), headers=BILLING)
    assert fits.status_code == 200, fits.text
    decisions = [
        r["decision"] for r in await ledger(tmp_path) if r["trace_id"] == first["trace_id"]
    ]
    assert "approval_expired" in decisions


async def test_approved_but_the_precondition_failed_meanwhile(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await pending(http, credit("pre-1", amount=400))
    order = credit()["args"]["order_id"]
    demo._order("acme", order).paid = False  # type: ignore[union-attr]  # the world moved
    approved = await http.post(
        f"/v1/approvals/{first['approval']['id']}/approve",
        json={"digest": first["approval"]["digest"]},
        headers=APPROVER,
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["final_status"] == 409
    retry = await propose(http, credit("pre-1", amount=400))
    assert retry.status_code == 409, retry.text
    assert retry.json()["code"] == "precondition_failed"
    assert demo.credits == []
    demo._order("acme", order).paid = True  # type: ignore[union-attr]
    fits = await http.post("/v1/proposals", json=credit("b-5", amount=150), headers=BILLING)
    assert fits.status_code == 200, fits.text  # the held 400 came back


async def test_a_digest_other_than_the_one_shown_is_refused(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await pending(http, credit("dig-1", amount=150))
    other = action_digest(
        tenant="acme",
        route="guarded_billing",
        tool="issue_credit",
        args={**credit()["args"], "amount": 999},
        idempotency_key="dig-1",
    )
    refused = await http.post(
        f"/v1/approvals/{first['approval']['id']}/approve",
        json={"digest": other},
        headers=APPROVER,
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "approval_conflict"
    assert refused.json()["errors"][0]["path"] == "/digest"
    malformed = await http.post(
        f"/v1/approvals/{first['approval']['id']}/approve",
        json={"digest": "md5:abc"},
        headers=APPROVER,
    )
    assert malformed.status_code == 422
    assert malformed.json()["errors"][0]["path"] == "/digest"
    seen = await http.get(f"/v1/approvals/{first['approval']['id']}", headers=APPROVER)
    assert seen.json()["status"] == "pending"
    assert demo.credits == []


async def test_route_tokens_never_approve_and_other_tenants_see_nothing(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await pending(http, credit("self-1", amount=150))
    path = f"/v1/approvals/{first['approval']['id']}"
    for token in (GUARDED, BILLING):
        own = await http.post(
            f"{path}/approve", json={"digest": first["approval"]["digest"]}, headers=token
        )
        assert own.status_code == 403, own.text
        assert own.json()["code"] == "forbidden"
        assert (await http.get(path, headers=token)).status_code == 403
    assert (await http.get("/v1/approvals", headers=GUARDED)).status_code == 403
    unknown = await http.post(
        "/v1/approvals/apr_nope/approve",
        json={"digest": first["approval"]["digest"]},
        headers=APPROVER,
    )
    assert unknown.status_code == 404
    bad_status = await http.get("/v1/approvals?status=maybe", headers=APPROVER)
    assert bad_status.status_code == 422
    assert bad_status.json()["errors"][0]["path"] == "/status"
    misspelt = await http.get("/v1/approvals?state=pending", headers=APPROVER)
    assert misspelt.status_code == 400  # not silently every approval
    assert misspelt.json()["code"] == "malformed_request"
    admin = await http.get(path, headers=ADMIN)  # admin tokens decide for every tenant
    assert admin.status_code == 200
    assert demo.credits == []


async def test_a_native_tool_call_that_waits_is_an_error_result_not_a_success(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_big",
                "type": "function",
                "function": {
                    "name": "issue_credit",
                    "arguments": json.dumps(credit()["args"] | {"amount": 150}),
                },
            }
        ],
    }
    answer = await http.post(
        "/v1/tool-calls", json={"format": "openai", "calls": turn}, headers=GUARDED
    )
    assert answer.status_code == 200, answer.text
    (decision,) = answer.json()["decisions"]
    assert decision["decision"] == "pending_approval"
    (message,) = answer.json()["results"]
    told = json.loads(message["content"])
    assert told["pending_approval"]["approval"]["id"] == decision["approval"]["id"]
    assert demo.credits == []


async def test_an_mcp_call_that_waits_is_an_error_result_naming_the_approval(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    args = credit()["args"] | {"amount": 150, "idempotency_key": "mcp-big"}
    async with mcp_session(url, "demo-guarded-token") as session:
        waiting = await session.call_tool("issue_credit", args)
    assert isinstance(waiting, types.CallToolResult) and waiting.is_error
    assert waiting.structured_content is not None
    told = waiting.structured_content["pending_approval"]
    assert told["approval"]["id"].startswith("apr_")
    assert demo.credits == []


async def test_a_decision_body_is_read_like_every_json_body(
    http: httpx.AsyncClient, demo: DemoBackend
) -> None:
    """A repeated key (the digest an approver saw, then another) and a body that is not JSON
    are refused before anything is decided."""
    first = await pending(http, credit("body-1", amount=150))
    url = f"/v1/approvals/{first['approval']['id']}/approve"
    digest = first["approval"]["digest"]
    twice = b'{"digest": "' + digest.encode() + b'", "digest": "sha256:' + b"0" * 64 + b'"}'
    repeated = await http.post(
        url, content=twice, headers={**APPROVER, "Content-Type": "application/json"}
    )
    assert repeated.status_code == 400, repeated.text
    assert repeated.json()["errors"][0]["path"] == "/digest"
    form = await http.post(
        url, content=b"digest=x", headers={**APPROVER, "Content-Type": "text/plain"}
    )
    assert form.status_code == 415, form.text
    bad = await http.post(url, json={"digest": 7}, headers=APPROVER)
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "/digest"
    still = await http.get(f"/v1/approvals/{first['approval']['id']}", headers=APPROVER)
    assert still.json()["status"] == "pending"
    assert demo.credits == []
