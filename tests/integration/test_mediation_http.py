"""Tool mediation (issue 22) over real HTTP: a route's catalog rules in every catalog the broker
serves, calls by visible names only, a required reason, and the receipt in the ledger."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.app import create_app
from broker.config import BrokerConfig, parse_config
from broker.mediation.view import declaration_hash
from broker.model import Principal
from broker.native.catalogs import ProviderCatalogs
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, DEMO_CONFIG, SCHEDULING, with_private_ledger
from tests.front_doors.test_mcp_server import mcp_session
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_raw

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
CREDIT = {"order_id": "O-55291", "amount": 25, "currency": "USD"}
RULES: list[dict[str, Any]] = [
    {"id": "hide-tickets", "action": "hide", "tool": "create_support_ticket"},
    {"id": "find", "action": "rename", "tool": "lookup_order", "name": "find_order"},
    {
        "id": "credit-note",
        "action": "augment",
        "tool": "issue_credit",
        "description_append": "Only after the customer agreed.",
        "properties": {"ticket_ref": {"type": "string", "maxLength": 40}},
    },
    {"id": "credit-reason", "action": "require_reason", "tool": "issue_credit"},
]


def mediated_config(mediation: dict[str, Any] | None = None) -> BrokerConfig:
    raw = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))
    raw["routes"]["billing_help"]["mediation"] = mediation or {"rules": RULES}
    return parse_config(raw)


@pytest.fixture
def mediated(make_broker: MakeBroker) -> tuple[str, DemoBackend]:
    url, backends = make_broker(mediated_config())
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    return url, demo


def _declared(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each declared tool of a provider catalog by name: (description, schema)."""
    tools = answer["tools"]
    if answer["format"] == "gemini":
        tools = tools[0]["functionDeclarations"]
    found = {}
    for tool in tools:
        tool = tool.get("function", tool)
        schema = next(
            tool[k]
            for k in ("parameters", "input_schema", "parametersJsonSchema", "inputSchema")
            if k in tool
        )
        found[tool["name"]] = {"description": tool["description"], "schema": schema}
    return found


@pytest.mark.parametrize(
    "format", ["openai", "openai-responses", "anthropic", "gemini", "mcp", None]
)
def test_every_catalog_format_shows_the_route_its_mediated_tools(
    mediated: tuple[str, DemoBackend], format: str | None
) -> None:
    url, _ = mediated
    params = {"format": format} if format else {}
    answer = httpx.get(f"{url}/v1/tools", headers=BILLING, params=params).json()
    if format is None:
        declared = {
            t["name"]: {"description": t["description"], "schema": t["input_schema"]}
            for t in answer["tools"]
        }
    else:
        declared = _declared(answer)
    assert set(declared) == {"find_order", "issue_credit"}
    credit = declared["issue_credit"]
    assert credit["description"].endswith(" Only after the customer agreed.")
    assert credit["schema"]["properties"]["ticket_ref"] == {"type": "string", "maxLength": 40}
    assert credit["schema"]["properties"]["reason"]["type"] == "string"
    assert "reason" in credit["schema"]["required"]
    assert "reason" not in declared["find_order"]["schema"]["properties"]
    # Another route's catalog is its own: the scheduling route keeps the tool's own name.
    other = httpx.get(f"{url}/v1/tools", headers=SCHEDULING, params=params).json()
    names = [t["name"] for t in other["tools"]] if format is None else list(_declared(other))
    assert names == ["lookup_order"]


async def test_the_mcp_listing_is_mediated_and_calls_go_by_the_visible_name(
    mediated: tuple[str, DemoBackend],
) -> None:
    url, demo = mediated
    async with mcp_session(url, "demo-billing-token") as session:
        listed = await session.list_tools()
        found = await session.call_tool("find_order", {"order_id": "O-55291"})
        hidden = await session.call_tool("create_support_ticket", {"customer_id": "C-10429"})
        credit = await session.call_tool(
            "issue_credit", {**CREDIT, "reason": "customer agreed", "idempotency_key": "m-1"}
        )
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"find_order", "issue_credit"}
    assert "reason" in tools["issue_credit"].input_schema["required"]
    assert not found.is_error and found.structured_content is not None
    assert found.structured_content["order_id"] == "O-55291"
    assert hidden.is_error and "unknown tool" in hidden.content[0].text  # type: ignore[union-attr]
    assert not credit.is_error, credit.content
    assert demo.credits[-1]["amount"] == 25


