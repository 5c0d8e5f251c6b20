"""``GET /v1/tools``: what each route may call, described the way an agent runtime needs it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.auth import mint_token
from broker.config import BrokerConfig
from tests.conftest import ADMIN, BILLING, GLOBEX, SCHEDULING
from tests.fakes import SIGNING_KEY, assert_problem, demo_raw, serve_demo

FIELDS = {"name", "tool_id", "description", "input_schema", "risk", "preconditions", "idempotent"}


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[str, DemoBackend]]:
    with serve_demo() as started:
        yield started


@pytest.fixture
async def client(shared: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=shared[0], timeout=10) as http:
        yield http


async def tools_of(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, dict]:
    response = await client.get("/v1/tools", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    listed = response.json()["tools"]
    names = [tool["name"] for tool in listed]
    assert len(names) == len(set(names))
    return {tool["name"]: tool for tool in listed}


async def test_billing_sees_its_three_tools_fully_described(client: httpx.AsyncClient) -> None:
    tools = await tools_of(client, BILLING)
    assert set(tools) == {"lookup_order", "create_support_ticket", "issue_credit"}
    config = demo_raw()["tools"]
    for name, tool in tools.items():
        assert set(tool) >= FIELDS, tool
        assert tool["input_schema"] == config[name]["input_schema"]
        assert tool["description"] == config[name]["description"]
        assert tool["risk"] == config[name]["risk"]
        assert tool["idempotent"] == config[name]["idempotent"]
        assert tool["preconditions"] == config[name].get("preconditions", [])
        assert isinstance(tool["tool_id"], str) and name in tool["tool_id"]
        assert "adapter" not in tool and "credentials" not in tool
    assert tools["issue_credit"]["risk"] == "write"
    assert tools["issue_credit"]["preconditions"] == [
        "order_paid",
        "within_return_window",
        "credit_within_order",
    ]
    assert tools["create_support_ticket"]["preconditions"] == [
        "customer_verified",
        "open_invoice_present",
    ]
    assert tools["lookup_order"]["risk"] == "read"
    assert tools["lookup_order"]["idempotent"] is True
    assert tools["issue_credit"]["idempotent"] is False


async def test_tool_ids_are_stable_and_distinct(client: httpx.AsyncClient) -> None:
    first = await tools_of(client, BILLING)
    again = await tools_of(client, GLOBEX)
    assert {n: t["tool_id"] for n, t in first.items()} == {
        n: t["tool_id"] for n, t in again.items()
    }
    assert len({t["tool_id"] for t in first.values()}) == 3


async def test_scheduling_sees_only_lookup_order(client: httpx.AsyncClient) -> None:
    tools = await tools_of(client, SCHEDULING)
    assert list(tools) == ["lookup_order"]
    assert set(tools["lookup_order"]) >= FIELDS


async def test_globex_sees_the_same_tools_as_acme_on_billing(client: httpx.AsyncClient) -> None:
    assert await tools_of(client, GLOBEX) == await tools_of(client, BILLING)


async def test_admin_sees_every_tool(client: httpx.AsyncClient) -> None:
    tools = await tools_of(client, ADMIN)
    assert set(tools) == {"lookup_order", "create_support_ticket", "issue_credit"}


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Token demo-billing-token"}],
    ids=["none", "unknown", "wrong-scheme"],
)
async def test_listing_tools_needs_a_token(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await client.get("/v1/tools", headers=headers)
    assert_problem(response, 401, "unauthenticated", "AUTHZ")
    assert response.headers["www-authenticate"].lower().startswith("bearer")


async def test_a_token_narrowed_to_some_tools_lists_only_those(
    client: httpx.AsyncClient, demo_config: BrokerConfig
) -> None:
    token = mint_token(
        demo_config,
        SIGNING_KEY.encode(),
        route="billing_help",
        tenant="acme",
        ttl_s=600,
        tools=["lookup_order"],
    )
    headers = {"Authorization": f"Bearer {token}"}
    tools = await tools_of(client, headers)
    assert list(tools) == ["lookup_order"]
    refused = await client.post(
        "/v1/proposals",
        json={
            "tool": "issue_credit",
            "args": {"order_id": "O-55291", "amount": 1, "currency": "USD"},
            "idempotency_key": "narrow",
        },
        headers=headers,
    )
    assert_problem(refused, 403, "tool_not_allowed", "AUTHZ")
