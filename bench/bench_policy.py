"""What 1,000 policy rules cost the proposal path, against no rules, in the same run.

In process (no HTTP, so the ratio is stricter than over the wire): ``Pipeline.propose`` of
create_support_ticket on the memory store, decision, execution and settlement, with a fresh
key each time. The "1,000 rules" config adds 1,000 tools and one rule naming each (the rule set
an operator with many tools writes), plus one rule on the proposal's own tool whose argument
predicate does not match, so the policy step runs and evaluates it. Rules are indexed by tool:
the proposal only looks at the rules that can concern its tool. Rounds alternate; medians.

    python bench/bench_policy.py [--rounds 9] [--batch 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tomllib  # noqa: E402

from adapters.demo import DemoBackend  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import BrokerConfig  # noqa: E402
from broker.config.loading import parse_config  # noqa: E402
from broker.model import ProposalRequest  # noqa: E402
from broker.pipeline.orchestrator import Pipeline  # noqa: E402
from broker.stores import MemoryStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402

TICKET_ARGS = {"customer_id": "C-10429", "subject": "Billing discrepancy", "priority": "high"}


def demo_raw() -> dict[str, Any]:
    with (ROOT / "deploy" / "demo.toml").open("rb") as handle:
        return tomllib.load(handle)


def with_rules(count: int) -> BrokerConfig:
    raw = demo_raw()
    raw["policy"] = {"rules": []}
    if count:
        template = raw["tools"]["lookup_order"]
        rules: list[dict[str, Any]] = []
        for i in range(count - 1):
            raw["tools"][f"extra_tool_{i}"] = copy.deepcopy(template)
            rules.append({"id": f"bench.r{i}", "action": "block", "tools": [f"extra_tool_{i}"]})
        rules.append(
            {
                "id": "bench.low_priority",
                "action": "block",
                "tools": ["create_support_ticket"],
                "routes": ["billing_help"],
                "args": [{"arg": "priority", "op": "eq", "value": "low"}],
            }
        )
        raw["policy"] = {"rules": rules}
    return parse_config(raw)


def pipeline_for(config: BrokerConfig) -> Pipeline:
    registry = build_registry(config, secrets={}, backends={"demo": DemoBackend()})
    return Pipeline(config=config, registry=registry, store=MemoryStore())


async def per_proposal_us(pipeline: Pipeline, config: BrokerConfig, tag: str, batch: int) -> float:
    principal = Authenticator(config, signing_key=None).authenticate("Bearer demo-billing-token")
    started = time.perf_counter()
    for i in range(batch):
        request = ProposalRequest(
            tool="create_support_ticket", args=TICKET_ARGS, idempotency_key=f"{tag}-{i}"
        )
        await pipeline.propose(principal, request)
    return (time.perf_counter() - started) / batch * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch", type=int, default=2000)
    options = parser.parse_args()
    configs = {"no rules": with_rules(0), "1,000 rules": with_rules(1000)}
    pipelines = {label: pipeline_for(config) for label, config in configs.items()}
    samples: dict[str, list[float]] = {label: [] for label in configs}
    for round_no in range(options.rounds + 1):
        for label, pipeline in pipelines.items():
            took = await per_proposal_us(
                pipeline, configs[label], f"{label}-{round_no}", options.batch
            )
            if round_no:  # the first round warms up
                samples[label].append(took)
    base = statistics.median(samples["no rules"])
    ruled = statistics.median(samples["1,000 rules"])
    print("proposal path in process (create_support_ticket: decision, execution, settlement)")
    print(f"  no rules:     {base:7.1f} us median of {options.rounds} rounds")
    print(f"  1,000 rules:  {ruled:7.1f} us median")
    print(f"  cost of the rules: {(ruled / base - 1) * 100:+.1f} % (target: at most +10 %)")


if __name__ == "__main__":
    asyncio.run(main())
