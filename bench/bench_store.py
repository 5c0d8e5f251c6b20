"""What the store costs per proposal: an admission, the dispatch mark and a settlement, as the
pipeline makes them (and without the mark, to price it).

Runs the same sequence (a claim, a budget charge and a rate-limit hit; the claim marked
dispatched, as just before the adapter call; then a successful settlement with its decision
record) against the memory store and the SQLite store under each
durability setting, one proposal at a time and many in flight (the SQLite store commits once
per turn of the event loop for every call of that turn), and prints the median wall-clock
and CPU microseconds per proposal over the rounds (CPU of every thread: the SQLite store commits
from a writer thread). Beside them: what handing one call to a worker thread and back costs (the store runs
its statements on the event loop instead; see broker/stores/sqlite.py), so the two can be
compared on this machine.

    python bench/bench_store.py [--proposals 3000] [--rounds 5] [--concurrency 1,32] [--dir DIR]
        [--mark both|yes|no]

``--dir`` puts the database files on the disk to be priced (default: a temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.ids import new_ulid  # noqa: E402
from broker.stores import (  # noqa: E402
    Admission,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    DecisionRecord,
    MemoryStore,
    RateHit,
    Settlement,
    SqliteStore,
    Store,
    StoredResponse,
)

RESPONSE = StoredResponse(200, b'{"decision":"approved","execution":{"status":"succeeded"}}' * 4)


async def one_proposal(store: Store, key: str, *, mark: bool) -> None:
    charge = BudgetCharge(
        name="tickets", scope="tenant:acme", amount=1, limit=10**12, window_s=86_400
    )
    # A rate limit per route (the demo's is per tenant and route), here over 1000 routes.
    hit = RateHit(name="calls", scope=f"route:{hash(key) % 1000}", limit=10**6, window_s=60.0)
    claim = ClaimRequest(
        tenant="acme", route="billing", key=key, fingerprint="fp", lease_s=40.0, idempotent=False
    )
    now = time.time()
    admitted = await store.admit(
        Admission(tenant="acme", claim=claim, charges=(charge,), hits=(hit,)),
        now=now,
        dry_run=False,
    )
    assert isinstance(admitted, Admitted), admitted
    # Proposal ids are the pipeline's: ULIDs, in the order they were made.
    proposal_id = f"prp_{new_ulid()}"
    if mark:
        assert await store.dispatch(admitted.ticket, proposal_id=proposal_id, now=now)
    record = DecisionRecord(
        proposal_id=proposal_id, tenant="acme", route="billing", response=RESPONSE
    )
    await store.settle(
        admitted.ticket,
        Settlement.SUCCEEDED,
        response=RESPONSE,
        record=record,
        ttl_s=86_400,
        now=now,
    )


async def per_proposal_us(
    store: Store, proposals: int, concurrency: int, tag: str, *, mark: bool
) -> tuple[float, float]:
    """Wall-clock and CPU (every thread of the process) microseconds per proposal, with
    ``concurrency`` proposals in flight."""

    async def worker(w: int) -> None:
        for i in range(w, proposals, concurrency):
            await one_proposal(store, f"bench-{tag}-{i}", mark=mark)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    wall = time.perf_counter() - started
    return wall / proposals * 1e6, (time.process_time() - cpu) / proposals * 1e6


async def thread_hop_us(calls: int) -> float:
    """Two round trips to a worker thread (an admission and a settlement) doing nothing."""
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(1) as pool:
        started = time.perf_counter()
        for _ in range(calls):
            await loop.run_in_executor(pool, int)
            await loop.run_in_executor(pool, int)
        return (time.perf_counter() - started) / calls * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proposals", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--concurrency", default="1,32", help="proposals in flight, comma-separated"
    )
    parser.add_argument(
        "--mark", choices=["both", "yes", "no"], default="both", help="the dispatch mark"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=args.dir) as scratch:
        stores: dict[str, Store] = {
            "memory": MemoryStore(),
            "sqlite, synchronous normal": SqliteStore(Path(scratch) / "normal.db"),
            "sqlite, synchronous full": SqliteStore(Path(scratch) / "full.db", synchronous="full"),
        }
        levels = [int(c) for c in args.concurrency.split(",")]
        marks = {"both": (False, True), "yes": (True,), "no": (False,)}[args.mark]
        times: dict[str, list[tuple[float, float]]] = {}
        for round_no in range(args.rounds):
            for label, store in stores.items():
                for level in levels:
                    for mark in marks:
                        tag = f"{round_no}-{level}-{int(mark)}"
                        spent = await per_proposal_us(store, args.proposals, level, tag, mark=mark)
                        marked = "marked" if mark else "unmarked"
                        times.setdefault(f"{label}, {level} in flight, {marked}", []).append(spent)
            hop = await thread_hop_us(args.proposals)
            times.setdefault("thread hop x2 (no store)", []).append((hop, float("nan")))
        for store in stores.values():
            await store.close()
    print(
        f"median of {args.rounds} rounds, {args.proposals} proposals each "
        "(admit [+ dispatch mark] + settle):"
    )
    for label, values in times.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"  {label:52} {wall:7.1f} us/proposal wall clock, {cpu:6.1f} us CPU")


if __name__ == "__main__":
    asyncio.run(main())
