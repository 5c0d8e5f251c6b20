"""Two ways into the broker for the same tool call, measured in one run: the runner the
front-door benches share (``bench_front_doors``, ``bench_gateway_execute``).

Each door is measured in its own fresh server process pinned to core 0, with the load generator on
core 1. Before its load, one request is checked to have *executed* (a tool-calls answer is 200
even when its call is refused). Rounds alternate the order; ratios pair one round's measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from bench.loadgen import (
    LoadResult,
    cpu_seconds,
    free_port,
    pin_load_generator,
    run_load,
    start_server,
)

ROOT = Path(__file__).resolve().parent.parent

Door = Callable[[int, int], bytes]
"""A raw HTTP request for (round, request number): fresh idempotency keys per request."""


def measure(
    name: str, door: Door, seconds: float, connections: int, store: str, round_no: int
) -> LoadResult:
    port = free_port()
    command = [sys.executable, "-m", "bench.servers", "broker", str(port), "--store", store]
    server: subprocess.Popen[bytes] = start_server(command, port, cwd=str(ROOT))
    try:
        _check_executes(name, port, door(round_no * 10 + 8, 0))
        asyncio.run(  # warm up: imports, caches, the store's first pages
            run_load(
                "127.0.0.1",
                port,
                lambda i: door(round_no * 10 + 9, i),
                connections=connections,
                seconds=1.0,
            )
        )
        cpu_before = cpu_seconds(server.pid)
        result = asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                lambda i: door(round_no * 10, i),
                connections=connections,
                seconds=seconds,
            )
        )
        result.server_cpu = cpu_seconds(server.pid) - cpu_before
        if set(result.statuses) != {200}:
            raise SystemExit(f"{name}: answers other than 200: {result.statuses}")
        return result
    finally:
        server.terminate()
        server.wait(timeout=10)


def _check_executes(name: str, port: int, raw: bytes) -> None:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    path = lines[0].split(" ", 2)[1]
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    answer = httpx.post(
        f"http://127.0.0.1:{port}{path}",
        content=body,
        headers={"Authorization": headers["Authorization"], "Content-Type": "application/json"},
    )
    decided = answer.json()
    decision = decided["decisions"][0] if "decisions" in decided else decided
    if (decision["decision"], decision["execution"]["status"]) != ("approved", "succeeded"):
        raise SystemExit(f"{name} does not execute: {answer.text}")


def compare(doors: Mapping[str, Door], *, ratio: str, target: float) -> None:
    """Measure the two ``doors`` (reference first) and print the second's throughput ratio to the
    first's, ``ratio`` naming it, against ``target``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    pin_load_generator()
    names = list(doors)
    width = max(map(len, names))
    runs: dict[str, list[LoadResult]] = {name: [] for name in names}
    for round_no in range(args.rounds):
        for name in names if round_no % 2 == 0 else names[::-1]:
            result = measure(
                name, doors[name], args.seconds, args.connections, args.store, round_no
            )
            print(f"round {round_no + 1}: {name:{width}} {result.summary()}")
            runs[name].append(result)

    med = statistics.median
    reference, measured = (runs[name] for name in names)
    print(f"\nmedian of {args.rounds} rounds, {args.connections} connections, {args.store} store:")
    for name in names:
        results = runs[name]
        print(
            f"  {name:{width}} {med(r.rps for r in results):8.0f} req/s  "
            f"p50 {med(r.percentile(50) for r in results):6.2f} ms  "
            f"p99 {med(r.percentile(99) for r in results):6.2f} ms  "
            f"cpu {med(r.cpu_per_request_us or 0.0 for r in results):5.0f} us/req"
        )
    ratios = [m.rps / r.rps for m, r in zip(measured, reference, strict=True)]
    print(
        f"  throughput ratio {ratio}: {med(ratios):.2f}  "
        f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; target >= {target:.2f})"
    )
