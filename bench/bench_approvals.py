"""The pending path (proposal → 202 pending_approval) against an approved dry run of the same
tool, in process on the memory store (no HTTP, no ledger), in one run: the ratio is the point.

The pending path takes the admission (claim, budget, rate slot), writes the approval, and
settles the key with the 202; the dry run evaluates the same chain and asks the adapter for a
preview. Issue 23 asks for a ratio of at most 1.2.

    python bench/bench_approvals.py                  # wall time, rounds interleaved
    python bench/bench_approvals.py --store redis    # the same on the Redis at REDIS_URL
    python bench/bench_approvals.py --instructions   # callgrind's count: what a busy box cannot move

On Redis the store's round trips count too (a fresh key prefix, deleted afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from adapters.demo import DemoBackend  # noqa: E402
from bench.procs import REDIS_URL, delete_prefix, redis_reachable  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import load_config  # noqa: E402
from broker.gc_tuning import tune_gc_for_serving  # noqa: E402
from broker.model import ProposalRequest  # noqa: E402
from broker.pipeline import Pipeline  # noqa: E402
from broker.policy.config import PolicyConfig  # noqa: E402
from broker.stores import AdmissionStore, MemoryStore  # noqa: E402
from broker.stores.redis import RedisStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402

BATCH = 1000
ROUNDS = 15
ARGS = {"order_id": "O-55300", "amount": 150, "currency": "USD"}


async def batch_us(call: Callable[[int], Awaitable[object]], first: int) -> float:
    started = time.perf_counter()
    for i in range(first, first + BATCH):
        await call(i)
    return (time.perf_counter() - started) / BATCH * 1e6


async def interleaved(
    dry: Callable[[int], Awaitable[object]], pending: Callable[[int], Awaitable[object]]
) -> tuple[float, float, float]:
    """Median µs per call of each, and the median of each round's ratio: the rounds alternate,
    so a neighbour that slows the box down weighs on both sides of a ratio alike."""
    dry_us, pending_us, ratios = [], [], []
    for r in range(ROUNDS):
        dry_us.append(await batch_us(dry, r * BATCH))
        pending_us.append(await batch_us(pending, r * BATCH))
        ratios.append(pending_us[-1] / dry_us[-1])
    return statistics.median(dry_us), statistics.median(pending_us), statistics.median(ratios)


Propose = Callable[[int], Awaitable[object]]


def build(store: AdmissionStore | None = None) -> tuple[Propose, Propose]:
    """Proposing an ``issue_credit`` that waits for approval, and its approved dry run."""
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
    pipeline = Pipeline(config=config, registry=registry, store=store or MemoryStore())
    principal = Authenticator(config, signing_key=None).authenticate("Bearer demo-guarded-token")

    def proposal(i: int, *, dry_run: bool) -> ProposalRequest:
        return ProposalRequest(
            tool="issue_credit",
            args=ARGS,
            preconditions=["order_paid", "within_return_window"],
            idempotency_key=f"{'dry' if dry_run else 'pending'}-{i}",
            dry_run=dry_run,
        )

    async def pending(i: int) -> object:
        answer = await pipeline.propose(principal, proposal(i, dry_run=False))
        if answer.status != 202:
            raise SystemExit(f"expected 202 pending_approval: {answer.body!r}")
        return answer

    async def dry(i: int) -> object:
        return await pipeline.propose(principal, proposal(i, dry_run=True))

    return pending, dry


async def timed(store_kind: str) -> None:
    store: AdmissionStore | None = None
    prefix = f"bench-approvals-{uuid.uuid4().hex[:10]}"
    if store_kind == "redis":
        if not redis_reachable(REDIS_URL):
            raise SystemExit(f"no Redis at {REDIS_URL}")
        store = RedisStore.from_url(REDIS_URL, prefix=prefix)
    try:
        await _timed(store)
    finally:
        if store is not None:
            await store.close()
            delete_prefix(REDIS_URL, prefix)


async def _timed(store: AdmissionStore | None) -> None:
    pending, dry = build(store)
    await pending(-1)
    tune_gc_for_serving()  # as `broker serve` does: the app's objects out of every collection
    dry_us, pending_us, ratio = await interleaved(dry, pending)
    print(f"approved dry run, issue_credit:          {dry_us:7.1f} us median")
    print(f"pending approval (202), issue_credit:    {pending_us:7.1f} us median")
    print(
        f"pending / dry run:                       {ratio:7.2f}x median of {ROUNDS} rounds "
        "(issue 23: <= 1.2x)"
    )


async def child(kind: str, calls: int) -> None:
    """Under callgrind: warm up, then ``calls`` proposals of one kind between the two lines."""
    pending, dry = build()
    propose = pending if kind == "pending" else dry
    for i in range(-200, 0):
        await propose(i)
    tune_gc_for_serving()
    print("measure", flush=True)
    sys.stdin.readline()
    for i in range(calls):
        await propose(i)
    print(f"done {calls}", flush=True)
    sys.stdin.readline()


def counted(calls: int) -> None:
    from bench.bench_instructions import count_instructions

    counts = {
        kind: count_instructions(
            [__file__, "--child", kind, "--calls", str(calls)], calls, what=kind
        )
        for kind in ("dry", "pending")
    }
    print(f"approved dry run, issue_credit:          {counts['dry'] / 1000:7.0f}k instructions")
    print(f"pending approval (202), issue_credit:    {counts['pending'] / 1000:7.0f}k instructions")
    print(
        f"pending / dry run:                       {counts['pending'] / counts['dry']:7.2f}x "
        "(issue 23: <= 1.2x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--child", choices=["dry", "pending"])
    parser.add_argument("--store", choices=["memory", "redis"], default="memory")
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child, args.calls))
    elif args.instructions:
        counted(args.calls)
    else:
        asyncio.run(timed(args.store))


if __name__ == "__main__":
    main()
