"""What a request may not be, on every JSON endpoint, over real HTTP: a body that repeats a key
(I-JSON), a ``Content-Type`` that is not JSON, two ``Authorization`` headers; and a
``traceparent`` that is not W3C is not passed on to backends."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, credit
from tests.fakes import assert_problem
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_config

StartBroker = Callable[..., tuple[str, Mapping[str, Backend]]]

JSON = {"Content-Type": "application/json"}
W3C = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


@pytest.fixture
def demo_broker(make_broker: StartBroker) -> tuple[str, DemoBackend]:
    url, backends = make_broker(registration_config())
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    return url, demo


@pytest.fixture
async def http(demo_broker: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo_broker[0], timeout=10) as client:
        yield client


def raw_credit(tail: str) -> bytes:
    """A credit proposal as text, with ``tail`` spliced in before its closing brace."""
    text = json.dumps(credit(key="dup-1"))
    return (text[:-1] + ", " + tail + "}").encode()


# -- I-JSON: one value per key ---------------------------------------------------------------------


async def test_a_repeated_dry_run_is_refused_and_nothing_executes(
    http: httpx.AsyncClient, demo_broker: tuple[str, DemoBackend]
) -> None:
    # A proxy that keeps the first value logged a dry run; msgspec alone kept the last and ran it.
    body = raw_credit('"dry_run": true, "dry_run": false')
    response = await http.post("/v1/proposals", content=body, headers={**BILLING, **JSON})
    problem = assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert problem["errors"] == [
        {"path": "/dry_run", "message": "this key appears more than once in its object"}
    ]
    assert demo_broker[1].credits == []
    # The refusal is a recorded decision like any other.
    stored = await http.get(f"/v1/proposals/{problem['proposal_id']}", headers=BILLING)
    assert stored.status_code == 200 and stored.json()["code"] == "malformed_request"


async def test_every_repeated_key_is_located_at_any_depth(
    http: httpx.AsyncClient, demo_broker: tuple[str, DemoBackend]
) -> None:
    body = (
        b'{"tool": "issue_credit", "idempotency_key": "dup-2", "preconditions": [],'
        b' "args": {"order_id": "O-55291", "amount": 1, "currency": "USD", "amount": 900},'
        b' "tool": "issue_credit"}'
    )
    response = await http.post("/v1/proposals", content=body, headers={**BILLING, **JSON})
    problem = assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert [e["path"] for e in problem["errors"]] == ["/args/amount", "/tool"]
    assert demo_broker[1].credits == []


async def test_the_same_key_in_sibling_objects_is_not_a_repeat(http: httpx.AsyncClient) -> None:
    body = {
        "text": "I opened the ticket.",
        "trace_id": "t-1",
        "session_id": "s-1",
    }
    response = await http.post("/v1/implied-writes/check", json=body, headers=BILLING)
    assert response.status_code == 200, response.text
    nested = await http.post(
        "/v1/proposals",
        json={"tool": "lookup_order", "args": {"order_id": "O-55291"}, "trace_id": "t-2"},
        headers=BILLING,
    )
    assert nested.status_code == 200, nested.text


async def test_a_registration_that_repeats_a_key_is_refused_and_not_stored(
    http: httpx.AsyncClient,
) -> None:
    text = json.dumps(registration("billing.refund", "http://127.0.0.1:9/tools/refund"))
    body = (text[:-1] + ', "routes": []}').encode()  # the first "routes" granted billing_help
    response = await http.post("/v1/tools", content=body, headers={**ADMIN, **JSON})
    problem = assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert [e["path"] for e in problem["errors"]] == ["/routes"]
    assert (await http.get("/v1/tools/billing.refund", headers=ADMIN)).status_code == 404


async def test_an_implied_write_check_that_repeats_a_key_is_refused(
    http: httpx.AsyncClient,
) -> None:
    body = b'{"text": "I refunded it.", "trace_id": "t-1", "trace_id": "t-2"}'
    response = await http.post(
        "/v1/implied-writes/check", content=body, headers={**BILLING, **JSON}
    )
    problem = assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert [e["path"] for e in problem["errors"]] == ["/trace_id"]


# -- Content-Type ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
async def test_a_proposal_that_is_not_sent_as_json_is_refused_415(
    http: httpx.AsyncClient, demo_broker: tuple[str, DemoBackend], content_type: str
) -> None:
    response = await http.post(
        "/v1/proposals",
        content=json.dumps(credit(key="ct-1")).encode(),
        headers={**BILLING, "Content-Type": content_type},
    )
    problem = assert_problem(response, 415, "unsupported_media_type", "SCHEMA")
    assert content_type in problem["detail"]
    assert problem["remediation"].startswith("REPAIR")
    assert demo_broker[1].credits == []


@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "application/json; charset=utf-8", "APPLICATION/JSON"],
)
async def test_json_with_or_without_parameters_or_no_content_type_is_accepted(
    http: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {**BILLING} if content_type is None else {**BILLING, "Content-Type": content_type}
    body = json.dumps({"tool": "lookup_order", "args": {"order_id": "O-55291"}}).encode()
    response = await http.post("/v1/proposals", content=body, headers=headers)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("path", "token"),
    [
        ("/v1/tools", ADMIN),
        ("/v1/implied-writes/check", BILLING),
        ("/v1/tool-calls", BILLING),
        ("/v1/resolutions", ADMIN),
    ],
)
async def test_every_json_endpoint_refuses_a_body_that_is_not_json_415(
    http: httpx.AsyncClient, path: str, token: dict[str, str]
) -> None:
    body = registration("billing.refund", "http://127.0.0.1:9/r")
    if path.endswith("check"):
        body = {"text": "I refunded it.", "trace_id": "t-1"}
    response = await http.post(
        path, content=json.dumps(body).encode(), headers={**token, "Content-Type": "text/plain"}
    )
    assert_problem(response, 415, "unsupported_media_type", "SCHEMA")
    assert (await http.get("/v1/tools/billing.refund", headers=ADMIN)).status_code == 404


# -- Authorization ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "second", ["Bearer demo-billing-token", "Bearer demo-admin-token"], ids=["same", "other"]
)
async def test_two_authorization_headers_are_refused_401(
    http: httpx.AsyncClient, demo_broker: tuple[str, DemoBackend], second: str
) -> None:
    headers = [("Authorization", "Bearer demo-billing-token"), ("Authorization", second)]
    proposed = await http.post("/v1/proposals", json=credit(key="auth-2"), headers=headers)
    problem = assert_problem(proposed, 401, "unauthenticated", "AUTHZ")
    assert "one Authorization header" in problem["detail"]
    assert proposed.headers["www-authenticate"] == "Bearer"
    assert demo_broker[1].credits == []
    listed = await http.get("/v1/tools", headers=headers)
    assert_problem(listed, 401, "unauthenticated", "AUTHZ")


# -- traceparent -----------------------------------------------------------------------------------


@pytest.fixture
def backend() -> Iterator[tuple[str, LoopbackBackend]]:
    loopback = LoopbackBackend()
    with running(loopback) as url:
        yield url, loopback


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    ("sent", "forwarded"),
    [
        (f"00-{TRACE}-00f067aa0ba902b7-01", True),
        (f"01-{TRACE}-00f067aa0ba902b7-01-future", False),  # not a version the broker reads
        (f"00-{TRACE}-00f067aa0ba902b7-01-extra", False),  # version 00 has exactly four
        (f"00-{TRACE.upper()}-00f067aa0ba902b7-01", False),
        (f"01-{TRACE}-00f067aa0ba902b7-01-" + "x" * 300, False),  # too long to pass on
        ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", False),
    ],
    ids=["w3c", "future-version", "v00-extra-field", "uppercase", "long", "zero-trace"],
)
async def test_only_a_w3c_traceparent_is_forwarded_to_the_backend(
    http: httpx.AsyncClient, backend: tuple[str, LoopbackBackend], sent: str, forwarded: bool
) -> None:
    backend_url, loopback = backend
    loopback.behaviours["/tools/ok"] = "ok"
    answer = await http.post(
        "/v1/tools", json=registration("billing.ok", backend_url + "/tools/ok"), headers=ADMIN
    )
    assert answer.status_code == 201, answer.text
    loopback.secrets["/tools/ok"] = answer.json()["signing_secret"]
    proposal: dict[str, Any] = {
        "tool": "billing.ok",
        "args": {"payment_id": "P-1"},
        "idempotency_key": "tp-1",
    }
    done = await http.post("/v1/proposals", json=proposal, headers={**BILLING, "traceparent": sent})
    assert done.status_code == 200, done.text
    (hit,) = loopback.hits_on("/tools/ok")
    if forwarded:
        assert hit.headers["traceparent"] == sent
        assert done.json()["trace_id"] == TRACE
    else:
        assert W3C.fullmatch(hit.headers["traceparent"]), hit.headers["traceparent"]
        assert TRACE not in hit.headers["traceparent"].lower()
        assert done.json()["trace_id"].startswith("trc_")


@pytest.mark.parametrize(
    ("path", "token", "body"),
    [
        ("/v1/tool-calls", BILLING, b'{"format": "openai", "calls": [], "calls": []}'),
        ("/v1/resolutions", ADMIN, b'{"outcome": "not_executed", "outcome": "succeeded"}'),
    ],
)
async def test_the_newer_json_endpoints_refuse_a_repeated_key_too(
    http: httpx.AsyncClient, path: str, token: dict[str, str], body: bytes
) -> None:
    response = await http.post(path, content=body, headers={**token, **JSON})
    problem = assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert len(problem["errors"]) == 1 and problem["errors"][0]["path"] in ("/calls", "/outcome")


async def test_tool_calls_refuse_two_authorization_headers(http: httpx.AsyncClient) -> None:
    headers = [("Authorization", "Bearer demo-billing-token")] * 2
    response = await http.post(
        "/v1/tool-calls", json={"format": "openai", "calls": []}, headers=headers
    )
    assert_problem(response, 401, "unauthenticated", "AUTHZ")
