"""The dry-run flag a route offers its model (``offer_dry_run``) and the route's limit on dry runs
(``[routes.X.dry_runs]``), over real HTTP: every catalog format and the MCP listing, every front
door, the ledger read back and verified."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig, parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, DEMO_CONFIG, credit
from tests.fakes import assert_problem
from tests.front_doors.test_mcp_server import mcp_session
from tests.integration.test_mediation_http import _declared

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
OFFER = {"id": "credit-preview", "action": "offer_dry_run", "tool": "issue_credit"}
PREVIEW = {"would_issue": {"order_id": "O-55300", "amount": 25}}


def config_with(
    rules: list[dict[str, Any]] | None = None, dry_runs: dict[str, Any] | None = None
) -> BrokerConfig:
    raw = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))
    route = raw["routes"]["billing_help"]
    if rules is not None:
        route["mediation"] = {"rules": rules}
    if dry_runs is not None:
        route["dry_runs"] = dry_runs
    return parse_config(raw)


def start(make_broker: MakeBroker, config: BrokerConfig) -> tuple[str, DemoBackend]:
    url, backends = make_broker(config)
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    return url, demo


def with_args(body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**body, "args": {**body["args"], **extra}}


def trace(url: str, trace_id: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = httpx.get(
        f"{url}/v1/traces/{trace_id}", headers=BILLING
    ).json()["records"]
    return records


def verified(url: str) -> None:
    answer = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()
    assert answer["ok"] is True, answer


@pytest.mark.parametrize("format", ["openai", "openai-responses", "anthropic", "gemini", "mcp"])
def test_every_catalog_offers_the_flag_on_the_chosen_tool_only(
    make_broker: MakeBroker, format: str
) -> None:
    url, _ = start(make_broker, config_with([OFFER]))
    answer = httpx.get(f"{url}/v1/tools", headers=BILLING, params={"format": format}).json()
    declared = _declared(answer)
    schema = declared["issue_credit"]["schema"]
    assert schema["properties"]["dry_run"]["type"] == "boolean"
    assert "dry_run" not in schema.get("required", [])
    assert "dry_run" not in declared["lookup_order"]["schema"]["properties"]


async def test_the_flag_makes_a_dry_run_recorded_in_the_receipt(make_broker: MakeBroker) -> None:
    url, demo = start(make_broker, config_with([OFFER]))
    body = {**with_args(credit(key="flag-1"), dry_run=True), "trace_id": "trc-flag"}
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["dry_run"] is True
    assert answer.json()["execution"] == {**answer.json()["execution"], "status": "dry_run"}
    assert answer.json()["execution"]["result"] == PREVIEW
    assert demo.credits == []
    # false (or absent) runs it for real; the tool never receives the flag.
    real = with_args(credit(key="flag-2"), dry_run=False)
    done = httpx.post(f"{url}/v1/proposals", headers=BILLING, json={**real, "trace_id": "trc-flag"})
    assert done.status_code == 200, done.text
    assert done.json()["execution"]["status"] == "succeeded"
    assert len(demo.credits) == 1 and "dry_run" not in demo.credits[0]
    dry, wet = trace(url, "trc-flag")
    assert dry["dry_run"] is True and dry["execution_status"] == "dry_run"
    assert dry["args_redacted"] == credit()["args"]  # the flag is not the tool's argument
    assert dry["receipt"]["dry_run_argument"] is True
    assert dry["receipt"]["rules"] == ["credit-preview"]
    assert dry["receipt"]["policy_state"] == "wrapped"
    assert wet["dry_run"] is False and "dry_run_argument" not in wet["receipt"]
    verified(url)


def test_a_flag_that_is_not_a_boolean_is_a_schema_rejection(make_broker: MakeBroker) -> None:
    url, demo = start(make_broker, config_with([OFFER]))
    body = with_args(credit(key="flag-3"), dry_run="yes")
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    problem = assert_problem(answer, 422, "schema_invalid", "SCHEMA")
    assert problem["errors"] == [{"path": "/args/dry_run", "message": "dry_run must be a boolean"}]
    assert demo.credits == []
    # A tool the rule does not name never takes the flag: its own schema answers.
    lookup = {"tool": "lookup_order", "args": {"order_id": "O-55291", "dry_run": True}}
    refused = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=lookup)
    assert_problem(refused, 422, "schema_invalid", "SCHEMA")


async def test_the_flag_works_through_mcp_and_native_tool_calls(make_broker: MakeBroker) -> None:
    url, demo = start(make_broker, config_with([OFFER]))
    args = {**credit()["args"], "dry_run": True, "idempotency_key": "mcp-flag"}
    async with mcp_session(url, "demo-billing-token") as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        called = await session.call_tool("issue_credit", args)
    assert listed["issue_credit"].input_schema["properties"]["dry_run"]["type"] == "boolean"
    assert not called.is_error, called.content
    assert called.structured_content == {"dry_run": True, "preview": PREVIEW}
    turn = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "issue_credit",
                    "arguments": json.dumps({**credit()["args"], "dry_run": True}),
                },
            }
        ],
    }
    native = httpx.post(
        f"{url}/v1/tool-calls", headers=BILLING, json={"format": "openai", "calls": turn}
    )
    assert native.status_code == 200, native.text
    (decision,) = native.json()["decisions"]
    assert decision["dry_run"] is True and decision["execution"]["status"] == "dry_run"
    assert demo.credits == []
    verified(url)


def test_a_dry_run_outside_the_route_s_only_list_is_refused(make_broker: MakeBroker) -> None:
    url, demo = start(make_broker, config_with(dry_runs={"only": ["lookup_order"]}))
    body = {**credit(key="scope-1"), "dry_run": True, "trace_id": "trc-scope"}
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    problem = assert_problem(answer, 409, "policy_blocked", "PRECONDITION")
    assert problem["failed_check"] == {"kind": "policy", "name": "dry_runs"}
    assert [e["path"] for e in problem["errors"]] == ["/dry_run"]
    allowed = {"tool": "lookup_order", "args": {"order_id": "O-55291"}, "dry_run": True}
    previewed = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=allowed)
    assert previewed.status_code == 200, previewed.text
    assert previewed.json()["execution"]["status"] == "dry_run"
    # The limit is on dry runs only: the tool itself stays callable.
    real = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=credit(key="scope-2"))
    assert real.status_code == 200, real.text
    assert len(demo.credits) == 1
    (record,) = trace(url, "trc-scope")
    assert record["decision"] == "rejected" and record["code"] == "policy_blocked"
    assert record["validators"][-1]["verdict"] == "reject:policy_blocked"
    verified(url)


async def test_an_except_list_refuses_the_offered_flag_and_native_dry_runs(
    make_broker: MakeBroker,
) -> None:
    url, demo = start(make_broker, config_with([OFFER], dry_runs={"except": ["issue_credit"]}))
    flagged = with_args(credit(key="scope-3"), dry_run=True)
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=flagged)
    problem = assert_problem(answer, 409, "policy_blocked", "PRECONDITION")
    assert [e["path"] for e in problem["errors"]] == ["/args/dry_run"]
    async with mcp_session(url, "demo-billing-token") as session:
        args = {**credit()["args"], "dry_run": True, "idempotency_key": "mcp-scope"}
        called = await session.call_tool("issue_credit", args)
    assert called.is_error and "dry runs" in called.content[0].text  # type: ignore[union-attr]
    turn = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "issue_credit", "arguments": json.dumps(credit()["args"])},
            }
        ],
    }
    native = httpx.post(
        f"{url}/v1/tool-calls",
        headers=BILLING,
        json={"format": "openai", "calls": turn, "dry_run": True},
    )
    (decision,) = native.json()["decisions"]
    assert decision["code"] == "policy_blocked"
    assert demo.credits == []
    verified(url)
