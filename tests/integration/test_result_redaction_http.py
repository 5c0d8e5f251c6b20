"""A tool's ``redact_result`` keys never reach the agent, over real HTTP, on every front door:
``/v1/proposals`` (and replays of its stored answers), ``/v1/tool-calls``, MCP ``tools/call``; the
ledger records the result as the agent received it, the names in the receipt, and verifies."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest
from broker_client import Client

from broker.config import BrokerConfig, parse_config
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, DEMO_CONFIG, credit, ticket
from tests.front_doors.test_mcp_server import mcp_session
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
LOOKUP = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}


def config_with(redactions: dict[str, list[str]]) -> BrokerConfig:
    raw = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))
    for tool, keys in redactions.items():
        raw["tools"][tool]["redact_result"] = keys
    return parse_config(raw)


@pytest.fixture
def url(make_broker: MakeBroker) -> str:
    # "Total" matches "total": keys are compared case-insensitively, as the ledger's.
    redactions = {
        "lookup_order": ["customer_id", "Total"],
        "issue_credit": ["credit_id"],
        "create_support_ticket": ["customer_id"],
    }
    return make_broker(config_with(redactions))[0]


def records(url: str, trace_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = httpx.get(f"{url}/v1/traces/{trace_id}", headers=BILLING).json()[
        "records"
    ]
    return found


def verified(url: str) -> None:
    answer = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()
    assert answer["ok"] is True, answer


def test_the_keys_are_taken_out_of_the_answer_and_named_in_it_and_the_ledger(url: str) -> None:
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json={**LOOKUP, "trace_id": "t-r1"})
    assert answer.status_code == 200, answer.text
    execution = answer.json()["execution"]
    assert execution["redacted"] == ["customer_id", "total"]
    assert execution["result"]["order_id"] == "O-55291"
    assert not {"customer_id", "total"} & set(execution["result"])
    (record,) = records(url, "t-r1")
    assert record["result_redacted"] == execution["result"]  # what the agent received
    assert record["receipt"]["redacted"] == ["customer_id", "total"]
    # A tool without the setting answers as before: no redacted member.
    plain = httpx.post(f"{url}/v1/proposals", headers={**BILLING}, json=credit(key="r-plain"))
    assert "credit_id" not in plain.json()["execution"]["result"]
    verified(url)


def test_a_replay_and_a_read_back_agree_byte_for_byte_with_the_first_answer(url: str) -> None:
    first = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=credit(key="r-1"))
    assert first.status_code == 200, first.text
    assert first.json()["execution"]["redacted"] == ["credit_id"]
    again = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=credit(key="r-1"))
    assert again.headers["idempotent-replayed"] == "true"
    assert json.loads(again.content) == {**json.loads(first.content), "replayed": True}
    proposal_id = first.json()["proposal_id"]
    read = httpx.get(f"{url}/v1/proposals/{proposal_id}", headers=BILLING)
    assert read.content == first.content
    verified(url)


def test_a_dry_run_preview_is_redacted_at_depth_and_read_back_from_the_ledger_alike(
    url: str,
) -> None:
    body = {**ticket(key="r-dry"), "dry_run": True, "trace_id": "t-r2"}
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    assert answer.status_code == 200, answer.text
    execution = answer.json()["execution"]
    assert execution["status"] == "dry_run"
    assert execution["result"] == {"would_create": {"priority": "high"}}
    assert execution["redacted"] == ["customer_id"]
    # A dry run takes no state: its answer is read back from the ledger, and agrees.
    proposal_id = answer.json()["proposal_id"]
    read = httpx.get(f"{url}/v1/proposals/{proposal_id}", headers=BILLING)
    assert read.status_code == 200, read.text
    assert read.json() == answer.json()
    (record,) = records(url, "t-r2")
    assert record["receipt"]["redacted"] == ["customer_id"]
    verified(url)


async def test_mcp_and_native_tool_calls_receive_the_redacted_result(url: str) -> None:
    async with mcp_session(url, "demo-billing-token") as session:
        called = await session.call_tool("lookup_order", {"order_id": "O-55291"})
    assert not called.is_error, called.content
    assert called.structured_content is not None
    assert called.structured_content["order_id"] == "O-55291"
    assert not {"customer_id", "total"} & set(called.structured_content)
    assert "customer_id" not in str(called.content)
    turn = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "O-55291"}'},
            }
        ],
    }
    native = httpx.post(
        f"{url}/v1/tool-calls", headers=BILLING, json={"format": "openai", "calls": turn}
    )
    assert native.status_code == 200, native.text
    (message,) = native.json()["results"]
    assert "customer_id" not in message["content"] and "O-55291" in message["content"]
    (decision,) = native.json()["decisions"]
    assert decision["execution"]["redacted"] == ["customer_id", "total"]
    verified(url)


def test_the_python_client_reads_the_redacted_names(url: str) -> None:
    with Client(url, "demo-billing-token") as client:
        decision = client.propose("lookup_order", {"order_id": "O-55291"})
    assert decision.execution is not None
    assert decision.execution.redacted == ("customer_id", "total")
    assert decision.execution.result is not None
    assert "customer_id" not in decision.execution.result


async def test_a_registered_tool_brings_its_own_keys(make_broker: MakeBroker) -> None:
    url, _ = make_broker(registration_config())
    with running(LoopbackBackend()) as backend_url:
        body = registration(
            "billing.refund",
            backend_url + "/tools/refund",
            risk="read",
            idempotent=True,
            redact_result=["payment_id"],
        )
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            created = await http.post("/v1/tools", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            shown = (await http.get("/v1/tools/billing.refund", headers=ADMIN)).json()
            assert shown["redact_result"] == ["payment_id"]
            proposal = {"tool": "billing.refund", "args": {"payment_id": "P-9"}}
            done = await http.post("/v1/proposals", json=proposal, headers=BILLING)
    assert done.status_code == 200, done.text
    execution = done.json()["execution"]
    assert execution["result"]["args"] == {}  # the backend echoed it; the agent never sees it
    assert execution["redacted"] == ["payment_id"]


async def test_an_approved_call_s_final_answer_is_redacted_too(make_broker: MakeBroker) -> None:
    """The answer an approval's execution stores, which the agent's retry and the read-back
    return, is taken through the same redaction."""
    raw = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))
    raw["tools"]["issue_credit"]["redact_result"] = ["credit_id"]
    raw["routes"]["guarded_billing"]["require_session_id"] = False
    raw.pop("policy", None)
    url, _ = make_broker(parse_config(raw))
    guarded = {"Authorization": "Bearer demo-guarded-token"}
    approver = {"Authorization": "Bearer demo-approver-token"}
    body = credit(key="r-big", amount=150)
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        held = await http.post("/v1/proposals", json=body, headers=guarded)
        assert held.status_code == 202, held.text
        approval = held.json()["approval"]
        approved = await http.post(
            f"/v1/approvals/{approval['id']}/approve",
            json={"digest": approval["digest"]},
            headers=approver,
        )
        assert approved.status_code == 200, approved.text
        final = await http.post("/v1/proposals", json=body, headers=guarded)
        read = await http.get(f"/v1/proposals/{held.json()['proposal_id']}", headers=guarded)
    assert final.status_code == 200, final.text
    execution = final.json()["execution"]
    assert execution["status"] == "succeeded" and execution["redacted"] == ["credit_id"]
    assert "credit_id" not in execution["result"] and execution["result"]["amount"] == 150
    assert read.json()["execution"] == execution
    verified(url)
