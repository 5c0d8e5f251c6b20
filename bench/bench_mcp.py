"""MCP ``tools/call`` at ``/mcp`` against ``POST /v1/proposals``, same tool, same broker, same run.

One broker process (the demo, embedded store) pinned to core 0; the load generator on core 1.
Every path calls create_support_ticket with a fresh idempotency key per request, through the
whole chain. MCP is measured two ways, both on the SDK's Streamable HTTP server: protocol
2026-07-28, what the SDK's own ``Client`` negotiates by default (one self-contained POST per
call, no session), and a 2025-06-18 session opened with ``initialize`` (what ``ClientSession``
and older clients use; every call passes through the session's dispatcher). Prints each path's
throughput and p50/p99, and each MCP/proposal ratio; repeats and quotes medians.

    python bench/bench_mcp.py [--seconds 5] [--rounds 3] [--connections 32]
        [--ledger-fsync batch|always]
    python bench/bench_mcp.py --instructions [--requests 1280] [--connections 32]
    python bench/bench_mcp.py --commits [--requests 3000] [--connections 32]

``--instructions`` drives both paths in process over ASGI (``bench.mcp_inprocess``) under
callgrind and prints instructions per call: what the noisy machine cannot move. The HTTP server
in front of the app is not counted (the same for both paths), nor the kernel. ``--commits``
drives both paths the same way (no valgrind) and prints, per 3,000 calls, how many commits the
ledger's group commit and the SQLite store's writer made: the batching that calls arriving
together share, and calls spread over many turns of the event loop lose.

The broker's ledger runs with ``ledger_fsync = "batch"`` unless ``--ledger-fsync`` says otherwise
(the project's rule for its throughput targets).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import HEADERS, TICKET  # noqa: E402
from bench.loadgen import (  # noqa: E402
    LoadResult,
    cpu_seconds,
    free_port,
    median,
    pin_load_generator,
    post,
    run_load,
    start_server,
)

ARGS = {"customer_id": "C-10429", "subject": "Billing discrepancy", "priority": "high"}
_PROTOCOL = "2025-06-18"


def _open_session(base: str) -> str:
    headers = {**HEADERS, "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": _PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    with httpx.Client(base_url=base, headers=headers, timeout=10) as http:
        opened = http.post("/mcp", json=initialize)
        opened.raise_for_status()
        session = opened.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        http.post(
            "/mcp",
            json=ready,
            headers={"mcp-session-id": session, "mcp-protocol-version": _PROTOCOL},
        ).raise_for_status()
    return session


_STATELESS = "2026-07-28"
"""The protocol the SDK's own ``Client`` negotiates by default: each request one self-contained
POST (no session), its version and client in ``_meta`` and its method in headers."""


def _stateless_call(round_no: int, n: int) -> bytes:
    arguments = {**ARGS, "idempotency_key": f"mcp-stateless-{round_no}-{n}"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": _STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": "create_support_ticket", "arguments": arguments, "_meta": meta},
    }
    headers = {
        **HEADERS,
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": _STATELESS,
        "mcp-method": "tools/call",
        "mcp-name": "create_support_ticket",
    }
    return post("/mcp", json.dumps(body, separators=(",", ":")).encode(), headers)


def _tools_call(session: str, round_no: int, n: int) -> bytes:
    arguments = {**ARGS, "idempotency_key": f"mcp-{round_no}-{n}"}
    body = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": "create_support_ticket", "arguments": arguments},
    }
    headers = {
        **HEADERS,
        "Accept": "application/json, text/event-stream",
        "mcp-session-id": session,
        "mcp-protocol-version": _PROTOCOL,
    }
    return post("/mcp", json.dumps(body, separators=(",", ":")).encode(), headers)


async def _child(path: str, requests: int, concurrency: int) -> None:
    """Run inside valgrind: start the app, open a session, warm both paths up, then the measured
    loop of ``path`` between two lines (``bench_instructions.count_instructions``)."""
    from bench.mcp_inprocess import Driver
    from bench.servers import build, lifespan
    from broker.gc_tuning import tune_gc_for_serving

    app = build("broker", "sqlite")
    tune_gc_for_serving()
    async with lifespan(app):
        driver = Driver(app)
        await driver.open_session()
        for warm in ("proposals", "mcp"):
            await driver.drive(warm, concurrency * 10, concurrency, tag=1)
        print("measure", flush=True)
        sys.stdin.readline()
        ok = await driver.drive(path, requests, concurrency, tag=2)
        print(f"done {ok}", flush=True)
        sys.stdin.readline()


def _instructions(requests: int, concurrency: int) -> None:
    from bench.bench_instructions import count_instructions

    counts = {}
    for path in ("proposals", "mcp"):
        child = [__file__, "--child", path, "--requests", str(requests)]
        child += ["--connections", str(concurrency)]
        counts[path] = count_instructions(child, requests, what=path)
        print(f"{path:10s} {counts[path] / 1000:8.0f}k instructions per call")
    print(f"mcp / proposals: {counts['proposals'] / counts['mcp']:.2f}x by instructions per call")


async def _count_commits(requests: int, concurrency: int) -> None:
    from bench.mcp_inprocess import Driver
    from bench.servers import build, lifespan
    from broker.ledger.batching import GroupCommit
    from broker.stores.sqlite_writer import Batch, Writer

    counts = {"ledger": 0, "sqlite": 0}
    # Counted by wrapping the two committers (this process only): nothing else observes a commit.
    ledger_commit = GroupCommit._commit_next
    sqlite_commit = Writer._commit

    async def counted_ledger(self: GroupCommit[object, object]) -> None:
        counts["ledger"] += 1
        await ledger_commit(self)

    def counted_sqlite(self: Writer, batch: Batch) -> None:
        counts["sqlite"] += 1  # on the writer thread; the loop only reads it between runs
        sqlite_commit(self, batch)

    GroupCommit._commit_next = counted_ledger  # type: ignore[method-assign]
    Writer._commit = counted_sqlite  # type: ignore[method-assign]
    app = build("broker", "sqlite")
    async with lifespan(app):
        driver = Driver(app)
        await driver.open_session()
        for tag, path in enumerate(("proposals", "mcp"), start=2):
            await driver.drive(path, concurrency * 10, concurrency, tag=1)
            counts["ledger"] = counts["sqlite"] = 0
            ok = await driver.drive(path, requests, concurrency, tag=tag)
            per = 3000 / requests
            print(
                f"{path:10s} {ok}/{requests} answered; per 3,000 calls: "
                f"{counts['ledger'] * per:5.0f} ledger commits, {counts['sqlite'] * per:5.0f} SQLite commits"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--ledger-fsync", choices=["batch", "always"], default="batch")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--commits", action="store_true")
    parser.add_argument("--requests", type=int)
    parser.add_argument("--child", choices=["proposals", "mcp"])
    args = parser.parse_args()
    os.environ["BENCH_LEDGER_FSYNC"] = args.ledger_fsync  # read by bench.servers
    if args.child:
        asyncio.run(_child(args.child, args.requests, args.connections))
        return
    if args.instructions:
        _instructions(args.requests or 1280, args.connections)
        return
    if args.commits:
        asyncio.run(_count_commits(args.requests or 3000, args.connections))
        return
    pin_load_generator()
    mcp_paths = ("mcp, 2026-07-28", "mcp, session")
    ratios: dict[str, list[float]] = {label: [] for label in mcp_paths}
    cpu_ratios: dict[str, list[float]] = {label: [] for label in mcp_paths}
    for round_no in range(args.rounds):
        port = free_port()
        command = [sys.executable, "-m", "bench.servers", "broker", str(port)]
        server = start_server(command, port, cwd=str(ROOT))
        try:
            session = _open_session(f"http://127.0.0.1:{port}")
            results: dict[str, LoadResult] = {}
            paths: list[tuple[str, Callable[[int], bytes]]] = [
                (
                    "proposals",
                    lambda i, r=round_no: post("/v1/proposals", TICKET % (r, i), HEADERS),
                ),
                (mcp_paths[0], lambda i, r=round_no: _stateless_call(r, i)),
                (mcp_paths[1], lambda i, s=session, r=round_no: _tools_call(s, r, i)),
            ]
            if round_no % 2:  # the box drifts: every other round measures in reverse order
                paths.reverse()
            for label, make in paths:
                asyncio.run(  # warm up every path alike
                    run_load("127.0.0.1", port, make, connections=args.connections, seconds=1.0)
                )
                before = cpu_seconds(server.pid)
                results[label] = asyncio.run(
                    run_load(
                        "127.0.0.1",
                        port,
                        make,
                        connections=args.connections,
                        seconds=args.seconds,
                    )
                )
                results[label].server_cpu = cpu_seconds(server.pid) - before
        finally:
            server.terminate()
            server.wait(timeout=10)
        print(f"round {round_no + 1}")
        for label in ("proposals", *mcp_paths):
            print(f"  {label:16} {results[label].summary()}")
        # Server CPU per request moves less with the machine's noise than throughput does.
        cpu = {label: result.cpu_per_request_us or 0.0 for label, result in results.items()}
        for label in mcp_paths:
            ratios[label].append(results[label].rps / results["proposals"].rps)
            cpu_ratios[label].append(cpu["proposals"] / cpu[label])
            print(
                f"  {label} / proposals: {ratios[label][-1]:.2f}x throughput, "
                f"{cpu_ratios[label][-1]:.2f}x by CPU/request"
            )
    print(f"median over {args.rounds} rounds (target >= 0.5x):")
    for label in mcp_paths:
        print(
            f"  {label} / proposals: {median(ratios[label]):.2f}x throughput, "
            f"{median(cpu_ratios[label]):.2f}x by server CPU per request"
        )


if __name__ == "__main__":
    main()
