"""Every idempotency case of docs/api.md, over real HTTP; the backends' own records say what ran."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from adapters.demo import DemoBackend
from broker.plugins import Backend
from tests.conftest import BILLING, GLOBEX, SCHEDULING, Clock, credit, ticket
from tests.fakes import (
    FAKE,
    FakeBackend,
    GatedBackend,
    SleepRecorder,
    assert_problem,
    demo_config_with,
    fake_config,
    pin_to_midday,
    retry_after,
    start_demo,
)

MakeBroker = Callable[..., tuple[str, Mapping[str, Backend]]]


async def propose(
    client: httpx.AsyncClient, body: Any, headers: Mapping[str, str]
) -> httpx.Response:
    return await client.post("/v1/proposals", json=body, headers=dict(headers))


def assert_replay_of(original: httpx.Response, replay: httpx.Response) -> None:
    """Same status, same body except ``replayed: true``, and the ``Idempotent-Replayed`` header."""
    assert replay.status_code == original.status_code, replay.text
    assert replay.headers.get("idempotent-replayed") == "true"
    assert "idempotent-replayed" not in original.headers
    first, again = original.json(), replay.json()
    assert first["replayed"] is False
    assert again["replayed"] is True
    assert {**again, "replayed": False} == first
    assert replay.headers["content-type"] == original.headers["content-type"]


@pytest.fixture
def fake_broker(make_broker: MakeBroker) -> Callable[..., tuple[str, FakeBackend]]:
    def start(**options: Any) -> tuple[str, FakeBackend]:
        fake = FakeBackend(**options)
        url, _ = make_broker(fake_config(), backends={"fake": fake}, sleep=SleepRecorder())
        return url, fake

    return start


# -- replay ----------------------------------------------------------------------------------------


async def test_a_replay_returns_the_stored_answer_and_does_not_execute_again(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await propose(client, credit(), BILLING)
    assert first.status_code == 200, first.text
    assert first.json()["execution"]["status"] == "succeeded"
    for _ in range(3):
        again = await propose(client, credit(), BILLING)
        assert_replay_of(first, again)
    assert len(demo.credits) == 1


async def test_a_replay_of_a_ticket_creates_no_second_ticket(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await propose(client, ticket(), BILLING)
    assert first.status_code == 200, first.text
    again = await propose(client, ticket(), BILLING)
    assert_replay_of(first, again)
    assert len(demo.tickets) == 1


@pytest.mark.parametrize(
    "raw",
    [
        b'{"idempotency_key":"canon","tool":"issue_credit",'
        b'"args":{"currency":"USD","amount":25.0,"order_id":"O-55291"}}',
        b'{\n  "tool" : "issue_credit" ,\n\t"args" : { "amount" : 2.5e1 , "currency" : "USD",'
        b' "order_id" : "O-55291" } , "idempotency_key" : "canon" }\n',
        b'{"tool":"issue_credit","args":{"order_id":"O-55291","currency":"USD","amount":25.000},'
        b'"idempotency_key":"canon","preconditions":["within_return_window"]}',
    ],
    ids=["reordered-25.0", "whitespace-2.5e1", "25.000-other-preconditions"],
)
async def test_semantically_equal_args_replay(
    client: httpx.AsyncClient, demo: DemoBackend, raw: bytes
) -> None:
    first = await propose(client, credit(key="canon", amount=25, order="O-55291"), BILLING)
    assert first.status_code == 200, first.text
    again = await client.post(
        "/v1/proposals", content=raw, headers={**BILLING, "Content-Type": "application/json"}
    )
    assert_replay_of(first, again)
    assert len(demo.credits) == 1


async def test_the_header_key_and_the_body_key_are_the_same_key(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    first = await propose(client, credit(key="both-ways"), BILLING)
    assert first.status_code == 200, first.text
    body = credit()
    del body["idempotency_key"]
    again = await propose(client, body, {**BILLING, "Idempotency-Key": "both-ways"})
    assert_replay_of(first, again)
    assert len(demo.credits) == 1


# -- reuse -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changed",
    [
        credit(key="reused", amount=30),
        credit(key="reused", order="O-70000"),
        {**ticket(key="reused")},
    ],
    ids=["other-amount", "other-order", "other-tool"],
)
async def test_same_key_other_args_is_422_and_the_stored_result_is_untouched(
    client: httpx.AsyncClient, demo: DemoBackend, changed: dict[str, Any]
) -> None:
    first = await propose(client, credit(key="reused"), BILLING)
    assert first.status_code == 200, first.text
    conflict = await propose(client, changed, BILLING)
    problem = assert_problem(conflict, 422, "idempotency_key_reused", "IDEMPOTENCY")
    assert problem["remediation"]
    assert "idempotent-replayed" not in conflict.headers
    again = await propose(client, credit(key="reused"), BILLING)
    assert_replay_of(first, again)
    assert len(demo.credits) == 1
    assert demo.tickets == []


# -- in progress -----------------------------------------------------------------------------------


async def test_same_key_while_the_first_still_runs_is_409_in_progress(
    make_broker: MakeBroker,
) -> None:
    demo = DemoBackend()
    gated = GatedBackend(demo, {"issue_credit"})
    url, _ = make_broker(backends={"demo": gated})
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        running = asyncio.create_task(propose(client, credit(key="slow"), BILLING))
        try:
            assert await asyncio.to_thread(gated.entered.wait, 5)
            busy = await propose(client, credit(key="slow"), BILLING)
            problem = assert_problem(busy, 409, "idempotency_in_progress", "IDEMPOTENCY")
            assert problem["remediation"]
            assert retry_after(busy) >= 1
            other_args = await propose(client, credit(key="slow", amount=30), BILLING)
            assert_problem(other_args, 422, "idempotency_key_reused", "IDEMPOTENCY")
        finally:
            gated.release.set()
        first = await running
        assert first.status_code == 200, first.text
        again = await propose(client, credit(key="slow"), BILLING)
    assert_replay_of(first, again)
    assert len(demo.credits) == 1


async def test_in_progress_with_real_latency(make_broker: MakeBroker) -> None:
    url, demo = start_demo(make_broker, demo=DemoBackend(latency_s=0.3))
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        answers = await asyncio.gather(
            propose(client, credit(key="latency"), BILLING),
            propose(client, credit(key="latency"), BILLING),
        )
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses in ([200, 200], [200, 409]), [a.text for a in answers]
    for answer in answers:
        if answer.status_code == 409:
            assert answer.json()["code"] == "idempotency_in_progress"
            retry_after(answer)
    assert len(demo.credits) == 1


# -- failures --------------------------------------------------------------------------------------


async def test_a_definite_provider_failure_is_stored_and_replayed(
    fake_broker: Callable[..., tuple[str, FakeBackend]],
) -> None:
    url, fake = fake_broker()
    body = {"tool": "definite", "args": {"n": 1}, "idempotency_key": "definite-1"}
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, body, FAKE)
        assert_problem(first, 502, "provider_error", "PROVIDER")
        again = await propose(client, body, FAKE)
    assert_replay_of(first, again)
    assert fake.count("definite") == 1


async def test_a_transient_failure_releases_the_key(
    fake_broker: Callable[..., tuple[str, FakeBackend]],
) -> None:
    url, fake = fake_broker(transient_failures=1)
    body = {"tool": "transient", "args": {"n": 1}, "idempotency_key": "transient-1"}
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, body, FAKE)
        problem = assert_problem(first, 502, "provider_error", "PROVIDER")
        assert problem["remediation"].startswith("RETRY")
        retry = await propose(client, body, FAKE)
        assert retry.status_code == 200, retry.text
        assert retry.json()["replayed"] is False
        assert "idempotent-replayed" not in retry.headers
        again = await propose(client, body, FAKE)
    assert_replay_of(retry, again)
    assert fake.count("transient") == 2


@pytest.mark.parametrize(
    ("tool", "counted", "status", "code", "category"),
    [
        ("unavailable", "unavailable", 503, "provider_unavailable", "PROVIDER"),
        ("hang_idem", "hang", 504, "timeout", "TIMEOUT"),  # idempotent: running again is safe
    ],
    ids=["backend-unavailable", "idempotent-tool-timed-out"],
)
async def test_an_unavailable_backend_or_an_idempotent_timeout_releases_the_key(
    fake_broker: Callable[..., tuple[str, FakeBackend]],
    tool: str,
    counted: str,
    status: int,
    code: str,
    category: str,
) -> None:
    url, fake = fake_broker()
    body = {"tool": tool, "args": {"n": 1}, "idempotency_key": f"released-{tool}"}
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, body, FAKE)
        assert_problem(first, status, code, category)
        second = await propose(client, body, FAKE)
        assert_problem(second, status, code, category)
        assert "idempotent-replayed" not in second.headers
    assert fake.count(counted) == 2


async def test_a_timeout_of_a_non_idempotent_tool_leaves_the_outcome_unknown(
    fake_broker: Callable[..., tuple[str, FakeBackend]],
) -> None:
    url, fake = fake_broker()
    body = {"tool": "hang", "args": {"n": 1}, "idempotency_key": "hang-1"}
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, body, FAKE)
        assert_problem(first, 504, "timeout", "TIMEOUT")
        assert first.json()["remediation"].startswith("ESCALATE")
        for _ in range(2):
            retry = await propose(client, body, FAKE)
            problem = assert_problem(retry, 409, "outcome_unknown", "IDEMPOTENCY")
            assert problem["remediation"]
    assert fake.count("hang") == 1


# -- scope and lifetime ----------------------------------------------------------------------------


async def test_a_key_is_scoped_to_the_tenant(client: httpx.AsyncClient, demo: DemoBackend) -> None:
    acme = await propose(client, credit(key="shared-key"), BILLING)
    assert acme.status_code == 200, acme.text
    globex_body = credit(key="shared-key", order="O-80001")
    globex_body["args"]["currency"] = "EUR"
    globex = await propose(client, globex_body, GLOBEX)
    assert globex.status_code == 200, globex.text
    assert globex.json()["replayed"] is False
    assert [c["tenant"] for c in demo.credits] == ["acme", "globex"]


async def test_a_key_is_scoped_to_the_route(make_broker: MakeBroker) -> None:
    config = demo_config_with(routes__scheduling__tools=["lookup_order", "issue_credit"])
    url, demo = start_demo(make_broker, config)
    async with httpx.AsyncClient(base_url=url) as client:
        billing = await propose(client, credit(key="route-key"), BILLING)
        assert billing.status_code == 200, billing.text
        scheduling = await propose(client, credit(key="route-key"), SCHEDULING)
        assert scheduling.status_code == 200, scheduling.text
        assert scheduling.json()["replayed"] is False
        assert "idempotent-replayed" not in scheduling.headers
    assert len(demo.credits) == 2


async def test_keys_expire_after_the_default_ttl_of_24_hours(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, credit(key="ttl"), BILLING)
        assert first.status_code == 200, first.text
        clock.advance(86_400 - 60)
        still = await propose(client, credit(key="ttl"), BILLING)
        assert_replay_of(first, still)
        clock.advance(61)
        later = await propose(client, credit(key="ttl"), BILLING)
        assert later.status_code == 200, later.text
        assert later.json()["replayed"] is False
        assert (
            later.json()["execution"]["result"]["credit_id"]
            != (first.json()["execution"]["result"]["credit_id"])
        )
    assert len(demo.credits) == 2


async def test_keys_live_for_the_configured_ttl(make_broker: MakeBroker, clock: Clock) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker, demo_config_with(service__idempotency_ttl_s=120))
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, credit(key="short-ttl"), BILLING)
        assert first.status_code == 200, first.text
        clock.advance(119)
        assert_replay_of(first, await propose(client, credit(key="short-ttl"), BILLING))
        clock.advance(2)
        later = await propose(client, credit(key="short-ttl"), BILLING)
        assert later.status_code == 200, later.text
        assert later.json()["replayed"] is False
    assert len(demo.credits) == 2


# -- the world changed -----------------------------------------------------------------------------


async def test_a_retry_whose_precondition_now_fails_still_replays_the_original_success(
    fake_broker: Callable[..., tuple[str, FakeBackend]],
) -> None:
    url, fake = fake_broker()
    body = {"tool": "gated", "args": {"n": 1}, "idempotency_key": "gate-1"}
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, body, FAKE)
        assert first.status_code == 200, first.text
        fake.gate_open = False
        again = await propose(client, body, FAKE)
        assert_replay_of(first, again)
        fresh = await propose(client, {**body, "idempotency_key": "gate-2"}, FAKE)
        assert_problem(fresh, 409, "precondition_failed", "PRECONDITION")
        other = await propose(client, {**body, "args": {"n": 2}}, FAKE)
        assert_problem(other, 422, "idempotency_key_reused", "IDEMPOTENCY")
    assert fake.count("ok") == 1


# -- dry runs --------------------------------------------------------------------------------------


async def test_a_dry_run_never_satisfies_a_later_real_run(
    client: httpx.AsyncClient, demo: DemoBackend
) -> None:
    dry = await propose(client, {**credit(key="dry-then-real"), "dry_run": True}, BILLING)
    assert dry.status_code == 200, dry.text
    assert dry.json()["execution"]["status"] == "dry_run"
    assert demo.credits == []
    real = await propose(client, credit(key="dry-then-real"), BILLING)
    assert real.status_code == 200, real.text
    assert real.json()["replayed"] is False
    assert real.json()["dry_run"] is False
    assert real.json()["execution"]["status"] == "succeeded"
    assert "idempotent-replayed" not in real.headers
    assert len(demo.credits) == 1


async def test_dry_runs_spend_no_budget_rate_or_key(make_broker: MakeBroker, clock: Clock) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        for i in range(30):
            dry = await propose(
                client, {**credit(key=f"k-{i}", amount=25), "dry_run": True}, BILLING
            )
            assert dry.status_code == 200, (i, dry.text)
            assert dry.json()["execution"]["status"] == "dry_run"
        assert demo.credits == []
        for i in range(20):
            real = await propose(client, credit(key=f"k-{i}", amount=25), BILLING)
            assert real.status_code == 200, (i, real.text)
            assert real.json()["replayed"] is False
    assert sum(c["amount"] for c in demo.credits) == 500


async def test_replayed_bodies_are_valid_json_with_the_original_ids(
    client: httpx.AsyncClient,
) -> None:
    first = await propose(client, {**credit(key="ids"), "trace_id": "trace-original"}, BILLING)
    again = await propose(client, {**credit(key="ids"), "trace_id": "trace-retry"}, BILLING)
    assert_replay_of(first, again)
    body = json.loads(again.content)
    assert body["proposal_id"] == first.json()["proposal_id"]
    assert body["trace_id"] == "trace-original"


async def test_a_retry_of_a_completed_proposal_replays_even_past_budget_and_rate(
    make_broker: MakeBroker, clock: Clock
) -> None:
    pin_to_midday(clock)
    url, demo = start_demo(make_broker)
    async with httpx.AsyncClient(base_url=url) as client:
        first = await propose(client, credit(key="k-0", amount=25), BILLING)
        assert first.status_code == 200, first.text
        for i in range(1, 20):
            ok = await propose(client, credit(key=f"k-{i}", amount=25), BILLING)
            assert ok.status_code == 200, (i, ok.text)
        limited = await propose(client, credit(key="k-20", amount=25), BILLING)
        assert limited.status_code == 429
        again = await propose(client, credit(key="k-0", amount=25), BILLING)
        assert_replay_of(first, again)
    assert len(demo.credits) == 20
