"""The failure taxonomy of docs/api.md, reached over real HTTP against the demo (and a fake).

Each test checks what a caller sees (status, problem+json members, headers) and, through the
backend's own records, that nothing ran when the answer says nothing ran.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx
import jwt
import pytest

from adapters.demo import DemoBackend
from broker.auth import mint_token
from broker.config import BrokerConfig
from broker.plugins import Backend
from tests.conftest import ADMIN, BILLING, GLOBEX, SCHEDULING, Clock, credit, ticket
from tests.fakes import (
    FAKE,
    SIGNING_KEY,
    FakeBackend,
    SleepRecorder,
    assert_decision_fields,
    assert_problem,
    fake_config,
    fake_tools,
    pin_to_midday,
    retry_after,
    serve_demo,
    start_demo,
)

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


@pytest.fixture(scope="module")
def shared(ingress: str) -> Iterator[tuple[str, DemoBackend]]:
    """One demo broker for the tests below that only meet rejections (nothing runs on it)."""
    with serve_demo(ingress=ingress) as started:
        yield started


@pytest.fixture
async def shared_client(shared: tuple[str, DemoBackend]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=shared[0], timeout=10) as http:
        yield http


@pytest.fixture
def shared_demo(shared: tuple[str, DemoBackend]) -> DemoBackend:
    return shared[1]


async def propose(
    client: httpx.AsyncClient, body: Any, headers: Mapping[str, str]
) -> httpx.Response:
    return await client.post("/v1/proposals", json=body, headers=dict(headers))


# -- SCHEMA ----------------------------------------------------------------------------------------


async def test_schema_invalid_lists_every_error_as_a_json_pointer(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    body = credit()
    body["args"] = {"order_id": "O-55291", "amount": "25", "currency": "GBP"}
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    paths = sorted(error["path"] for error in problem["errors"])
    assert paths == ["/args/amount", "/args/currency"]
    assert all(error["message"] for error in problem["errors"])
    assert problem["remediation"]
    assert shared_demo.credits == []


async def test_schema_invalid_points_at_missing_and_unexpected_arguments(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    body = credit()
    body["args"] = {"order_id": "O-55291", "note": "x"}
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    paths = {error["path"] for error in problem["errors"]}
    assert paths == {"/args/amount", "/args/currency", "/args/note"}
    assert shared_demo.credits == []


@pytest.mark.parametrize(
    ("args", "pointer"),
    [
        ({"order_id": "55291", "amount": 25, "currency": "USD"}, "/args/order_id"),
        ({"order_id": "O-55291", "amount": 0, "currency": "USD"}, "/args/amount"),
        ({"order_id": "O-55291", "amount": -5, "currency": "USD"}, "/args/amount"),
        ({"order_id": "O-55291", "amount": 1000.01, "currency": "USD"}, "/args/amount"),
        ({"order_id": "O-55291", "amount": True, "currency": "USD"}, "/args/amount"),
        ({"order_id": "O-55291", "amount": 25, "currency": "usd"}, "/args/currency"),
        ({"order_id": ["O-55291"], "amount": 25, "currency": "USD"}, "/args/order_id"),
    ],
)
async def test_schema_invalid_for_each_bad_argument(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend, args: dict[str, Any], pointer: str
) -> None:
    body = credit()
    body["args"] = args
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == [pointer]
    assert shared_demo.credits == []


async def test_unknown_tool(shared_client: httpx.AsyncClient) -> None:
    response = await propose(shared_client, {"tool": "delete_everything", "args": {}}, BILLING)
    problem = assert_problem(response, 422, "unknown_tool", "SCHEMA")
    assert problem["tool"] == "delete_everything"
    assert problem["remediation"]


async def test_unknown_precondition_points_at_its_index(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    body = credit()
    body["preconditions"] = ["order_paid", "moon_is_full", "within_return_window", "stars_align"]
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 422, "unknown_precondition", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == [
        "/preconditions/1",
        "/preconditions/3",
    ]
    assert shared_demo.credits == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("tenant", "globex"), ("approved", True), ("principal", {"admin": True})],
)
async def test_unknown_top_level_field_is_refused_with_a_pointer(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend, field: str, value: Any
) -> None:
    body = credit()
    body[field] = value
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == [f"/{field}"]
    assert shared_demo.credits == []


@pytest.mark.parametrize(
    "content", [b"not json", b"{", b'{"tool": "issue_credit",}', b"\x00\x01", b"{'tool': 1}"]
)
async def test_a_body_that_is_not_json_is_400(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend, content: bytes
) -> None:
    response = await shared_client.post(
        "/v1/proposals",
        content=content,
        headers={**BILLING, "Content-Type": "application/json"},
    )
    assert_problem(response, 400, "malformed_request", "SCHEMA")
    assert shared_demo.credits == []


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"tool": 5, "args": {}}, "/tool"),
        ({"tool": "lookup_order", "args": []}, "/args"),
        ({"tool": "lookup_order", "args": "O-55291"}, "/args"),
        ({"tool": "lookup_order"}, "/args"),
        ({"args": {"order_id": "O-55291"}}, "/tool"),
        ({"tool": "lookup_order", "args": {}, "preconditions": "order_paid"}, "/preconditions"),
        ({"tool": "lookup_order", "args": {}, "preconditions": [1]}, "/preconditions/0"),
        ({"tool": "lookup_order", "args": {}, "dry_run": "yes"}, "/dry_run"),
        ({"tool": "lookup_order", "args": {}, "idempotency_key": 5}, "/idempotency_key"),
        ({"tool": "lookup_order", "args": {}, "trace_id": ["x"]}, "/trace_id"),
    ],
)
async def test_wrong_types_are_422_with_a_pointer(
    shared_client: httpx.AsyncClient, body: Any, pointer: str
) -> None:
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == [pointer]


@pytest.mark.parametrize("content", [b"[]", b'"issue_credit"', b"25", b"null", b"true"])
async def test_a_json_body_that_is_not_an_object_is_422(
    shared_client: httpx.AsyncClient, content: bytes
) -> None:
    response = await shared_client.post(
        "/v1/proposals", content=content, headers={**BILLING, "Content-Type": "application/json"}
    )
    problem = assert_problem(response, 422, "schema_invalid", "SCHEMA")
    assert [error["path"] for error in problem["errors"]] == [""]


# -- AUTHZ -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Bearer"},
        {"Authorization": "demo-billing-token"},
        {"Authorization": "Basic ZGVtbzpkZW1v"},
        {"Authorization": "Bearer a.b.c"},
    ],
    ids=["none", "unknown", "empty", "no-scheme", "basic", "garbage-jwt"],
)
async def test_unauthenticated_is_401_with_www_authenticate(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend, headers: dict[str, str]
) -> None:
    response = await propose(shared_client, credit(), headers)
    assert_problem(response, 401, "unauthenticated", "AUTHZ")
    assert response.headers["www-authenticate"].lower().startswith("bearer")
    assert shared_demo.credits == []


async def test_a_minted_token_expires_by_the_injected_clock(
    make_broker: MakeBroker, demo_config: BrokerConfig, clock: Clock
) -> None:
    url, backends = make_broker()
    token = mint_token(
        demo_config,
        SIGNING_KEY.encode(),
        route="billing_help",
        tenant="acme",
        ttl_s=60,
        now=clock.now,
    )
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url) as client:
        ok = await propose(
            client, {"tool": "lookup_order", "args": {"order_id": "O-55291"}}, headers
        )
        assert ok.status_code == 200, ok.text
        clock.advance(3600)
        response = await propose(client, credit(), headers)
    assert_problem(response, 401, "token_expired", "AUTHZ")
    assert response.headers["www-authenticate"].lower().startswith("bearer")
    demo = backends["demo"]
    assert isinstance(demo, DemoBackend)
    assert demo.credits == []


async def test_a_token_signed_for_a_tenant_the_route_does_not_serve_is_403_tenant_mismatch(
    make_broker: MakeBroker, clock: Clock
) -> None:
    url, _ = make_broker()
    now = int(clock.now)
    claims = {
        "iss": "action-broker",
        "aud": "action-broker",
        "sub": "route-scheduling@bots",
        "route": "scheduling",
        "tenant": "globex",
        "iat": now,
        "exp": now + 600,
    }
    token = jwt.encode(claims, SIGNING_KEY, algorithm="HS256")
    async with httpx.AsyncClient(base_url=url) as client:
        response = await propose(
            client,
            {"tool": "lookup_order", "args": {"order_id": "O-80001"}},
            {"Authorization": f"Bearer {token}"},
        )
    assert_problem(response, 403, "tenant_mismatch", "AUTHZ")


async def test_a_route_calling_a_tool_it_may_not_use_is_403_tool_not_allowed(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    response = await propose(shared_client, credit(), SCHEDULING)
    problem = assert_problem(response, 403, "tool_not_allowed", "AUTHZ")
    assert problem["remediation"]
    assert shared_demo.credits == []


async def test_an_admin_token_cannot_propose(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    response = await propose(shared_client, credit(), ADMIN)
    assert response.status_code == 403, response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["category"] == "AUTHZ"
    assert shared_demo.credits == []


# -- PRECONDITION ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason_says", "next_step", "effects"),
    [
        (ticket(customer="C-20001"), ("C-20001", "not verified"), "ASK_FOR_MORE:", "tickets"),
        (
            credit(order="O-60000", key="k-60000"),
            ("O-60000", "not paid"),
            "ASK_FOR_MORE:",
            "credits",
        ),
        (credit(order="O-70000", key="k-70000"), ("O-70000",), "ESCALATE:", "credits"),
    ],
    ids=["unverified-customer", "unpaid-order", "outside-return-window"],
)
async def test_a_failed_precondition_says_which_and_what_to_do_next(
    shared_client: httpx.AsyncClient,
    shared_demo: DemoBackend,
    body: dict[str, Any],
    reason_says: tuple[str, ...],
    next_step: str,
    effects: str,
) -> None:
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 409, "precondition_failed", "PRECONDITION")
    assert all(fragment in problem["reason"] for fragment in reason_says), problem["reason"]
    assert problem["remediation"].startswith(next_step)
    assert getattr(shared_demo, effects) == []


async def test_declared_preconditions_run_even_when_the_model_lists_none(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    body = credit(order="O-60000", key="k-silent")
    body["preconditions"] = []
    response = await propose(shared_client, body, BILLING)
    assert_problem(response, 409, "precondition_failed", "PRECONDITION")
    assert shared_demo.credits == []


async def test_budget_exceeded_after_500_in_credits(make_broker: MakeBroker, clock: Clock) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(20):
            ok = await propose(client, credit(key=f"budget-{i}", amount=25), BILLING)
            assert ok.status_code == 200, (i, ok.text)
        clock.advance(61)  # out of the rate limit's window: only the budget can refuse now
        response = await propose(client, credit(key="budget-20", amount=25), BILLING)
        problem = assert_problem(response, 429, "budget_exceeded", "PRECONDITION")
        assert problem["remediation"]
        wait = retry_after(response)
        assert wait <= 43_200 + 1  # the daily window ends at midnight UTC
        small = await propose(client, credit(key="budget-21", amount=0.01), BILLING)
        assert_problem(small, 429, "budget_exceeded", "PRECONDITION")
        assert sum(c["amount"] for c in demo.credits) == 500
        assert len(demo.credits) == 20
        clock.advance(wait)  # the next daily window
        fresh = await propose(client, credit(key="budget-22", amount=25), BILLING)
        assert fresh.status_code == 200, fresh.text
    assert len(demo.credits) == 21


async def test_the_budget_is_exact_for_fractional_amounts(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(2):
            ok = await propose(client, credit(key=f"third-{i}", amount=166.67), BILLING)
            assert ok.status_code == 200, ok.text
        over = await propose(client, credit(key="third-2", amount=166.67), BILLING)
        assert_problem(over, 429, "budget_exceeded", "PRECONDITION")
        rest = await propose(client, credit(key="rest", amount=166.66), BILLING)
        assert rest.status_code == 200, rest.text
    assert round(sum(c["amount"] for c in demo.credits), 6) == 500


@pytest.mark.parametrize("amount", [1e-7, 4e-7, 2.5e-6])
async def test_amounts_below_a_micro_unit_cannot_slip_past_a_spent_budget(
    make_broker: MakeBroker, clock: Clock, amount: float
) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        spent = await propose(client, credit(key="all", amount=500), BILLING)
        assert spent.status_code == 200, spent.text
        tiny = await propose(client, credit(key="tiny", amount=amount), BILLING)
        assert_problem(tiny, 429, "budget_exceeded", "PRECONDITION")
    assert sum(c["amount"] for c in demo.credits) <= 500


async def test_the_budget_is_per_tenant(make_broker: MakeBroker, clock: Clock) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        big = await propose(client, credit(key="acme-500", amount=500), BILLING)
        assert big.status_code == 200, big.text
        globex = credit(key="globex-1", amount=300, order="O-80001")
        globex["args"]["currency"] = "EUR"
        other = await propose(client, globex, GLOBEX)
        assert other.status_code == 200, other.text
    assert [c["tenant"] for c in demo.credits] == ["acme", "globex"]


async def test_rate_limited_after_20_calls_in_60_seconds_then_free_again(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(20):
            ok = await propose(client, credit(key=f"rate-{i}", amount=1), BILLING)
            assert ok.status_code == 200, (i, ok.text)
            clock.advance(1)
        limited = await propose(client, credit(key="rate-20", amount=1), BILLING)
        problem = assert_problem(limited, 429, "rate_limited", "PRECONDITION")
        assert problem["remediation"]
        wait = retry_after(limited)
        assert 1 <= wait <= 60
        assert len(demo.credits) == 20
        clock.advance(wait - 1)
        early = await propose(client, credit(key="rate-20", amount=1), BILLING)
        assert_problem(early, 429, "rate_limited", "PRECONDITION")
        clock.advance(1)  # waiting exactly Retry-After is enough
        again = await propose(client, credit(key="rate-20", amount=1), BILLING)
        assert again.status_code == 200, again.text
        clock.advance(61)
        for i in range(19):
            more = await propose(client, credit(key=f"rate-more-{i}", amount=1), BILLING)
            assert more.status_code == 200, (i, more.text)
    assert len(demo.credits) == 40


async def test_rejected_proposals_spend_no_budget_or_rate(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(25):
            refused = await propose(client, credit(key=f"unpaid-{i}", order="O-60000"), BILLING)
            assert refused.status_code == 409, refused.text
        for i in range(20):
            ok = await propose(client, credit(key=f"paid-{i}", amount=25), BILLING)
            assert ok.status_code == 200, (i, ok.text)
    assert len(demo.credits) == 20


# -- IDEMPOTENCY -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [credit(), ticket()], ids=["issue_credit", "create_support_ticket"]
)
async def test_write_tools_need_an_idempotency_key(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend, body: dict[str, Any]
) -> None:
    body = dict(body)
    del body["idempotency_key"]
    response = await propose(shared_client, body, BILLING)
    problem = assert_problem(response, 400, "idempotency_key_missing", "IDEMPOTENCY")
    assert [error["path"] for error in problem["errors"]] == ["/idempotency_key"]
    assert problem["remediation"]
    assert shared_demo.credits == [] and shared_demo.tickets == []


async def test_lookup_order_needs_no_idempotency_key(client: httpx.AsyncClient) -> None:
    response = await propose(
        client, {"tool": "lookup_order", "args": {"order_id": "O-55291"}}, BILLING
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["decision"] == "approved"
    assert body["execution"]["status"] == "succeeded"
    assert body["execution"]["result"]["order_id"] == "O-55291"


@pytest.mark.parametrize(
    "key",
    ["", "x" * 256, "clé-ünicode", "línea", "a\nb", "tab\there", "nul\x00", "del\x7f"],
    ids=["empty", "256-chars", "non-ascii", "non-ascii-2", "newline", "tab", "nul", "del"],
)
async def test_invalid_idempotency_keys_are_400(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend, key: str
) -> None:
    response = await propose(shared_client, credit(key=key), BILLING)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["category"] == "IDEMPOTENCY"
    assert problem["code"].startswith("idempotency_key_")
    assert [error["path"] for error in problem["errors"]] == ["/idempotency_key"]
    assert shared_demo.credits == []


async def test_a_non_ascii_header_key_is_400(
    shared_client: httpx.AsyncClient, shared_demo: DemoBackend
) -> None:
    body = credit()
    del body["idempotency_key"]
    headers = {**BILLING, "Idempotency-Key": "cl\u00e9".encode()}
    response = await shared_client.post("/v1/proposals", json=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["category"] == "IDEMPOTENCY"
    assert shared_demo.credits == []


async def test_keys_of_255_printable_characters_are_accepted(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    key = ("~ !" * 100)[:255]
    response = await propose(client, credit(key=key), BILLING)
    assert response.status_code == 200, response.text
    assert len(demo.credits) == 1


async def test_header_and_body_keys_must_agree(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    response = await propose(
        client, credit(key="body-key"), {**BILLING, "Idempotency-Key": "other"}
    )
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["category"] == "IDEMPOTENCY"
    assert response.headers["content-type"].startswith("application/problem+json")
    assert demo.credits == []
    same = await propose(client, credit(key="same-key"), {**BILLING, "Idempotency-Key": "same-key"})
    assert same.status_code == 200, same.text


async def test_the_header_alone_carries_the_key(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    body = credit()
    del body["idempotency_key"]
    headers = {**BILLING, "Idempotency-Key": "header-only"}
    first = await propose(client, body, headers)
    assert first.status_code == 200, first.text
    second = await propose(client, body, headers)
    assert second.status_code == 200, second.text
    assert second.headers.get("idempotent-replayed") == "true"
    assert len(demo.credits) == 1


# -- PROVIDER and TIMEOUT (fake backend) -------------------------------------------------------------


@pytest.fixture
def fake_broker(make_broker: MakeBroker) -> tuple[str, FakeBackend]:
    fake = FakeBackend()
    url, _ = make_broker(fake_config(), backends={"fake": fake}, sleep=SleepRecorder())
    return url, fake


@pytest.mark.parametrize(
    ("tool", "operation", "status", "code", "category"),
    [
        ("definite", "definite", 502, "provider_error", "PROVIDER"),
        ("unavailable", "unavailable", 503, "provider_unavailable", "PROVIDER"),
        ("crash", "crash", 502, "provider_error", "PROVIDER"),
        ("not_a_dict", "not_a_dict", 502, "provider_error", "PROVIDER"),
        ("hang", "hang", 504, "timeout", "TIMEOUT"),
    ],
)
async def test_failed_executions_carry_category_code_and_status(
    fake_broker: tuple[str, FakeBackend],
    tool: str,
    operation: str,
    status: int,
    code: str,
    category: str,
) -> None:
    url, fake = fake_broker
    async with httpx.AsyncClient(base_url=url) as client:
        response = await propose(
            client, {"tool": tool, "args": {"n": 1}, "idempotency_key": f"k-{tool}"}, FAKE
        )
    problem = assert_problem(response, status, code, category)
    assert_decision_fields(problem, decision="approved")
    execution = problem["execution"]
    assert execution["status"] == "failed"
    assert execution["error"]["category"] == category
    assert execution["error"]["code"] == code
    assert execution["error"]["message"]
    assert execution["attempts"] == 1
    assert problem["remediation"]
    assert fake.count(operation) == 1
    assert "secret internals" not in response.text
    assert "Traceback" not in response.text


async def test_a_transient_fault_of_an_idempotent_tool_is_retried_within_one_proposal(
    make_broker: MakeBroker,
) -> None:
    fake = FakeBackend(transient_failures=2)
    sleep = SleepRecorder()
    url, _ = make_broker(fake_config(), backends={"fake": fake}, sleep=sleep)
    async with httpx.AsyncClient(base_url=url) as client:
        response = await propose(
            client, {"tool": "transient_idem", "args": {"n": 1}, "idempotency_key": "k"}, FAKE
        )
    assert response.status_code == 200, response.text
    assert response.json()["execution"]["attempts"] == 3
    assert fake.count("transient") == 3
    assert len(sleep.calls) == 2


async def test_a_transient_fault_of_a_non_idempotent_tool_is_not_retried(
    make_broker: MakeBroker,
) -> None:
    fake = FakeBackend(transient_failures=5)
    url, _ = make_broker(fake_config(), backends={"fake": fake}, sleep=SleepRecorder())
    async with httpx.AsyncClient(base_url=url) as client:
        response = await propose(
            client, {"tool": "transient", "args": {"n": 1}, "idempotency_key": "k"}, FAKE
        )
    problem = assert_problem(response, 502, "provider_error", "PROVIDER")
    assert problem["execution"]["attempts"] == 1
    assert problem["remediation"].startswith("RETRY")
    assert fake.count("transient") == 1


@pytest.mark.parametrize(
    ("mode", "status", "code"),
    [("crash", 502, "provider_error"), ("hang", 503, "provider_unavailable")],
)
async def test_a_broken_verifier_fails_closed(
    make_broker: MakeBroker, mode: str, status: int, code: str
) -> None:
    """A check that cannot be made is not a failed precondition: the agent is not told to fix
    input that may be right (a hang is an outage to retry later, a crash a fault)."""
    fake = FakeBackend()
    fake.gate_mode = mode
    url, _ = make_broker(fake_config(), backends={"fake": fake}, sleep=SleepRecorder())
    async with httpx.AsyncClient(base_url=url) as client:
        response = await propose(
            client, {"tool": "gated", "args": {"n": 1}, "idempotency_key": "k"}, FAKE
        )
    problem = assert_problem(response, status, code, "PROVIDER")
    assert problem["remediation"]
    assert ("retry-after" in response.headers) is (code == "provider_unavailable")
    assert "secret internals" not in response.text
    assert fake.count("ok") == 0


ONE_CALL = {"one_call": {"kind": "count", "limit": 1, "window_s": 86_400, "per": ["tenant"]}}


@pytest.mark.parametrize(
    ("tool", "status", "refunded"),
    [("definite", 502, True), ("transient", 502, True), ("hang", 504, False)],
    ids=["definite-refunds", "transient-refunds", "unknown-outcome-keeps"],
)
async def test_a_failed_execution_gives_its_budget_back_unless_it_may_have_happened(
    make_broker: MakeBroker, clock: Clock, tool: str, status: int, refunded: bool
) -> None:
    pin_to_midday(clock)
    tools = fake_tools()
    for name in ("ok", tool):
        tools[name]["budgets"] = ["one_call"]
    fake = FakeBackend(transient_failures=None)
    config = fake_config(tools, budgets=ONE_CALL)
    url, _ = make_broker(config, backends={"fake": fake}, sleep=SleepRecorder())
    async with httpx.AsyncClient(base_url=url) as client:
        failed = await propose(
            client, {"tool": tool, "args": {"n": 1}, "idempotency_key": "a"}, FAKE
        )
        assert failed.status_code == status, failed.text
        after = await propose(
            client, {"tool": "ok", "args": {"n": 1}, "idempotency_key": "b"}, FAKE
        )
    if refunded:
        assert after.status_code == 200, after.text
        assert fake.count("ok") == 1
    else:
        assert_problem(after, 429, "budget_exceeded", "PRECONDITION")
        assert fake.count("ok") == 0


# -- every rejection is a problem with the decision fields -------------------------------------------

_REJECTIONS: list[tuple[str, dict[str, str], Any]] = [
    (
        "schema_invalid",
        BILLING,
        {**credit(), "args": {"order_id": "x", "amount": 1, "currency": "USD"}},
    ),
    ("unknown_tool", BILLING, {"tool": "nope", "args": {}}),
    ("unknown_precondition", BILLING, {**credit(), "preconditions": ["nope"]}),
    ("unknown_field", BILLING, {**credit(), "tenant": "globex"}),
    ("wrong_type", BILLING, {"tool": 5, "args": {}}),
    ("not_json", BILLING, b"not json"),
    ("unauthenticated", {}, credit()),
    ("tool_not_allowed", SCHEDULING, credit()),
    ("admin", ADMIN, credit()),
    ("precondition_failed", BILLING, credit(order="O-60000")),
    (
        "idempotency_key_missing",
        BILLING,
        {k: v for k, v in credit().items() if k != "idempotency_key"},
    ),
    ("idempotency_key_invalid", BILLING, credit(key="")),
]


@pytest.mark.parametrize(
    ("headers", "body"), [(h, b) for _, h, b in _REJECTIONS], ids=[n for n, _, _ in _REJECTIONS]
)
async def test_every_rejection_is_problem_json_with_the_decision_fields(
    shared_client: httpx.AsyncClient, headers: dict[str, str], body: Any
) -> None:
    if isinstance(body, bytes):
        response = await shared_client.post(
            "/v1/proposals", content=body, headers={**headers, "Content-Type": "application/json"}
        )
    else:
        response = await propose(shared_client, body, headers)
    assert response.status_code >= 400
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    for member in ("type", "title", "status", "detail"):
        assert member in problem
    assert problem["status"] == response.status_code
    assert_decision_fields(problem)
    assert problem["category"] and problem["code"] and problem["reason"]
