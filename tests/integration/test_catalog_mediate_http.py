"""``POST /v1/catalog/mediate`` over real HTTP: an agent's own request's tools, built with the
OpenAI and Anthropic SDKs' own param types, answered as the route's model may see them (and
parsed back by those types), with ``tool_choice`` fixed up and a receipt per declaration."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest
from anthropic.types import (
    CacheControlEphemeralParam,
    ToolChoiceAnyParam,
    ToolChoiceToolParam,
    ToolParam,
    WebSearchTool20250305Param,
)
from openai.types.chat import (
    ChatCompletionAllowedToolChoiceParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionNamedToolChoiceParam,
)
from openai.types.responses import (
    FunctionToolParam,
    ToolChoiceAllowedParam,
    ToolChoiceFunctionParam,
    WebSearchToolParam,
)
from openai.types.shared_params import FunctionDefinition
from pydantic import TypeAdapter

from broker.config import BrokerConfig, parse_config
from broker.mediation.view import declaration_hash
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, DEMO_CONFIG, SCHEDULING
from tests.fakes import assert_problem
from tests.integration.test_mediation_http import RULES

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
DEMO = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))
SCHEMAS: dict[str, dict[str, Any]] = {n: t["input_schema"] for n, t in DEMO["tools"].items()}
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def config_with(mediation: dict[str, Any] | None = None) -> BrokerConfig:
    raw = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))
    raw["routes"]["billing_help"]["mediation"] = mediation or {"rules": RULES}
    return parse_config(raw)


@pytest.fixture
def url(make_broker: MakeBroker) -> str:
    return make_broker(config_with())[0]


def mediate(url: str, body: dict[str, Any], headers: dict[str, str] = BILLING) -> httpx.Response:
    return httpx.post(f"{url}/v1/catalog/mediate", headers=headers, json=body)


def mediated(url: str, body: dict[str, Any], headers: dict[str, str] = BILLING) -> dict[str, Any]:
    answer = mediate(url, body, headers)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    assert found["format"] == body["format"]
    return found


def listed(url: str, format: str, headers: dict[str, str] = BILLING) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/v1/tools", headers=headers, params={"format": format})
    tools: list[dict[str, Any]] = answer.json()["tools"]
    return tools


def chat_tool(name: str, description: str = "", **schema: Any) -> ChatCompletionFunctionToolParam:
    return ChatCompletionFunctionToolParam(
        type="function",
        function=FunctionDefinition(
            name=name, description=description, parameters=schema or SCHEMAS.get(name, {})
        ),
    )


def receipts_by_name(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["declared"]: r for r in answer["receipts"]}


def test_openai_chat_tools_are_mediated_and_the_choice_follows_a_rename(url: str) -> None:
    tools = [
        chat_tool("lookup_order", "Look up an order."),
        chat_tool("issue_credit", "Credit an order."),
        chat_tool("create_support_ticket", "Open a ticket."),
        chat_tool("get_weather", "The weather in a city.", **WEATHER_SCHEMA),
    ]
    choice = ChatCompletionNamedToolChoiceParam(type="function", function={"name": "lookup_order"})
    answer = mediated(url, {"format": "openai", "tools": tools, "tool_choice": choice})
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    declared = [adapter.validate_python(tool) for tool in answer["tools"]]
    assert declared == answer["tools"]
    # The route's tools in exactly the declaration its catalog lists; the agent's own tool as
    # the agent wrote it; the hidden tool gone.
    catalog = {t["function"]["name"]: t for t in listed(url, "openai")}
    assert answer["tools"] == [catalog["find_order"], catalog["issue_credit"], tools[3]]
    assert answer["tool_choice"] == {"type": "function", "function": {"name": "find_order"}}
    assert answer["tool_choice_change"] == "renamed"
    receipts = receipts_by_name(answer)
    assert receipts["lookup_order"] == {
        "declared": "lookup_order",
        "declared_by": "config",
        "executed_by": "python",
        "policy_state": "renamed",
        "fidelity": "normalized",
        "tool": "lookup_order",
        "visible_name": "find_order",
        "original_hash": declaration_hash(
            "lookup_order", "Look up an order.", SCHEMAS["lookup_order"]
        ),
        "visible_hash": receipts["lookup_order"]["visible_hash"],
        "rules": ["find"],
    }
    assert receipts["issue_credit"]["policy_state"] == "wrapped"
    assert receipts["issue_credit"]["rules"] == ["credit-note", "credit-reason"]
    hidden = receipts["create_support_ticket"]
    assert (hidden["policy_state"], hidden["dropped"]) == ("hidden", "hidden on this route")
    assert "visible_hash" not in hidden and "fidelity" not in hidden
    weather = receipts["get_weather"]
    assert weather == {
        "declared": "get_weather",
        "declared_by": "agent",
        "executed_by": "agent",
        "policy_state": "deferred",
        "fidelity": "pass_through",
        "original_hash": weather["original_hash"],
        "visible_hash": weather["original_hash"],
    }
    assert weather["original_hash"] == declaration_hash(
        "get_weather", "The weather in a city.", WEATHER_SCHEMA
    )


def test_a_choice_of_a_hidden_tool_is_dropped_and_allowed_tools_keep_what_is_left(
    url: str,
) -> None:
    tools = [chat_tool("create_support_ticket"), chat_tool("lookup_order")]
    named = ChatCompletionNamedToolChoiceParam(
        type="function", function={"name": "create_support_ticket"}
    )
    answer = mediated(url, {"format": "openai", "tools": tools, "tool_choice": named})
    assert "tool_choice" not in answer and answer["tool_choice_change"] == "dropped"
    assert [t["function"]["name"] for t in answer["tools"]] == ["find_order"]
    allowed = ChatCompletionAllowedToolChoiceParam(
        type="allowed_tools",
        allowed_tools={
            "mode": "required",
            "tools": [
                {"type": "function", "function": {"name": "create_support_ticket"}},
                {"type": "function", "function": {"name": "lookup_order"}},
            ],
        },
    )
    answer = mediated(url, {"format": "openai", "tools": tools, "tool_choice": allowed})
    assert answer["tool_choice"] == {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "required",
            "tools": [{"type": "function", "function": {"name": "find_order"}}],
        },
    }
    # No tool left: the choice goes too, whatever it was.
    alone = [chat_tool("create_support_ticket")]
    answer = mediated(url, {"format": "openai", "tools": alone, "tool_choice": "required"})
    assert answer["tools"] == [] and "tool_choice" not in answer
    assert answer["tool_choice_change"] == "dropped"
    # A choice that needs no fixing is answered unchanged and unmarked.
    answer = mediated(url, {"format": "openai", "tools": tools, "tool_choice": "auto"})
    assert answer["tool_choice"] == "auto" and "tool_choice_change" not in answer


def test_responses_tools_keep_hosted_tools_and_fix_the_choice(url: str) -> None:
    tools = [
        FunctionToolParam(
            type="function",
            name="issue_credit",
            parameters=SCHEMAS["issue_credit"],
            strict=True,
            description="Credit an order.",
        ),
        FunctionToolParam(
            type="function", name="lookup_order", parameters=SCHEMAS["lookup_order"], strict=False
        ),
        WebSearchToolParam(type="web_search"),
    ]
    choice = ToolChoiceAllowedParam(
        type="allowed_tools",
        mode="auto",
        tools=[{"type": "function", "name": "lookup_order"}, {"type": "web_search"}],
    )
    answer = mediated(url, {"format": "openai-responses", "tools": tools, "tool_choice": choice})
    adapter = TypeAdapter(FunctionToolParam)
    functions = [adapter.validate_python(t) for t in answer["tools"][:2]]
    assert functions == answer["tools"][:2]
    catalog = {t["name"]: t for t in listed(url, "openai-responses")}
    assert answer["tools"] == [catalog["issue_credit"], catalog["find_order"], tools[2]]
    assert answer["tool_choice"] == {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "find_order"}, {"type": "web_search"}],
    }
    search = receipts_by_name(answer)["web_search"]
    assert (search["executed_by"], search["policy_state"]) == ("provider", "deferred")
    assert "original_hash" not in search  # not a function declaration: nothing to hash
    named = ToolChoiceFunctionParam(type="function", name="issue_credit")
    answer = mediated(url, {"format": "openai-responses", "tools": tools, "tool_choice": named})
    assert answer["tool_choice"] == named and "tool_choice_change" not in answer


def test_anthropic_tools_keep_their_cache_breakpoint_and_the_choice_is_fixed(url: str) -> None:
    tools = [
        ToolParam(
            name="issue_credit",
            description="Credit an order.",
            input_schema=SCHEMAS["issue_credit"],
            cache_control=CacheControlEphemeralParam(type="ephemeral"),
        ),
        ToolParam(name="create_support_ticket", input_schema=SCHEMAS["create_support_ticket"]),
        WebSearchTool20250305Param(type="web_search_20250305", name="web_search", max_uses=2),
    ]
    choice = ToolChoiceToolParam(type="tool", name="create_support_ticket")
    answer = mediated(url, {"format": "anthropic", "tools": tools, "tool_choice": choice})
    catalog = {t["name"]: t for t in listed(url, "anthropic")}
    credit, search = answer["tools"]
    assert credit == {**catalog["issue_credit"], "cache_control": {"type": "ephemeral"}}
    assert TypeAdapter(ToolParam).validate_python(credit) == credit
    assert search == tools[2]
    assert "tool_choice" not in answer and answer["tool_choice_change"] == "dropped"
    only_hidden = {"format": "anthropic", "tools": [tools[1]], "tool_choice": {"type": "any"}}
    assert ToolChoiceAnyParam(type="any") == only_hidden["tool_choice"]
    answer = mediated(url, only_hidden)
    assert answer["tools"] == [] and "tool_choice" not in answer


def test_a_route_that_drops_unknown_tools_and_a_tool_of_another_route(
    make_broker: MakeBroker,
) -> None:
    url, _ = make_broker(config_with({"rules": RULES, "unknown_tools": "drop"}))
    tools = [chat_tool("lookup_order"), chat_tool("get_weather", **WEATHER_SCHEMA)]
    answer = mediated(url, {"format": "openai", "tools": tools})
    assert [t["function"]["name"] for t in answer["tools"]] == ["find_order"]
    weather = receipts_by_name(answer)["get_weather"]
    assert (weather["policy_state"], weather["dropped"]) == (
        "blocked",
        "not a broker tool (unknown_tools)",
    )
    # The scheduling route has no rules: its tool passes as declared (the agent copied the
    # catalog), a tool of another route is blocked, and an unknown one passes through.
    copied = listed(url, "openai", SCHEDULING)
    tools = [*copied, chat_tool("issue_credit"), chat_tool("get_weather", **WEATHER_SCHEMA)]
    answer = mediated(url, {"format": "openai", "tools": tools}, SCHEDULING)
    assert answer["tools"] == [copied[0], tools[2]]
    receipts = receipts_by_name(answer)
    lookup = receipts["lookup_order"]
    assert (lookup["policy_state"], lookup["fidelity"]) == ("allowed", "pass_through")
    assert lookup["original_hash"] == lookup["visible_hash"]
    assert receipts["issue_credit"]["policy_state"] == "blocked"
    assert receipts["issue_credit"]["dropped"] == "not a tool of this route"


def test_key_order_never_changes_a_hash_and_two_names_of_one_tool_give_it_once(url: str) -> None:
    reordered = dict(reversed(list(SCHEMAS["lookup_order"].items())))
    tools = [
        chat_tool("lookup_order", "Look up an order.", **reordered),
        chat_tool("find_order", "Look up an order."),
    ]
    choice = {"type": "function", "function": {"name": "find_order"}}
    answer = mediated(url, {"format": "openai", "tools": tools, "tool_choice": choice})
    first, second = answer["receipts"]
    assert first["original_hash"] == declaration_hash(
        "lookup_order", "Look up an order.", SCHEMAS["lookup_order"]
    )
    assert [t["function"]["name"] for t in answer["tools"]] == ["find_order"]
    assert second["dropped"] == "the same tool as 'lookup_order'"
    assert answer["tool_choice"] == choice


def test_bad_bodies_are_problems_with_pointers_and_change_nothing(url: str) -> None:
    before = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()["records"]
    good = chat_tool("lookup_order")
    cases: list[tuple[Any, int, str, list[str]]] = [
        ({"format": "gemini", "tools": []}, 422, "schema_invalid", ["/format"]),
        ({"format": "openai"}, 422, "schema_invalid", ["/tools"]),
        ({"format": "openai", "tools": [], "extra": 1}, 422, "schema_invalid", ["/extra"]),
        ({"format": "openai", "tools": [good, 7]}, 422, "schema_invalid", ["/tools/1"]),
        ({"format": "openai", "tools": [good] * 513}, 422, "schema_invalid", ["/tools"]),
        (
            {"format": "openai", "tools": [{"type": "function", "function": {}}]},
            422,
            "schema_invalid",
            ["/tools/0/function/name"],
        ),
        (
            {"format": "anthropic", "tools": [{"name": "x"}]},
            422,
            "schema_invalid",
            ["/tools/0/input_schema"],
        ),
        (
            {"format": "anthropic", "tools": [{"name": "x", "input_schema": {"maximum": 2**60}}]},
            422,
            "schema_invalid",
            ["/tools/0"],
        ),
        (
            {"format": "openai", "tools": [good, good]},
            422,
            "schema_invalid",
            ["/tools/1/function/name"],
        ),
        (
            {
                "format": "openai",
                "tools": [good],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            422,
            "schema_invalid",
            ["/tool_choice/function/name"],
        ),
        (
            {"format": "anthropic", "tools": [], "tool_choice": "auto"},
            422,
            "schema_invalid",
            ["/tool_choice"],
        ),
        (
            {"format": "openai", "tools": [], "tool_choice": "sometimes"},
            422,
            "schema_invalid",
            ["/tool_choice"],
        ),
    ]
    for body, status, code, pointers in cases:
        answer = mediate(url, body)
        problem = assert_problem(answer, status, code, "SCHEMA")
        assert [e["path"] for e in problem["errors"]] == pointers, (body, problem)
    repeated = httpx.post(
        f"{url}/v1/catalog/mediate",
        headers={**BILLING, "Content-Type": "application/json"},
        content=b'{"format": "openai", "tools": [], "format": "anthropic"}',
    )
    problem = assert_problem(repeated, 400, "malformed_request", "SCHEMA")
    assert [e["path"] for e in problem["errors"]] == ["/format"]
    not_json = httpx.post(
        f"{url}/v1/catalog/mediate",
        headers={**BILLING, "Content-Type": "text/plain"},
        content=json.dumps({"format": "openai", "tools": []}),
    )
    assert_problem(not_json, 415, "unsupported_media_type", "SCHEMA")
    broken = httpx.post(
        f"{url}/v1/catalog/mediate",
        headers={**BILLING, "Content-Type": "application/json"},
        content=b'{"format": ',
    )
    assert_problem(broken, 400, "malformed_request", "SCHEMA")
    admin = mediate(url, {"format": "openai", "tools": []}, ADMIN)
    assert_problem(admin, 403, "forbidden", "AUTHZ")
    unauthenticated = httpx.post(f"{url}/v1/catalog/mediate", json={})
    assert unauthenticated.status_code == 401
    # Mediating records nothing: the ledger is as it was.
    after = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()
    assert after["ok"] is True and after["records"] == before
