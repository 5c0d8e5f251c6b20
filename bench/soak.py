"""Soak: mixed traffic for a chosen time, broker and bare side by side in turn, printing resident
memory, open files and p99 as the run goes on (the reliability matrix's soak row).

Each server (``bench/servers.py``: the bare Litestar endpoint, then the broker on the demo config
with the embedded SQLite store and a file ledger in a temporary directory) runs in its own process
on core 0, the load generator on core 1. Every ``--interval`` seconds a line says how the last
interval went: requests, p50/p99, the answers by status, resident memory (the process and its
children) and open file descriptors. At the end: growth of resident memory from the first sample
(after a warm-up) to the last, and the p99 of the first third against the last third.

The mix, per ten requests: five ``lookup_order`` (read, no key), two writes with a fresh key
(admission, execution, ledger, settlement), one replay of a write key from the last hundred, one
schema rejection, one ``issue_credit`` (mostly refused by its rate limit, so budgets and rate
logs are exercised too). The writes go to ``billing.soak``, an HTTP tool registered at the start
of the run, whose backend is a process of its own (``BACKEND`` below): the demo backend's
``create_support_ticket`` keeps every ticket in the broker's process (``adapters/demo``), which
would be the demo's growth, not the broker's. Keys live ``--ttl`` seconds (``BENCH_IDEMPOTENCY_TTL_S``),
short by default so that a run of minutes reaches the store's steady state: memory held by keys
must plateau once keys expire as fast as they are made.

A closed loop of ``--connections`` (default 4, well below saturation on one core) keeps the load
steady rather than maximal; the 30-minute run is ``--minutes 30``.

    flock /tmp/bench.lock python bench/soak.py --minutes 3 [--interval 15] [--connections 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_memory import resident_bytes  # noqa: E402
from bench.bodies import HEADERS, LOOKUP, credit, ticket  # noqa: E402
from bench.loadgen import (  # noqa: E402
    LoadResult,
    free_port,
    pin_load_generator,
    post,
    process_tree,
    run_load,
    start_server,
)

REPLAYED_KEYS = 100
ADMIN = {"Authorization": "Bearer demo-admin-token"}

BACKEND = """
import asyncio, sys

async def answer(reader, writer):
    try:
        while True:
            length = 0
            while (line := await reader.readline()) not in (b"\\r\\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            await reader.readexactly(length)
            body = b'{"ok":true}'
            writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\n"
                         b"content-length: %d\\r\\n\\r\\n%s" % (len(body), body))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()

