"""The broker's full proposal path against a bare Litestar endpoint, same bodies, same run.

Each server runs alone in its own process pinned to core 0; the load generator runs on core 1.
The broker path is create_support_ticket with a fresh idempotency key per request: token lookup,
strict decoding, schema, both preconditions, the idempotency claim, the adapter call and the
settlement. Prints throughput and p50/p99 for each, and the ratios; repeats and quotes medians.

``--fast-path-variant`` adds the broker with ``[service] proposal_fast_path = true`` and prints
what answering proposals before Litestar's routing buys over the default typed handler.
``--no-ledger-variant`` adds the broker with a ledger that keeps nothing, to price the ledger;
``--baseline DIR`` adds the same broker run from another checkout (say, ``git worktree add
/tmp/base HEAD~5``), in the same rounds: the box drifts by more than most changes, so two
commits are only compared fairly side by side, and the paired ratio is printed.
``--ledger-fsync batch,always`` (the default) runs one broker per file-ledger fsync policy, the
first held to the targets (the project's rule: batch) and used by every other variant, so the
same run shows what the ledger's own work costs (``batch``) and what waiting for the disk adds
(``always``), with the fsync process's CPU shown apart.

    python bench/bench_proposals.py [--seconds 5] [--rounds 3] [--connections 32]
        [--store sqlite|memory|redis] [--store-synchronous normal,full] [--no-memory-variant]
        [--fast-path-variant] [--no-ledger-variant] [--no-metrics-variant]
        [--ledger-fsync batch,always] [--baseline DIR]

The store is the embedded SQLite default unless ``--store`` says otherwise; with it, the same
broker on the memory store runs beside (its ratio printed too), and ``--store-synchronous
normal,full`` adds a broker per durability setting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, TICKET  # noqa: E402
from bench.loadgen import (  # noqa: E402
    LoadResult,
    cpu_seconds,
    free_port,
    pin_load_generator,
    post,
    run_load,
    start_server,
)


@dataclass(frozen=True)
class Variant:
    """One server measured: a ``bench.servers`` kind, with its label and environment."""

    label: str
    kind: str
    env: dict[str, str] = field(default_factory=dict)
    store: str = ""
    """The store this variant runs on; empty: the run's ``--store``."""
    root: Path = ROOT
    """The checkout whose broker this variant runs (``--baseline``: another commit's)."""


def _start(variant: Variant, port: int, store: str) -> subprocess.Popen[bytes]:
    store = variant.store or store
    command = [sys.executable, "-m", "bench.servers", variant.kind, str(port), "--store", store]
    return start_server(command, port, cwd=str(variant.root), env=variant.env)


def measure(
    variant: Variant, seconds: float, connections: int, store: str, round_no: int
) -> LoadResult:
    port = free_port()
    server = _start(variant, port, store)
    try:
        warm = asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                lambda i: post("/v1/proposals", TICKET % (round_no * 10 + 9, i), HEADERS),
                connections=connections,
                seconds=1.0,
            )
        )
        del warm
        cpu_before = cpu_seconds(server.pid)
        children_before = cpu_seconds(server.pid, own=False)
        result = asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                lambda i: post("/v1/proposals", TICKET % (round_no * 10, i), HEADERS),
                connections=connections,
                seconds=seconds,
            )
        )
        result.server_cpu = cpu_seconds(server.pid) - cpu_before
        result.children_cpu = cpu_seconds(server.pid, own=False) - children_before
        return result
    finally:
        server.terminate()
        server.wait(timeout=10)


def _forget(prefix: str) -> None:
    """Delete the keys a Redis run wrote (only under its own prefix)."""
    from redis import Redis

    client = Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--store", choices=["sqlite", "memory", "redis"], default="sqlite")
    parser.add_argument(
        "--store-synchronous",
        default="normal",
        help="comma-separated SQLite synchronous settings (normal, full), one broker each",
    )
    parser.add_argument(
        "--no-memory-variant",
        action="store_true",
        help="with --store sqlite, skip the broker on the memory store measured beside it",
    )
    parser.add_argument(
        "--fast-path-variant",
        action="store_true",
        help="also run the broker with [service] proposal_fast_path = true, to price it",
    )
    parser.add_argument(
        "--no-metrics-variant",
        action="store_true",
        help="also run the broker with metrics that record nothing, to price the metrics",
    )
    parser.add_argument(
        "--no-ledger-variant",
        action="store_true",
        help="also run the broker with a ledger that keeps nothing, to price the ledger",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another commit: its broker runs in the same rounds, for comparison",
    )
    parser.add_argument(
        "--ledger-fsync",
        default=os.environ.get("BENCH_LEDGER_FSYNC", "batch,always"),
        help="comma-separated file-ledger fsync policies, one broker each (the first is the "
        "one compared with bare and held to the targets); default batch, with always beside",
    )
    args = parser.parse_args()
    pin_load_generator()
    os.environ["BENCH_PREFIX"] = f"bench-{os.getpid()}"
    try:
        _run(args)
    finally:
        if args.store == "redis":
            _forget(os.environ["BENCH_PREFIX"])


