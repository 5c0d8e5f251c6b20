"""The pending path (proposal → 202 pending_approval) against an approved dry run of the same
tool, in process on the memory store (no HTTP, no ledger), in one run: the ratio is the point.

The pending path takes the admission (claim, budget, rate slot), writes the approval, and
settles the key with the 202; the dry run evaluates the same chain and asks the adapter for a
preview. Issue 23 asks for a ratio of at most 1.2.

    python bench/bench_approvals.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from adapters.demo import DemoBackend  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import load_config  # noqa: E402
from broker.gc_tuning import tune_gc_for_serving  # noqa: E402
from broker.model import ProposalRequest  # noqa: E402
from broker.pipeline import Pipeline  # noqa: E402
from broker.policy.config import PolicyConfig  # noqa: E402
from broker.stores import MemoryStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402

BATCH = 1000
ROUNDS = 9
ARGS = {"order_id": "O-55300", "amount": 150, "currency": "USD"}


async def per_call_us(call: Callable[[int], Awaitable[object]]) -> float:
    samples = []
    for r in range(ROUNDS):
        started = time.perf_counter()
        for i in range(BATCH):
            await call(r * BATCH + i)
        samples.append((time.perf_counter() - started) / BATCH * 1e6)
    return statistics.median(samples)


async def main() -> None:
    config = load_config(ROOT / "deploy" / "demo.toml")
    # Room for every call of the run: the budget and rate limit would refuse most of them.
    budgets = {name: msgspec.structs.replace(b, limit=1e12) for name, b in config.budgets.items()}
    rates = {
        name: msgspec.structs.replace(r, limit=10**9) for name, r in config.rate_limits.items()
    }
    # Approval alone: guarded_billing's policy (session rules, lookup first) would refuse these
    # calls, and it costs the same on both paths.
    routes = dict(config.routes)
    routes["guarded_billing"] = msgspec.structs.replace(
        routes["guarded_billing"], require_session_id=False
    )
    config = msgspec.structs.replace(
        config, budgets=budgets, rate_limits=rates, routes=routes, policy=PolicyConfig()
    )
    registry = build_registry(config, secrets={}, backends={"demo": DemoBackend()})
    pipeline = Pipeline(config=config, registry=registry, store=MemoryStore())
    principal = Authenticator(config, signing_key=None).authenticate("Bearer demo-guarded-token")

    def proposal(i: int, *, dry_run: bool) -> ProposalRequest:
        return ProposalRequest(
            tool="issue_credit",
            args=ARGS,
            preconditions=["order_paid", "within_return_window"],
            idempotency_key=f"{'dry' if dry_run else 'pending'}-{i}",
            dry_run=dry_run,
        )

    first = await pipeline.propose(principal, proposal(-1, dry_run=False))
    assert first.status == 202, first.body
    tune_gc_for_serving()  # as `broker serve` does: the app's objects out of every collection
    dry = await per_call_us(lambda i: pipeline.propose(principal, proposal(i, dry_run=True)))
    pending = await per_call_us(lambda i: pipeline.propose(principal, proposal(i, dry_run=False)))
    print(f"approved dry run, issue_credit:          {dry:7.1f} us median")
    print(f"pending approval (202), issue_credit:    {pending:7.1f} us median")
    print(f"pending / dry run:                       {pending / dry:7.2f}x (issue 23: <= 1.2x)")


if __name__ == "__main__":
    asyncio.run(main())
