"""Memory-store specifics the shared contract suite cannot reach (its periodic sweep, and that
its admission never yields to the event loop)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from broker.stores import (
    Admission,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    MemoryStore,
    RateHit,
    StoredResponse,
)
from broker.stores.base import rate_retry_after
from broker.stores.memory import _SWEEP_EVERY


def claim(key: str, *, idempotent: bool = False) -> ClaimRequest:
    return ClaimRequest(
        tenant="acme",
        route="billing_help",
        key=key,
        fingerprint="fp",
        lease_s=5,
        idempotent=idempotent,
    )


async def test_the_sweep_never_frees_an_abandoned_claim_of_a_non_idempotent_tool() -> None:
    store = MemoryStore()
    abandoned = claim("abandoned")
    taken = await store.admit(Admission(tenant="acme", claim=abandoned), now=1000.0, dry_run=False)
    assert isinstance(taken, Admitted)  # then its call is sent, and its process dies
    assert await store.dispatch(taken.ticket, proposal_id="prp_abandoned", now=1000.0)
    # Long after its lease, enough other traffic passes to trigger a sweep.
    for i in range(_SWEEP_EVERY + 1):
        await store.admit(Admission(tenant="acme", claim=None), now=5000.0 + i, dry_run=False)
    assert await store.lookup(abandoned, now=9000.0) == Conflict("outcome_unknown")


def decision(proposal_id: str) -> DecisionRecord:
    return DecisionRecord(
        proposal_id=proposal_id,
        tenant="acme",
        route="billing_help",
        response=StoredResponse(200, b"{}"),
    )


async def test_sweeps_space_out_as_the_store_grows_and_still_free_what_expired() -> None:
    store = MemoryStore(clock=lambda: 1000.0)
    kept = 3 * _SWEEP_EVERY
    for i in range(kept):
        await store.save_decision(decision(f"prp_{i}"), ttl_s=10)

    async def admissions(count: int, now: float) -> None:
        for _ in range(count):
            await store.admit(Admission(tenant="acme", claim=None), now=now, dry_run=False)

    await admissions(_SWEEP_EVERY, now=1000.0)  # a sweep: nothing has expired yet
    assert len(store._decisions) == kept
    # Everything has expired, but the next sweep waits for as many admissions as there were
    # entries left, so the scan costs a bounded amount per admission.
    await admissions(kept - 1, now=2000.0)
    assert len(store._decisions) == kept
    await admissions(1, now=2000.0)
    assert store._decisions == {}
    assert await store.load_decision("prp_0") is None


def run_without_yielding(step: Coroutine[Any, Any, AdmitResult]) -> AdmitResult:
    """Drive ``step`` by hand: it must finish on its first resumption, never handing control
    back to an event loop (where another admission could run between its read and its write)."""
    try:
        step.send(None)
    except StopIteration as done:
        result: AdmitResult = done.value
        return result
    step.close()
    raise AssertionError("admit yielded to the event loop: concurrent admissions could interleave")


def test_an_admission_never_yields_so_concurrent_ones_cannot_interleave() -> None:
    """Why the shared contract's concurrent-admission cases cannot race on this store: each
    ``admit`` runs from its first read to its last write without awaiting. A change that adds an
    ``await`` inside it (and so a window for overspending) fails here."""
    store = MemoryStore()
    charge = BudgetCharge(name="credits", scope="tenant:acme", amount=4, limit=10, window_s=3600)
    hit = RateHit(name="calls", scope="tenant:acme|route:billing_help", limit=100, window_s=60)

    def step(key: str, now: float) -> Coroutine[Any, Any, AdmitResult]:
        admission = Admission(tenant="acme", claim=claim(key), charges=(charge,), hits=(hit,))
        return store.admit(admission, now=now, dry_run=False)

    assert isinstance(run_without_yielding(step("k-1", 1000.0)), Admitted)
    assert isinstance(run_without_yielding(step("k-2", 1000.0)), Admitted)
    assert run_without_yielding(step("k-1", 1000.0)) == Conflict("in_progress", 5.0)
    assert isinstance(run_without_yielding(step("k-3", 1000.0)), Limited)
    for i in range(_SWEEP_EVERY + 1):  # the periodic sweep runs inside admit too
        unclaimed = Admission(tenant="acme", claim=None)
        run_without_yielding(store.admit(unclaimed, now=2000.0 + i, dry_run=False))


def test_a_rate_wait_is_never_longer_than_its_window() -> None:
    # Another process stamped the oldest call a little ahead of this process's clock.
    assert rate_retry_after(oldest=100.002, window_s=60, now=100.0) == 60
    assert rate_retry_after(oldest=100.0, window_s=60, now=130.0) == 30
    assert rate_retry_after(oldest=10.0, window_s=60, now=100.0) == 0.001