def test_a_hidden_tool_is_not_callable_under_any_name_and_a_renamed_one_only_by_its_new_one(
    mediated: tuple[str, DemoBackend],
) -> None:
    url, _ = mediated
    ticket_id = httpx.get(f"{url}/v1/tools/create_support_ticket", headers=ADMIN).json()["tool_id"]
    ticket = {"customer_id": "C-10429", "subject": "x", "priority": "low"}
    calls = [
        {"tool": "create_support_ticket", "args": ticket, "idempotency_key": "h-1"},
        {"tool_id": ticket_id, "args": ticket, "idempotency_key": "h-2"},
        {"tool": "lookup_order", "args": {"order_id": "O-55291"}},
    ]
    for body in calls:
        answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["code"] == "unknown_tool"
    found = httpx.post(
        f"{url}/v1/proposals",
        headers=BILLING,
        json={"tool": "find_order", "args": {"order_id": "O-55291"}},
    )
    assert found.status_code == 200, found.text
    assert found.json()["tool"] == "lookup_order"
    # The scheduling route has no rules: the tool keeps its name there.
    plain = httpx.post(
        f"{url}/v1/proposals",
        headers=SCHEDULING,
        json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
    )
    assert plain.status_code == 200, plain.text


def test_a_missing_reason_is_a_schema_rejection_with_a_pointer(
    mediated: tuple[str, DemoBackend],
) -> None:
    url, demo = mediated
    body = {"tool": "issue_credit", "args": CREDIT, "idempotency_key": "r-1"}
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["code"] == "schema_invalid"
    assert problem["errors"][0]["path"] == "/args/reason"
    assert problem["failed_check"] == {"kind": "schema", "name": "issue_credit"}
    blank = {**body, "args": {**CREDIT, "reason": "  "}, "idempotency_key": "r-2"}
    assert httpx.post(f"{url}/v1/proposals", headers=BILLING, json=blank).status_code == 422
    assert demo.credits == []


def test_the_reason_and_the_receipt_are_kept_in_the_ledger_and_the_chain_verifies(
    mediated: tuple[str, DemoBackend],
) -> None:
    url, demo = mediated
    args = {**CREDIT, "reason": "customer agreed on the phone", "ticket_ref": "T-9"}
    body = {"tool": "issue_credit", "args": args, "idempotency_key": "k-1", "trace_id": "trc-med-1"}
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    assert answer.status_code == 200, answer.text
    # The tool gets its own arguments only: the reason and the injected property are stripped.
    assert demo.credits[-1]["amount"] == 25 and "reason" not in str(demo.credits[-1])
    found = httpx.post(
        f"{url}/v1/proposals",
        headers=BILLING,
        json={"tool": "find_order", "args": {"order_id": "O-55291"}, "trace_id": "trc-med-1"},
    )
    assert found.status_code == 200
    records = httpx.get(f"{url}/v1/traces/trc-med-1", headers=BILLING).json()["records"]
    credit, lookup = records
    assert credit["proposal_reason"] == "customer agreed on the phone"
    assert credit["args_redacted"] == CREDIT
    schema = mediated_config().tools["issue_credit"]
    assert credit["receipt"] == {
        "declared_by": "config",
        "executed_by": "python",
        "fidelity": "normalized",
        "original_hash": declaration_hash("issue_credit", schema.description, schema.input_schema),
        "policy_state": "wrapped",
        "rules": ["credit-note", "credit-reason"],
        "visible_hash": credit["receipt"]["visible_hash"],
    }
    assert credit["receipt"]["visible_hash"] != credit["receipt"]["original_hash"]
    assert lookup["tool"] == "lookup_order"
    assert lookup["receipt"]["policy_state"] == "renamed"
    assert lookup["receipt"]["visible_name"] == "find_order"
    assert lookup["receipt"]["rules"] == ["find"]
    verified = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()
    assert verified["ok"] is True, verified


