"""The gateway's meta-tools over real HTTP (seed 004 §4): the demo's ``gateway_billing`` and
``proxy_billing`` routes in every catalog format, and the agent loop through
``POST /v1/tool-calls``: browse, hydrate, execute, with the ledger read back and verified."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.config import parse_config
from broker.plugins import Backend
from broker.stores import MemoryStore
from broker.taxonomy import ConfigError, StoreUnavailableError
from tests.conftest import ADMIN
from tests.fakes import demo_raw

GATEWAY = {"Authorization": "Bearer demo-gateway-token"}
PROXY = {"Authorization": "Bearer demo-proxy-token"}
META = ["tool_browse", "tool_hydrate", "tool_execute", "tool_view"]
CREDIT = {"order_id": "O-55291", "amount": 25, "currency": "USD"}

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.jsonl"


@pytest.fixture
def demo(make_broker: MakeBroker, effects: Path) -> tuple[str, DemoBackend]:
    backend = DemoBackend(effects_path=str(effects))
    url, _ = make_broker(backends={"demo": backend})
    return url, backend


@pytest.fixture
async def http(demo: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo[0], timeout=10) as client:
        yield client


def ledger_records(tmp_path: Path) -> list[dict[str, Any]]:
    """Every record of the broker's ledger file (``make_broker`` keeps it under tmp_path)."""
    path = tmp_path / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def verified(http: httpx.AsyncClient) -> None:
    report = await http.get("/v1/audit/verify", headers=ADMIN)
    assert report.status_code == 200, report.text
    assert report.json()["ok"] is True, report.text


