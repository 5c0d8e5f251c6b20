"""What a refusal explains, over real HTTP: ``failed_check`` on every rejection and failure, every
problem of a body at once, reasons said once, tools named by their stable id; and the ledger
record of each, read back and verified.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.auth import hash_token
from broker.config import BrokerConfig, parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, SCHEDULING, credit, ticket
from tests.fakes import (
    FAKE,
    FakeBackend,
    SleepRecorder,
    assert_problem,
    demo_config_with,
    fake_raw,
    serve_demo,
)

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
_traces = count(1)


def fake_config_with_admin() -> BrokerConfig:
    """The fake tools, and the demo's admin token to read their records back and verify them."""
    raw = fake_raw()
    raw["tokens"].append({"name": "admin", "sha256": hash_token("demo-admin-token"), "admin": True})
    return parse_config(raw)


@pytest.fixture(scope="module")
def shared(ingress: str) -> Iterator[tuple[str, DemoBackend]]:
    """One demo broker for the tests that only meet refusals (nothing runs on it)."""
    with serve_demo(ingress=ingress) as started:
        yield started


@pytest.fixture
async def shared_client(shared: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=shared[0], timeout=10) as http:
        yield http


async def propose(
    client: httpx.AsyncClient, body: Any, headers: Mapping[str, str]
) -> tuple[httpx.Response, dict[str, Any] | None]:
    """The answer, and the proposal's ledger record read back through its trace (``None`` when
    the body could not carry a trace id)."""
    trace = None
    if isinstance(body, dict) and "trace_id" not in body:
        trace = f"explain-{next(_traces)}"
        body = {**body, "trace_id": trace}
    response = await client.post("/v1/proposals", json=body, headers=dict(headers))
    if trace is None or response.json().get("tool") is None:
        return response, None
    records = (await client.get(f"/v1/traces/{trace}", headers=ADMIN)).json()["records"]
    assert len(records) == 1, records
    return response, records[0]


async def verified(client: httpx.AsyncClient) -> None:
    report = (await client.get("/v1/audit/verify", headers=ADMIN)).json()
    assert report["ok"] is True, report


