"""``POST /v1/tool-calls`` refuses what it cannot read as a whole, clearly and with JSON Pointers,
and executes nothing: truncated payloads, a wrong format, 10,000 calls, an envelope with stray
members, no token. No input answers 500."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from tests.conftest import ADMIN, BILLING
from tests.fakes import assert_problem, demo_config_with

CREDIT = json.dumps({"order_id": "O-55291", "amount": 25, "currency": "USD"})
GOOD = {
    "format": "openai",
    "calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "issue_credit", "arguments": CREDIT},
        }
    ],
}


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.jsonl"


@pytest.fixture
def start(make_broker: Callable[..., tuple[str, Any]], effects: Path) -> Callable[..., str]:
    def started(**config: Any) -> str:
        url, _ = make_broker(
            demo_config_with(**config) if config else None,
            backends={"demo": DemoBackend(effects_path=str(effects))},
        )
        return url

    return started


@pytest.fixture
async def http(start: Callable[..., str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=start(), timeout=30) as client:
        yield client


async def post(
    http: httpx.AsyncClient, body: Any, headers: dict[str, str] = BILLING
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await http.post(
        "/v1/tool-calls",
        content=content,
        headers={**headers, "Content-Type": "application/json"},
    )


def nothing_ran(effects: Path) -> None:
    assert not effects.exists() or effects.read_text() == ""


async def test_every_truncation_of_a_payload_is_a_clear_400(
    http: httpx.AsyncClient, effects: Path
) -> None:
    whole = json.dumps(GOOD).encode()
    for cut in range(1, len(whole), 7):
        response = await post(http, whole[:cut])
        body = assert_problem(response, 400, "malformed_request", "SCHEMA")
        assert body["errors"] == [{"path": "", "message": "the body is not valid JSON"}]
    nothing_ran(effects)
    assert (await post(http, whole)).status_code == 200  # the whole payload is fine


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({**GOOD, "format": "openai-chat"}, "/format"),
        ({"calls": GOOD["calls"]}, "/format"),
        ({"format": "openai"}, "/calls"),
        ({**GOOD, "tenant": "globex"}, "/tenant"),
        ({**GOOD, "dry_run": "yes"}, "/dry_run"),
        ({**GOOD, "idempotency_keys": {"call_1": 7}}, "/idempotency_keys"),
        ({"format": "openai", "calls": "issue_credit"}, "/calls"),
        (
            {"format": "openai", "calls": [{"function": {"name": "x", "arguments": "{}"}}]},
            "/calls/0/id",
        ),
        (
            {
                "format": "openai",
                "calls": [{"id": "c", "function": {"name": "x", "arguments": {}}}],
            },
            "/calls/0/function/arguments",
        ),
        (
            {"format": "openai", "calls": {"role": "assistant", "tool_calls": [{"id": "c"}]}},
            "/calls/tool_calls/0/function",
        ),
        (
            {"format": "openai-responses", "calls": [{"type": "function_call", "name": "x"}]},
            "/calls/0/call_id",
        ),
        (
            {"format": "anthropic", "calls": [{"type": "tool_use", "id": "t", "input": {}}]},
            "/calls/0/name",
        ),
        (
            {"format": "anthropic", "calls": {"role": "assistant", "content": [{"text": "hi"}]}},
            "/calls/content/0/type",
        ),
        (
            {
                "format": "gemini",
                "calls": {"role": "model", "parts": [{"functionCall": {"args": {}}}]},
            },
            "/calls/parts/0/functionCall/name",
        ),
    ],
)
async def test_a_malformed_payload_is_422_pointing_into_it(
    http: httpx.AsyncClient, effects: Path, body: dict[str, Any], pointer: str
) -> None:
    response = await post(http, body)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == [pointer], problem
    nothing_ran(effects)


async def test_ten_thousand_calls_are_refused_before_any_runs(
    http: httpx.AsyncClient, effects: Path
) -> None:
    call = {"id": "c", "function": {"name": "issue_credit", "arguments": CREDIT}}
    many = [{**call, "id": f"c{i}"} for i in range(10_000)]
    for format_, calls in (
        ("openai", many[:129]),
        (
            "openai",
            [{"id": f"c{i}", "function": {"name": "x", "arguments": "{}"}} for i in range(10_000)],
        ),
    ):
        response = await post(http, {"format": format_, "calls": calls})
        problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
        assert problem["errors"] == [
            {"path": "/calls", "message": f"at most 128 calls per request; got {len(calls)}"}
        ]
    # ten thousand whole calls are more than the body may hold: 413 before anything is read
    response = await post(http, {"format": "openai", "calls": many})
    assert_problem(response, 413, "payload_too_large", "SCHEMA")
    nothing_ran(effects)


async def test_the_bound_on_calls_is_configurable(start: Callable[..., str], effects: Path) -> None:
    async with httpx.AsyncClient(base_url=start(service__max_tool_calls=1), timeout=10) as http:
        two = {"format": "openai", "calls": GOOD["calls"] * 2}
        problem = assert_problem(await post(http, two), 422, "schema_invalid", "SCHEMA")
        assert problem["errors"][0]["message"] == "at most 1 calls per request; got 2"
        nothing_ran(effects)
        assert (await post(http, GOOD)).status_code == 200


async def test_deep_nesting_and_non_utf8_are_400(http: httpx.AsyncClient, effects: Path) -> None:
    deep = b'{"format": "gemini", "calls": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert_problem(await post(http, deep), 400, "malformed_request", "SCHEMA")
    assert_problem(await post(http, b'{"format": "\xff"}'), 400, "malformed_request", "SCHEMA")
    nothing_ran(effects)


async def test_without_a_route_token_nothing_is_read(
    http: httpx.AsyncClient, effects: Path
) -> None:
    response = await post(http, GOOD, headers={})
    assert_problem(response, 401, "unauthenticated", "AUTHZ")
    assert response.headers["www-authenticate"] == "Bearer"
    assert_problem(await post(http, GOOD, headers=ADMIN), 403, "forbidden", "AUTHZ")
    nothing_ran(effects)


async def test_refusals_are_recorded_in_the_ledger(http: httpx.AsyncClient) -> None:
    refused = await post(http, {**GOOD, "format": "nope"})
    proposal_id = refused.json()["proposal_id"]
    read = await http.get(f"/v1/proposals/{proposal_id}", headers=BILLING)
    assert read.status_code == 200, read.text
    assert read.json()["code"] == "schema_invalid"
    report = (await http.get("/v1/audit/verify", headers=ADMIN)).json()
    assert report["ok"] is True, report
