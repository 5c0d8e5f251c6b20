"""The broker's front doors for one tool call, measured in one run against the same broker.

``POST /v1/proposals`` (the typed ingress) and ``POST /v1/tool-calls`` with one OpenAI Chat
Completions call: the same tool (create_support_ticket, both preconditions, a fresh idempotency
key per request), the same demo broker, each measured in its own fresh server process pinned to
core 0 with the load generator on core 1. Rounds alternate the order; ratios pair one round's
measurements. Target: ``/v1/tool-calls`` >= 0.9x the proposal path's throughput.

    python bench/bench_front_doors.py [--seconds 5] [--rounds 3] [--connections 32]
        [--store sqlite|memory]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, TICKET, TICKET_TOOL_CALL  # noqa: E402
from bench.loadgen import (  # noqa: E402
    LoadResult,
    cpu_seconds,
    free_port,
    pin_load_generator,
    post,
    run_load,
    start_server,
)

DOORS: dict[str, Callable[[int, int], bytes]] = {
    "POST /v1/proposals": lambda r, i: post("/v1/proposals", TICKET % (r, i), HEADERS),
    "POST /v1/tool-calls (openai)": lambda r, i: post(
        "/v1/tool-calls", TICKET_TOOL_CALL % (r, i), HEADERS
    ),
}


def measure(door: str, seconds: float, connections: int, store: str, round_no: int) -> LoadResult:
    port = free_port()
    command = [sys.executable, "-m", "bench.servers", "broker", str(port), "--store", store]
    server: subprocess.Popen[bytes] = start_server(command, port, cwd=str(ROOT))
    request = DOORS[door]
    try:
        _check_executes(door, port, request(round_no * 10 + 8, 0))
        asyncio.run(  # warm up: imports, caches, the store's first pages
            run_load(
                "127.0.0.1",
                port,
                lambda i: request(round_no * 10 + 9, i),
                connections=connections,
                seconds=1.0,
            )
        )
        cpu_before = cpu_seconds(server.pid)
        result = asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                lambda i: request(round_no * 10, i),
                connections=connections,
                seconds=seconds,
            )
        )
        result.server_cpu = cpu_seconds(server.pid) - cpu_before
        if set(result.statuses) != {200}:
            raise SystemExit(f"{door}: answers other than 200: {result.statuses}")
        return result
    finally:
        server.terminate()
        server.wait(timeout=10)


def _check_executes(door: str, port: int, raw: bytes) -> None:
    """Both doors answer 200 for what they measure only if it executed: the tool-calls answer
    is 200 even when its call is refused, so one request is checked before the load."""
    head, _, body = raw.partition(b"\r\n\r\n")
    path = head.split(b" ", 2)[1].decode()
    answer = httpx.post(f"http://127.0.0.1:{port}{path}", content=body, headers=HEADERS)
    decided = answer.json()
    decision = decided["decisions"][0] if "decisions" in decided else decided
    if (decision["decision"], decision["execution"]["status"]) != ("approved", "succeeded"):
        raise SystemExit(f"{door} does not execute: {answer.text}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    pin_load_generator()
    doors = list(DOORS)
    width = max(map(len, doors))
    runs: dict[str, list[LoadResult]] = {door: [] for door in doors}
    for round_no in range(args.rounds):
        for door in doors if round_no % 2 == 0 else doors[::-1]:
            result = measure(door, args.seconds, args.connections, args.store, round_no)
            print(f"round {round_no + 1}: {door:{width}} {result.summary()}")
            runs[door].append(result)

    med = statistics.median
    proposals, tool_calls = (runs[door] for door in doors)
    print(f"\nmedian of {args.rounds} rounds, {args.connections} connections, {args.store} store:")
    for door in doors:
        results = runs[door]
        print(
            f"  {door:{width}} {med(r.rps for r in results):8.0f} req/s  "
            f"p50 {med(r.percentile(50) for r in results):6.2f} ms  "
            f"p99 {med(r.percentile(99) for r in results):6.2f} ms  "
            f"cpu {med(r.cpu_per_request_us or 0.0 for r in results):5.0f} us/req"
        )
    ratios = [t.rps / p.rps for t, p in zip(tool_calls, proposals, strict=True)]
    print(
        f"  throughput ratio tool-calls/proposals: {med(ratios):.2f}  "
        f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; target >= 0.90)"
    )


if __name__ == "__main__":
    main()
