"""A generated catalog of 1,000 tools behind a gateway route, over real HTTP
(``POST /v1/tool-calls``): browsing by query and by path, bad input answered in the §3.4 shapes
with nothing executed (counted at the backend), results kept aside and viewed, and cache-stable
browsing per session."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from broker.app import create_app
from tests.conftest import serve, with_private_ledger
from tests.gateway_catalog import (
    BIG_ROWS,
    GATEWAY_TOKEN,
    GLOBEX_TOKEN,
    NAMESPACES,
    OTHER_TOKEN,
    PROXY_TOKEN,
    SIZE,
    CatalogBackend,
    backends,
    catalog_config,
)

GATEWAY = {"Authorization": f"Bearer {GATEWAY_TOKEN}"}
_CALL_IDS = itertools.count(1)
SECRETS = {"BROKER_TOKEN_SIGNING_KEY": "test-signing-key-0123456789abcdef"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, CatalogBackend]]:
    """One broker for the module: a thousand tools take seconds to load, a browse microseconds.
    Each test uses its own session ids, and reads the backend's counts from zero."""
    backend = CatalogBackend()
    config = with_private_ledger(catalog_config(), tmp_path_factory.mktemp("gateway"))
    app = create_app(config, backends=backends(backend), secrets=SECRETS)
    with serve(app) as url:
        yield url, backend


@pytest.fixture
def backend(served: tuple[str, CatalogBackend]) -> CatalogBackend:
    served[1].executed.clear()
    return served[1]


@pytest.fixture
def url(served: tuple[str, CatalogBackend], backend: CatalogBackend) -> str:
    return served[0]


@pytest.fixture
async def http(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        yield client


async def call(
    http: httpx.AsyncClient,
    name: str,
    args: dict[str, Any],
    *,
    token: str = GATEWAY_TOKEN,
    **more: Any,
) -> tuple[Any, Any]:
    """One meta-tool call as an Anthropic tool_use block: (what the model reads, the decision).
    Every call has an id of its own, as a model's do (the id is a write's idempotency key)."""
    call_id = f"toolu_{next(_CALL_IDS)}"
    calls = [{"type": "tool_use", "id": call_id, "name": name, "input": args}]
    response = await http.post(
        "/v1/tool-calls",
        json={"format": "anthropic", "calls": calls, **more},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    (block,) = body["results"]["content"]
    assert block["tool_use_id"] == call_id
    text = block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
    return json.loads(text), body["decisions"][0]


async def tool_id_of(http: httpx.AsyncClient, token: str, name: str) -> str:
    listed = await http.get("/v1/tools", headers={"Authorization": f"Bearer {token}"})
    return next(t["tool_id"] for t in listed.json()["tools"] if t["name"] == name)


# -- browsing 1,000 tools -------------------------------------------------------------------------


async def test_a_query_finds_the_tool_among_a_thousand(http: httpx.AsyncClient) -> None:
    found, decision = await call(http, "tool_browse", {"query": "archive payslip", "limit": 5})
    assert decision is None
    cards = found["cards"]
    assert 1 <= len(cards) <= 5 and found["total"] >= len(cards)
    assert cards[0]["name"].endswith("_archive_payslip")
    scores = [card["score"] for card in cards]
    assert scores == sorted(scores, reverse=True)  # §2.5: best first
    assert all(
        set(card)
        <= {
            "id",
            "kind",
            "name",
            "namespace",
            "description",
            "has_schema",
            "tags",
            "score",
            "cost_hint",
            "side_effects",
        }
        for card in cards
    )
    assert found["text"].splitlines()[0]  # the rendered preamble the model reads


async def test_paths_walk_from_the_namespaces_to_one_tool(http: httpx.AsyncClient) -> None:
    root, _ = await call(http, "tool_browse", {"path": "/", "limit": 50})
    namespaces = {card["namespace"] for card in root["cards"]}
    assert set(NAMESPACES) <= namespaces
    assert all(card["kind"] == "internal" for card in root["cards"])
    payroll, _ = await call(http, "tool_browse", {"path": "/payroll", "limit": 50})
    assert payroll["total"] >= 1 and payroll["cards"]
    listed = json.dumps(payroll)
    hidden = await tool_id_of(http, PROXY_TOKEN, "payroll_export")
    elsewhere = await tool_id_of(http, OTHER_TOKEN, "secret_payroll")
    assert hidden not in listed and elsewhere not in listed


async def test_every_generated_tool_is_reachable_and_only_those(http: httpx.AsyncClient) -> None:
    seen: set[str] = set()
    pending = ["/"]
    while pending:
        path = pending.pop()
        page, _ = await call(http, "tool_browse", {"path": path, "limit": 50})
        assert page["total"] <= 50, path  # no listing here needs more than one page
        for card in page["cards"]:
            if card["kind"] == "internal":
                pending.append(card["id"])
            else:
                seen.add(card["name"])
    assert len(seen) == SIZE + 1  # the generated tools and big_report; never the hidden one
    assert "big_report" in seen and "payroll_export" not in seen


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"query": "invoice", "path": "/billing"}, "ARGS_INVALID"),
        ({}, "ARGS_INVALID"),
        ({"query": "x" * 10_000}, "ARGS_INVALID"),
        ({"query": 42}, "ARGS_INVALID"),
        ({"query": "invoice", "limit": 500}, "ARGS_INVALID"),
        ({"query": "invoice", "extra": 1}, "ARGS_INVALID"),
        ({"path": "billing"}, "PATH_INVALID"),
        ({"path": "//billing"}, "PATH_INVALID"),
        ({"path": "/billing/"}, "PATH_INVALID"),
        ({"path": "/Billing"}, "PATH_INVALID"),
        ({"path": "/" + "a/" * 300 + "a"}, "PATH_INVALID"),
        ({"path": "/nowhere"}, "PATH_NOT_FOUND"),
    ],
)
async def test_bad_browses_answer_the_seed_shape_and_run_nothing(
    http: httpx.AsyncClient, backend: CatalogBackend, args: dict[str, Any], code: str
) -> None:
    answer, decision = await call(http, "tool_browse", args)
    assert decision is None
    assert set(answer) == {"error", "message", "path", "details"}, answer
    assert answer["error"] == code, answer
    assert answer["message"]
    assert backend.executed == {}


