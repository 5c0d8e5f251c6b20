"""``[[policy.rules]]`` over real HTTP: the demo's ``guarded_billing`` rules on the memory, SQLite
and Redis stores, judged by the answers, the demo backend's effects and the ledger read back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN, BILLING
from tests.fakes import demo_raw
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
from tests.integration.procs import PrivateRedis
from tests.redis_helpers import missing_redis


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
    assert body["errors"] == [{"path": "/session_id", "message": "required on this route"}]
    # billing_help: as before, no session needed and no loop guard
    for _ in range(5):
        answer = await http.post(url + PROPOSALS, json=lookup(None), headers=BILLING)
        assert answer.status_code == 200, answer.text
    for _ in range(5):
        answer = await http.post(url + PROPOSALS, json=lookup("same"), headers=BILLING)
        assert answer.status_code == 200, answer.text


def ticket(session_id: str, key: str) -> dict[str, Any]:
    return {
        "tool": "create_support_ticket",
        "args": {"customer_id": "C-10429", "subject": "Billing", "priority": "high"},
        "preconditions": ["customer_verified", "open_invoice_present"],
        "idempotency_key": key,
        "session_id": session_id,
    }


class Monitor:
    """Every command Redis receives from a client (``MONITOR``), scripts' own commands apart."""

    def __init__(self, private: PrivateRedis) -> None:
        self.seen: list[dict[str, Any]] = []
        self._redis = private.client()
        self._monitor = self._redis.monitor()
        self._monitor.__enter__()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        try:
            for command in self._monitor.listen():
                self.seen.append(command)
        except Exception:  # the connection closes when the test is done
            return

    def round_trips_between(self, first: str, last: str) -> list[str]:
        """The proposals' commands between two markers: those on the tenant's keys (background
        work, such as the registry's, touches none of them)."""
        commands = [str(c["command"]) for c in self.seen if c.get("client_type") != "lua"]
        start = commands.index(f"ECHO {first}")
        window = commands[start + 1 : commands.index(f"ECHO {last}")]
        return [command for command in window if "{acme}" in command]

    def close(self) -> None:
        self._monitor.connection.disconnect()
        self._redis.close()


async def test_a_loop_rule_adds_no_redis_round_trip(
    start: Callable[..., Started], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    """On a Redis of the test's own: a write under the loop guard sends Redis exactly the
    commands the same write sends on a route without rules (the hit rides in the admission
    script; the sequence rule reads the file ledger)."""
    private = PrivateRedis(tmp_path / "redis", persistent=False)
    try:
        private.start()
    except (OSError, RuntimeError) as exc:
        missing_redis(f"cannot start redis-server: {exc}")
    monitor = None
    try:
        raw = demo_raw()
        raw["service"]["registry_poll_s"] = 3600.0  # no polling inside the counted windows
        url, demo, _ = start(raw, store="redis", redis_url=private.url)
        admin = private.client()
        monitor = Monitor(private)

        async def commands_for(headers: dict[str, str], tag: str) -> list[str]:
            admin.echo(f"{tag}-start")
            for i in range(3):
                body = ticket(session(), f"{tag}-{i}")
                answer = await http.post(url + PROPOSALS, json=body, headers=headers)
                assert answer.status_code == 200, answer.text
            admin.echo(f"{tag}-end")
            await asyncio.sleep(0.2)  # MONITOR's stream catches up
            return monitor.round_trips_between(f"{tag}-start", f"{tag}-end")

        await commands_for(BILLING, "warm")  # scripts loaded, connections open
        plain = await commands_for(BILLING, "plain")
        guarded = await commands_for(GUARDED, "guarded")
        assert len(demo.tickets) == 9
        assert plain, "the store was not used"
        assert len(guarded) == len(plain), (plain, guarded)
    finally:
        if monitor is not None:
            monitor.close()
        private.stop()


@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_retries_with_one_key_replay_and_never_trip_the_loop_guard(
    start: Callable[..., Started], http: httpx.AsyncClient, store: str
) -> None:
    url, demo, _ = start(store=store)
    one = session()
    assert (await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED)).is_success
    answers = [
        await http.post(url + PROPOSALS, json=credit(one, "same-key"), headers=GUARDED)
        for _ in range(6)
    ]
    assert [a.status_code for a in answers] == [200] * 6, answers[-1].text
    assert [a.json()["replayed"] for a in answers] == [False] + [True] * 5
    assert len(demo.credits) == 1
    # new keys for the same credit are new calls: the fourth in the window is a loop
    fresh = [
        await http.post(url + PROPOSALS, json=credit(one, f"new-{i}"), headers=GUARDED)
        for i in range(3)
    ]
    assert [a.status_code for a in fresh[:2]] == [200, 200], fresh[-1].text
    refused_by(fresh[2], "demo.loop_guard")
    assert len(demo.credits) == 3


async def test_the_fast_path_applies_the_same_rules(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    raw = demo_raw()
    raw["service"]["proposal_fast_path"] = True
    url, demo, _ = start(raw)
    one = session()
    refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "f1"), headers=GUARDED),
        "demo.lookup_first",
    )
    refused_by(
        await http.post(url + PROPOSALS, json=lookup(None), headers=GUARDED), "require_session_id"
    )
    for _ in range(3):
        assert (await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED)).is_success
    refused_by(
        await http.post(url + PROPOSALS, json=lookup(one), headers=GUARDED), "demo.loop_guard"
    )
    assert (await http.post(url + PROPOSALS, json=credit(one, "f2"), headers=GUARDED)).is_success
    assert len(demo.credits) == 1
