"""Resident memory under sustained load: does the broker's grow with the proposals it answers?

The reliability matrix's soak row asks for flat memory. Each server (the bare Litestar endpoint,
then the broker: demo config, memory store, file ledger in a temporary directory, as
``bench/servers.py`` builds them) is warmed up, then driven through several phases of the same
load; its resident set (the process and its children, from ``/proc``) is read after each phase.
Growth per request is the slope between the first and the last reading.

The broker is sent ``lookup_order`` proposals: the whole path and a ledger record each, but no
idempotency key, so the store keeps nothing per request by design (keys are kept until their
TTL and that growth is bounded by it, not a leak). With ``--keyed``, create_support_ticket with
a fresh key each time shows that per-key cost as well.

    python bench/bench_memory.py [--phases 4] [--seconds 8] [--connections 32] [--keyed]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, LOOKUP, TICKET  # noqa: E402
from bench.loadgen import (  # noqa: E402
    free_port,
    pin_load_generator,
    post,
    process_tree,
    run_load,
    start_server,
)


def resident_bytes(pid: int) -> int:
    """VmRSS of a process and its live descendants (the file ledger's fsync child)."""
    total = 0
    for current in process_tree(pid):
        try:
            with open(f"/proc/{current}/status") as status:
                total += sum(
                    int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:")
                )
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
    return total


def measure(kind: str, args: argparse.Namespace) -> tuple[list[int], list[int]]:
    """(requests answered so far, resident bytes) after the warm-up and after each phase."""
    port = free_port()
    command = [sys.executable, "-m", "bench.servers", kind, str(port), "--store", "memory"]
    server: subprocess.Popen[bytes] = start_server(command, port, cwd=str(ROOT))
    body = LOOKUP if kind == "bare" or not args.keyed else None
    answered, counts, sizes = 0, [], []
    try:
        for phase in range(args.phases + 1):  # phase 0 warms up (allocator, caches, JIT-free)
            result = asyncio.run(
                run_load(
                    "127.0.0.1",
                    port,
                    lambda i, phase=phase: post(
                        "/v1/proposals", body or TICKET % (phase, i), HEADERS
                    ),
                    connections=args.connections,
                    seconds=args.seconds,
                )
            )
            if set(result.statuses) != {200}:
                raise SystemExit(f"{kind}: unexpected answers {result.statuses}")
            answered += result.requests
            counts.append(answered)
            sizes.append(resident_bytes(server.pid))
            print(f"{kind:<7} after {answered:>8,} requests: {sizes[-1] / 2**20:7.1f} MiB resident")
    finally:
        server.terminate()
        server.wait(timeout=10)
    return counts, sizes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument(
        "--keyed",
        action="store_true",
        help="send the broker create_support_ticket with a fresh idempotency key per request",
    )
    args = parser.parse_args()
    pin_load_generator()
    os.environ["BENCH_PREFIX"] = f"bench-{os.getpid()}"
    slopes = {}
    for kind in ("bare", "broker"):
        counts, sizes = measure(kind, args)
        # From the end of the warm-up to the last phase.
        slopes[kind] = (sizes[-1] - sizes[0]) / (counts[-1] - counts[0])
    what = "create_support_ticket, a fresh key each" if args.keyed else "lookup_order, no key"
    print(
        f"\nresident memory growth after warm-up, {args.phases} phases of {args.seconds:g} s, "
        f"{args.connections} connections ({what}):\n"
        f"  bare    {slopes['bare']:8.1f} bytes per request\n"
        f"  broker  {slopes['broker']:8.1f} bytes per request "
        f"({slopes['broker'] - slopes['bare']:+.1f} over bare)"
    )


if __name__ == "__main__":
    main()
