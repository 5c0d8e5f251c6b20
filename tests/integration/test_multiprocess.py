"""Two real broker processes on one Redis: exactly-once, budgets, crashes and tenant scoping hold
across processes, judged by the demo backend's effects file (what really executed, everywhere).
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from tests.integration.procs import (
    BILLING,
    GLOBEX,
    REDIS_URL,
    BrokerProcess,
    Launcher,
    Setup,
    audit_report,
    credit,
    eventually,
    launcher_for,
    redis_reachable,
    retry_after,
    ticket,
)
from tests.redis_helpers import missing_redis

pytestmark = pytest.mark.redis

LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=200)
PROPOSALS = "/v1/proposals"


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    if not redis_reachable(REDIS_URL):
        missing_redis(f"no Redis at {REDIS_URL}")
    yield from launcher_for(tmp_path)


def _spread(brokers: list[BrokerProcess], i: int) -> str:
    return brokers[i % len(brokers)].url + PROPOSALS


async def test_50_concurrent_proposals_with_one_key_execute_once_across_processes(
    launcher: Launcher,
) -> None:
    setup = launcher.config(latency_s=0.3)
    brokers = launcher.start(setup, 2)
    body = ticket("one-key-for-fifty")
    async with httpx.AsyncClient(timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(client.post(_spread(brokers, i), json=body, headers=BILLING) for i in range(50))
        )
        later = [await client.post(b.url + PROPOSALS, json=body, headers=BILLING) for b in brokers]
        # both processes appended to one ledger; each sees one unbroken chain of all 52
        reports = [await audit_report(client, b) for b in brokers]

    assert setup.effects_per_key() == {("acme", "one-key-for-fifty"): 1}, launcher.logs()
    statuses = Counter(answer.status_code for answer in answers)
    assert set(statuses) <= {200, 409}, [a.text for a in answers if a.status_code >= 500]
    originals = [a for a in answers if a.status_code == 200 and not a.json()["replayed"]]
    assert len(originals) == 1, statuses
    assert "idempotent-replayed" not in originals[0].headers
    original = originals[0].json()
    for answer in answers + later:
        body_out = answer.json()
        if answer.status_code == 409:
            assert body_out["code"] == "idempotency_in_progress", body_out
            retry_after(answer)
        elif answer is not originals[0]:
            assert answer.headers.get("idempotent-replayed") == "true"
            assert body_out["replayed"] is True
            assert body_out["proposal_id"] == original["proposal_id"]
            assert body_out["execution"] == original["execution"]
    for answer in later:  # once finished, both processes replay it
        assert answer.status_code == 200
        assert answer.json()["replayed"] is True
    assert reports[0] == reports[1]
    assert reports[0]["ok"] is True, reports[0]
    assert reports[0]["records"] == 52


async def test_100_concurrent_credits_never_overspend_a_shared_budget(launcher: Launcher) -> None:
    # 10 in credits per day, 1 each: ten fit; the rate limit is raised out of the way.
    setup = launcher.config(latency_s=0.05, credit_budget=10, credit_rate_limit=1000)
    brokers = launcher.start(setup, 2)
    async with httpx.AsyncClient(timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(
                client.post(_spread(brokers, i), json=credit(f"credit-{i}"), headers=BILLING)
                for i in range(100)
            )
        )

    effects = setup.effects()
    assert len(effects) == 10, launcher.logs()
    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {200: 10, 429: 90}, statuses
    approved_keys = {f"credit-{i}" for i, answer in enumerate(answers) if answer.status_code == 200}
    assert {e["idempotency_key"] for e in effects} == approved_keys
    for answer in answers:
        if answer.status_code == 429:
            body = answer.json()
            assert (body["category"], body["code"]) == ("PRECONDITION", "budget_exceeded")
            assert answer.headers["content-type"].startswith("application/problem+json")
            retry_after(answer)


async def test_a_rate_limit_holds_across_processes(launcher: Launcher) -> None:
    # 20 calls in any 60 s per tenant and route (the demo's limit), far under the budget.
    setup = launcher.config(latency_s=0.05)
    brokers = launcher.start(setup, 2)
    async with httpx.AsyncClient(timeout=20, limits=LIMITS) as client:
        answers = await asyncio.gather(
            *(
                client.post(_spread(brokers, i), json=credit(f"rate-{i}"), headers=BILLING)
                for i in range(40)
            )
        )

    assert Counter(answer.status_code for answer in answers) == {200: 20, 429: 20}
    assert len(setup.effects()) == 20
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["code"] == "rate_limited"
            assert 1 <= retry_after(answer) <= 60


async def _idem_states(setup: Setup, tenant: str = "acme") -> list[bytes]:
    client = Redis.from_url(setup.redis_url, socket_timeout=2)
    try:
        states = []
        # A large COUNT: the shared Redis may hold many other keys, and SCAN walks them all.
        pattern = f"{setup.prefix}:{{{tenant}}}:idem:*"
        async for key in client.scan_iter(match=pattern, count=10_000):
            state = await client.hget(key, "s")
            states.append(state if isinstance(state, bytes) else b"")
        return states
    finally:
        await client.aclose()


async def test_a_process_killed_mid_call_leaves_the_key_in_progress_then_outcome_unknown(
    launcher: Launcher,
) -> None:
    # The adapter takes 3 s, the tool's timeout is 1 s and the lease 1 + 1 s: the kill lands
    # while the call is in flight, long before the broker itself would give up on it.
    setup = launcher.config(latency_s=3.0, lease_margin_s=1.0, tool_timeouts={"issue_credit": 1.0})
    a, b = launcher.start(setup, 2)
    body = credit("killed-mid-call", amount=5)
    async with httpx.AsyncClient(timeout=10, limits=LIMITS) as client:
        in_flight = asyncio.create_task(client.post(a.url + PROPOSALS, json=body, headers=BILLING))
        # A has claimed the key (the claim is in Redis, in progress): the adapter call is running.
        await eventually(
            lambda: _in_flight(setup), timeout_s=5, interval_s=0.005, what="A's call in flight"
        )
        a.kill()
        with pytest.raises(httpx.TransportError):
            await in_flight

        first = await client.post(b.url + PROPOSALS, json=body, headers=BILLING)
        assert first.status_code == 409, first.text
        assert first.json()["code"] == "idempotency_in_progress"
        assert retry_after(first) <= 2

        seen: list[dict[str, Any]] = []

        async def outcome_unknown() -> bool:
            answer = await client.post(b.url + PROPOSALS, json=body, headers=BILLING)
            assert answer.status_code == 409, answer.text
            seen.append(answer.json())
            return bool(seen[-1]["code"] == "outcome_unknown")

        await eventually(outcome_unknown, timeout_s=10, interval_s=0.1, what="the lease to lapse")
        assert {p["code"] for p in seen[:-1]} <= {"idempotency_in_progress"}, seen
        problem = seen[-1]
        assert problem["category"] == "IDEMPOTENCY"
        assert problem["remediation"].startswith("ESCALATE")

        again = await asyncio.gather(
            *(client.post(b.url + PROPOSALS, json=body, headers=BILLING) for _ in range(5))
        )
        assert {(r.status_code, r.json()["code"]) for r in again} == {(409, "outcome_unknown")}
        report = await audit_report(client, b)  # the kill left the shared ledger intact
        assert report["ok"] is True, report

    # The call never finished on A (it was killed 2.5 s before the adapter would have), and B
    # never ran it: not once, and certainly not twice.
    assert setup.effects_per_key()[("acme", "killed-mid-call")] <= 1
    assert setup.effects() == []
    assert await _idem_states(setup) == [b"u"]


async def _in_flight(setup: Setup, tenant: str = "acme") -> bool:
    """Whether the one claim is in progress and marked dispatched: its adapter call has left.
    (Merely claimed is too early: a process killed between its claim and its dispatch mark
    leaves a claim that is released, and the retry rightly runs it.)"""
    client = Redis.from_url(setup.redis_url, socket_timeout=2)
    try:
        pattern = f"{setup.prefix}:{{{tenant}}}:idem:*"
        keys = client.scan_iter(match=pattern, count=10_000)  # as _idem_states
        marks = [await client.hmget(key, "s", "d") async for key in keys]
        return marks == [[b"p", b"1"]]
    finally:
        await client.aclose()


async def test_a_process_killed_after_answering_is_replayed_by_another(
    launcher: Launcher,
) -> None:
    setup = launcher.config(latency_s=0.0)
    a, b = launcher.start(setup, 2)
    body = credit("done-then-killed", amount=7)
    async with httpx.AsyncClient(timeout=10) as client:
        first = await client.post(a.url + PROPOSALS, json=body, headers=BILLING)
        assert first.status_code == 200, first.text
        a.kill()
        replay = await client.post(b.url + PROPOSALS, json=body, headers=BILLING)

    assert replay.status_code == 200, replay.text
    assert replay.headers.get("idempotent-replayed") == "true"
    original, replayed = first.json(), replay.json()
    assert replayed["replayed"] is True
    assert {**replayed, "replayed": False} == original
    assert setup.effects_per_key() == {("acme", "done-then-killed"): 1}


async def test_a_process_stopped_mid_call_finishes_it_first(launcher: Launcher) -> None:
    # SIGTERM (a rolling deploy) drains: the call in flight completes and settles, so another
    # process replays it instead of leaving the key in progress or outcome_unknown.
    setup = launcher.config(latency_s=1.0)
    a, b = launcher.start(setup, 2)
    body = credit("drained-on-sigterm", amount=3)
    async with httpx.AsyncClient(timeout=10) as client:
        in_flight = asyncio.create_task(client.post(a.url + PROPOSALS, json=body, headers=BILLING))
        await eventually(
            lambda: _in_flight(setup), timeout_s=5, interval_s=0.005, what="A's call in flight"
        )
        a.proc.send_signal(signal.SIGTERM)
        first = await in_flight
        await asyncio.to_thread(a.proc.wait, 10)
        replay = await client.post(b.url + PROPOSALS, json=body, headers=BILLING)

    assert first.status_code == 200, first.text
    assert replay.status_code == 200, replay.text
    assert replay.json()["replayed"] is True
    assert replay.json()["proposal_id"] == first.json()["proposal_id"]
    assert setup.effects_per_key() == {("acme", "drained-on-sigterm"): 1}


async def test_one_key_under_two_tenants_on_two_processes_executes_for_each(
    launcher: Launcher,
) -> None:
    setup = launcher.config(latency_s=0.1)
    a, b = launcher.start(setup, 2)
    key = "shared-key-across-tenants"
    async with httpx.AsyncClient(timeout=10) as client:
        acme, globex = await asyncio.gather(
            client.post(a.url + PROPOSALS, json=ticket(key, "C-10429"), headers=BILLING),
            client.post(b.url + PROPOSALS, json=ticket(key, "C-30001"), headers=GLOBEX),
        )
        # each tenant's retry, on the other process, replays its own answer and nobody else's
        acme_again, globex_again = await asyncio.gather(
            client.post(b.url + PROPOSALS, json=ticket(key, "C-10429"), headers=BILLING),
            client.post(a.url + PROPOSALS, json=ticket(key, "C-30001"), headers=GLOBEX),
        )

    for answer in (acme, globex):
        assert answer.status_code == 200, answer.text
        assert answer.json()["replayed"] is False
    assert acme_again.json()["proposal_id"] == acme.json()["proposal_id"]
    assert globex_again.json()["proposal_id"] == globex.json()["proposal_id"]
    assert acme_again.json()["replayed"] is globex_again.json()["replayed"] is True
    assert setup.effects_per_key() == {("acme", key): 1, ("globex", key): 1}

    # the decision records are shared too, and still scoped: each tenant reads only its own
    async with httpx.AsyncClient(timeout=10) as client:
        acme_id, globex_id = acme.json()["proposal_id"], globex.json()["proposal_id"]
        mine = await client.get(f"{b.url}{PROPOSALS}/{acme_id}", headers=BILLING)
        theirs = await client.get(f"{a.url}{PROPOSALS}/{globex_id}", headers=BILLING)
    assert mine.status_code == 200, mine.text
    assert mine.json()["proposal_id"] == acme_id
    assert theirs.status_code == 404, theirs.text


async def test_distinct_effects_on_two_processes_get_distinct_ids(launcher: Launcher) -> None:
    setup = launcher.config()
    a, b = launcher.start(setup, 2)
    async with httpx.AsyncClient(timeout=10) as client:
        for broker, n in ((a, 1), (b, 2)):
            for body in (ticket(f"ids-ticket-{n}"), credit(f"ids-credit-{n}", amount=n)):
                answer = await client.post(broker.url + PROPOSALS, json=body, headers=BILLING)
                assert answer.status_code == 200, answer.text

    effects = setup.effects()
    assert len(effects) == 4
    tickets = [e["ticket_id"] for e in effects if "ticket_id" in e]
    credits = [e["credit_id"] for e in effects if "credit_id" in e]
    # two different tickets (and two credits of different amounts) must not share an id
    assert len(set(tickets)) == 2, tickets
    assert len(set(credits)) == 2, credits
