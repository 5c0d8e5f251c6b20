"""The gateway's meta-tools at ``/mcp``, driven by the official ``mcp`` SDK client over real
HTTP: the demo's gateway and proxy routes, the agent loop with the ledger read back, and the
generated catalog of 1,000 tools browsed by query and path. The MCP session is the gateway's
session: its browse memory and the results it kept aside are its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from adapters.demo import DemoBackend
from broker.app import create_app
from tests.conftest import ADMIN, serve, with_private_ledger
from tests.front_doors.test_mcp_server import mcp_session
from tests.gateway_catalog import (
    GATEWAY_TOKEN,
    NAMESPACES,
    PROXY_TOKEN,
    CatalogBackend,
    backends,
    catalog_config,
)

CREDIT = {"order_id": "O-55291", "amount": 25, "currency": "USD"}
SECRETS = {"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef"}


def read(result: types.CallToolResult) -> Any:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    content = json.loads(block.text)
    assert result.structured_content == content
    return content


async def meta(session: ClientSession, name: str, args: dict[str, Any]) -> tuple[Any, bool]:
    result = await session.call_tool(name, args)
    return read(result), bool(result.is_error)


# -- the demo routes ------------------------------------------------------------------------------


async def test_a_gateway_route_lists_the_meta_tools(broker: tuple[str, DemoBackend]) -> None:
    url, _ = broker
    async with mcp_session(url, "demo-gateway-token") as session:
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert list(tools) == ["tool_browse", "tool_hydrate", "tool_execute", "tool_view"]
    execute = tools["tool_execute"]
    assert execute.annotations is not None and execute.annotations.read_only_hint is False
    assert "idempotency_key" in execute.input_schema["properties"]
    assert tools["tool_browse"].annotations.read_only_hint is True  # type: ignore[union-attr]


async def test_a_proxy_route_lists_a_card_per_tool_named_by_its_id(
    broker: tuple[str, DemoBackend],
) -> None:
    url, _ = broker
    async with mcp_session(url, "demo-proxy-token") as session:
        listed = await session.list_tools()
    names = [tool.name for tool in listed.tools]
    assert names[3:] == ["tool_hydrate", "tool_execute", "tool_view"]
    cards = listed.tools[:3]
    assert {card.name.split(":")[1].split("@")[0] for card in cards} == {
        "lookup_order",
        "create_support_ticket",
        "issue_credit",
    }
    assert all(card.input_schema == {"type": "object"} for card in cards)


async def test_the_mcp_agent_loop_executes_once_and_the_ledger_shows_it(
    make_broker: Any, tmp_path: Path
) -> None:
    url, backends_used = make_broker()
    demo = backends_used["demo"]
    async with mcp_session(url, "demo-gateway-token") as session:
        found, failed = await meta(session, "tool_browse", {"query": "issue a credit"})
        assert not failed
        tool_id = next(c["id"] for c in found["cards"] if c["name"] == "issue_credit")
        hydrated, _ = await meta(session, "tool_hydrate", {"tool_id": tool_id})
        assert set(hydrated["input_schema"]["properties"]) == set(CREDIT)
        # A write without a key is refused by the chain, as for any MCP tool call.
        refused, failed = await meta(session, "tool_execute", {"tool_id": tool_id, "args": CREDIT})
        assert failed and refused["error"]["code"] == "idempotency_key_missing"
        assert demo.credits == []
        call = {"tool_id": tool_id, "args": CREDIT, "idempotency_key": "mcp-credit-1"}
        issued, failed = await meta(session, "tool_execute", call)
        assert not failed and issued["status"] == "issued"
        again, _ = await meta(session, "tool_execute", call)
        assert again == issued and len(demo.credits) == 1
    records = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    credits = [r for r in records if r["tool"] == "issue_credit"]
    assert [(r["execution_status"], r["replayed"]) for r in credits] == [
        (None, False),  # the refusal for want of a key
        ("succeeded", False),
        (None, True),
    ]
    assert all(r["receipt"]["policy_state"] == "wrapped" for r in credits)
    assert all(r["route"] == "gateway_billing" for r in credits)
    verified = httpx.get(f"{url}/v1/audit/verify", headers=ADMIN).json()
    assert verified["ok"] is True, verified


async def test_a_tool_called_by_its_own_name_is_refused(broker: tuple[str, DemoBackend]) -> None:
    url, demo = broker
    async with mcp_session(url, "demo-gateway-token") as session:
        call = {**CREDIT, "idempotency_key": "direct-1"}
        answer, failed = await meta(session, "issue_credit", call)
    assert failed and answer["error"]["code"] == "unknown_tool"
    assert demo.credits == []
    assert "tool_execute" in answer["error"]["reason"]


# -- 1,000 tools ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, CatalogBackend]]:
    backend = CatalogBackend()
    config = with_private_ledger(catalog_config(), tmp_path_factory.mktemp("gateway-mcp"))
    with serve(create_app(config, backends=backends(backend), secrets=SECRETS)) as url:
        yield url, backend


async def test_a_thousand_tools_browsed_by_query_and_path(
    large: tuple[str, CatalogBackend],
) -> None:
    url, _ = large
    async with mcp_session(url, GATEWAY_TOKEN) as session:
        listed = await session.list_tools()
        assert len(listed.tools) == 4
        found, failed = await meta(session, "tool_browse", {"query": "sync stock", "limit": 10})
        assert not failed and len(found["cards"]) == 10
        assert found["cards"][0]["name"].endswith("_sync_stock")
        root, _ = await meta(session, "tool_browse", {"path": "/", "limit": 50})
        assert set(NAMESPACES) <= {card["namespace"] for card in root["cards"]}
        cluster, _ = await meta(session, "tool_browse", {"path": "/inventory/stock"})
        assert {card["name"] for card in cluster["cards"]} >= {"inventory_sync_stock"}
        bad, failed = await meta(session, "tool_browse", {"path": "/inventory/"})
        assert failed and bad["error"] == "PATH_INVALID" and bad["path"] == "/inventory/"
        both, failed = await meta(session, "tool_browse", {"path": "/", "query": "x"})
        assert failed and both["error"] == "ARGS_INVALID"


async def test_a_proxy_lists_a_thousand_cards(large: tuple[str, CatalogBackend]) -> None:
    url, _ = large
    async with mcp_session(url, PROXY_TOKEN) as session:
        listed = await session.list_tools()
    assert len(listed.tools) == 1000 + 2 + 3  # the generated tools, two more, the channel
    assert all(len(tool.description or "") < 400 for tool in listed.tools[:-3])


async def test_a_kept_result_belongs_to_its_mcp_session(large: tuple[str, CatalogBackend]) -> None:
    url, backend = large
    async with mcp_session(url, PROXY_TOKEN) as session:
        tool_id = next(t.name for t in (await session.list_tools()).tools if "big_report" in t.name)
        kept, failed = await meta(session, "tool_execute", {"tool_id": tool_id, "args": {}})
        assert not failed
        handle = kept["kept_aside"]["handle"]
        part, failed = await meta(
            session, "tool_view", {"handle": handle, "selector": "/rows[0:2]"}
        )
        assert not failed and [row["id"] for row in part["value"]] == [0, 1]
    async with mcp_session(url, PROXY_TOKEN) as other:
        stolen, failed = await meta(other, "tool_view", {"handle": handle, "selector": "/rows"})
    assert failed and stolen["error"] == "HANDLE_NOT_FOUND"
    assert backend.executed["big_report"] == 1
