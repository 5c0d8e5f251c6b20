"""One contract for every Store: the same tests run against MemoryStore and RedisStore.

Time is the ``now`` the caller passes (T0 is aligned to every window used here), so windows and
leases are deterministic; only decision records use the wall clock (as the protocol does).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import pytest

from broker.stores import (
    Admission,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    RateHit,
    RegisteredTool,
    Replay,
    Resolution,
    Settlement,
    Store,
    StoredResponse,
    Ticket,
)
from broker.stores.redis import RedisStore
from tests.redis_helpers import connected_redis

T0 = 1_700_006_400.0  # a multiple of 86 400, hence of every window below
DAY = 86_400
OK = StoredResponse(200, b'{"ok":true,"credit_id":"cr_1"}')
DENIED = StoredResponse(422, b'{"error":"card_declined"}')


def approx(expected: float) -> float:
    """``pytest.approx``, typed as the float it stands in for."""
    return cast(float, pytest.approx(expected))


def claim(
    key: str = "key-0001",
    *,
    tenant: str = "acme",
    route: str = "billing",
    fp: str = "fp-1",
    lease_s: float = 30.0,
    idempotent: bool = True,
) -> ClaimRequest:
    return ClaimRequest(
        tenant=tenant, route=route, key=key, fingerprint=fp, lease_s=lease_s, idempotent=idempotent
    )


def budget(
    amount: int = 1,
    *,
    limit: int = 10,
    name: str = "credits",
    scope: str = "tenant:acme",
    window_s: int = 3600,
) -> BudgetCharge:
    return BudgetCharge(name=name, scope=scope, amount=amount, limit=limit, window_s=window_s)


def rate(limit: int = 3, *, window_s: float = 60.0, name: str = "calls") -> RateHit:
    return RateHit(name=name, scope="tenant:acme|route:billing", limit=limit, window_s=window_s)


def adm(
    c: ClaimRequest | None = None,
    *,
    charges: tuple[BudgetCharge, ...] = (),
    hits: tuple[RateHit, ...] = (),
    tenant: str | None = None,
) -> Admission:
    tenant = tenant if tenant is not None else (c.tenant if c is not None else "acme")
    return Admission(tenant=tenant, claim=c, charges=charges, hits=hits)


def record(pid: str = "prp_01JTEST", response: StoredResponse = OK) -> DecisionRecord:
    return DecisionRecord(proposal_id=pid, tenant="acme", route="billing", response=response)


def ticket_of(result: AdmitResult) -> Ticket:
    assert isinstance(result, Admitted), result
    return result.ticket


async def admit(store: Store, admission: Admission, at: float = T0) -> AdmitResult:
    return await store.admit(admission, now=at, dry_run=False)


async def dry(store: Store, admission: Admission, at: float = T0) -> AdmitResult:
    return await store.admit(admission, now=at, dry_run=True)


async def sent(store: Store, result: AdmitResult, at: float = T0) -> Ticket:
    """Admitted, then marked dispatched as the executor marks it just before the call leaves:
    a claim abandoned after this may have reached its backend."""
    ticket = ticket_of(result)
    assert await store.dispatch(ticket, proposal_id=f"prp_sent_{ticket.owner}", now=at)
    return ticket


async def settle(
    store: Store,
    ticket: Ticket,
    how: Settlement,
    *,
    at: float = T0 + 1,
    response: StoredResponse = OK,
    ttl_s: int = DAY,
    pid: str = "prp_01JTEST",
) -> bool:
    return await store.settle(
        ticket, how, response=response, record=record(pid, response), ttl_s=ttl_s, now=at
    )


async def room(store: Store, charge: BudgetCharge, at: float) -> int:
    """How much of ``charge``'s budget is left at ``at`` (probed with dry runs, taking nothing)."""
    left = 0
    for amount in range(charge.limit, 0, -1):
        probe = BudgetCharge(
            name=charge.name,
            scope=charge.scope,
            amount=amount,
            limit=charge.limit,
            window_s=charge.window_s,
        )
        if isinstance(await dry(store, adm(charges=(probe,)), at), Admitted):
            left = amount
            break
    return left


# -- idempotency state machine ------------------------------------------------------------------