async def read_back(client: httpx.AsyncClient, answer: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/proposals/{id}``: the answer as the broker keeps it."""
    read = await client.get(f"/v1/proposals/{answer['proposal_id']}", headers=ADMIN)
    assert read.status_code == 200, read.text
    body: dict[str, Any] = read.json()
    return body


# -- failed_check --------------------------------------------------------------------------------


def _bad_args() -> dict[str, Any]:
    body = credit("bad-args")
    body["args"]["currency"] = "GBP"
    return body


def _no_key() -> dict[str, Any]:
    body = credit()
    del body["idempotency_key"]
    return body


@pytest.mark.parametrize(
    ("body", "headers", "status", "code", "check"),
    [
        (_bad_args(), BILLING, 422, "schema_invalid", {"kind": "schema", "name": "issue_credit"}),
        ({"tool": "delete_all", "args": {}}, BILLING, 422, "unknown_tool", {"kind": "schema"}),
        (
            {**credit(), "preconditions": ["moon_is_full"]},
            BILLING,
            422,
            "unknown_precondition",
            {"kind": "schema"},
        ),
        (
            credit(),
            SCHEDULING,
            403,
            "tool_not_allowed",
            {"kind": "authz", "name": "scheduling"},
        ),
        (_no_key(), BILLING, 400, "idempotency_key_missing", {"kind": "idempotency"}),
        (
            credit("unpaid", order="O-60000"),
            BILLING,
            409,
            "precondition_failed",
            {"kind": "precondition", "name": "order_paid"},
        ),
        (
            credit("too-old", order="O-70000"),
            BILLING,
            409,
            "precondition_failed",
            {"kind": "precondition", "name": "within_return_window"},
        ),
    ],
    ids=[
        "schema",
        "unknown-tool",
        "unknown-precondition",
        "authz",
        "idempotency",
        "precondition-paid",
        "precondition-window",
    ],
)
async def test_each_refusal_names_its_check_in_the_answer_and_the_ledger(
    shared_client: httpx.AsyncClient,
    shared: tuple[str, DemoBackend],
    body: dict[str, Any],
    headers: Mapping[str, str],
    status: int,
    code: str,
    check: dict[str, Any],
) -> None:
    expected = {"name": None, **check}
    response, record = await propose(shared_client, body, headers)
    answer = assert_problem(response, status, code, response.json()["category"])
    assert answer["failed_check"] == expected
    assert record is not None and record["failed_check"] == expected
    assert (await read_back(shared_client, answer))["failed_check"] == expected
    assert shared[1].credits == []
    await verified(shared_client)


async def test_a_refusal_before_the_chain_names_its_kind(shared_client: httpx.AsyncClient) -> None:
    unauthenticated = await shared_client.post("/v1/proposals", json=credit())
    assert assert_problem(unauthenticated, 401, "unauthenticated", "AUTHZ")["failed_check"] == {
        "kind": "authz",
        "name": None,
    }
    malformed = await shared_client.post(
        "/v1/proposals",
        content=b"{not json",
        headers={**BILLING, "content-type": "application/json"},
    )
    assert assert_problem(malformed, 400, "malformed_request", "SCHEMA")["failed_check"] == {
        "kind": "schema",
        "name": None,
    }


async def test_budget_and_rate_limit_refusals_name_the_limit(make_broker: MakeBroker) -> None:
    config = demo_config_with(rate_limits__credit_calls__limit=1)
    url, _ = make_broker(config)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        first, _ = await propose(client, credit("c1", amount=400), BILLING)
        assert first.status_code == 200, first.text
        assert "failed_check" not in first.json()  # approvals carry no failed check
        over_budget, record = await propose(client, credit("c2", amount=200), BILLING)
        answer = assert_problem(over_budget, 429, "budget_exceeded", "PRECONDITION")
        assert answer["failed_check"] == {"kind": "budget", "name": "credits_per_day"}
        assert record is not None and record["failed_check"] == answer["failed_check"]
        limited, record = await propose(client, credit("c3", amount=1), BILLING)
        answer = assert_problem(limited, 429, "rate_limited", "PRECONDITION")
        assert answer["failed_check"] == {"kind": "rate_limit", "name": "credit_calls"}
        assert record is not None and record["failed_check"] == answer["failed_check"]
        reused, _ = await propose(client, credit("c1", amount=5), BILLING)
        answer = assert_problem(reused, 422, "idempotency_key_reused", "IDEMPOTENCY")
        assert answer["failed_check"] == {"kind": "idempotency", "name": None}
        await verified(client)


async def test_a_route_policy_refusal_names_the_setting(make_broker: MakeBroker) -> None:
    config = demo_config_with(routes__billing_help__require_implied_write_check=True)
    url, backends = make_broker(config)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        response, record = await propose(client, credit(), BILLING)
        answer = assert_problem(response, 409, "policy_blocked", "PRECONDITION")
        check = {"kind": "policy", "name": "require_implied_write_check"}
        assert answer["failed_check"] == check
        assert record is not None and record["failed_check"] == check
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend) and demo.credits == []


@pytest.mark.parametrize(
    ("tool", "status", "code", "kind"),
    [
        ("definite", 502, "provider_error", "provider"),
        ("unavailable", 503, "provider_unavailable", "provider"),
        ("hang", 504, "timeout", "timeout"),
    ],
)
async def test_a_failed_execution_names_the_tool_that_failed(
    make_broker: MakeBroker, tool: str, status: int, code: str, kind: str
) -> None:
    fake = FakeBackend()
    url, _ = make_broker(fake_config_with_admin(), backends={"fake": fake}, sleep=SleepRecorder())
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        body = {"tool": tool, "args": {"n": 1}, "idempotency_key": "k"}
        response, record = await propose(client, body, FAKE)
        answer = assert_problem(response, status, code, response.json()["category"])
        assert answer["decision"] == "approved"
        assert answer["failed_check"] == {"kind": kind, "name": tool}
        assert record is not None and record["failed_check"] == answer["failed_check"]
        assert record["attempt_outcomes"] == [code]
        await verified(client)


# -- every problem at once, each said once -------------------------------------------------------


async def test_a_provider_shaped_body_gets_every_problem_at_once(
    shared_client: httpx.AsyncClient, shared: tuple[str, DemoBackend]
) -> None:
    body = {"name": "issue_credit", "arguments": {"order_id": "O-55291"}, "trace_id": "x-shape"}
    response = await shared_client.post("/v1/proposals", json=body, headers=BILLING)
    answer = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [(e["path"], e["message"]) for e in answer["errors"]] == [
        ("/args", "missing required field 'args'"),
        ("/arguments", "unknown field 'arguments'"),
        ("/name", "unknown field 'name'"),
        ("/tool", "missing required field 'tool' (or name the tool by 'tool_id')"),
    ]
    assert answer["failed_check"] == {"kind": "schema", "name": None}
    assert (await read_back(shared_client, answer))["errors"] == answer["errors"]
    assert shared[1].credits == []


async def test_every_mistyped_field_is_located(shared_client: httpx.AsyncClient) -> None:
    body = {
        "tool": 7,
        "args": ["O-55291"],
        "preconditions": ["order_paid", 3],
        "dry_run": "yes",
        "idempotency_key": "k",
        "extra": 1,
        "trace_id": "x-types",
    }
    response = await shared_client.post("/v1/proposals", json=body, headers=BILLING)
    answer = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [e["path"] for e in answer["errors"]] == [
        "/args",
        "/dry_run",
        "/extra",
        "/preconditions/1",
        "/tool",
    ]
    assert all("Expected" in e["message"] for e in answer["errors"] if e["path"] != "/extra")


async def test_a_body_that_is_not_an_object_says_so(shared_client: httpx.AsyncClient) -> None:
    response = await shared_client.post("/v1/proposals", json=["issue_credit"], headers=BILLING)
    answer = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert answer["errors"] == [{"path": "", "message": "expected a JSON object, got an array"}]


async def test_a_reason_shared_by_several_failed_checks_is_said_once(
    shared_client: httpx.AsyncClient,
) -> None:
    response, record = await propose(shared_client, credit("nowhere", order="O-99999"), BILLING)
    answer = assert_problem(response, 409, "precondition_failed", "PRECONDITION")
    assert answer["reason"] == "order O-99999 not found"
    assert answer["failed_check"] == {"kind": "precondition", "name": "order_paid"}
    assert record is not None and record["reason"] == "order O-99999 not found"


# -- the ledger record is complete ---------------------------------------------------------------


async def test_the_record_keeps_the_models_preconditions_reason_and_timing(
    client: httpx.AsyncClient,
) -> None:
    body = {**credit(), "reason": "the customer was double charged"}
    response, record = await propose(client, body, BILLING)
    assert response.status_code == 200, response.text
    execution = response.json()["execution"]
    assert record is not None
    assert record["preconditions"] == ["order_paid", "within_return_window"]
    assert record["proposal_reason"] == "the customer was double charged"
    assert record["started_at"] == execution["started_at"]
    assert record["ended_at"] == execution["ended_at"]
    assert record["started_at"] <= record["ended_at"]
    assert record["attempt_outcomes"] == ["succeeded"]
    assert record["failed_check"] is None
    await verified(client)


async def test_the_record_keeps_every_attempt_and_how_it_ended(
    make_broker: MakeBroker, tmp_path: Path
) -> None:
    fake = FakeBackend(transient_failures=2)
    url, _ = make_broker(fake_config_with_admin(), backends={"fake": fake}, sleep=SleepRecorder())
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        body = {"tool": "transient_idem", "args": {"n": 1}, "idempotency_key": "k"}
        response, record = await propose(client, body, FAKE)
        assert response.status_code == 200, response.text
        assert record is not None and record["attempts"] == 3
        assert record["attempt_outcomes"] == ["provider_error", "provider_error", "succeeded"]
        refused, _ = await propose(client, {"tool": "gated", "args": {"n": "x"}}, FAKE)
        assert refused.status_code == 422
        await verified(client)
    assert fake.count("transient") == 3
    # The operator's own check of the file, fields old records lack included.
    ledger = tmp_path / "ledger.jsonl"
    assert (
        '"attempt_outcomes":["provider_error","provider_error","succeeded"]' in ledger.read_text()
    )
    verify = subprocess.run(
        [sys.executable, "-m", "broker", "ledger", "verify", "--path", str(ledger), "--jobs", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


# -- stable tool ids -----------------------------------------------------------------------------


async def _tool_id(client: httpx.AsyncClient, name: str) -> str:
    tools = (await client.get("/v1/tools", headers=BILLING)).json()["tools"]
    return str(next(tool["tool_id"] for tool in tools if tool["name"] == name))


async def test_a_proposal_may_name_its_tool_by_its_stable_id(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    tool_id = await _tool_id(client, "issue_credit")
    body = credit()
    del body["tool"]
    response, record = await propose(client, {**body, "tool_id": tool_id}, BILLING)
    assert response.status_code == 200, response.text
    assert response.json()["tool"] == "issue_credit"
    assert record is not None and record["tool"] == "issue_credit"
    assert record["tool_id"] == tool_id
    assert len(demo.credits) == 1
    # The same key and args by name: the same action, replayed.
    again = await client.post("/v1/proposals", json=credit(), headers=BILLING)
    assert again.json()["replayed"] is True
    assert len(demo.credits) == 1


@pytest.mark.parametrize(
    ("naming", "status", "code", "pointer"),
    [
        (
            {"tool": "issue_credit", "tool_id": "demo:issue_credit@1"},
            422,
            "schema_invalid",
            "/tool_id",
        ),
        ({}, 422, "schema_invalid", "/tool"),
        ({"tool_id": "demo:issue_credit"}, 422, "schema_invalid", "/tool_id"),
        ({"tool_id": 12}, 422, "schema_invalid", "/tool_id"),
        ({"tool_id": "demo:issue_credit#00000000"}, 422, "unknown_tool", "/tool_id"),
    ],
    ids=["both", "neither", "no-version-or-hash", "not-a-string", "unknown"],
)
async def test_a_tool_named_twice_not_at_all_or_by_a_bad_id_is_refused_with_a_pointer(
    shared_client: httpx.AsyncClient,
    shared: tuple[str, DemoBackend],
    naming: dict[str, Any],
    status: int,
    code: str,
    pointer: str,
) -> None:
    body = credit()
    del body["tool"]
    response = await shared_client.post("/v1/proposals", json={**body, **naming}, headers=BILLING)
    answer = assert_problem(response, status, code, "SCHEMA")
    assert [error["path"] for error in answer["errors"]] == [pointer]
    assert answer["failed_check"] == {"kind": "schema", "name": None}
    assert shared[1].credits == []


async def test_a_ticket_still_runs_by_name(client: httpx.AsyncClient, demo: DemoBackend) -> None:
    """Naming by tool_id leaves naming by tool exactly as it was."""
    response = await client.post("/v1/proposals", json=ticket(), headers=BILLING)
    assert response.status_code == 200, response.text
    assert "failed_check" not in response.json()
