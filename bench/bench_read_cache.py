"""The read cache and argument repair on the proposal path, in process (chain + execution on the
memory store, no HTTP in front, no ledger: the smallest denominator).

Read cache: the same read tool of a local HTTP backend (a bare ASGI app in its own process, on
loopback): without ``read_cache`` (every proposal calls the backend), with it and new arguments
every time (every proposal a miss: the look-up, the call, and the result stored), and with it and
the same arguments (every proposal after the first a hit).

Argument repair: a read tool with a numeric argument, on a route without ``argument_repair``
and on one with it, both sent valid arguments (what repair costs when it has nothing to do: it
runs only on arguments that fail the schema), and on the repairing route sent ``"25"`` for the
number (the repair path: a failed validation, the walk, a second validation).

Rounds alternate between the variants so each sees the same machine load; the figures are
medians over rounds, and each share the median of the rounds' paired ratios.

    python bench/bench_read_cache.py [--rounds 40] [--batch 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.demo import DemoBackend  # noqa: E402
from broker.auth import Authenticator  # noqa: E402
from broker.config import parse_config  # noqa: E402
from broker.model import Principal, ProposalRequest  # noqa: E402
from broker.pipeline.orchestrator import Pipeline  # noqa: E402
from broker.plugins import Adapter, AdapterContext, PreconditionVerifier  # noqa: E402
from broker.stores import MemoryStore  # noqa: E402
from broker.tools.runtime import build_registry  # noqa: E402

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sku", "qty"],
    "properties": {"sku": {"type": "string"}, "qty": {"type": "number", "minimum": 0}},
}
QUOTE = b'{"sku":"A-1","price":12.5,"currency":"USD"}'


async def backend_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The local backend: reads the request, answers one small JSON object."""
    if scope["type"] != "http":
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": QUOTE})


class _Quote:
    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        return {"sku": args["sku"], "price": 12.5}


class QuoteBackend:
    """An in-process backend for the repair rounds (no backend call to drown the difference)."""

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        return {"quote": _Quote()}

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]:
        return {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_backend(port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "--serve-backend", str(port)]
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        command = ["taskset", "-c", "0", *command]  # the broker's loop keeps the other core
    backend = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return backend
        except OSError:
            if time.monotonic() > deadline:
                backend.kill()
                raise SystemExit("the local backend did not start") from None
            time.sleep(0.05)


def pipeline(backend_url: str) -> tuple[Pipeline, Principal, Principal]:
    raw = tomllib.loads((ROOT / "deploy" / "demo.toml").read_text(encoding="utf-8"))
    raw["backends"]["quotes"] = {"factory": "bench.bench_read_cache:QuoteBackend"}
    http = {"kind": "http", "url": f"{backend_url}/quote", "signing_secret": "env:QUOTE_SECRET"}
    for name, extra in (("quote_http", {}), ("quote_cached", {"read_cache": {"ttl_s": 3600}})):
        raw["tools"][name] = {
            "description": "Quote a SKU.",
            "risk": "read",
            "input_schema": SCHEMA,
            "adapter": http,
            **extra,
        }
    raw["tools"]["quote_local"] = {
        "description": "Quote a SKU.",
        "risk": "read",
        "input_schema": SCHEMA,
        "adapter": {"kind": "python", "backend": "quotes", "operation": "quote"},
    }
    for route in ("billing_help", "scheduling"):
        raw["routes"][route]["tools"] += ["quote_http", "quote_cached", "quote_local"]
    raw["routes"]["scheduling"]["argument_repair"] = True
    config = parse_config(raw)
    registry = build_registry(
        config,
        secrets={"QUOTE_SECRET": "bench-quote-secret"},
        backends={"quotes": QuoteBackend(), "demo": DemoBackend()},
    )
    auth = Authenticator(config, signing_key=None)
    plain = auth.authenticate("Bearer demo-billing-token")
    repairing = auth.authenticate("Bearer demo-scheduling-token")
    return Pipeline(config=config, registry=registry, store=MemoryStore()), plain, repairing


Call = Callable[[], Awaitable[None]]


def call(pipe: Pipeline, principal: Principal, tool: str, args: dict[str, Any]) -> Call:
    async def run() -> None:
        answer = await pipe.propose(principal, ProposalRequest(tool=tool, args=dict(args)))
        assert answer.status == 200, answer.body

    return run


async def per_call_us(run: Call, batch: int) -> float:
    started = time.perf_counter()
    for _ in range(batch):
        await run()
    return (time.perf_counter() - started) / batch * 1e6


async def paired(variants: dict[str, Call], rounds: int, batch: int) -> dict[str, list[float]]:
    for run in variants.values():  # warm each (connection pool, the cache's one miss)
        await per_call_us(run, batch)
    found: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            found[name].append(await per_call_us(run, batch))
    return found


def share(base: list[float], other: list[float]) -> float:
    return statistics.median(o / b - 1 for b, o in zip(base, other, strict=True)) * 100


async def measure(backend_url: str, rounds: int, batch: int) -> None:
    pipe, plain, repairing = pipeline(backend_url)
    valid = {"sku": "A-1", "qty": 25}
    skus = iter(range(10**9))

    async def new_sku() -> None:
        args = {"sku": f"A-{next(skus)}", "qty": 25}
        answer = await pipe.propose(plain, ProposalRequest(tool="quote_cached", args=args))
        assert answer.status == 200, answer.body

    cache = await paired(
        {
            "uncached": call(pipe, plain, "quote_http", valid),
            "miss": new_sku,
            "hit": call(pipe, plain, "quote_cached", valid),
        },
        rounds,
        batch,
    )
    call_us, miss_us, hit_us = (statistics.median(cache[k]) for k in ("uncached", "miss", "hit"))
    print("read cache: a read of a local HTTP backend, in process (memory store, no ledger)")
    print(f"  no read_cache, every proposal calls: {call_us:7.1f} us median of {rounds} x {batch}")
    print(f"  read_cache, every proposal a miss:   {miss_us:7.1f} us median")
    print(f"  read_cache, every proposal a hit:    {hit_us:7.1f} us median")
    print(f"  a miss costs {share(cache['uncached'], cache['miss']):+5.1f} % over no cache")
    print(f"  a hit costs  {hit_us / miss_us:7.3f} x a miss")
    repair = await paired(
        {
            "off": call(pipe, plain, "quote_local", valid),
            "on, valid": call(pipe, repairing, "quote_local", valid),
            "on, repaired": call(pipe, repairing, "quote_local", {"sku": "A-1", "qty": "25"}),
        },
        rounds,
        batch,
    )
    print("argument repair: an in-process read tool (chain + execution, no ledger)")
    for name, found in repair.items():
        print(f"  {name:13s} {statistics.median(found):7.1f} us median")
    print(f"  repair on, nothing to repair: {share(repair['off'], repair['on, valid']):+5.1f} %")
    print(f"  repair on, one repair:        {share(repair['off'], repair['on, repaired']):+5.1f} %")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--serve-backend", type=int)
    args = parser.parse_args()
    if args.serve_backend:
        import uvicorn

        uvicorn.run(backend_app, host="127.0.0.1", port=args.serve_backend, log_level="error")
        return
    port = free_port()
    backend = start_backend(port)
    try:
        asyncio.run(measure(f"http://127.0.0.1:{port}", args.rounds, args.batch))
    finally:
        backend.terminate()
        backend.wait(timeout=10)


if __name__ == "__main__":
    main()