def openai_calls(*calls: tuple[str, str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
        for call_id, name, a in calls
    ]


async def turn(
    http: httpx.AsyncClient,
    *calls: tuple[str, str, dict[str, Any]],
    headers: dict[str, str] = GATEWAY,
    **more: Any,
) -> dict[str, Any]:
    response = await http.post(
        "/v1/tool-calls",
        json={"format": "openai", "calls": openai_calls(*calls), **more},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def content(body: dict[str, Any], index: int = 0) -> Any:
    return json.loads(body["results"][index]["content"])


# -- catalogs -----------------------------------------------------------------------------------


def _names(answer: dict[str, Any]) -> list[str]:
    tools = answer["tools"]
    if answer["format"] == "gemini":
        tools = tools[0]["functionDeclarations"]
    if answer["format"] == "openai":
        return [tool["function"]["name"] for tool in tools]
    return [tool["name"] for tool in tools]


@pytest.mark.parametrize("format", ["openai", "openai-responses", "anthropic", "gemini", "mcp"])
async def test_every_catalog_format_lists_the_meta_tools_only(
    http: httpx.AsyncClient, format: str
) -> None:
    answer = (await http.get(f"/v1/tools?format={format}", headers=GATEWAY)).json()
    assert _names(answer) == META
    # No tool schema reaches the model up front: the declared text never names a tool's field.
    assert "order_id" not in json.dumps(answer)
    assert answer["names"] == {}


async def test_the_proxy_lists_one_schema_free_card_per_tool_then_its_invocation_channel(
    http: httpx.AsyncClient,
) -> None:
    mcp = (await http.get("/v1/tools?format=mcp", headers=PROXY)).json()
    cards = mcp["tools"][:3]
    assert [tool["name"] for tool in mcp["tools"][3:]] == [
        "tool_hydrate",
        "tool_execute",
        "tool_view",
    ]
    assert all(card["inputSchema"] == {"type": "object"} for card in cards)  # §4.1's sentinel
    ids = [card["name"] for card in cards]
    assert ids == sorted(ids) and all(":" in tool_id for tool_id in ids)
    openai = (await http.get("/v1/tools?format=openai", headers=PROXY)).json()
    functions = [tool["function"] for tool in openai["tools"][:3]]
    # Provider names cannot hold ':' or '#': the id opens the description instead.
    assert [f["description"].split("]")[0] for f in functions] == [f"[tool_id {i}" for i in ids]
    assert all(f["parameters"] == {"type": "object"} for f in functions)


async def test_a_tools_route_is_unchanged(http: httpx.AsyncClient) -> None:
    answer = (
        await http.get(
            "/v1/tools?format=openai", headers={"Authorization": "Bearer demo-billing-token"}
        )
    ).json()
    assert set(_names(answer)) == {"lookup_order", "create_support_ticket", "issue_credit"}


# -- the agent loop -----------------------------------------------------------------------------


async def test_browse_hydrate_execute_runs_one_proposal_and_the_ledger_shows_it(
    http: httpx.AsyncClient, demo: tuple[str, DemoBackend], tmp_path: Path, effects: Path
) -> None:
    _, backend = demo
    session = {"session_id": "sess-loop-1", "trace_id": "trc-gateway-loop"}
    browsed = await turn(http, ("c1", "tool_browse", {"query": "credit a paid order"}), **session)
    cards = content(browsed)["cards"]
    assert browsed["decisions"] == [None]  # a read of the catalog: no proposal
    credit_card = next(card for card in cards if card["name"] == "issue_credit")
    tool_id = credit_card["id"]
    assert "input_schema" not in json.dumps(cards)  # §2.2: cards never carry schemas

    hydrated = await turn(http, ("c2", "tool_hydrate", {"tool_id": tool_id}), **session)
    schema = content(hydrated)["input_schema"]
    assert schema["required"] == ["order_id", "amount", "currency"]

    executed = await turn(
        http, ("c3", "tool_execute", {"tool_id": tool_id, "args": CREDIT}), **session
    )
    result = content(executed)
    assert result["status"] == "issued" and result["amount"] == 25
    (decision,) = executed["decisions"]
    assert decision["decision"] == "approved" and decision["tool"] == "issue_credit"
    assert len(backend.credits) == 1
    # The key is the call's, as for any native tool call: resent, nothing runs twice.
    again = await turn(
        http, ("c3", "tool_execute", {"tool_id": tool_id, "args": CREDIT}), **session
    )
    assert content(again) == result and len(backend.credits) == 1
    assert [json.loads(line)["idempotency_key"] for line in effects.read_text().splitlines()] == [
        "openai:c3"
    ]

    records = [r for r in ledger_records(tmp_path) if r.get("trace_id") == "trc-gateway-loop"]
    # Browse and hydrate left none; the execution one; the resend a replay, not a second run.
    assert [(r["tool"], r["replayed"]) for r in records] == [
        ("issue_credit", False),
        ("issue_credit", True),
    ]
    record = records[0]
    assert record["execution_status"] == "succeeded" and record["tool_id"] == tool_id
    assert record["tool"] == "issue_credit" and record["route"] == "gateway_billing"
    assert record["receipt"]["policy_state"] == "wrapped"
    assert record["receipt"]["fidelity"] == "emulated"
    assert record["receipt"]["visible_name"] == "tool_execute"
    await verified(http)


# -- the route option ---------------------------------------------------------------------------


def test_an_unknown_catalog_mode_is_refused_at_start_with_its_key_path() -> None:
    raw = demo_raw()
    raw["routes"]["gateway_billing"]["catalog"] = "browse"
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    (where, problem), *_ = refused.value.problems
    assert where == "routes.gateway_billing.catalog"
    assert "browse" in problem


# -- the store down -----------------------------------------------------------------------------


class _AsideDown(MemoryStore):
    """A store whose kept-aside values cannot be reached (the rest works)."""

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        raise StoreUnavailableError("aside store down")

    async def get_expiring(self, tenant: str, key: str) -> bytes | None:
        raise StoreUnavailableError("aside store down")


async def test_a_session_browse_fails_closed_when_the_store_is_down(
    make_broker: MakeBroker,
) -> None:
    url, _ = make_broker(store=_AsideDown())
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        browse = ("c1", "tool_browse", {"query": "credit"})
        down = await turn(http, browse, session_id="sess-down")
        assert content(down)["error"]["code"] == "store_unavailable"
        # Without a session nothing is read from the store: the browse is answered.
        answered = await turn(http, ("c2", "tool_browse", {"query": "credit"}))
        assert content(answered)["cards"]