asyncio.run(main())
"""
"""A backend that answers every POST with ``{"ok":true}`` (keep-alive), keeping nothing."""


def write(key: str) -> dict[str, object]:
    return {"tool": "billing.soak", "args": {"payment_id": "P-1"}, "idempotency_key": key}


def registration(url: str) -> bytes:
    return _compact(
        {
            "name": "billing.soak",
            "description": "Refund a payment (the soak's write, on a backend that keeps nothing).",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["payment_id"],
                "properties": {"payment_id": {"type": "string", "pattern": "^P-[0-9]+$"}},
            },
            "risk": "write",
            "idempotent": False,
            "preconditions": [],
            "routes": ["billing_help"],
            "adapter": {"kind": "http", "url": url, "timeout_s": 2.0},
        }
    )


def _compact(body: dict[str, object]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def mixed(run: int) -> Callable[[int], bytes]:
    """The ``make_request`` of one interval: request ``i`` by its place in the mix of ten."""

    def make(i: int) -> bytes:
        slot = i % 10
        if slot < 5:
            body = LOOKUP
        elif slot < 7:
            body = _compact(write(f"soak-{run}-{i}"))
        elif slot == 7:
            body = _compact(write(f"soak-replay-{i // 10 % REPLAYED_KEYS}"))
        elif slot == 8:
            body = _compact(ticket(f"soak-bad-{run}-{i}", priority="whenever"))
        else:
            body = _compact(credit(f"soak-credit-{run}-{i}", 1))
        return post("/v1/proposals", body, HEADERS)

    return make


def open_files(pid: int) -> int:
    total = 0
    for current in process_tree(pid):
        try:
            total += len(os.listdir(f"/proc/{current}/fd"))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


@dataclass
class Sample:
    at_s: float
    result: LoadResult
    resident: int
    files: int


@dataclass
class Soak:
    kind: str
    samples: list[Sample] = field(default_factory=list)

    def line(self, sample: Sample) -> str:
        r = sample.result
        codes = " ".join(f"{k}:{v}" for k, v in sorted(r.statuses.items()))
        return (
            f"{self.kind:<6} t={sample.at_s:6.0f}s {r.requests:7d} req {r.rps:6.0f}/s "
            f"p50 {r.percentile(50):6.2f} ms p99 {r.percentile(99):6.2f} ms "
            f"rss {sample.resident / 2**20:6.1f} MiB fds {sample.files:3d}  [{codes}]"
        )

    def summary(self) -> str:
        first, last = self.samples[0], self.samples[-1]
        growth = (last.resident - first.resident) / first.resident * 100
        third = max(len(self.samples) // 3, 1)
        early = _p99(self.samples[:third])
        late = _p99(self.samples[-third:])
        return (
            f"{self.kind:<6} resident {first.resident / 2**20:6.1f} -> "
            f"{last.resident / 2**20:6.1f} MiB ({growth:+.1f} %), fds {first.files} -> "
            f"{last.files}, p99 first third {early:.2f} ms, last third {late:.2f} ms "
            f"({(late / early - 1) * 100 if early else 0:+.0f} %)"
        )


def _p99(samples: list[Sample]) -> float:
    latencies = [value for s in samples for value in s.result.latencies]
    merged = LoadResult(latencies=latencies)
    return merged.percentile(99) if latencies else 0.0


def soak(kind: str, args: argparse.Namespace) -> Soak:
    port = free_port()
    command = [sys.executable, "-m", "bench.servers", kind, str(port), "--store", args.store]
    env = {"BENCH_IDEMPOTENCY_TTL_S": str(args.ttl), "BENCH_PREFIX": f"soak-{os.getpid()}"}
    backend_port = free_port()
    backend = start_server([sys.executable, "-c", BACKEND, str(backend_port)], backend_port, core=1)
    server: subprocess.Popen[bytes] = start_server(command, port, cwd=str(ROOT), env=env)
    report = Soak(kind)
    try:
        if kind != "bare":
            url = f"http://127.0.0.1:{backend_port}/refund"
            created = httpx.post(
                f"http://127.0.0.1:{port}/v1/tools",
                content=registration(url),
                headers={**ADMIN, "Content-Type": "application/json"},
                timeout=10,
            )
            if created.status_code != 201:
                raise SystemExit(f"registering billing.soak: {created.status_code} {created.text}")
        warm = asyncio.run(
            run_load(
                "127.0.0.1",
                port,
                mixed(-1),
                connections=args.connections,
                seconds=args.warmup,
            )
        )
        if 500 in warm.statuses:
            raise SystemExit(f"{kind}: errors while warming up: {warm.statuses}")
        elapsed, run = 0.0, 0
        while elapsed < args.minutes * 60:
            result = asyncio.run(
                run_load(
                    "127.0.0.1",
                    port,
                    mixed(run),
                    connections=args.connections,
                    seconds=args.interval,
                )
            )
            elapsed += result.seconds
            run += 1
            sample = Sample(elapsed, result, resident_bytes(server.pid), open_files(server.pid))
            report.samples.append(sample)
            print(report.line(sample), flush=True)
            if any(status >= 500 for status in result.statuses):
                raise SystemExit(f"{kind}: server errors {result.statuses}")
    finally:
        server.terminate()
        server.wait(timeout=10)
        backend.terminate()
        backend.wait(timeout=10)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="per server (default 3)")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds per sample")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before sampling")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--ttl", type=int, default=60, help="idempotency key TTL, seconds")
    parser.add_argument("--store", default="sqlite", choices=["sqlite", "memory", "redis"])
    parser.add_argument("--only", choices=["broker", "bare"], help="soak one server only")
    args = parser.parse_args()
    pin_load_generator()
    kinds = [args.only] if args.only else ["bare", "broker"]
    reports = [soak(kind, args) for kind in kinds]
    print(
        f"\nsoak: {args.minutes:g} min per server, {args.connections} connections, "
        f"mixed traffic, key TTL {args.ttl} s, store {args.store}:"
    )
    for report in reports:
        print("  " + report.summary())


if __name__ == "__main__":
    main()
