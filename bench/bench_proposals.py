"""The broker's full proposal path against a bare Litestar endpoint, same bodies, same run.

Each server runs alone in its own process pinned to core 0; the load generator runs on core 1.
The broker path is create_support_ticket with a fresh idempotency key per request: token lookup,
strict decoding, schema, both preconditions, the idempotency claim, the adapter call and the
settlement. Prints throughput and p50/p99 for each, and the ratios; repeats and quotes medians.

    python bench/bench_proposals.py [--seconds 5] [--rounds 3] [--connections 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loadgen import LoadResult, free_port, post, run_load, start_server  # noqa: E402

BODY = (
    b'{"tool":"create_support_ticket","args":{"customer_id":"C-10429",'
    b'"subject":"Billing discrepancy","priority":"high"},'
    b'"preconditions":["customer_verified","open_invoice_present"],'
    b'"idempotency_key":"bench-%d-%d"}'
)
HEADERS = {"Authorization": "Bearer demo-billing-token"}


def _start(kind: str, port: int, store: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "bench.servers", kind, str(port), "--store", store]
    return start_server(command, port, cwd=str(ROOT))


def measure(kind: str, seconds: float, connections: int, store: str, round_no: int) -> LoadResult:
    port = free_port()
    server = _start(kind, port, store)
    try:
        warm = asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                lambda i: post("/v1/proposals", BODY % (round_no * 10 + 9, i), HEADERS),
                connections=connections,
                seconds=1.0,
            )
        )
        del warm
        return asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                lambda i: post("/v1/proposals", BODY % (round_no * 10, i), HEADERS),
                connections=connections,
                seconds=seconds,
            )
        )
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
    parser.add_argument("--store", choices=["memory", "redis"], default="memory")
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
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    os.environ["BENCH_PREFIX"] = f"bench-{os.getpid()}"
    try:
        _run(args)
    finally:
        if args.store == "redis":
            _forget(os.environ["BENCH_PREFIX"])


def _run(args: argparse.Namespace) -> None:

    bare_rps, broker_rps, bare_p99, broker_p99, bare_p50, broker_p50 = [], [], [], [], [], []
    unledgered_rps: list[float] = []
    uncounted_rps: list[float] = []
    for round_no in range(args.rounds):
        bare = measure("bare", args.seconds, args.connections, args.store, round_no)
        broker = measure("broker", args.seconds, args.connections, args.store, round_no)
        print(f"round {round_no + 1}: bare   {bare.summary()}")
        print(f"round {round_no + 1}: broker {broker.summary()}")
        if args.no_ledger_variant:
            unledgered = measure(
                "broker-noledger", args.seconds, args.connections, args.store, round_no
            )
            print(f"round {round_no + 1}: broker without ledger {unledgered.summary()}")
            unledgered_rps.append(unledgered.rps)
        if args.no_metrics_variant:
            uncounted = measure(
                "broker-nometrics", args.seconds, args.connections, args.store, round_no
            )
            print(f"round {round_no + 1}: broker without metrics {uncounted.summary()}")
            uncounted_rps.append(uncounted.rps)
        bare_rps.append(bare.rps)
        broker_rps.append(broker.rps)
        bare_p50.append(bare.percentile(50))
        broker_p50.append(broker.percentile(50))
        bare_p99.append(bare.percentile(99))
        broker_p99.append(broker.percentile(99))
    med = statistics.median
    print(
        f"\nmedian of {args.rounds} rounds, {args.connections} connections, {args.store} store:\n"
        f"  bare    {med(bare_rps):8.0f} req/s  p50 {med(bare_p50):6.2f} ms  p99 {med(bare_p99):6.2f} ms\n"
        f"  broker  {med(broker_rps):8.0f} req/s  p50 {med(broker_p50):6.2f} ms  p99 {med(broker_p99):6.2f} ms\n"
        f"  throughput ratio broker/bare: {med(broker_rps) / med(bare_rps):.2f}  (target >= 0.45)\n"
        f"  p99 ratio broker/bare:        {med(broker_p99) / med(bare_p99):.2f}  (target <= 5)"
    )
    if unledgered_rps:
        cost = 1 - med(broker_rps) / med(unledgered_rps)
        print(
            f"  broker without ledger {med(unledgered_rps):8.0f} req/s: the ledger costs "
            f"{cost:.1%} of throughput (target <= 15%)"
        )
    if uncounted_rps:
        cost = 1 - med(broker_rps) / med(uncounted_rps)
        print(
            f"  broker without metrics {med(uncounted_rps):8.0f} req/s: the metrics cost "
            f"{cost:.1%} of throughput (target <= 5%)"
        )


if __name__ == "__main__":
    main()
