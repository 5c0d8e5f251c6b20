"""The MCP front door at ``/mcp``, driven by the official ``mcp`` SDK client over real HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from adapters.demo import DemoBackend
from tests.conftest import ADMIN

CREDIT = {"order_id": "O-55291", "amount": 25, "currency": "USD"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
"""A raw ``initialize`` request, for what the SDK client cannot show (status codes, session ids)."""


@asynccontextmanager
async def mcp_session(
    url: str,
    token: str,
    on_message: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with (
        http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        yield session


async def test_a_route_token_lists_its_tools_with_annotations_from_risk(
    broker: tuple[str, DemoBackend],
) -> None:
    url, _ = broker
    async with mcp_session(url, "demo-billing-token") as session:
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"lookup_order", "create_support_ticket", "issue_credit"}
    lookup, credit = tools["lookup_order"], tools["issue_credit"]
    assert lookup.annotations is not None and lookup.annotations.read_only_hint is True
    assert credit.annotations is not None and credit.annotations.read_only_hint is False
    assert "idempotency_key" not in lookup.input_schema.get("properties", {})
    assert "idempotency_key" in credit.input_schema["required"]


async def test_calls_run_through_the_chain_and_replay_by_key(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    async with mcp_session(url, "demo-billing-token") as session:
        order = await session.call_tool("lookup_order", {"order_id": "O-55291"})
        first = await session.call_tool("issue_credit", {**CREDIT, "idempotency_key": "mcp-1"})
        again = await session.call_tool("issue_credit", {**CREDIT, "idempotency_key": "mcp-1"})
        by_meta = await session.call_tool(
            "issue_credit",
            {**CREDIT, "amount": 10},
            meta={"io.action-broker/idempotency_key": "mcp-2"},  # type: ignore[arg-type]
        )
    assert isinstance(order, types.CallToolResult) and not order.is_error
    assert order.structured_content is not None
    assert order.structured_content["order_id"] == "O-55291"
    assert isinstance(first, types.CallToolResult) and not first.is_error
    assert isinstance(again, types.CallToolResult)
    assert first.structured_content == again.structured_content
    assert isinstance(by_meta, types.CallToolResult) and not by_meta.is_error
    text = first.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == first.structured_content
    assert [c["amount"] for c in demo.credits] == [25, 10]


async def test_a_refused_call_is_an_error_result_with_remediation(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    unpaid = {"order_id": "O-60000", "amount": 5, "currency": "USD", "idempotency_key": "mcp-3"}
    async with mcp_session(url, "demo-billing-token") as session:
        refused = await session.call_tool("issue_credit", unpaid)
        unknown = await session.call_tool("delete_everything", {})
        keyless = await session.call_tool("issue_credit", CREDIT)
    assert isinstance(refused, types.CallToolResult) and refused.is_error
    assert refused.structured_content is not None
    error = refused.structured_content["error"]
    assert error["category"] == "PRECONDITION" and error["code"] == "precondition_failed"
    assert error["remediation"]
    assert isinstance(unknown, types.CallToolResult) and unknown.is_error
    assert isinstance(keyless, types.CallToolResult) and keyless.is_error
    assert keyless.structured_content is not None
    assert keyless.structured_content["error"]["code"] == "idempotency_key_missing"
    assert demo.credits == []


async def test_without_a_token_the_answer_is_401_before_any_message(
    broker: tuple[str, DemoBackend],
) -> None:
    url, _ = broker
    initialize = INITIALIZE
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=url) as http:
        missing = await http.post("/mcp", json=initialize, headers=headers)
        bad = await http.post(
            "/mcp", json=initialize, headers={**headers, "Authorization": "Bearer nope"}
        )
        admin = await http.post("/mcp", json=initialize, headers={**headers, **ADMIN})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert bad.status_code == 401
    assert admin.status_code == 403
    assert missing.json()["code"] == "unauthenticated"


async def test_another_routes_session_id_is_not_found(broker: tuple[str, DemoBackend]) -> None:
    url, _ = broker
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer demo-billing-token",
    }
    initialize = INITIALIZE
    async with httpx.AsyncClient(base_url=url) as http:
        opened = await http.post("/mcp", json=initialize, headers=headers)
        session_id = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        other = {**headers, "Authorization": "Bearer demo-scheduling-token"}
        stolen = await http.post(
            "/mcp", json=listing, headers={**other, "mcp-session-id": session_id}
        )
    assert opened.status_code == 200
    assert stolen.status_code == 404


async def test_a_registration_reaches_connected_clients_as_list_changed(
    broker: tuple[str, DemoBackend],
) -> None:
    url, _ = broker
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    registration = {
        "name": "ops.restart_service",
        "description": "Restart one service of the tenant.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["service"],
            "properties": {"service": {"type": "string"}},
        },
        "risk": "write",
        "routes": ["billing_help"],
        "adapter": {"kind": "http", "url": "http://127.0.0.1:9/restart", "timeout_s": 1.0},
    }
    async with mcp_session(url, "demo-billing-token", on_message) as session:
        before = await session.list_tools()
        await asyncio.sleep(0.2)  # the client opens its GET stream for server notifications
        async with httpx.AsyncClient(base_url=url) as http:
            created = await http.post("/v1/tools", json=registration, headers=ADMIN)
        assert created.status_code == 201, created.text
        await asyncio.wait_for(changed.wait(), timeout=10)
        after = await session.list_tools()
    assert "ops.restart_service" not in {tool.name for tool in before.tools}
    assert "ops.restart_service" in {tool.name for tool in after.tools}


async def test_tools_list_is_the_mcp_catalog_format(broker: tuple[str, DemoBackend]) -> None:
    url, _ = broker
    async with mcp_session(url, "demo-billing-token") as session:
        listed = await session.list_tools()
    async with httpx.AsyncClient(base_url=url) as http:
        catalog = await http.get(
            "/v1/tools",
            params={"format": "mcp"},
            headers={"Authorization": "Bearer demo-billing-token"},
        )
    over_mcp = {tool.name: tool.input_schema for tool in listed.tools}
    over_http = {tool["name"]: tool["inputSchema"] for tool in catalog.json()["tools"]}
    assert over_mcp == over_http


async def test_the_sdk_client_by_default_negotiates_the_stateless_protocol_and_runs_the_chain(
    broker: tuple[str, DemoBackend],
) -> None:
    # The SDK's own ``Client`` probes ``server/discover`` and adopts 2026-07-28 or later: one
    # self-contained POST per request, no session. Calls must go through the chain all the same.
    url, demo = broker
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer demo-billing-token"}, timeout=30)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        assert client.protocol_version >= "2026-07-28"
        listed = await client.list_tools()
        first = await client.call_tool("issue_credit", {**CREDIT, "idempotency_key": "modern-1"})
        again = await client.call_tool("issue_credit", {**CREDIT, "idempotency_key": "modern-1"})
        refused = await client.call_tool(
            "issue_credit",
            {"order_id": "O-60000", "amount": 5, "currency": "USD", "idempotency_key": "modern-2"},
        )
    assert {tool.name for tool in listed.tools} == {
        "lookup_order",
        "create_support_ticket",
        "issue_credit",
    }
    assert isinstance(first, types.CallToolResult) and not first.is_error
    assert isinstance(again, types.CallToolResult)
    assert first.structured_content == again.structured_content
    assert isinstance(refused, types.CallToolResult) and refused.is_error
    assert refused.structured_content is not None
    assert refused.structured_content["error"]["code"] == "precondition_failed"
    assert [c["amount"] for c in demo.credits] == [25]
