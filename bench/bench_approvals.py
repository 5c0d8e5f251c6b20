"""The pending path (proposal → 202 pending_approval) against an approved dry run of the same
tool, in process (no HTTP), in one run: the ratio is the point. By default on the memory store
without a ledger: the pending path's own work, nothing else.

The pending path takes the admission (claim, budget, rate slot), writes the approval, and
settles the key with the 202; the dry run evaluates the same chain and asks the adapter for a
preview. Issue 23 asks for a ratio of at most 1.2.

    python bench/bench_approvals.py                  # timed, one call at a time
    python bench/bench_approvals.py --store sqlite --ledger --concurrency 32  # as a server pays
    python bench/bench_approvals.py --store redis    # the same on the Redis at REDIS_URL
    python bench/bench_approvals.py --instructions   # callgrind's count: what a busy box cannot move
    python bench/bench_approvals.py --instructions --store sqlite --ledger --concurrency 32

The timed mode runs rounds of calls, a round of dry runs then one of pending calls, in turn (a
neighbour that slows the box weighs on both sides of a round's ratio alike), ``--concurrency``
calls in flight at once, and prints the medians over the rounds of:

* CPU per call: the process's CPU time (``time.process_time``: every thread, the SQLite writer's
  too, user and system) over the round, divided by its calls. What a loaded server pays for
  each call, the number to hold to the 1.2x when calls wait for something (a commit).
* wall per call: the round's elapsed time divided by its calls. With one call in flight and
  nothing to wait for (the memory store), the same as the CPU; where a call waits for a commit
  it is latency instead: a pending call alone waits for its SQLite commit (the approval is
  durable before the 202 is sent), which the dry run never does.
* the ratios pending / dry run of both, each the median of the rounds' own ratios.

On Redis the store's round trips count too (a fresh key prefix, deleted afterwards). ``--store
sqlite`` is the embedded default's store (``synchronous = normal``, a fresh file in a temporary
directory) and ``--ledger`` the file ledger with ``ledger_fsync = "batch"`` beside it, both
records written as every proposal's are: what a user of ``broker serve`` meets, but HTTP. Under
``--instructions`` the store's writer threads are counted with the loop (not the kernel's
writes and fsyncs, which only the CPU and wall times show).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from adapters.demo import DemoBackend  # noqa: E402
from bench.procs import REDIS_URL, delete_prefix, redis_reachable  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import load_config  # noqa: E402
from broker.gc_tuning import tune_gc_for_serving  # noqa: E402
from broker.model import ProposalRequest  # noqa: E402
from broker.pipeline.orchestrator import Pipeline  # noqa: E402
from broker.policy.config import PolicyConfig  # noqa: E402
from broker.state import open_ledger  # noqa: E402
from broker.stores import AdmissionStore, MemoryStore, SqliteStore  # noqa: E402
from broker.stores.redis import RedisStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402

BATCH = 1000
ROUNDS = 15
ARGS = {"order_id": "O-55300", "amount": 150, "currency": "USD"}


Propose = Callable[[int], Awaitable[object]]


async def in_flight(propose: Propose, first: int, last: int, concurrency: int) -> None:
    """Calls ``first`` to ``last``, ``concurrency`` at a time (as requests in flight share the
    store's commits and the ledger's writes)."""
    for start in range(first, last, concurrency):
        await asyncio.gather(*(propose(i) for i in range(start, min(last, start + concurrency))))


class Round(NamedTuple):
    cpu_us: float
    wall_us: float


async def one_round(propose: Propose, first: int, concurrency: int) -> Round:
    """CPU (every thread of the process) and wall time per call over ``BATCH`` calls."""
    cpu, wall = time.process_time(), time.perf_counter()
    await in_flight(propose, first, first + BATCH, concurrency)
    return Round(
        (time.process_time() - cpu) / BATCH * 1e6, (time.perf_counter() - wall) / BATCH * 1e6
    )


async def interleaved(dry: Propose, pending: Propose, concurrency: int) -> dict[str, float]:
    """Medians over the rounds, which alternate: of each side's µs per call, and of each
    round's ratio (pending / dry run)."""
    rounds: list[tuple[Round, Round]] = []
    for r in range(ROUNDS):
        rounds.append(
            (
                await one_round(dry, r * BATCH, concurrency),
                await one_round(pending, r * BATCH, concurrency),
            )
        )
    return {
        "dry_cpu": statistics.median(d.cpu_us for d, _ in rounds),
        "pending_cpu": statistics.median(p.cpu_us for _, p in rounds),
        "cpu_ratio": statistics.median(p.cpu_us / d.cpu_us for d, p in rounds),
        "dry_wall": statistics.median(d.wall_us for d, _ in rounds),
        "pending_wall": statistics.median(p.wall_us for _, p in rounds),
        "wall_ratio": statistics.median(p.wall_us / d.wall_us for d, p in rounds),
    }