def test_a_route_without_rules_still_gets_a_pass_through_receipt(
    mediated: tuple[str, DemoBackend],
) -> None:
    url, _ = mediated
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}, "trace_id": "trc-med-2"}
    assert httpx.post(f"{url}/v1/proposals", headers=SCHEDULING, json=body).status_code == 200
    (record,) = httpx.get(f"{url}/v1/traces/trc-med-2", headers=SCHEDULING).json()["records"]
    receipt = record["receipt"]
    assert receipt["policy_state"] == "allowed" and receipt["fidelity"] == "pass_through"
    assert receipt["original_hash"] == receipt["visible_hash"]
    assert "rules" not in receipt and "visible_name" not in receipt


def test_fill_blank_advertises_the_reason_and_records_a_blank_one(make_broker: MakeBroker) -> None:
    config = mediated_config({"required_reason": True, "reason_on_missing": "fill_blank"})
    url, _ = make_broker(config)
    tools = httpx.get(f"{url}/v1/tools", headers=BILLING).json()["tools"]
    for tool in tools:
        assert "reason" in tool["input_schema"]["properties"]
        assert "reason" not in tool["input_schema"].get("required", [])
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}, "trace_id": "trc-med-3"}
    assert httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body).status_code == 200
    (record,) = httpx.get(f"{url}/v1/traces/trc-med-3", headers=BILLING).json()["records"]
    assert record["proposal_reason"] == "(no reason given)"
    assert record["receipt"]["rules"] == ["required_reason"]


def test_native_tool_calls_use_the_visible_names_the_catalog_gave(make_broker: MakeBroker) -> None:
    rules = [
        {"action": "rename", "tool": "lookup_order", "name": "find-order"},
        {"action": "hide", "tool": "create_support_ticket"},
    ]
    url, _ = make_broker(mediated_config({"rules": rules}))
    catalog = httpx.get(f"{url}/v1/tools", headers=BILLING, params={"format": "openai"}).json()
    assert set(_declared(catalog)) == {"find-_order", "issue_credit"}
    turn = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "find-_order", "arguments": '{"order_id": "O-55291"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"order_id": "O-55291"}'},
            },
        ],
    }
    answer = httpx.post(
        f"{url}/v1/tool-calls", headers=BILLING, json={"format": "openai", "calls": turn}
    )
    assert answer.status_code == 200, answer.text
    found, old_name = answer.json()["decisions"]
    assert found["decision"] == "approved" and found["tool"] == "lookup_order"
    assert old_name["code"] == "unknown_tool"


def test_each_catalog_is_computed_once_per_catalog_version(tmp_path: Path) -> None:
    """The mediated answer is served from memory: the same bytes object until the catalog
    changes (a registration), then computed afresh."""
    config = mediated_config()
    app = create_app(with_private_ledger(config, tmp_path), backends={"demo": DemoBackend()})
    catalogs: ProviderCatalogs = app.state.provider_catalogs
    principal = Principal(
        service_account="route-billing-help@bots",
        route="billing_help",
        tenant="acme",
        tools=frozenset(config.routes["billing_help"].tools),
    )
    first = catalogs.answer(principal, "anthropic")
    assert catalogs.answer(principal, "anthropic") is first
    registry = app.state.broker.registry
    registry.install(registry.version + 1, registry.registered)
    again = catalogs.answer(principal, "anthropic")
    assert again is not first and again == first


REFUND = {
    "id": "refund",
    "action": "replace",
    "tool": "issue_credit",
    "name": "refund_order",
    "description": "Refund part of an order, in US dollars.",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["order", "dollars"],
        "properties": {
            "order": {"type": "string", "pattern": "^O-[0-9]+$"},
            "dollars": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
            "currency": {"enum": ["USD"], "default": "USD"},
        },
    },
    "arguments": {"order_id": "order", "amount": "dollars", "currency": "currency"},
}


