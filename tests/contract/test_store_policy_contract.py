"""The store's side of policy loop thresholds, on every store: a loop hit is counted in the
proposal's own admission, all or nothing with its claim and budgets, and exactly under
concurrency (``broker.policy.step`` adds it; nothing else in the store knows of policy)."""

from __future__ import annotations

import asyncio

from broker.policy.step import loop_hit_name
from broker.stores import Admitted, Limited, RateHit, Store
from tests.contract.test_store_contract import T0, adm, admit, budget, claim


def loop(limit: int = 3) -> RateHit:
    return RateHit(
        name=loop_hit_name("demo.loop_guard"),
        scope="session=5f1c|call=9a0b",
        limit=limit,
        window_s=60.0,
    )


async def test_a_full_loop_refuses_without_taking_the_claim(store: Store) -> None:
    for i in range(3):
        assert isinstance(await admit(store, adm(claim(f"k{i}"), hits=(loop(),))), Admitted)
    refused = await admit(store, adm(claim("k3"), hits=(loop(),)))
    assert isinstance(refused, Limited)
    assert (refused.kind, refused.name) == ("rate", "policy:demo.loop_guard")
    assert 0 < refused.retry_after_s <= 60
    # the key was not taken: once the window has passed it admits as new
    later = await admit(store, adm(claim("k3"), hits=(loop(),)), at=T0 + 61)
    assert isinstance(later, Admitted)


async def test_a_budget_refusal_does_not_count_the_loop_hit(store: Store) -> None:
    tight = budget(5, limit=4)
    refused = await admit(store, adm(claim("b0"), charges=(tight,), hits=(loop(1),)))
    assert isinstance(refused, Limited) and refused.kind == "budget"
    assert isinstance(await admit(store, adm(claim("b1"), hits=(loop(1),))), Admitted)


async def test_concurrent_admissions_never_pass_the_threshold(store: Store) -> None:
    results = await asyncio.gather(
        *(admit(store, adm(claim(f"c{i}"), hits=(loop(),))) for i in range(20))
    )
    assert sum(isinstance(r, Admitted) for r in results) == 3
    assert all(isinstance(r, Admitted | Limited) for r in results)
