"""Memory-store specifics the shared contract suite cannot reach (its periodic sweep)."""

from __future__ import annotations

from broker.stores import Admission, ClaimRequest, Conflict, MemoryStore
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