def test_a_replaced_tool_is_called_by_its_declaration_and_reaches_the_real_tool_mapped(
    make_broker: MakeBroker,
) -> None:
    url, backends = make_broker(mediated_config({"rules": [REFUND]}))
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    for format in ("anthropic", "mcp"):
        catalog = httpx.get(f"{url}/v1/tools", headers=BILLING, params={"format": format}).json()
        refund = _declared(catalog)["refund_order"]
        assert refund["description"] == REFUND["description"]
        assert set(refund["schema"]["properties"]) >= {"order", "dollars", "currency"}
        assert "issue_credit" not in _declared(catalog)
    bad = {"order": "O-55291", "dollars": 500, "currency": "USD"}
    body = {"tool": "refund_order", "args": bad, "idempotency_key": "rf-0"}
    refused = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["path"] == "/args/dollars"  # the declaration it saw
    assert refused.json()["failed_check"] == {"kind": "schema", "name": "refund_order"}
    args = {"order": "O-55291", "dollars": 25, "currency": "USD"}
    body = {"tool": "refund_order", "args": args, "idempotency_key": "rf-1", "trace_id": "trc-rf"}
    answer = httpx.post(f"{url}/v1/proposals", headers=BILLING, json=body)
    assert answer.status_code == 200, answer.text
    assert demo.credits[-1]["amount"] == 25 and demo.credits[-1]["order_id"] == "O-55291"
    old = {"tool": "issue_credit", "args": CREDIT, "idempotency_key": "rf-2"}
    assert httpx.post(f"{url}/v1/proposals", headers=BILLING, json=old).json()["code"] == (
        "unknown_tool"
    )
    (record,) = httpx.get(f"{url}/v1/traces/trc-rf", headers=BILLING).json()["records"]
    assert record["tool"] == "issue_credit"
    assert record["args_redacted"] == CREDIT  # what the tool received
    receipt = record["receipt"]
    assert (receipt["policy_state"], receipt["fidelity"]) == ("replaced", "emulated")
    assert receipt["visible_name"] == "refund_order" and receipt["rules"] == ["refund"]
    assert receipt["visible_hash"] == declaration_hash(
        "refund_order", REFUND["description"], REFUND["input_schema"]
    )
    assert httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()["ok"] is True


async def test_rules_apply_to_a_tool_registered_later_and_its_receipt_says_backend(
    make_broker: MakeBroker,
) -> None:
    raw = registration_raw()
    raw["registered_tools"] = {"billing.refund": {}}
    raw["routes"]["billing_help"]["mediation"] = {
        "required_reason": True,
        "rules": [{"id": "plain", "action": "rename", "tool": "billing.refund", "name": "refund"}],
    }
    url, _ = make_broker(parse_config(raw))
    loopback = LoopbackBackend()
    with running(loopback) as backend_url:
        body = registration(
            "billing.refund", backend_url + "/tools/refund", risk="read", idempotent=True
        )
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            assert (await http.post("/v1/tools", json=body, headers=ADMIN)).status_code == 201
            listed = (await http.get("/v1/tools", headers=BILLING)).json()["tools"]
            refund = {t["name"]: t for t in listed}["refund"]
            assert "billing.refund" not in {t["name"] for t in listed}
            assert "reason" in refund["input_schema"]["required"]
            async with mcp_session(url, "demo-billing-token") as session:
                names = {tool.name for tool in (await session.list_tools()).tools}
            assert "refund" in names and "billing.refund" not in names
            args = {"payment_id": "P-9", "reason": "duplicate charge"}
            proposal = {"tool": "refund", "args": args, "trace_id": "trc-reg"}
            done = await http.post("/v1/proposals", json=proposal, headers=BILLING)
            assert done.status_code == 200, done.text
            assert done.json()["execution"]["result"]["args"] == {"payment_id": "P-9"}
            records = (await http.get("/v1/traces/trc-reg", headers=BILLING)).json()["records"]
    (record,) = records
    assert record["proposal_reason"] == "duplicate charge"
    receipt = record["receipt"]
    assert (receipt["declared_by"], receipt["executed_by"]) == ("backend", "http")
    assert receipt["rules"] == ["plain", "required_reason"]
