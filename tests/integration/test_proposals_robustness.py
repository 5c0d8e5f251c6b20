"""Hostile and sloppy input, tracing, reading decisions back, and tenant isolation, over HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from tests.conftest import ADMIN, BILLING, GLOBEX, SCHEDULING, credit
from tests.fakes import assert_problem, serve_demo

MIB = 1_048_576
JSON_HEADERS = {**BILLING, "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def shared(ingress: str) -> Iterator[tuple[str, DemoBackend]]:
    with serve_demo(ingress=ingress) as started:
        yield started


@pytest.fixture
async def client(shared: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=shared[0], timeout=30) as http:
        yield http


@pytest.fixture
def demo(shared: tuple[str, DemoBackend]) -> DemoBackend:
    return shared[1]


async def still_serving(client: httpx.AsyncClient) -> None:
    live = await client.get("/livez")
    assert live.status_code == 200
    lookup = await client.post(
        "/v1/proposals",
        json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
        headers=BILLING,
    )
    assert lookup.status_code == 200, lookup.text


def padded(size: int) -> bytes:
    """A valid read proposal of exactly ``size`` bytes (padding in ``reason``)."""
    head = b'{"tool":"lookup_order","args":{"order_id":"O-55291"},"reason":"'
    tail = b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


# -- size ------------------------------------------------------------------------------------------


async def test_a_body_over_1_mib_is_413_problem_json(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/proposals", content=padded(MIB + 1), headers=JSON_HEADERS)
    assert_problem(response, 413, "payload_too_large", "SCHEMA")
    await still_serving(client)


async def test_a_chunked_body_over_1_mib_is_413_without_content_length(
    client: httpx.AsyncClient,
) -> None:
    body = padded(2 * MIB)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    request = client.build_request("POST", "/v1/proposals", content=chunks(), headers=JSON_HEADERS)
    assert "content-length" not in request.headers
    assert request.headers["transfer-encoding"] == "chunked"
    response = await client.send(request)
    assert_problem(response, 413, "payload_too_large", "SCHEMA")
    await still_serving(client)


async def test_a_body_of_exactly_1_mib_is_served(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/proposals", content=padded(MIB), headers=JSON_HEADERS)
    assert response.status_code == 200, response.text[:300]


# -- malformed JSON --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b'{"tool":"lookup_order","args":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        b'{"tool":"lookup_order","args":{"x":' + b"[" * 100_000,
        b'{"tool":"lookup_order","args":' + b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"}",
        b'{"tool":"lookup_order","args":{"x":' + b'{"a":[' * 5_000 + b"1" + b"]}" * 5_000 + b"}}",
    ],
    ids=["arrays-100k", "arrays-100k-unclosed", "objects-10k", "mixed-10k"],
)
async def test_deeply_nested_json_is_400_and_the_server_survives(
    client: httpx.AsyncClient, content: bytes
) -> None:
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    assert_problem(response, 400, "malformed_request", "SCHEMA")
    await still_serving(client)


@pytest.mark.parametrize(
    ("shape", "depth", "where"),
    [
        ("arrays", 200, "extra"),
        ("arrays", 256, "extra"),
        ("objects", 300, "order_id"),
        ("arrays", 900, "order_id"),
    ],
)
async def test_moderately_nested_args_are_refused_never_500(
    client: httpx.AsyncClient, shape: str, depth: int, where: str
) -> None:
    """Nesting the JSON decoder accepts (below ~1000 levels) must not break the validator."""
    if shape == "arrays":
        nested = b"[" * depth + b"]" * depth
    else:
        nested = b'{"a":' * depth + b"1" + b"}" * depth
    prefix = b'"order_id":' if where == "order_id" else b'"order_id":"O-55291","x":'
    content = b'{"tool":"lookup_order","args":{' + prefix + nested + b"}}"
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    assert response.status_code in (400, 422), response.text[:300]
    problem = response.json()
    assert problem["category"] == "SCHEMA"
    await still_serving(client)


@pytest.mark.parametrize(
    "content",
    [
        b'{"tool":"lookup_order","args":{"order_id":"O-5\xff5291"}}',
        b'{"tool":"lookup_order","args":{"order_id":"O-\xc3\x28"}}',
        b'{"tool":"lookup_order","args":{"order_id":"\xed\xa0\x80"}}',
        b'{"tool":"lookup_\x80order","args":{}}',
    ],
    ids=["ff", "bad-continuation", "surrogate", "in-tool"],
)
async def test_invalid_utf8_is_400(client: httpx.AsyncClient, content: bytes) -> None:
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    assert_problem(response, 400, "malformed_request", "SCHEMA")


async def test_a_lone_surrogate_escape_is_refused_not_a_500(client: httpx.AsyncClient) -> None:
    content = b'{"tool":"lookup_order","args":{"order_id":"O-1\\ud800"}}'
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    assert response.status_code in (400, 422), response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    await still_serving(client)


@pytest.mark.parametrize("content", [b"", b" ", b"\n\n"], ids=["empty", "space", "newlines"])
async def test_an_empty_body_is_400(client: httpx.AsyncClient, content: bytes) -> None:
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    assert_problem(response, 400, "malformed_request", "SCHEMA")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_other_methods_on_the_proposals_path_are_405_problem_json(
    client: httpx.AsyncClient, method: str
) -> None:
    response = await client.request(method, "/v1/proposals", headers=BILLING)
    assert_problem(response, 405, "malformed_request", "SCHEMA")
    assert set(response.headers["allow"].split(", ")) == {"OPTIONS", "POST"}


async def test_options_on_the_proposals_path_lists_post(client: httpx.AsyncClient) -> None:
    response = await client.options("/v1/proposals")
    assert response.status_code == 204
    assert response.headers["allow"] == "OPTIONS, POST"


@pytest.mark.parametrize(
    "number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"1e999999"]
)
async def test_non_finite_numbers_are_refused_never_500(
    client: httpx.AsyncClient, demo: DemoBackend, number: bytes
) -> None:
    content = (
        b'{"tool":"issue_credit","idempotency_key":"nan","args":'
        b'{"order_id":"O-55291","amount":' + number + b',"currency":"USD"}}'
    )
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    assert response.status_code in (400, 422), response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["category"] == "SCHEMA"
    if response.status_code == 422:
        assert [error["path"] for error in problem["errors"]] == ["/args/amount"]
    assert demo.credits == []


@pytest.mark.parametrize(
    "amount", [b"1000000000000000000000000000000", b"-1000000000000000000000000000000", b"1e308"]
)
async def test_huge_numbers_are_schema_errors(
    client: httpx.AsyncClient, demo: DemoBackend, amount: bytes
) -> None:
    content = (
        b'{"tool":"issue_credit","idempotency_key":"huge","args":'
        b'{"order_id":"O-55291","amount":' + amount + b',"currency":"USD"}}'
    )
    response = await client.post("/v1/proposals", content=content, headers=JSON_HEADERS)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == ["/args/amount"]
    assert demo.credits == []


async def test_duplicate_top_level_keys_cannot_smuggle_a_second_value(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    content = (
        b'{"tool":"lookup_order","tool":"issue_credit","idempotency_key":"dup",'
        b'"args":{"order_id":"O-55291","amount":25,"currency":"USD"}}'
    )
    response = await client.post("/v1/proposals", content=content, headers=SCHEDULING)
    assert response.status_code in (400, 403, 422), response.text
    assert demo.credits == []


# -- tracing ---------------------------------------------------------------------------------------

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_a_trace_id_is_generated_when_absent(client: httpx.AsyncClient) -> None:
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}
    first = (await client.post("/v1/proposals", json=body, headers=BILLING)).json()
    second = (await client.post("/v1/proposals", json=body, headers=BILLING)).json()
    assert first["trace_id"] and second["trace_id"]
    assert first["trace_id"] != second["trace_id"]


async def test_a_trace_id_is_echoed_when_present(client: httpx.AsyncClient) -> None:
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}, "trace_id": "x-9af3"}
    response = await client.post("/v1/proposals", json=body, headers=BILLING)
    assert response.json()["trace_id"] == "x-9af3"
    rejected = await client.post(
        "/v1/proposals", json={**credit(order="O-60000"), "trace_id": "x-9af4"}, headers=BILLING
    )
    assert rejected.status_code == 409
    assert rejected.json()["trace_id"] == "x-9af4"


@pytest.mark.parametrize("field", ["trace_id", "session_id"])
@pytest.mark.parametrize("bad", ["x-9af3\n", "with space", "", "x" * 129, "tab\there", "é"])
async def test_a_trace_or_session_id_outside_its_pattern_is_refused_with_its_pointer(
    client: httpx.AsyncClient, bad: str, field: str
) -> None:
    # 1-128 visible ASCII characters: it is echoed, logged, recorded and sent to backends.
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}, field: bad}
    response = await client.post("/v1/proposals", json=body, headers=BILLING)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [e["path"] for e in problem["errors"]] == [f"/{field}"]
    assert response.json()["trace_id"].startswith("trc_")  # never the refused one


async def test_an_idempotency_key_with_a_line_break_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/proposals", json=credit(key="k-1\n"), headers=BILLING)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "idempotency_key_invalid"


async def test_the_traceparent_trace_id_is_used_when_the_body_has_none(
    client: httpx.AsyncClient,
) -> None:
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}
    response = await client.post(
        "/v1/proposals", json=body, headers={**BILLING, "traceparent": TRACEPARENT}
    )
    assert response.json()["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    explicit = await client.post(
        "/v1/proposals",
        json={**body, "trace_id": "from-body"},
        headers={**BILLING, "traceparent": TRACEPARENT},
    )
    assert explicit.json()["trace_id"] == "from-body"


@pytest.mark.parametrize(
    "traceparent",
    [
        "garbage",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ],
    ids=["garbage", "uppercase", "zero-trace-id", "zero-parent-id", "version-ff"],
)
async def test_an_invalid_traceparent_is_ignored(
    client: httpx.AsyncClient, traceparent: str
) -> None:
    body = {"tool": "lookup_order", "args": {"order_id": "O-55291"}}
    response = await client.post(
        "/v1/proposals", json=body, headers={**BILLING, "traceparent": traceparent}
    )
    assert response.status_code == 200
    trace_id = response.json()["trace_id"]
    assert trace_id
    assert trace_id.lower() not in traceparent.lower()


# -- reading decisions back ------------------------------------------------------------------------


def without_id(problem: dict[str, Any], proposal_id: str) -> dict[str, Any]:
    return {
        k: (v.replace(proposal_id, "<id>") if isinstance(v, str) else v) for k, v in problem.items()
    }


async def test_a_decision_can_be_read_back_by_its_route_and_admin_only(
    client: httpx.AsyncClient,
) -> None:
    made = await client.post(
        "/v1/proposals",
        json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
        headers=BILLING,
    )
    assert made.status_code == 200
    proposal_id = made.json()["proposal_id"]

    mine = await client.get(f"/v1/proposals/{proposal_id}", headers=BILLING)
    assert mine.status_code == 200, mine.text
    assert mine.headers["content-type"].startswith("application/json")
    assert mine.json() == made.json()

    admin = await client.get(f"/v1/proposals/{proposal_id}", headers=ADMIN)
    assert admin.status_code == 200, admin.text
    assert admin.json() == made.json()

    missing_id = "prp_01JAAAAAAAAAAAAAAAAAAAAAAA"
    missing = await client.get(f"/v1/proposals/{missing_id}", headers=BILLING)
    assert_problem(missing, 404, missing.json()["code"], missing.json()["category"])
    for other in (GLOBEX, SCHEDULING):
        hidden = await client.get(f"/v1/proposals/{proposal_id}", headers=other)
        assert hidden.status_code == 404, hidden.text
        assert hidden.headers["content-type"] == missing.headers["content-type"]
        assert without_id(hidden.json(), proposal_id) == without_id(missing.json(), missing_id)

    anonymous = await client.get(f"/v1/proposals/{proposal_id}")
    assert_problem(anonymous, 401, "unauthenticated", "AUTHZ")


async def test_a_rejection_can_be_read_back(client: httpx.AsyncClient) -> None:
    made = await client.post("/v1/proposals", json=credit(order="O-60000"), headers=BILLING)
    assert made.status_code == 409
    read = await client.get(f"/v1/proposals/{made.json()['proposal_id']}", headers=BILLING)
    assert read.status_code == 200, read.text
    record = read.json()
    assert record["decision"] == "rejected"
    assert record["code"] == "precondition_failed"
    assert record["proposal_id"] == made.json()["proposal_id"]


# -- tenant isolation ------------------------------------------------------------------------------


def json_leaves(value: Any) -> list[Any]:
    """Every scalar in a decoded JSON document, keys included."""
    if isinstance(value, dict):
        return [*value, *(leaf for item in value.values() for leaf in json_leaves(item))]
    if isinstance(value, list):
        return [leaf for item in value for leaf in json_leaves(item)]
    return [value]


def normalised(response: httpx.Response, order: str) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    drop = {"proposal_id", "trace_id", "execution", "audit"}  # ids and chain refs differ per record
    out = {k: v for k, v in body.items() if k not in drop}
    text = re.sub(re.escape(order), "<order>", repr(out))
    execution = body.get("execution") or {}
    error = execution.get("error") or {}
    return {
        "status": response.status_code,
        "content_type": response.headers["content-type"],
        "body": text,
        "error": re.sub(re.escape(order), "<order>", repr(error)),
        "execution_status": execution.get("status"),
    }


async def test_another_tenants_order_looks_exactly_like_a_missing_one_for_credits(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    elsewhere = await client.post(
        "/v1/proposals", json=credit(key="iso-1", order="O-55291"), headers=GLOBEX
    )
    missing = await client.post(
        "/v1/proposals", json=credit(key="iso-2", order="O-99999"), headers=GLOBEX
    )
    problem = assert_problem(elsewhere, 409, "precondition_failed", "PRECONDITION")
    assert "not found" in problem["reason"]
    assert normalised(elsewhere, "O-55291") == normalised(missing, "O-99999")
    assert demo.credits == []


async def test_another_tenants_order_looks_exactly_like_a_missing_one_for_lookups(
    client: httpx.AsyncClient,
) -> None:
    elsewhere = await client.post(
        "/v1/proposals",
        json={"tool": "lookup_order", "args": {"order_id": "O-55291"}},
        headers=GLOBEX,
    )
    missing = await client.post(
        "/v1/proposals",
        json={"tool": "lookup_order", "args": {"order_id": "O-99999"}},
        headers=GLOBEX,
    )
    assert elsewhere.status_code >= 400, elsewhere.text
    # No result, and none of the order's values anywhere in the answer (compared as JSON values:
    # a bare "120" can be part of a random id or hash).
    assert (elsewhere.json().get("execution") or {}).get("result") is None
    order_values = {"C-10429", 120, "120.00", "USD"}  # 120 matches 120.0 too
    assert not order_values & set(json_leaves(elsewhere.json())), elsewhere.text
    assert normalised(elsewhere, "O-55291") == normalised(missing, "O-99999")
    own = await client.post(
        "/v1/proposals",
        json={"tool": "lookup_order", "args": {"order_id": "O-80001"}},
        headers=GLOBEX,
    )
    assert own.status_code == 200
    assert own.json()["execution"]["result"]["currency"] == "EUR"


async def test_a_tenant_cannot_be_chosen_in_the_body(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    body = {**credit(key="smuggle", order="O-55291"), "tenant": "acme"}
    response = await client.post("/v1/proposals", json=body, headers=GLOBEX)
    assert_problem(response, 422, "schema_invalid", "SCHEMA")
    args_smuggle = credit(key="smuggle-2", order="O-55291")
    args_smuggle["args"]["tenant"] = "acme"
    response = await client.post("/v1/proposals", json=args_smuggle, headers=GLOBEX)
    assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert demo.credits == []
