"""CPU work per proposal, counted in instructions: a measure the noisy box cannot disturb.

Each app (bare endpoint, broker, broker without ledger) is driven in process over ASGI, with
``--concurrency`` requests in flight, under ``valgrind --tool=callgrind``; instructions are
collected only around the measured loop (``callgrind_control`` toggles collection once the app
has started and warmed up). Same inputs, same counts, whatever else the machine is doing. Not
counted: the kernel (syscalls, fsync) and the HTTP server in front of the app. Under valgrind's
CPU model OpenSSL may pick a slower SHA-256 than on the real CPU, which overstates the ledger.

    python bench/bench_instructions.py [--requests 1280] [--concurrency 32]
        [--store memory|sqlite|redis] [--ledger-fsync batch|always]

The ledger runs with ``ledger_fsync = "batch"`` unless ``--ledger-fsync`` says otherwise: the
ledger's throughput targets are held to batch (the fsync itself is the kernel's, never counted).
``--store sqlite`` prices the embedded default (its writer thread counted with the loop's).
``--store redis`` runs the brokers on the Redis at ``REDIS_URL`` (under a fresh key prefix,
deleted afterwards), to price the shared store's client side; keep ``--concurrency`` low there
(4 to 8): under valgrind a large batch of requests can outlast the store's 0.5 s deadline, and a
live broker sends the store a handful of exchanges per batch, not dozens.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bodies import TICKET, post_scope  # noqa: E402

KINDS = ("bare", "broker", "broker-noledger")


async def _drive(app: Any, requests: int, concurrency: int, tag: int) -> int:
    """``requests`` proposals, ``concurrency`` at a time; how many answered 200."""
    ok = 0

    async def one(n: int) -> None:
        nonlocal ok
        body = TICKET % (tag, n)
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                await asyncio.Event().wait()  # the app never asks twice
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal ok
            if message["type"] == "http.response.start" and message["status"] == 200:
                ok += 1

        await app(post_scope("/v1/proposals", body), receive, send)

    async def worker(first: int) -> None:
        for n in range(first, requests, concurrency):
            await one(n)

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return ok


async def _child(kind: str, requests: int, concurrency: int, store: str) -> None:
    """Run inside valgrind: start the app, warm up, then the measured loop between two lines."""
    from bench.servers import build, lifespan
    from broker.gc_tuning import tune_gc_for_serving

    app = build(kind, "memory" if kind == "bare" else store)
    tune_gc_for_serving()
    async with lifespan(app):
        await _drive(app, concurrency * 20, concurrency, tag=1)
        print("measure", flush=True)
        sys.stdin.readline()
        ok = await _drive(app, requests, concurrency, tag=2)
        print(f"done {ok}", flush=True)
        sys.stdin.readline()


def _count(kind: str, requests: int, concurrency: int, store: str) -> float:
    """Instructions per request of ``kind``."""
    child = [__file__, "--child", kind, "--requests", str(requests)]
    child += ["--concurrency", str(concurrency), "--store", store]
    return count_instructions(child, requests, what=kind)


def count_instructions(child: list[str], requests: int, *, what: str) -> float:
    """Instructions per request of a Python ``child`` run under callgrind, counted only between
    its "measure" and "done <answered>" lines (it waits for a line on stdin after each)."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as scratch:
        out = Path(scratch) / "out"
        process = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                sys.executable,
                *child,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        assert process.stdin is not None and process.stdout is not None
        answered = 0
        for line in process.stdout:
            if line.startswith("measure"):
                subprocess.run(["callgrind_control", "-i", "on", str(process.pid)], check=True,
                               capture_output=True)  # fmt: skip
            elif line.startswith("done"):
                subprocess.run(["callgrind_control", "-i", "off", str(process.pid)], check=True,
                               capture_output=True)  # fmt: skip
                answered = int(line.split()[1])
            else:
                continue
            process.stdin.write("\n")
            process.stdin.flush()
        if process.wait() != 0 or answered != requests:
            raise SystemExit(f"{what}: {answered} of {requests} answered as expected")
        total = 0
        for dump in out.parent.iterdir():  # one file per process and thread callgrind saw
            for line in dump.read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    total = max(total, int(line.split()[1]))
        return total / requests


def _count_on_redis(requests: int, concurrency: int) -> dict[str, float]:
    """The counts with the brokers on Redis, each under a key prefix of its own, deleted after."""
    from bench.procs import REDIS_URL, delete_prefix, redis_reachable

    if not redis_reachable(REDIS_URL):
        raise SystemExit(f"no Redis at {REDIS_URL}")
    counts: dict[str, float] = {}
    for kind in KINDS:
        # A prefix per app: on one shared prefix the second app would only replay the first's keys.
        prefix = os.environ["BENCH_PREFIX"] = f"bench-instr-{uuid.uuid4().hex[:10]}"
        try:
            counts[kind] = _count(kind, requests, concurrency, "redis")
        finally:
            delete_prefix(REDIS_URL, prefix)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1280)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--store", choices=["memory", "sqlite", "redis"], default="memory")
    parser.add_argument("--ledger-fsync", choices=["batch", "always"], default="batch")
    parser.add_argument("--child", choices=KINDS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.child, args.requests, args.concurrency, args.store))
        return
    os.environ["BENCH_LEDGER_FSYNC"] = args.ledger_fsync
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if args.store == "redis":
        counts = _count_on_redis(args.requests, args.concurrency)
    else:
        counts = {kind: _count(kind, args.requests, args.concurrency, args.store) for kind in KINDS}
    for kind, count in counts.items():
        print(f"{kind:16s} {count / 1000:8.0f}k instructions per request")
    print(
        f"broker / bare: {counts['broker'] / counts['bare']:.2f}x the work; the ledger is "
        f"{1 - counts['broker-noledger'] / counts['broker']:.1%} of the broker's"
    )


if __name__ == "__main__":
    main()