async def test_fresh_admit_claims_the_key(store: Store) -> None:
    c = claim()
    ticket = ticket_of(await admit(store, adm(c, charges=(budget(3),))))
    assert ticket.tenant == "acme"
    assert ticket.claim == c
    assert ticket.owner
    assert ticket.charges == ((budget(3), int(T0 // 3600)),)
    assert await store.lookup(c, now=T0 + 5) == Conflict("in_progress", approx(25.0))


async def test_owner_tokens_are_unique(store: Store) -> None:
    owners = {ticket_of(await admit(store, adm(claim(f"key-{i:04d}")))).owner for i in range(20)}
    assert len(owners) == 20


async def test_replay_after_succeeded(store: Store) -> None:
    c = claim()
    ticket = ticket_of(await admit(store, adm(c)))
    assert await settle(store, ticket, Settlement.SUCCEEDED, response=OK) is True
    assert await admit(store, adm(c), T0 + 2) == Replay(OK)
    assert await store.lookup(c, now=T0 + 2) == Replay(OK)
    assert await admit(store, adm(c), T0 + 3) == Replay(OK)  # replays do not consume the record


async def test_replay_after_definite_failure_and_refund(store: Store) -> None:
    c, charge = claim(), budget(7)
    ticket = ticket_of(await admit(store, adm(c, charges=(charge,))))
    assert await room(store, charge, T0 + 1) == 3
    assert await settle(store, ticket, Settlement.DEFINITE_FAILURE, response=DENIED) is True
    assert await room(store, charge, T0 + 2) == 10
    assert await admit(store, adm(c, charges=(charge,)), T0 + 2) == Replay(DENIED)
    assert await room(store, charge, T0 + 2) == 10  # a replay takes nothing


async def test_reused_key_with_other_fingerprint_leaves_the_result_untouched(store: Store) -> None:
    c = claim()
    ticket = ticket_of(await admit(store, adm(c)))
    assert await admit(store, adm(claim(fp="fp-2")), T0 + 1) == Conflict("reused")
    assert await settle(store, ticket, Settlement.SUCCEEDED) is True
    assert await admit(store, adm(claim(fp="fp-2")), T0 + 2) == Conflict("reused")
    assert await store.lookup(claim(fp="fp-2"), now=T0 + 2) == Conflict("reused")
    assert await admit(store, adm(c), T0 + 3) == Replay(OK)


async def test_in_progress_conflict_with_retry_after(store: Store) -> None:
    c = claim(lease_s=30)
    ticket_of(await admit(store, adm(c)))
    result = await admit(store, adm(c), T0 + 10)
    assert result == Conflict("in_progress", approx(20.0))
    almost = await admit(store, adm(c), T0 + 29.9995)
    assert isinstance(almost, Conflict)
    assert almost.retry_after_s == approx(0.001)  # never zero while still in progress


async def test_transient_failure_releases_the_key_and_refunds(store: Store) -> None:
    c, charge, hit = claim(), budget(7), rate(5)
    ticket = ticket_of(await admit(store, adm(c, charges=(charge,), hits=(hit,))))
    assert await settle(store, ticket, Settlement.TRANSIENT_FAILURE) is True
    assert await store.lookup(c, now=T0 + 2) is None
    assert await room(store, charge, T0 + 2) == 10
    retry = ticket_of(await admit(store, adm(c, charges=(charge,)), T0 + 2))
    assert retry.owner != ticket.owner


async def test_unknown_marks_outcome_unknown_and_keeps_the_charge(store: Store) -> None:
    c, charge = claim(idempotent=True), budget(7)
    ticket = ticket_of(await admit(store, adm(c, charges=(charge,))))
    assert await settle(store, ticket, Settlement.UNKNOWN, ttl_s=DAY) is True
    assert await admit(store, adm(c), T0 + 2) == Conflict("outcome_unknown")
    assert await store.lookup(c, now=T0 + 2) == Conflict("outcome_unknown")
    assert await dry(store, adm(c), T0 + 2) == Conflict("outcome_unknown")
    assert await room(store, charge, T0 + 2) == 3


async def test_outcome_unknown_never_expires_into_a_rerun(store: Store) -> None:
    c = claim()
    ticket = ticket_of(await admit(store, adm(c)))
    assert await settle(store, ticket, Settlement.UNKNOWN, at=T0 + 1, ttl_s=600) is True
    assert await admit(store, adm(c), T0 + 600.5) == Conflict("outcome_unknown")
    assert await admit(store, adm(c), T0 + 601) == Conflict("outcome_unknown")
    assert await admit(store, adm(c), T0 + 400 * DAY) == Conflict("outcome_unknown")
    await redis_keeps_it_without_ttl(store, c)


async def redis_keeps_it_without_ttl(store: Store, c: ClaimRequest) -> None:
    """Redis also collects keys by TTL (real time, not the tests' clock): an unknown key has none."""
    if isinstance(store, RedisStore):
        assert await store.client.pttl(store.keys.idem(c)) == -1


async def test_lease_expiry_of_an_idempotent_tool_is_reclaimable(store: Store) -> None:
    c = claim(lease_s=30, idempotent=True)
    first = ticket_of(await admit(store, adm(c)))
    assert isinstance(await admit(store, adm(c), T0 + 29.9), Conflict)
    assert await store.lookup(c, now=T0 + 30) is None
    second = ticket_of(await admit(store, adm(c), T0 + 30))
    assert second.owner != first.owner
    assert await admit(store, adm(c), T0 + 31) == Conflict("in_progress", approx(29.0))


async def test_lease_expiry_of_a_non_idempotent_tool_is_outcome_unknown(store: Store) -> None:
    c = claim(lease_s=30, idempotent=False)
    await sent(store, await admit(store, adm(c)))
    seen = T0 + 31
    assert await admit(store, adm(c), seen) == Conflict("outcome_unknown")
    assert await store.lookup(c, now=seen + 1) == Conflict("outcome_unknown")
    assert await dry(store, adm(c), seen + 2) == Conflict("outcome_unknown")
    # kept until resolved, however long that takes
    assert await admit(store, adm(c), seen + 400 * DAY) == Conflict("outcome_unknown")
    await redis_keeps_it_without_ttl(store, c)


async def test_lease_expiry_seen_by_lookup_first(store: Store) -> None:
    c = claim(lease_s=30, idempotent=False)
    await sent(store, await admit(store, adm(c)))
    assert await store.lookup(c, now=T0 + 100) == Conflict("outcome_unknown")
    assert await admit(store, adm(c), T0 + 100 + 400 * DAY) == Conflict("outcome_unknown")


async def test_an_abandoned_claim_of_a_non_idempotent_tool_has_no_ttl(store: Store) -> None:
    c = claim(lease_s=30, idempotent=False)
    await sent(store, await admit(store, adm(c)))
    await redis_keeps_it_without_ttl(store, c)
    assert await admit(store, adm(c), T0 + 400 * DAY) == Conflict("outcome_unknown")


# -- resolving an unknown outcome -----------------------------------------------------------------


async def unknown(store: Store, c: ClaimRequest) -> None:
    ticket = ticket_of(await admit(store, adm(c)))
    assert await settle(store, ticket, Settlement.UNKNOWN) is True


async def resolve(
    store: Store,
    c: ClaimRequest,
    how: Resolution,
    *,
    at: float = T0 + 10,
    response: StoredResponse | None = OK,
    ttl_s: int = DAY,
) -> str:
    return await store.resolve(c, how, response=response, ttl_s=ttl_s, now=at)


async def test_resolved_as_succeeded_replays_the_given_result(store: Store) -> None:
    c = claim(idempotent=False)
    await unknown(store, c)
    assert await store.unknown_keys() == 1
    assert await resolve(store, c, Resolution.SUCCEEDED) == "resolved"
    assert await admit(store, adm(c), T0 + 11) == Replay(OK)
    assert await store.lookup(c, now=T0 + 11) == Replay(OK)
    assert await store.unknown_keys() == 0
    # a resolved key is a known outcome: it expires with its TTL like any other
    assert isinstance(await admit(store, adm(c), T0 + 10 + DAY), Admitted)


async def test_resolved_as_failed_replays_the_failure(store: Store) -> None:
    c = claim(idempotent=False)
    await unknown(store, c)
    assert await resolve(store, c, Resolution.FAILED, response=DENIED) == "resolved"
    assert await admit(store, adm(c), T0 + 11) == Replay(DENIED)


async def test_resolved_as_not_executed_releases_the_key(store: Store) -> None:
    c = claim(idempotent=False)
    await unknown(store, c)
    assert await resolve(store, c, Resolution.NOT_EXECUTED, response=None) == "resolved"
    assert await store.unknown_keys() == 0
    assert isinstance(await admit(store, adm(c), T0 + 11), Admitted)


async def test_an_abandoned_claim_can_be_resolved(store: Store) -> None:
    c = claim(lease_s=30, idempotent=False)
    await sent(store, await admit(store, adm(c)))
    assert await resolve(store, c, Resolution.SUCCEEDED, at=T0 + 31) == "resolved"
    assert await admit(store, adm(c), T0 + 32) == Replay(OK)


async def test_only_an_unknown_outcome_is_resolved(store: Store) -> None:
    c = claim(idempotent=False)
    assert await resolve(store, c, Resolution.SUCCEEDED) == "absent"
    ticket = ticket_of(await admit(store, adm(c)))
    assert await resolve(store, c, Resolution.NOT_EXECUTED, at=T0 + 1) == "in_progress"
    other = claim(idempotent=False, fp="fp-other")
    assert await resolve(store, other, Resolution.NOT_EXECUTED, at=T0 + 1) == "reused"
    assert await settle(store, ticket, Settlement.SUCCEEDED, response=DENIED) is True
    assert await resolve(store, c, Resolution.SUCCEEDED) == "settled"
    assert await admit(store, adm(c), T0 + 11) == Replay(DENIED)  # untouched
    assert await store.unknown_keys() == 0


async def test_unknown_keys_counts_each_key_once(store: Store) -> None:
    first, second = claim("k-1", idempotent=False), claim("k-2", idempotent=False, lease_s=5)
    await unknown(store, first)
    await sent(store, await admit(store, adm(second)))
    assert await store.unknown_keys() == 1  # the second is still within its lease
    for at in (T0 + 6, T0 + 7):
        assert await admit(store, adm(second), at) == Conflict("outcome_unknown")
        assert await admit(store, adm(first), at) == Conflict("outcome_unknown")
    assert await store.unknown_keys() == 2


async def test_settle_by_a_non_owner_after_takeover_changes_nothing(store: Store) -> None:
    c, charge = claim(lease_s=30, idempotent=True), budget(2)
    stale = await sent(store, await admit(store, adm(c, charges=(charge,))))
    fresh = ticket_of(await admit(store, adm(c, charges=(charge,)), T0 + 31))
    assert await room(store, charge, T0 + 32) == 6

    assert await settle(store, stale, Settlement.SUCCEEDED, at=T0 + 32) is False
    assert await settle(store, stale, Settlement.UNKNOWN, at=T0 + 32) is False
    assert await store.lookup(c, now=T0 + 33) == Conflict("in_progress", approx(28.0))
    assert await room(store, charge, T0 + 33) == 6

    assert await settle(store, fresh, Settlement.SUCCEEDED, at=T0 + 34, response=DENIED) is True
    assert await settle(store, stale, Settlement.TRANSIENT_FAILURE, at=T0 + 35) is False
    assert await admit(store, adm(c), T0 + 36) == Replay(DENIED)


async def test_a_stale_tickets_failure_still_refunds_its_own_charge(store: Store) -> None:
    """Pins the reference behaviour: the refund belongs to the ticket, the key to its owner."""
    c, charge = claim(lease_s=30, idempotent=True), budget(2)
    stale = await sent(store, await admit(store, adm(c, charges=(charge,))))
    ticket_of(await admit(store, adm(c, charges=(charge,)), T0 + 31))
    assert await settle(store, stale, Settlement.DEFINITE_FAILURE, at=T0 + 32) is False
    assert await room(store, charge, T0 + 33) == 8
    assert isinstance(await store.lookup(c, now=T0 + 33), Conflict)


async def test_late_owner_completes_when_nobody_saw_the_lease_expire(store: Store) -> None:
    c = claim(lease_s=30, idempotent=False)
    ticket = ticket_of(await admit(store, adm(c)))
    assert await settle(store, ticket, Settlement.SUCCEEDED, at=T0 + 45) is True
    assert await admit(store, adm(c), T0 + 46) == Replay(OK)


async def test_late_owner_loses_once_the_expiry_was_seen(store: Store) -> None:
    c = claim(lease_s=30, idempotent=False)
    ticket = await sent(store, await admit(store, adm(c)))
    assert await store.lookup(c, now=T0 + 40) == Conflict("outcome_unknown")
    assert await settle(store, ticket, Settlement.SUCCEEDED, at=T0 + 45) is False
    assert await admit(store, adm(c), T0 + 46) == Conflict("outcome_unknown")


async def test_keys_are_scoped_by_tenant_and_route(store: Store) -> None:
    base = claim("shared-key-1")
    other_tenant = claim("shared-key-1", tenant="globex", fp="fp-other")
    other_route = claim("shared-key-1", route="scheduling", fp="fp-other")
    ticket = ticket_of(await admit(store, adm(base)))
    t2 = ticket_of(await admit(store, adm(other_tenant), T0 + 1))
    t3 = ticket_of(await admit(store, adm(other_route), T0 + 1))
    assert await settle(store, ticket, Settlement.SUCCEEDED, at=T0 + 2) is True
    assert await settle(store, t2, Settlement.DEFINITE_FAILURE, at=T0 + 2, response=DENIED)
    assert await store.lookup(base, now=T0 + 3) == Replay(OK)
    assert await store.lookup(other_tenant, now=T0 + 3) == Replay(DENIED)
    assert await store.lookup(other_route, now=T0 + 3) == Conflict("in_progress", approx(28))
    assert t3.owner not in (ticket.owner, t2.owner)


async def test_odd_tenants_and_keys_stay_distinct(store: Store) -> None:
    odd = ["te{n}ant", "t:x", "", "テナント", "a" * 300]
    for i, tenant in enumerate(odd):
        c = claim("k{1}:*\x00 ", tenant=tenant, fp=f"fp-{i}")
        ticket = ticket_of(await admit(store, adm(c)))
        assert await settle(
            store, ticket, Settlement.SUCCEEDED, response=StoredResponse(200 + i, b"")
        )
    for i, tenant in enumerate(odd):
        c = claim("k{1}:*\x00 ", tenant=tenant, fp=f"fp-{i}")
        assert await store.lookup(c, now=T0 + 2) == Replay(StoredResponse(200 + i, b""))


async def test_completed_record_expires_with_its_ttl(store: Store) -> None:
    c = claim()
    ticket = ticket_of(await admit(store, adm(c)))
    assert await settle(store, ticket, Settlement.SUCCEEDED, at=T0 + 1, ttl_s=100) is True
    assert await store.lookup(c, now=T0 + 100.9) == Replay(OK)
    assert await store.lookup(c, now=T0 + 101) is None
    assert isinstance(await admit(store, adm(claim(fp="fp-2")), T0 + 101), Admitted)


async def test_lease_and_expiry_instants_are_exact_doubles(store: Store) -> None:
    """An instant is ``now`` plus an offset, added in binary floating point: a store must decide
    on that very double (a Redis script adds it up itself), not on a rounded decimal of it."""
    start, lease = T0 + 1 / 3, 2.7  # neither has a short decimal, nor has their sum
    c = claim(lease_s=lease)
    ticket_of(await admit(store, adm(c), start))
    lease_end = start + lease
    assert isinstance(await store.lookup(c, now=math.nextafter(lease_end, 0)), Conflict)
    assert await store.lookup(c, now=lease_end) is None  # an idempotent tool's lapsed lease

    ticket = ticket_of(await admit(store, adm(c), lease_end))
    settled_at = lease_end + 1 / 7
    assert await settle(store, ticket, Settlement.SUCCEEDED, at=settled_at, ttl_s=7) is True
    expiry = settled_at + 7
    assert await store.lookup(c, now=math.nextafter(expiry, 0)) == Replay(OK)
    assert await store.lookup(c, now=expiry) is None


# -- budgets --------------------------------------------------------------------------------------


async def test_budget_reservations_sum_up_to_the_limit_exactly(store: Store) -> None:
    at = T0 + 900
    for amount in (3, 3, 4):
        assert isinstance(await admit(store, adm(charges=(budget(amount),)), at), Admitted)
    refused = await admit(store, adm(charges=(budget(1),)), at)
    assert refused == Limited("budget", "credits", approx(2700.0))
    assert isinstance(await admit(store, adm(charges=(budget(10),)), T0 + 3600), Admitted)


async def test_an_admission_reports_what_each_budget_has_used_after_it(store: Store) -> None:
    first = ticket_of(await admit(store, adm(charges=(budget(3), budget(2, name="calls")))))
    second = ticket_of(await admit(store, adm(charges=(budget(4),))))
    assert (first.used, second.used) == ((3, 2), (7,))
    dry = await store.admit(adm(charges=(budget(1),)), now=T0, dry_run=True)
    assert ticket_of(dry).used == ()


async def test_budget_charge_above_the_limit_is_refused(store: Store) -> None:
    refused = await admit(store, adm(charges=(budget(11),)), T0 + 1800.5)
    assert refused == Limited("budget", "credits", approx(1799.5))


async def test_budgets_are_per_name_and_scope(store: Store) -> None:
    assert isinstance(await admit(store, adm(charges=(budget(10),))), Admitted)
    assert isinstance(await admit(store, adm(charges=(budget(10, name="other"),))), Admitted)
    assert isinstance(await admit(store, adm(charges=(budget(10, scope="tenant:x"),))), Admitted)
    assert isinstance(await admit(store, adm(charges=(budget(1),))), Limited)


async def test_count_budget(store: Store) -> None:
    count = budget(1, limit=3, name="issue_credit.count", window_s=DAY)
    for i in range(3):
        assert isinstance(await admit(store, adm(charges=(count,)), T0 + i), Admitted)
    refused = await admit(store, adm(charges=(count,)), T0 + 60)
    assert refused == Limited("budget", "issue_credit.count", approx(DAY - 60.0))


async def test_refund_goes_back_to_the_window_it_was_taken_in(store: Store) -> None:
    charge = budget(6)
    old = ticket_of(await admit(store, adm(charges=(charge,)), T0 + 3000))
    # the window rolls; the new window fills up
    assert isinstance(await admit(store, adm(charges=(budget(10),)), T0 + 3601), Admitted)
    assert await settle(store, old, Settlement.DEFINITE_FAILURE, at=T0 + 3602) is True
    assert await room(store, charge, T0 + 3603) == 0  # the new window got nothing back
    assert await room(store, charge, T0 + 3001) == 10  # the old one did


async def test_refund_never_goes_below_zero(store: Store) -> None:
    charge = budget(4)
    ticket = ticket_of(await admit(store, adm(charges=(charge,))))
    assert await settle(store, ticket, Settlement.TRANSIENT_FAILURE) is True
    assert await settle(store, ticket, Settlement.TRANSIENT_FAILURE) is True
    assert await room(store, charge, T0 + 2) == 10
    assert isinstance(await admit(store, adm(charges=(budget(10),)), T0 + 3), Admitted)
    assert isinstance(await admit(store, adm(charges=(budget(1),)), T0 + 3), Limited)


async def test_succeeded_and_unknown_keep_the_charges(store: Store) -> None:
    charge = budget(3)
    for how in (Settlement.SUCCEEDED, Settlement.UNKNOWN):
        ticket = ticket_of(await admit(store, adm(charges=(charge,))))
        assert await settle(store, ticket, how) is True
    assert await room(store, charge, T0 + 2) == 4


# -- rate limits (sliding log) ------------------------------------------------------------------


async def test_rate_limit_is_exact_over_any_window(store: Store) -> None:
    hit = rate(3, window_s=60)
    for at in (T0, T0 + 10, T0 + 20):
        assert isinstance(await admit(store, adm(hits=(hit,)), at), Admitted)
    assert await admit(store, adm(hits=(hit,)), T0 + 30) == Limited("rate", "calls", approx(30.0))
    assert await admit(store, adm(hits=(hit,)), T0 + 59.5) == Limited("rate", "calls", approx(0.5))
    # the oldest (T0) leaves the window at T0 + 60
    assert isinstance(await admit(store, adm(hits=(hit,)), T0 + 60), Admitted)
    assert await admit(store, adm(hits=(hit,)), T0 + 60.5) == Limited("rate", "calls", approx(9.5))
    assert isinstance(await admit(store, adm(hits=(hit,)), T0 + 70), Admitted)
    # refused calls took no slot: any 60 s still hold at most 3 admitted calls
    assert await admit(store, adm(hits=(hit,)), T0 + 75) == Limited("rate", "calls", approx(5.0))


async def test_rate_limit_retry_after_points_at_the_entry_that_must_leave(store: Store) -> None:
    hit = rate(2, window_s=60)
    for at in (T0, T0 + 1, T0 + 50):
        if at == T0 + 50:
            assert await admit(store, adm(hits=(hit,)), at) == Limited(
                "rate", "calls", approx(10.0)
            )
        else:
            assert isinstance(await admit(store, adm(hits=(hit,)), at), Admitted)
    assert isinstance(await admit(store, adm(hits=(hit,)), T0 + 60), Admitted)
    assert await admit(store, adm(hits=(hit,)), T0 + 60.25) == Limited(
        "rate", "calls", approx(0.75)
    )


async def test_a_lowered_rate_limit_waits_for_enough_entries_to_leave(store: Store) -> None:
    for at in (T0, T0 + 10, T0 + 20):
        assert isinstance(await admit(store, adm(hits=(rate(3),)), at), Admitted)
    # limit lowered from 3 to 2: both T0 and T0 + 10 must leave before a slot opens
    assert await admit(store, adm(hits=(rate(2),)), T0 + 30) == Limited(
        "rate", "calls", approx(40.0)
    )
    assert isinstance(await admit(store, adm(hits=(rate(2),)), T0 + 70), Admitted)


async def test_rate_limits_are_per_name(store: Store) -> None:
    assert isinstance(await admit(store, adm(hits=(rate(1),))), Admitted)
    assert isinstance(await admit(store, adm(hits=(rate(1, name="other"),))), Admitted)
    assert isinstance(await admit(store, adm(hits=(rate(1),)), T0 + 1), Limited)


# -- all or nothing -----------------------------------------------------------------------------


async def test_an_exhausted_second_budget_takes_nothing(store: Store) -> None:
    first, second = budget(4, name="credits"), budget(1, name="calls", limit=1)
    hit, c = rate(1), claim()
    assert isinstance(await admit(store, adm(charges=(second,))), Admitted)  # exhaust "calls"

    refused = await admit(store, adm(c, charges=(first, second), hits=(hit,)), T0 + 5)
    assert refused == Limited("budget", "calls", approx(3595.0))

    assert await room(store, first, T0 + 6) == 10  # nothing from the first budget
    assert await store.lookup(c, now=T0 + 6) is None  # nor the key
    assert isinstance(await admit(store, adm(hits=(hit,)), T0 + 7), Admitted)  # nor the rate slot
    assert isinstance(await admit(store, adm(c, charges=(first,)), T0 + 8), Admitted)


async def test_a_rate_limited_admission_takes_nothing(store: Store) -> None:
    charge, hit, c = budget(5), rate(1), claim()
    assert isinstance(await admit(store, adm(hits=(hit,))), Admitted)
    refused = await admit(store, adm(c, charges=(charge,), hits=(hit,)), T0 + 1)
    assert refused == Limited("rate", "calls", approx(59.0))
    assert await room(store, charge, T0 + 2) == 10
    assert await store.lookup(c, now=T0 + 2) is None


async def test_a_conflicting_key_takes_nothing(store: Store) -> None:
    charge, hit, c = budget(5), rate(2), claim()
    ticket_of(await admit(store, adm(c)))
    assert await admit(store, adm(c, charges=(charge,), hits=(hit,)), T0 + 1) == Conflict(
        "in_progress", approx(29.0)
    )
    assert await room(store, charge, T0 + 2) == 10
    for at in (T0 + 3, T0 + 4):
        assert isinstance(await admit(store, adm(hits=(hit,)), at), Admitted)


# -- dry runs -----------------------------------------------------------------------------------


async def test_dry_run_takes_nothing(store: Store) -> None:
    c, charge, hit = claim(), budget(10), rate(1)
    result = await dry(store, adm(c, charges=(charge,), hits=(hit,)))
    assert result == Admitted(Ticket(tenant="acme", claim=None, owner=None, charges=()))
    assert await store.lookup(c, now=T0 + 1) is None
    assert isinstance(await admit(store, adm(c, charges=(charge,), hits=(hit,)), T0 + 1), Admitted)


async def test_dry_run_never_replays(store: Store) -> None:
    c = claim()
    ticket = ticket_of(await admit(store, adm(c)))
    assert await dry(store, adm(c), T0 + 1) == Conflict("in_progress", approx(29.0))
    assert await settle(store, ticket, Settlement.SUCCEEDED, at=T0 + 2) is True
    result = await dry(store, adm(c), T0 + 3)
    assert result == Admitted(Ticket(tenant="acme", claim=None, owner=None, charges=()))
    assert await dry(store, adm(claim(fp="fp-2")), T0 + 3) == Conflict("reused")
    assert await admit(store, adm(c), T0 + 4) == Replay(OK)  # and leaves the record alone


async def test_dry_run_reports_limits(store: Store) -> None:
    hit = rate(1)
    assert isinstance(await admit(store, adm(charges=(budget(10),), hits=(hit,))), Admitted)
    assert await dry(store, adm(charges=(budget(1),)), T0 + 600) == Limited(
        "budget", "credits", approx(3000.0)
    )
    assert await dry(store, adm(hits=(hit,)), T0 + 15) == Limited("rate", "calls", approx(45.0))


# -- lookups, settlements without a claim, decisions --------------------------------------------


async def test_lookup_of_an_unknown_key(store: Store) -> None:
    assert await store.lookup(claim("never-seen"), now=T0) is None


async def test_admission_without_claim(store: Store) -> None:
    ticket = ticket_of(await admit(store, adm(charges=(budget(2),), hits=(rate(2),))))
    assert ticket.claim is None
    assert ticket.owner is None
    assert await settle(store, ticket, Settlement.SUCCEEDED) is True
    empty = ticket_of(await admit(store, adm()))
    assert empty == Ticket(tenant="acme", claim=None, owner=None, charges=())


async def test_save_and_load_decision(store: Store) -> None:
    rec = DecisionRecord(
        proposal_id="prp_01JSAVE",
        tenant="acme",
        route="billing",
        response=StoredResponse(403, b'{"code":"tool_not_allowed"}'),
    )
    assert await store.load_decision("prp_01JSAVE") is None
    await store.save_decision(rec, ttl_s=60)
    assert await store.load_decision("prp_01JSAVE") == rec
    assert await store.load_decision("prp_01JOTHER") is None
    replaced = DecisionRecord(
        proposal_id="prp_01JSAVE", tenant="acme", route="billing", response=OK
    )
    await store.save_decision(replaced, ttl_s=60)
    assert await store.load_decision("prp_01JSAVE") == replaced


async def test_settle_saves_the_decision(store: Store) -> None:
    now = time.time()
    ticket = ticket_of(await store.admit(adm(claim()), now=now, dry_run=False))
    rec = record("prp_01JSETTLED", OK)
    assert await store.settle(
        ticket, Settlement.SUCCEEDED, response=OK, record=rec, ttl_s=60, now=now + 0.01
    )
    assert await store.load_decision("prp_01JSETTLED") == rec


async def test_settle_saves_the_decision_even_when_the_claim_is_no_longer_its_own(
    store: Store,
) -> None:
    now = time.time()  # decision records expire on the store's clock
    c = claim(lease_s=30, idempotent=True)
    stale = ticket_of(await admit(store, adm(c), now))
    ticket_of(await admit(store, adm(c), now + 31))  # the lease expired: someone else owns it
    rec = record("prp_01JSTALE", DENIED)
    settled = await store.settle(
        stale, Settlement.SUCCEEDED, response=DENIED, record=rec, ttl_s=60, now=now + 32
    )
    assert settled is False
    assert await store.load_decision("prp_01JSTALE") == rec


async def test_settle_without_a_claim_or_charges_saves_the_decision(store: Store) -> None:
    now = time.time()
    ticket = ticket_of(await admit(store, adm(None), now))
    rec = record("prp_01JNOCLAIM", OK)
    settled = await store.settle(
        ticket, Settlement.SUCCEEDED, response=OK, record=rec, ttl_s=60, now=now
    )
    assert settled is True
    assert await store.load_decision("prp_01JNOCLAIM") == rec


async def test_decision_expires(store: Store) -> None:
    await store.save_decision(record("prp_01JSHORT"), ttl_s=1)
    assert await store.load_decision("prp_01JSHORT") == record("prp_01JSHORT")
    await asyncio.sleep(1.05)
    assert await store.load_decision("prp_01JSHORT") is None


# -- concurrency --------------------------------------------------------------------------------


@asynccontextmanager
async def sharing(store: Store, count: int) -> AsyncIterator[list[Store]]:
    """``count`` stores over ``store``'s state, each with connections of its own where the
    backend has connections (Redis: separate clients on the same key prefix, as separate broker
    processes would be); otherwise ``store`` itself, ``count`` times."""
    if not isinstance(store, RedisStore):
        yield [store] * count
        return
    clients = [await connected_redis(socket_timeout=5, max_connections=50) for _ in range(count)]
    # The fixture's random prefix: the same keys, other clients.
    stores = [RedisStore(client, prefix=store.prefix) for client in clients]
    try:
        yield list(stores)
    finally:
        for each, client in zip(stores, clients, strict=True):
            await each.close()  # its own connections (the client is not the store's)
            await client.aclose()


async def test_concurrent_admits_never_overspend(store: Store) -> None:
    """A budget of 10 is never overspent by 100 admissions in flight at once.

    With Redis the admissions are spread over four clients, so they race inside the server as
    four broker processes would. The memory store cannot race at all: its ``admit`` never
    awaits (``tests/unit/test_memory_store.py`` holds it to that), so the gather below
    interleaves only between admissions; a store that yields between reading the budget and
    writing it fails this test.
    """
    charge = budget(1, limit=10)
    async with sharing(store, 4) as stores:
        results = await asyncio.gather(
            *(
                admit(stores[i % len(stores)], adm(charges=(charge,)), T0 + i / 1000)
                for i in range(100)
            )
        )
    assert sum(isinstance(r, Admitted) for r in results) == 10
    assert all(
        isinstance(r, Limited) and r.kind == "budget"
        for r in results
        if not isinstance(r, Admitted)
    )
    assert await room(store, charge, T0 + 1) == 0


async def test_concurrent_admits_of_one_key_admit_exactly_one(store: Store) -> None:
    c = claim("contended-key")
    results = await asyncio.gather(*(admit(store, adm(c), T0 + i / 1000) for i in range(50)))
    assert sum(isinstance(r, Admitted) for r in results) == 1
    assert sum(isinstance(r, Conflict) and r.kind == "in_progress" for r in results) == 49


# -- registered tools -----------------------------------------------------------------------------


def tool(name: str = "ops.restart", key: str = "key-1", spec: bytes = b'{"v":1}') -> RegisteredTool:
    return RegisteredTool(
        name=name, spec=spec, signing_secret=key, updated_at=T0, updated_by="admin:demo"
    )


async def test_a_new_store_has_no_tools_at_version_zero(store: Store) -> None:
    assert await store.tools_version() == 0
    snapshot = await store.list_tools()
    assert snapshot.version == 0 and snapshot.tools == ()
    assert await store.get_tool("ops.restart") is None
    assert await store.delete_tool("ops.restart") is None
    assert await store.tools_version() == 0


async def test_put_get_list_delete_round_trip(store: Store) -> None:
    first = await store.put_tool(tool(), keep_secret=True)
    assert first.created and not first.secret_kept and first.version == 1
    assert await store.get_tool("ops.restart") == tool()
    other = await store.put_tool(tool("ops.status", "key-2"), keep_secret=True)
    assert other.created and other.version == 2
    snapshot = await store.list_tools()
    assert snapshot.version == 2
    assert sorted(snapshot.tools, key=lambda t: t.name) == [
        tool("ops.restart"),
        tool("ops.status", "key-2"),
    ]
    assert await store.delete_tool("ops.restart") == 3
    assert await store.get_tool("ops.restart") is None
    assert [t.name for t in (await store.list_tools()).tools] == ["ops.status"]
    assert await store.tools_version() == 3


async def test_replacing_keeps_the_secret_unless_told_otherwise(store: Store) -> None:
    await store.put_tool(tool(key="original"), keep_secret=True)
    kept = await store.put_tool(tool(key="ignored", spec=b'{"v":2}'), keep_secret=True)
    assert not kept.created and kept.secret_kept and kept.version == 2
    stored = await store.get_tool("ops.restart")
    assert stored is not None and stored.spec == b'{"v":2}'
    assert stored.signing_secret == "original"
    rotated = await store.put_tool(tool(key="rotated"), keep_secret=False)
    assert not rotated.created and not rotated.secret_kept and rotated.version == 3
    stored = await store.get_tool("ops.restart")
    assert stored is not None and stored.signing_secret == "rotated"


async def test_a_deleted_tool_registers_again_with_a_fresh_secret(store: Store) -> None:
    await store.put_tool(tool(key="old"), keep_secret=True)
    await store.delete_tool("ops.restart")
    again = await store.put_tool(tool(key="new"), keep_secret=True)
    assert again.created and not again.secret_kept
    stored = await store.get_tool("ops.restart")
    assert stored is not None and stored.signing_secret == "new"


async def test_concurrent_registrations_each_bump_the_version_once(store: Store) -> None:
    writes = await asyncio.gather(
        *(store.put_tool(tool(f"ops.t{i}", f"s{i}"), keep_secret=True) for i in range(20))
    )
    assert sorted(w.version for w in writes) == list(range(1, 21))
    snapshot = await store.list_tools()
    assert snapshot.version == 20 and len(snapshot.tools) == 20
    assert {t.name: t.signing_secret for t in snapshot.tools} == {
        f"ops.t{i}": f"s{i}" for i in range(20)
    }


async def test_waiting_without_a_change_lasts_its_timeout(store: Store) -> None:
    # The first wait may open a subscription (and return when it is confirmed); the contract
    # is about every wait after it.
    await store.wait_tools_changed(0.05)
    started = time.monotonic()
    await store.wait_tools_changed(0.3)
    waited = time.monotonic() - started
    assert 0.24 <= waited < 2.0, f"waited {waited:.3f} s for a timeout of 0.3 s"


async def test_a_change_from_another_client_ends_the_wait_early(store: Store) -> None:
    if not isinstance(store, RedisStore):
        pytest.skip("one process: the writer applies its own change; waiting only paces a poll")
    await store.wait_tools_changed(0.05)  # subscribed from here on
    async with sharing(store, 1) as (writer,):
        waiting = asyncio.create_task(store.wait_tools_changed(10.0))
        await asyncio.sleep(0.1)
        assert not waiting.done(), "the wait returned before anything changed"
        started = time.monotonic()
        await writer.put_tool(tool(), keep_secret=True)
        await asyncio.wait_for(waiting, timeout=3.0)
    assert time.monotonic() - started < 2.0


# -- the completer's pass: claims stuck past their lease ------------------------------------------


async def test_complete_stuck_resolves_only_claims_past_their_lease(store: Store) -> None:
    from broker.stores import StuckClaims

    idempotent = claim("stuck-idem", lease_s=30, idempotent=True)
    effectful = claim("stuck-effect", lease_s=30, idempotent=False)
    unsent = claim("stuck-unsent", lease_s=30, idempotent=False)
    live = claim("still-leased", lease_s=300, idempotent=False)
    done = claim("settled-one", lease_s=30, idempotent=False)
    for c in (idempotent, effectful, live):
        await sent(store, await admit(store, adm(c)))
    ticket_of(await admit(store, adm(unsent)))  # its process died before the call left
    assert await settle(store, ticket_of(await admit(store, adm(done))), Settlement.SUCCEEDED)

    assert await store.complete_stuck(now=T0 + 29, limit=100) == StuckClaims()
    assert await store.complete_stuck(now=T0 + 31, limit=100) == StuckClaims(released=2, unknown=1)
    # Done once: a second pass finds nothing more, and nobody had to retry a key for it.
    assert await store.complete_stuck(now=T0 + 32, limit=100) == StuckClaims()
    assert await store.lookup(idempotent, now=T0 + 33) is None
    assert await store.lookup(unsent, now=T0 + 33) is None
    assert await store.lookup(effectful, now=T0 + 33) == Conflict("outcome_unknown")
    assert await store.lookup(live, now=T0 + 33) == Conflict("in_progress", approx(267.0))
    assert await store.lookup(done, now=T0 + 33) == Replay(OK)
    # outcome_unknown is held a day from the pass that saw it, as when a retry sees it first
    assert await admit(store, adm(effectful), T0 + 31 + DAY - 1) == Conflict("outcome_unknown")


async def test_complete_stuck_leaves_a_late_owner_nothing_to_settle(store: Store) -> None:
    from broker.stores import StuckClaims

    c = claim("late-owner", lease_s=30, idempotent=False)
    late = await sent(store, await admit(store, adm(c)))
    assert await store.complete_stuck(now=T0 + 40, limit=100) == StuckClaims(unknown=1)
    assert not await settle(store, late, Settlement.SUCCEEDED, at=T0 + 41)
    assert await store.lookup(c, now=T0 + 42) == Conflict("outcome_unknown")


async def test_complete_stuck_stops_at_its_limit(store: Store) -> None:
    claims = [claim(f"many-{i}", lease_s=10, idempotent=False) for i in range(5)]
    for c in claims:
        await sent(store, await admit(store, adm(c)))
    first = await store.complete_stuck(now=T0 + 11, limit=3)
    assert first.released + first.unknown == 3
    rest = await store.complete_stuck(now=T0 + 11, limit=100)
    assert (rest.released, rest.unknown) == (0, 2)
