"""One decision in process: the validator chain on the memory store, no HTTP, in microseconds.

Also measures argument validation alone with jsonschema-rs (the hot path) and python-jsonschema
(the schema checker) on the demo schemas, since it was the largest single cost.

    python bench/bench_decision.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jsonschema  # noqa: E402
import msgspec  # noqa: E402

from adapters.demo import DemoBackend  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import load_config  # noqa: E402
from broker.model import ProposalRequest  # noqa: E402
from broker.pipeline.orchestrator import Pipeline  # noqa: E402
from broker.stores import MemoryStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402
from broker.validators.schema import ArgsValidator  # noqa: E402

BATCH = 2000
ROUNDS = 15

ARGS = {
    "lookup_order": {"order_id": "O-55291"},
    "create_support_ticket": {
        "customer_id": "C-10429",
        "subject": "Billing discrepancy",
        "priority": "high",
    },
    "issue_credit": {"order_id": "O-55291", "amount": 25, "currency": "USD"},
}


def per_call_us(fn: object, rounds: int = ROUNDS, batch: int = BATCH) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(batch):
            fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - started) / batch * 1e6)
    return statistics.median(samples)


async def async_per_call_us(make_call: object, rounds: int = ROUNDS, batch: int = BATCH) -> float:
    samples = []
    for r in range(rounds):
        started = time.perf_counter()
        for i in range(batch):
            await make_call(r * batch + i)  # type: ignore[operator]
        samples.append((time.perf_counter() - started) / batch * 1e6)
    return statistics.median(samples)


async def decisions() -> None:
    config = load_config(ROOT / "deploy" / "demo.toml")
    registry = build_registry(config, secrets={}, backends={"demo": DemoBackend()})
    pipeline = Pipeline(config=config, registry=registry, store=MemoryStore())
    principal = Authenticator(config, signing_key=None).authenticate("Bearer demo-billing-token")

    credit = ProposalRequest(
        tool="issue_credit", args=ARGS["issue_credit"], idempotency_key="k", dry_run=True
    )
    chain = await async_per_call_us(lambda i: pipeline.decide(principal, credit))
    print("validator chain, issue_credit (tool, authz, schema, key, 3 preconditions,")
    print(f"  budget + rate evaluated, dry run so nothing spent):      {chain:6.1f} us median")

    def claimed(i: int) -> ProposalRequest:
        return ProposalRequest(
            tool="create_support_ticket",
            args=ARGS["create_support_ticket"],
            idempotency_key=f"chain-{i}",
        )

    claim = await async_per_call_us(lambda i: pipeline.decide(principal, claimed(i)))
    print(f"validator chain, create_support_ticket, key claimed:      {claim:6.1f} us median")
    dry = await async_per_call_us(lambda i: pipeline.propose(principal, credit))
    print(f"whole dry run answer (chain + preview + problem/JSON):    {dry:6.1f} us median")

    def ticket(i: int) -> ProposalRequest:
        return ProposalRequest(
            tool="create_support_ticket",
            args=ARGS["create_support_ticket"],
            idempotency_key=f"key-{i}",
        )

    full = await async_per_call_us(lambda i: pipeline.propose(principal, ticket(i)))
    print(f"decision + execution + settlement, create_support_ticket: {full:6.1f} us median")
    rejected = ProposalRequest(tool="issue_credit", args={"order_id": "x"}, idempotency_key="k")
    schema = await async_per_call_us(lambda i: pipeline.propose(principal, rejected))
    print(f"schema rejection (3 errors, problem+json):                {schema:6.1f} us median")


def validators() -> None:
    config = load_config(ROOT / "deploy" / "demo.toml")
    print("\nargument validation per call (valid args):")
    for name, tool in config.tools.items():
        fast = ArgsValidator(tool.input_schema)
        reference = jsonschema.Draft202012Validator(tool.input_schema)
        args = ARGS[name]
        rs = per_call_us(lambda f=fast, a=args: f.errors(a))
        py = per_call_us(lambda r=reference, a=args: r.is_valid(a), batch=500)
        print(
            f"  {name:24s} jsonschema-rs {rs:5.2f} us   python-jsonschema {py:6.2f} us   x{py / rs:4.0f}"
        )
    encoded = msgspec.json.encode(ARGS["issue_credit"])
    print(
        f"  (for scale: msgspec decoding those args {per_call_us(lambda: msgspec.json.decode(encoded)):.2f} us)"
    )


if __name__ == "__main__":
    asyncio.run(decisions())
    validators()
