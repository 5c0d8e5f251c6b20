"""``GET /v1/tools?format=…``: the route's catalog as each provider's tool declarations, each
parsed by that provider's SDK type; names a provider refuses are encoded, and calls under the
encoded name reach the tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx
import mcp.types as mcp
import pytest
from anthropic.types import ToolParam
from google.genai import types as gemini
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from broker.native.names import PROVIDER_NAME
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, SCHEDULING
from tests.fakes import demo_raw
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]
DEMO_TOOLS = {"lookup_order", "create_support_ticket", "issue_credit"}


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


@pytest.fixture
async def http(make_broker: StartBroker) -> AsyncIterator[httpx.AsyncClient]:
    url, _ = make_broker(registration_config())
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        yield client


async def catalog(
    http: httpx.AsyncClient, format: str, headers: dict[str, str] = BILLING
) -> dict[str, Any]:
    response = await http.get("/v1/tools", params={"format": format}, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["format"] == format
    return body


def schemas() -> dict[str, Any]:
    return {name: tool["input_schema"] for name, tool in demo_raw()["tools"].items()}


async def test_openai_declarations(http: httpx.AsyncClient) -> None:
    body = await catalog(http, "openai")
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    declared = [adapter.validate_python(tool) for tool in body["tools"]]
    assert declared == body["tools"]
    functions = {tool["function"]["name"]: tool["function"] for tool in declared}
    assert set(functions) == DEMO_TOOLS
    for name, schema in schemas().items():
        assert functions[name].get("parameters") == schema  # unchanged
        assert functions[name].get("description")
    assert body["names"] == {}


async def test_responses_and_anthropic_declarations(http: httpx.AsyncClient) -> None:
    responses = await catalog(http, "openai-responses")
    adapter = TypeAdapter(FunctionToolParam)
    tools = [adapter.validate_python(tool) for tool in responses["tools"]]
    assert tools == responses["tools"]
    assert {t["name"]: t["parameters"] for t in tools} == schemas()
    anthropic = await catalog(http, "anthropic")
    param = TypeAdapter(ToolParam)
    declared = [param.validate_python(tool) for tool in anthropic["tools"]]
    assert declared == anthropic["tools"]
    assert {t["name"]: t["input_schema"] for t in declared} == schemas()


async def test_gemini_declarations_carry_the_whole_json_schema(http: httpx.AsyncClient) -> None:
    body = await catalog(http, "gemini")
    (tool,) = [gemini.Tool.model_validate(t) for t in body["tools"]]  # extra members: refused
    declarations = {d.name: d for d in tool.function_declarations or []}
    assert set(declarations) == DEMO_TOOLS
    for name, schema in schemas().items():
        assert declarations[name].parameters_json_schema == schema
        assert declarations[name].parameters is None


async def test_mcp_declarations_with_annotations_and_the_key_argument(
    http: httpx.AsyncClient,
) -> None:
    body = await catalog(http, "mcp")
    tools = {t.name: t for t in (mcp.Tool.model_validate(t) for t in body["tools"])}
    assert set(tools) == DEMO_TOOLS
    lookup, credit = tools["lookup_order"], tools["issue_credit"]
    assert lookup.annotations is not None and lookup.annotations.read_only_hint is True
    assert lookup.annotations.idempotent_hint is True
    assert lookup.input_schema == schemas()["lookup_order"]
    assert credit.annotations is not None and credit.annotations.read_only_hint is False
    assert credit.annotations.destructive_hint is False
    assert "idempotency_key" in credit.input_schema["required"]
    assert credit.input_schema["properties"]["idempotency_key"]["type"] == "string"


async def test_each_route_sees_only_its_tools_and_bad_formats_are_refused(
    http: httpx.AsyncClient,
) -> None:
    body = await catalog(http, "anthropic", SCHEDULING)
    assert [t["name"] for t in body["tools"]] == ["lookup_order"]
    refused = await http.get("/v1/tools", params={"format": "claude"}, headers=BILLING)
    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert "format" in refused.text
    assert (await http.get("/v1/tools", params={"format": "openai"})).status_code == 401
    misspelt = await http.get("/v1/tools", params={"fromat": "openai"}, headers=BILLING)
    assert misspelt.status_code == 400, misspelt.text
    assert "fromat" in misspelt.json()["detail"]


async def test_a_dotted_name_is_encoded_and_its_calls_reach_the_tool(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend]
) -> None:
    url, loopback = backend
    long_name = "billing." + "refund_with_a_rather_long_name_" * 4
    before = await catalog(http, "openai")  # cached for this catalog version
    for name, path in (("billing.refund", "/tools/refund"), (long_name, "/tools/long")):
        registered = await http.post(
            "/v1/tools", json=registration(name, url + path), headers=ADMIN
        )
        assert registered.status_code == 201, registered.text
    body = await catalog(http, "openai")
    assert body != before  # the registration changed the catalog: recomputed, not cached
    names = [tool["function"]["name"] for tool in body["tools"]]
    assert all(PROVIDER_NAME.fullmatch(name) for name in names), names
    assert body["names"]["billing--refund"] == "billing.refund"
    (abridged,) = [exposed for exposed, real in body["names"].items() if real == long_name]
    assert len(abridged) == 64
    assert "billing.refund" in [t["name"] for t in (await catalog(http, "mcp"))["tools"]]

    calls = [
        {"id": "c1", "function": {"name": "billing--refund", "arguments": '{"payment_id": "P-1"}'}},
        {"id": "c2", "function": {"name": abridged, "arguments": '{"payment_id": "P-2"}'}},
    ]
    answered = await http.post(
        "/v1/tool-calls", json={"format": "openai", "calls": calls}, headers=BILLING
    )
    assert answered.status_code == 200, answered.text
    decisions = answered.json()["decisions"]
    assert [d["tool"] for d in decisions] == ["billing.refund", long_name]
    assert [d["execution"]["status"] for d in decisions] == ["succeeded", "succeeded"]
    assert [h.json()["args"] for h in loopback.hits_on("/tools/refund")] == [{"payment_id": "P-1"}]
    assert [h.json()["args"] for h in loopback.hits_on("/tools/long")] == [{"payment_id": "P-2"}]
    results = answered.json()["results"]
    assert json.loads(results[0]["content"])["ok"] is True