def build(
    store: AdmissionStore | None = None, scratch: Path | None = None
) -> tuple[Propose, Propose, Callable[[], Awaitable[None]]]:
    """Proposing an ``issue_credit`` that waits for approval, its approved dry run, and what
    closes the ledger; with a file ledger (fsync batch) in ``scratch`` when one is given."""
    config = load_config(ROOT / "deploy" / "demo.toml")
    # Room for every call of the run: the budget and rate limit would refuse most of them. The
    # rate window is a millisecond: a real log holds at most its limit's stamps (20 in the
    # demo), not every call of the run, which the SQLite store would write whole every time.
    budgets = {name: msgspec.structs.replace(b, limit=1e12) for name, b in config.budgets.items()}
    rates = {
        name: msgspec.structs.replace(r, limit=10**9, window_s=1e-3)
        for name, r in config.rate_limits.items()
    }
    # Approval alone: guarded_billing's policy (session rules, lookup first) would refuse these
    # calls, and it costs the same on both paths.
    routes = dict(config.routes)
    routes["guarded_billing"] = msgspec.structs.replace(
        routes["guarded_billing"], require_session_id=False
    )
    service = config.service
    if scratch is not None:
        service = msgspec.structs.replace(
            service,
            ledger_path=str(scratch / "ledger.jsonl"),
            ledger_key_path=str(scratch / "key.pem"),
            ledger_fsync="batch",
        )
    config = msgspec.structs.replace(
        config,
        budgets=budgets,
        rate_limits=rates,
        routes=routes,
        policy=PolicyConfig(),
        service=service,
    )
    store = store or MemoryStore()
    ledger = open_ledger(config, store) if scratch is not None else None  # type: ignore[arg-type]
    registry = build_registry(config, secrets={}, backends={"demo": DemoBackend()})
    pipeline = Pipeline(
        config=config,
        registry=registry,
        store=store,
        ledger=ledger.sink if ledger else None,
        probe_ledger=ledger.probe_before_write if ledger else False,
    )
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

    async def close() -> None:
        if ledger is not None:
            await ledger.sink.close()

    return pending, dry, close


@contextlib.asynccontextmanager
async def deployment(store_kind: str, with_ledger: bool) -> AsyncIterator[tuple[Propose, Propose]]:
    """The two paths on ``store_kind`` (with the file ledger if asked), closed afterwards."""
    store: AdmissionStore | None = None
    prefix = f"bench-approvals-{uuid.uuid4().hex[:10]}"
    scratch = Path(tempfile.mkdtemp(prefix="bench-approvals-"))
    if store_kind == "redis":
        if not redis_reachable(REDIS_URL):
            raise SystemExit(f"no Redis at {REDIS_URL}")
        store = RedisStore.from_url(REDIS_URL, prefix=prefix)
    elif store_kind == "sqlite":
        store = SqliteStore(scratch / "state.sqlite3", synchronous="normal")
    try:
        pending, dry, close = build(store, scratch if with_ledger else None)
        try:
            yield pending, dry
        finally:
            await close()
    finally:
        if store is not None:
            await store.close()
        if store_kind == "redis":
            delete_prefix(REDIS_URL, prefix)
        shutil.rmtree(scratch, ignore_errors=True)


async def timed(store_kind: str, with_ledger: bool, concurrency: int) -> None:
    async with deployment(store_kind, with_ledger) as (pending, dry):
        await in_flight(pending, -200, 0, concurrency)
        await in_flight(dry, -200, 0, concurrency)
        tune_gc_for_serving()  # as `broker serve` does: the app's objects out of every collection
        m = await interleaved(dry, pending, concurrency)
    print(f"{concurrency} in flight, µs per call (median of {ROUNDS} rounds):   CPU    wall")
    print(f"approved dry run, issue_credit:          {m['dry_cpu']:7.1f} {m['dry_wall']:7.1f}")
    print(
        f"pending approval (202), issue_credit:    {m['pending_cpu']:7.1f} {m['pending_wall']:7.1f}"
    )
    print(
        f"pending / dry run:                       {m['cpu_ratio']:6.2f}x {m['wall_ratio']:6.2f}x"
        "  (issue 23: <= 1.2x)"
    )


async def child(
    kind: str, calls: int, store_kind: str, with_ledger: bool, concurrency: int
) -> None:
    """Under callgrind: warm up, then ``calls`` proposals of one kind between the two lines,
    ``concurrency`` at a time."""
    async with deployment(store_kind, with_ledger) as (pending, dry):
        propose = pending if kind == "pending" else dry
        await in_flight(propose, -200, 0, concurrency)
        tune_gc_for_serving()
        print("measure", flush=True)
        sys.stdin.readline()
        await in_flight(propose, 0, calls, concurrency)
        print(f"done {calls}", flush=True)
        sys.stdin.readline()


def counted(calls: int, store_kind: str, with_ledger: bool, concurrency: int) -> None:
    from bench.bench_instructions import count_instructions

    options = ["--store", store_kind, *(["--ledger"] if with_ledger else [])]
    options += ["--concurrency", str(concurrency)]
    counts = {
        kind: count_instructions(
            [__file__, "--child", kind, "--calls", str(calls), *options], calls, what=kind
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
    parser.add_argument("--store", choices=["memory", "redis", "sqlite"], default="memory")
    parser.add_argument("--ledger", action="store_true", help="the file ledger, fsync batch")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="proposals in flight at once (1: each alone)",
    )
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child, args.calls, args.store, args.ledger, args.concurrency))
    elif args.instructions:
        if args.store == "redis":
            raise SystemExit("--instructions counts the memory or SQLite store")
        counted(args.calls, args.store, args.ledger, args.concurrency)
    else:
        asyncio.run(timed(args.store, args.ledger, args.concurrency))


if __name__ == "__main__":
    main()
