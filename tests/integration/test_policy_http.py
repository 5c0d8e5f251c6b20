"""``[[policy.rules]]`` over real HTTP: the demo's ``guarded_billing`` rules on the memory, SQLite
and Redis stores, judged by the answers, the demo backend's effects and the ledger read back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN, BILLING
from tests.integration.policy_helpers import (
    GUARDED,
    LOOKUP_FIRST_REMEDIATION,
    PROPOSALS,
    STORES,
    Started,
    credit,
    ledger_records,
    lookup,
    policy_brokers,
    refused_by,
    session,
)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Started]]:
    yield from policy_brokers(tmp_path)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


# -- the demo route ---------------------------------------------------------------------------


@pytest.mark.parametrize("store", STORES)
async def test_loop_guard_blocks_the_fourth_identical_call_in_a_session(
    start: Callable[..., Started], http: httpx.AsyncClient, store: str
) -> None:
    url, _, ledger = start(store=store)
    one = session()
    answers = [
        await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED) for _ in range(4)
    ]
    assert [a.status_code for a in answers[:3]] == [200, 200, 200], answers[-1].text
    body = refused_by(answers[3], "demo.loop_guard")
    assert body["remediation"].startswith("STOP: this exact call was already made 3 times")
    assert answers[3].headers.get("retry-after")
    # other args, or another session, are other loops
    other_args = await http.post(url + PROPOSALS, json=lookup(one, "O-60000"), headers=GUARDED)
    other_session = await http.post(url + PROPOSALS, json=lookup(session()), headers=GUARDED)
    assert other_args.status_code == 200, other_args.text
    assert other_session.status_code == 200, other_session.text
    # the ledger names the rule on the refusal, and its chain verifies
    refused = [r for r in ledger_records(ledger) if r.get("code") == "policy_blocked"]
    assert len(refused) == 1
    assert refused[0]["failed_check"] == {"kind": "policy", "name": "demo.loop_guard"}
    assert refused[0]["session_id"] == one
    report = await http.get(url + "/v1/audit/verify", headers=ADMIN)
    assert report.status_code == 200 and report.json()["ok"] is True, report.text


@pytest.mark.parametrize("store", STORES)
async def test_credit_only_after_a_succeeded_lookup_of_the_same_order(
    start: Callable[..., Started], http: httpx.AsyncClient, store: str
) -> None:
    url, demo, _ = start(store=store)
    one = session()
    first = await http.post(url + PROPOSALS, json=credit(one, "k1"), headers=GUARDED)
    body = refused_by(first, "demo.lookup_first")
    assert body["remediation"] == LOOKUP_FIRST_REMEDIATION
    # a lookup of another order, or in another session, does not count
    assert (
        await http.post(url + PROPOSALS, json=lookup(one, "O-60000"), headers=GUARDED)
    ).is_success
    assert (await http.post(url + PROPOSALS, json=lookup(session()), headers=GUARDED)).is_success
    refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "k2"), headers=GUARDED),
        "demo.lookup_first",
    )
    assert demo.credits == []
    # a failed lookup (an order that does not exist) is no witness either
    missing = await http.post(url + PROPOSALS, json=lookup(one, "O-99999"), headers=GUARDED)
    assert missing.status_code != 200
    refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "k3", order="O-99999"), headers=GUARDED),
        "demo.lookup_first",
    )
    assert (await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED)).is_success
    done = await http.post(url + PROPOSALS, json=credit(one, "k4"), headers=GUARDED)
    assert done.status_code == 200, done.text
    assert len(demo.credits) == 1


async def test_guarded_route_requires_a_session_id_and_other_routes_do_not(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    url, _, _ = start()
    body = refused_by(
        await http.post(url + PROPOSALS, json=lookup(None), headers=GUARDED), "require_session_id"
    )
    assert "session_id" in body["remediation"]
    # billing_help: as before, no session needed and no loop guard
    for _ in range(5):
        answer = await http.post(url + PROPOSALS, json=lookup(None), headers=BILLING)
        assert answer.status_code == 200, answer.text
    for _ in range(5):
        answer = await http.post(url + PROPOSALS, json=lookup("same"), headers=BILLING)
        assert answer.status_code == 200, answer.text