async def test_unknown_hidden_and_other_routes_ids_are_indistinguishable(
    http: httpx.AsyncClient, backend: CatalogBackend
) -> None:
    elsewhere = await tool_id_of(http, OTHER_TOKEN, "secret_payroll")
    hidden = await tool_id_of(http, PROXY_TOKEN, "payroll_export")
    invented = "payroll:made_up_tool@1"
    answers = {}
    for tool_id in (elsewhere, hidden, invented):
        hydrated, _ = await call(http, "tool_hydrate", {"tool_id": tool_id})
        executed, decision = await call(http, "tool_execute", {"tool_id": tool_id, "args": {}})
        assert hydrated == executed, (hydrated, executed)
        assert hydrated["error"] == "PATH_NOT_FOUND"
        # Recorded like any refused proposal, and no hint that the tool exists.
        assert decision["code"] == "unknown_tool"
        answers[tool_id] = json.dumps([hydrated, decision["reason"]]).replace(tool_id, "<id>")
    assert len(set(answers.values())) == 1, answers
    assert backend.executed == {}


@pytest.mark.parametrize(
    "args",
    [
        {"tool_id": "billing:billing_create_invoice@1"},  # no args
        {"args": {"ref": "r"}},  # no tool_id
        {"tool_id": 7, "args": {}},
        {"tool_id": "billing:billing_create_invoice@1", "args": []},
        {"tool_id": "billing:billing_create_invoice@1", "args": {}, "more": True},
    ],
)
async def test_malformed_execute_calls_are_args_invalid_and_run_nothing(
    http: httpx.AsyncClient, backend: CatalogBackend, args: dict[str, Any]
) -> None:
    answer, decision = await call(http, "tool_execute", args)
    assert answer["error"] == "ARGS_INVALID"
    assert answer["details"]["errors"] and all("path" in e for e in answer["details"]["errors"])
    assert decision["decision"] == "rejected" and decision["code"] == "schema_invalid"
    assert backend.executed == {}


async def test_arguments_that_miss_the_schema_are_args_invalid_and_reach_no_backend(
    http: httpx.AsyncClient, backend: CatalogBackend
) -> None:
    tool_id = await tool_id_of(http, PROXY_TOKEN, "billing_get_invoice")
    answer, decision = await call(
        http, "tool_execute", {"tool_id": tool_id, "args": {"ref": 5, "x": 1}}
    )
    assert answer["error"] == "ARGS_INVALID"
    paths = sorted(e["path"] for e in answer["details"]["errors"])
    assert paths == ["/args/ref", "/args/x"]
    assert decision["code"] == "schema_invalid" and decision["tool"] == "billing_get_invoice"
    assert backend.executed == {}
    ran, decision = await call(http, "tool_execute", {"tool_id": tool_id, "args": {"ref": "r"}})
    assert ran == {"tool": "billing_get_invoice", "args": {"ref": "r"}}
    assert backend.executed == {"billing_get_invoice": 1}


