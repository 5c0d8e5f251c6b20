"""``tool_execute`` against a direct call of the same tool, through the same front door.

Both go to ``POST /v1/tool-calls`` as one OpenAI Chat Completions call of create_support_ticket
(both preconditions, a fresh call id, hence idempotency key, per request) on the demo broker:
directly on ``billing_help`` (``tools`` catalog), and as ``tool_execute(tool_id, args)`` on
``gateway_billing`` (``gateway`` catalog). Each is measured in its own fresh server process pinned
to core 0 with the load generator on core 1; rounds alternate the order and ratios pair one
round's measurements. Target: ``tool_execute`` >= 0.9x the direct call's throughput.

    python bench/bench_gateway_execute.py [--seconds 5] [--rounds 3] [--connections 32]
        [--store sqlite|memory]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, TICKET_TOOL_CALL, ticket  # noqa: E402
from bench.loadgen import (  # noqa: E402
    LoadResult,
    cpu_seconds,
    free_port,
    pin_load_generator,
    post,
    run_load,
    start_server,
)

GATEWAY_HEADERS = {"Authorization": "Bearer demo-gateway-token"}
"""The demo's gateway_billing token (acme): the same three tools, behind the meta-tools."""

TICKET_ID = "demo:create_support_ticket@1"


def _execute_call() -> bytes:
    arguments = {"tool_id": TICKET_ID, "args": ticket("")["args"]}
    call = {
        "id": "bench-%d-%d",
        "type": "function",
        "function": {"name": "tool_execute", "arguments": json.dumps(arguments)},
    }
    # Escaped for %-formatting of the call id only.
    raw = json.dumps({"format": "openai", "calls": [call]}, separators=(",", ":"))
    return raw.replace("%", "%%").replace("bench-%%d-%%d", "bench-%d-%d").encode()


EXECUTE_TOOL_CALL = _execute_call()

DOORS: dict[str, Callable[[int, int], bytes]] = {
    "direct create_support_ticket": lambda r, i: post(
        "/v1/tool-calls", TICKET_TOOL_CALL % (r, i), HEADERS
    ),
    "tool_execute(create_support_ticket)": lambda r, i: post(
        "/v1/tool-calls", EXECUTE_TOOL_CALL % (r, i), GATEWAY_HEADERS
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
    """A tool-calls answer is 200 even when its call is refused: one request is checked to have
    executed before the load."""
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line)
    answer = httpx.post(
        f"http://127.0.0.1:{port}/v1/tool-calls",
        content=body,
        headers={"Authorization": headers["Authorization"], "Content-Type": "application/json"},
    )
    decision = answer.json()["decisions"][0]
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
    direct, executed = (runs[door] for door in doors)
    print(f"\nmedian of {args.rounds} rounds, {args.connections} connections, {args.store} store:")
    for door in doors:
        results = runs[door]
        print(
            f"  {door:{width}} {med(r.rps for r in results):8.0f} req/s  "
            f"p50 {med(r.percentile(50) for r in results):6.2f} ms  "
            f"p99 {med(r.percentile(99) for r in results):6.2f} ms  "
            f"cpu {med(r.cpu_per_request_us or 0.0 for r in results):5.0f} us/req"
        )
    ratios = [e.rps / d.rps for e, d in zip(executed, direct, strict=True)]
    print(
        f"  throughput ratio tool_execute/direct: {med(ratios):.2f}  "
        f"(rounds {min(ratios):.2f}-{max(ratios):.2f}; target >= 0.90)"
    )


if __name__ == "__main__":
    main()
