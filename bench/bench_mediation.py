"""Tool mediation's cost: the proposal path with ten mediation rules on the route against none,
same run, in process (chain + execution on the memory store, no HTTP, no ledger: the smallest
denominator, so the share is an upper bound of what it adds over HTTP).

Rounds alternate between the two pipelines so both see the same machine load, and the share
is the median of each round pair's ratio (robust to the load other jobs put on the machine).

    python bench/bench_mediation.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.demo import DemoBackend  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import parse_config  # noqa: E402
from broker.model import ProposalRequest  # noqa: E402
from broker.pipeline.orchestrator import Pipeline  # noqa: E402
from broker.stores import MemoryStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402

BATCH = 500
ROUNDS = 60

TEN_RULES: list[dict[str, Any]] = [
    {"action": "rename", "tool": "lookup_order", "name": "find_order"},
    {"action": "augment", "tool": "lookup_order", "description_append": "Read only."},
    {"action": "augment", "tool": "lookup_order", "properties": {"note": {"type": "string"}}},
    {"action": "require_reason", "tool": "lookup_order"},
    {"action": "rename", "tool": "issue_credit", "name": "credit"},
    {"action": "augment", "tool": "issue_credit", "description_append": "Ask first."},
    {"action": "augment", "tool": "issue_credit", "properties": {"ticket": {"type": "string"}}},
    {"action": "require_reason", "tool": "issue_credit"},
    {"action": "augment", "tool": "issue_credit", "description_append": "Never twice."},
    {"action": "hide", "tool": "create_support_ticket"},
]


def pipeline(rules: list[dict[str, Any]] | None) -> tuple[Pipeline, Any]:
    raw = tomllib.loads((ROOT / "deploy" / "demo.toml").read_text(encoding="utf-8"))
    if rules:
        raw["routes"]["billing_help"]["mediation"] = {"rules": rules}
    config = parse_config(raw)
    registry = build_registry(config, secrets={}, backends={"demo": DemoBackend()})
    principal = Authenticator(config, signing_key=None).authenticate("Bearer demo-billing-token")
    return Pipeline(config=config, registry=registry, store=MemoryStore()), principal


async def per_call_us(run: Any) -> float:
    started = time.perf_counter()
    for _ in range(BATCH):
        await run()
    return (time.perf_counter() - started) / BATCH * 1e6


async def main() -> None:
    plain, principal = pipeline(None)
    mediated, _ = pipeline(TEN_RULES)

    async def plain_call() -> None:
        request = ProposalRequest(tool="lookup_order", args={"order_id": "O-55291"})
        answer = await plain.propose(principal, request)
        assert answer.status == 200, answer.body

    async def mediated_call() -> None:
        args = {"order_id": "O-55291", "reason": "the customer asked", "note": "n"}
        answer = await mediated.propose(principal, ProposalRequest(tool="find_order", args=args))
        assert answer.status == 200, answer.body

    await per_call_us(plain_call)  # warm both (the first call builds the route's view)
    await per_call_us(mediated_call)
    bare: list[float] = []
    ruled: list[float] = []
    for _ in range(ROUNDS):
        bare.append(await per_call_us(plain_call))
        ruled.append(await per_call_us(mediated_call))
    none_us, ten_us = statistics.median(bare), statistics.median(ruled)
    share = statistics.median(t / n - 1 for n, t in zip(bare, ruled, strict=True)) * 100
    print("proposal path in process (lookup_order: chain + execution, memory store, no ledger)")
    print(f"  no mediation rules:               {none_us:6.1f} us median of {ROUNDS} x {BATCH}")
    print(f"  ten rules (rename, reason, ...):  {ten_us:6.1f} us median")
    print(f"  mediation's share:                {share:+5.1f} % (median of paired rounds)")


if __name__ == "__main__":
    asyncio.run(main())