def _variants(args: argparse.Namespace) -> tuple[list[Variant], list[Variant]]:
    """Every server to measure, and the brokers among them (the first is compared with bare)."""
    policies = [policy for policy in args.ledger_fsync.split(",") if policy] or [""]
    # Every variant but the other policies' brokers runs on the policy of the target row.
    held = {"BENCH_LEDGER_FSYNC": policies[0]} if policies[0] else {}
    brokers = [
        Variant("broker", "broker")
        if not policy
        else Variant(
            f"broker, fsync {policy}" if number else "broker",
            "broker",
            {"BENCH_LEDGER_FSYNC": policy},
        )
        for number, policy in enumerate(policies)
    ]
    if args.store == "sqlite":
        for setting in [s for s in args.store_synchronous.split(",") if s][1:]:
            brokers.append(
                Variant(
                    f"broker, sqlite {setting}",
                    "broker",
                    {**held, "BENCH_STORE_SYNCHRONOUS": setting},
                )
            )
        if args.store_synchronous.split(",")[0] == "full":
            brokers[0].env["BENCH_STORE_SYNCHRONOUS"] = "full"
        if not args.no_memory_variant:
            brokers.append(Variant("broker, memory store", "broker", dict(held), store="memory"))
    if args.baseline is not None:
        if not (args.baseline / "bench" / "servers.py").is_file():
            raise SystemExit(f"--baseline {args.baseline}: not a checkout of this project")
        baseline = args.baseline.resolve()
        brokers.append(Variant("broker, baseline", "broker", dict(held), root=baseline))
    variants = [Variant("bare", "bare"), *brokers]
    if args.fast_path_variant:
        variants.append(Variant("broker, fast path", "broker", {**held, "BENCH_FAST_PATH": "1"}))
    if args.no_ledger_variant:
        variants.append(Variant("broker without ledger", "broker-noledger"))
    if args.no_metrics_variant:
        variants.append(Variant("broker without metrics", "broker-nometrics", dict(held)))
    return variants, brokers


def _run(args: argparse.Namespace) -> None:
    variants, brokers = _variants(args)
    width = max(len(variant.label) for variant in variants)
    runs: dict[str, list[LoadResult]] = {variant.label: [] for variant in variants}
    for round_no in range(args.rounds):
        # The box drifts (other tenants, clock speed): every other round runs the variants in
        # reverse order, and the ratios below pair the variants of one round.
        order = variants if round_no % 2 == 0 else variants[::-1]
        for variant in order:
            result = measure(variant, args.seconds, args.connections, args.store, round_no)
            print(f"round {round_no + 1}: {variant.label:{width}} {result.summary()}")
            runs[variant.label].append(result)

    med = statistics.median

    def paired(kind: str, of: str = "bare") -> tuple[float, float, float]:
        ratios = [a.rps / b.rps for a, b in zip(runs[kind], runs[of], strict=True)]
        return med(ratios), min(ratios), max(ratios)

    def cpu_paired(kind: str, of: str = "bare") -> float:
        """Median over rounds of ``of``'s server CPU per request over ``kind``'s: what the
        throughput ratio would be if both servers were held to their CPU alone."""
        return med(
            b.cpu_per_request_us / a.cpu_per_request_us  # type: ignore[operator]
            for a, b in zip(runs[kind], runs[of], strict=True)
        )

    def summary(label: str) -> str:
        results = runs[label]
        children = med(r.children_cpu_per_request_us or 0.0 for r in results)
        return (
            f"{med(r.rps for r in results):8.0f} req/s  "
            f"p50 {med(r.percentile(50) for r in results):6.2f} ms  "
            f"p99 {med(r.percentile(99) for r in results):6.2f} ms  "
            f"cpu {med(r.cpu_per_request_us or 0.0 for r in results):5.0f} us/req"
            + (f" (of which the fsync process {children:.0f})" if children >= 0.5 else "")
        )

    ratio, low, high = paired("broker")
    p99 = med(
        b.percentile(99) / a.percentile(99)
        for a, b in zip(runs["bare"], runs["broker"], strict=True)
    )
    print(f"\nmedian of {args.rounds} rounds, {args.connections} connections, {args.store} store:")
    for variant in variants:
        if not variant.kind.startswith("broker-"):
            print(f"  {variant.label:{width}} {summary(variant.label)}")
    print(
        f"  throughput ratio broker/bare: {ratio:.2f}  (rounds {low:.2f}-{high:.2f}; "
        f"targets on the embedded store: >= 0.45, and >= 0.40 on sqlite)\n"
        f"  server CPU per request, bare/broker: {cpu_paired('broker'):.2f}\n"
        f"  p99 ratio broker/bare:        {p99:.2f}  (target <= 5)"
    )
    for other in brokers[1:]:
        ratio, low, high = paired(other.label)
        print(f"  throughput ratio {other.label}/bare: {ratio:.2f}  (rounds {low:.2f}-{high:.2f})")
    if "broker, baseline" in runs:
        gain, low, high = paired("broker", of="broker, baseline")
        saved = 1 - cpu_paired("broker, baseline", of="broker")
        print(
            f"  broker against its baseline: {gain - 1:+.1%} throughput (rounds {low - 1:+.1%} to "
            f"{high - 1:+.1%}), {saved:+.1%} server CPU per request saved"
        )
    if "broker, fast path" in runs:
        gain, low, high = paired("broker, fast path", of="broker")
        saved = 1 - cpu_paired("broker", of="broker, fast path")
        print(
            f"  the fast path buys {gain - 1:.1%} throughput over the typed handler (rounds "
            f"{low - 1:.1%}-{high - 1:.1%}; kept, opt-in, only at >= 15%) and saves "
            f"{saved:.1%} of its server CPU per request"
        )
    for without, what, target, priced in (
        ("broker without ledger", "ledger", 15, brokers),
        ("broker without metrics", "metrics", 5, brokers[:1]),
    ):
        if without not in runs:
            continue
        print(f"  {without} {summary(without)}:")
        for broker in priced:
            kept, low, high = paired(broker.label, of=without)
            print(
                f"    {broker.label}: the {what} costs {1 - kept:.1%} of throughput "
                f"(rounds {1 - high:.1%}-{1 - low:.1%}; target <= {target}%), "
                f"{1 - cpu_paired(broker.label, of=without):.1%} of server CPU per request"
            )


if __name__ == "__main__":
    main()