async def test_a_real_tool_name_is_not_callable_on_a_gateway_route(
    http: httpx.AsyncClient, backend: CatalogBackend
) -> None:
    answer, decision = await call(http, "billing_get_invoice", {"ref": "r"})
    assert decision["code"] == "unknown_tool" and "tool_execute" in decision["reason"]
    assert answer["error"]["code"] == "unknown_tool"
    assert backend.executed == {}


# -- results kept aside -------------------------------------------------------------------------


async def test_a_large_result_is_kept_aside_and_viewed_in_parts(
    http: httpx.AsyncClient, backend: CatalogBackend
) -> None:
    tool_id = await tool_id_of(http, PROXY_TOKEN, "big_report")
    session = {"session_id": "sess-view-1"}
    answer, decision = await call(http, "tool_execute", {"tool_id": tool_id, "args": {}}, **session)
    assert decision["execution"]["status"] == "succeeded"
    kept = answer["kept_aside"]
    assert kept["bytes"] > 16 * 1024 and kept["outline"]["keys"]["rows"] == {
        "type": "array",
        "length": BIG_ROWS,
    }
    assert answer["preview"].endswith("…") and len(answer["preview"]) <= 1001
    handle = kept["handle"]

    part, decision = await call(
        http, "tool_view", {"handle": handle, "selector": "/rows[10:13]"}, **session
    )
    assert decision is None
    assert [row["id"] for row in part["value"]] == [10, 11, 12]
    name, _ = await call(
        http, "tool_view", {"handle": handle, "selector": "/rows/7/name"}, **session
    )
    assert name["value"] == "row 7"
    title, _ = await call(http, "tool_view", {"handle": handle, "selector": "/title"}, **session)
    assert title["value"] == "the big report"

    whole, _ = await call(http, "tool_view", {"handle": handle, "selector": ""}, **session)
    assert whole["error"] == "SELECTION_TOO_LARGE" and whole["path"] == ""
    missing, _ = await call(http, "tool_view", {"handle": handle, "selector": "/nope"}, **session)
    assert missing["error"] == "SELECTOR_NOT_FOUND"
    bad, _ = await call(http, "tool_view", {"handle": handle, "selector": "rows"}, **session)
    assert bad["error"] == "SELECTOR_INVALID"
    assert backend.executed == {"big_report": 1}  # viewing runs nothing


async def test_a_handle_of_another_session_or_tenant_is_not_found(http: httpx.AsyncClient) -> None:
    tool_id = await tool_id_of(http, PROXY_TOKEN, "big_report")
    answer, _ = await call(
        http, "tool_execute", {"tool_id": tool_id, "args": {}}, session_id="sess-owner"
    )
    handle = answer["kept_aside"]["handle"]
    view = {"handle": handle, "selector": "/title"}
    never = {"handle": "rh_" + "0" * 32, "selector": "/title"}
    not_found, _ = await call(http, "tool_view", never, session_id="sess-owner")
    assert not_found["error"] == "HANDLE_NOT_FOUND"
    for attempt in (
        await call(http, "tool_view", view, session_id="sess-thief"),
        await call(http, "tool_view", view),
        await call(http, "tool_view", view, token=GLOBEX_TOKEN, session_id="sess-owner"),
    ):
        answer, decision = attempt
        assert decision is None
        assert answer["error"] == "HANDLE_NOT_FOUND"
        assert answer["message"].replace(handle, "<h>") == not_found["message"].replace(
            never["handle"], "<h>"
        )
        assert "the big report" not in json.dumps(answer)


# -- cache-stable browsing per session -------------------------------------------------------------


async def test_a_session_sees_its_cards_first_then_the_breakpoint(http: httpx.AsyncClient) -> None:
    first, _ = await call(
        http, "tool_browse", {"query": "archive payslip", "limit": 3}, session_id="sess-cache"
    )
    assert all(card["id"] != "__cache_breakpoint__" for card in first["cards"])
    second, _ = await call(
        http,
        "tool_browse",
        {"query": "payslip archive export", "limit": 6},
        session_id="sess-cache",
    )
    ids = [card["id"] for card in second["cards"]]
    assert "__cache_breakpoint__" in ids
    seen = ids[: ids.index("__cache_breakpoint__")]
    assert seen == sorted(seen) and set(seen) <= {card["id"] for card in first["cards"]}
    # The seen prefix is byte for byte as first shown.
    before = {card["id"]: card for card in first["cards"]}
    assert all(card == before[card["id"]] for card in second["cards"][: len(seen)])
    # Another session, and no session at all, rank afresh.
    fresh, _ = await call(
        http, "tool_browse", {"query": "payslip archive export", "limit": 6}, session_id="sess-new"
    )
    plain, _ = await call(http, "tool_browse", {"query": "payslip archive export", "limit": 6})
    for answer in (fresh, plain):
        assert "__cache_breakpoint__" not in [card["id"] for card in answer["cards"]]
