"""Memory-store specifics the shared contract suite cannot reach (its periodic sweep)."""

from __future__ import annotations

from broker.stores import (
    Admission,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    MemoryStore,
    StoredResponse,
)
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
    await store.admit(Admission(tenant="acme", claim=abandoned), now=1000.0, dry_run=False)
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
