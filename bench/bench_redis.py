"""Two broker processes sharing one Redis against two bare Litestar processes; then Redis
commands per proposal, by kind of outcome.

Throughput: each side is two server processes pinned to core 0 (the load generator runs on core
1); 32 keep-alive connections, half to each process, same bodies (create_support_ticket with a
fresh idempotency key per request, so every broker request is a full approval: token, schema,
both preconditions, the admission script, the adapter call, the settlement script and the
decision record). The brokers use the Redis at ``REDIS_URL`` under a unique key prefix, deleted
afterwards. Median of the rounds; the order of the sides turns every round, and the ratios are
also given paired by round (the sides of one round saw the same state of the box).

Commands (``bench/redis_commands.py``): per request of each kind (approval, replay, budget
rejection, schema rejection), those a broker sends and those its Lua scripts run inside Redis.
By default this runs on a private ``redis-server`` (nobody
else's commands in the counts, nobody else's stats reset); ``--count-on shared`` uses
``REDIS_URL`` instead.

    python bench/bench_redis.py [--seconds 5] [--rounds 3] [--connections 32] [--count 200]
        [--count-on private|shared|none] [--ledger-fsync batch,always]

The brokers' ledger is held to the targets with ``ledger_fsync = "batch"`` (the project's
rule); a pair of brokers per further policy (``always`` by default) is measured beside.
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
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from bench.bodies import HEADERS, ticket_bytes  # noqa: E402
from bench.loadgen import LoadResult, cpu_seconds, free_port, post, run_load  # noqa: E402
from bench.procs import (  # noqa: E402
    REDIS_URL,
    PrivateRedis,
    delete_prefix,
    redis_reachable,
    start_brokers,
    write_config,
)
from bench.redis_commands import count_commands  # noqa: E402

SERVER_CPUS = "0"
PROCESSES = 2


def _pinning() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1


# -- servers --------------------------------------------------------------------------------------


def _start_bare(log_dir: Path) -> list[tuple[int, subprocess.Popen[bytes]]]:
    """Two ``bench.servers bare`` processes (uvloop, httptools), each on its own port."""
    started: list[tuple[int, subprocess.Popen[bytes]]] = []
    for _ in range(PROCESSES):
        port = free_port()
        command = [sys.executable, "-m", "bench.servers", "bare", str(port)]
        if _pinning() and shutil.which("taskset"):
            command = ["taskset", "-c", SERVER_CPUS, *command]
        with (log_dir / f"bare-{port}.log").open("wb") as log:
            proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        started.append((port, proc))
    deadline = time.monotonic() + 20
    for port, proc in started:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    _stop([p for _, p in started])
                    raise RuntimeError("the bare server did not start") from None
                time.sleep(0.05)
    return started


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# -- load -----------------------------------------------------------------------------------------


def _merge(results: list[LoadResult]) -> LoadResult:
    merged = LoadResult()
    for result in results:
        merged.requests += result.requests
        merged.latencies += result.latencies
        merged.seconds = max(merged.seconds, result.seconds)
        for status, n in result.statuses.items():
            merged.statuses[status] = merged.statuses.get(status, 0) + n
    return merged


def _requests(tag: str) -> Callable[[int], bytes]:
    return lambda i: post("/v1/proposals", ticket_bytes(f"{tag}-{i}"), HEADERS)


async def _spread_load(ports: list[int], tag: str, connections: int, seconds: float) -> LoadResult:
    """``connections`` split evenly over the processes, run together, merged."""
    per = connections // len(ports)
    results = await asyncio.gather(
        *(
            run_load(
                "127.0.0.1",
                port,
                _requests(f"{tag}-p{n}"),
                connections=per + (1 if n < connections % len(ports) else 0),
                seconds=seconds,
            )
            for n, port in enumerate(ports)
        )
    )
    return _merge(list(results))


def _cpu_seconds(pids: list[int]) -> float:
    """CPU time of these processes and their descendants so far (0.0 without Linux ``/proc``)."""
    if not os.path.isdir("/proc"):
        return 0.0
    return sum(cpu_seconds(pid) for pid in pids)


def _measure(
    ports: list[int], pids: list[int], tag: str, connections: int, seconds: float
) -> tuple[LoadResult, float]:
    """The load result, and the servers' CPU milliseconds per request during it."""
    asyncio.run(_spread_load(ports, f"{tag}-warm", connections, 1.0))
    cpu = _cpu_seconds(pids)
    result = asyncio.run(_spread_load(ports, tag, connections, seconds))
    cpu = _cpu_seconds(pids) - cpu
    return result, (cpu * 1000 / result.requests if result.requests else 0.0)


def measure_bare(
    work: Path, round_no: int, connections: int, seconds: float
) -> tuple[LoadResult, float]:
    started = _start_bare(work)
    ports, pids = [port for port, _ in started], [proc.pid for _, proc in started]
    try:
        return _measure(ports, pids, f"bare-{round_no}", connections, seconds)
    finally:
        _stop([proc for _, proc in started])


def measure_broker(
    work: Path, config: Path, tag: str, connections: int, seconds: float
) -> tuple[LoadResult, float]:
    """Two brokers on ``config``; ``tag`` makes the idempotency keys of this side and round
    (brokers of every side share the key prefix: a tag used twice would only replay)."""
    cpus = SERVER_CPUS if _pinning() else None
    brokers = start_brokers(config, PROCESSES, work / "logs", cpus=cpus)
    ports, pids = [b.port for b in brokers], [b.proc.pid for b in brokers]
    try:
        return _measure(ports, pids, tag, connections, seconds)
    finally:
        for broker in brokers:
            broker.stop()


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--count", type=int, default=200, help="requests per kind for counting")
    parser.add_argument("--count-on", choices=["private", "shared", "none"], default="private")
    parser.add_argument(
        "--ledger-fsync",
        default="batch,always",
        help="comma-separated ledger_fsync policies, one pair of brokers each; the first is the "
        "one held to the targets (batch: the project's rule), the others are printed beside",
    )
    args = parser.parse_args()
    if not redis_reachable(REDIS_URL):
        sys.exit(f"no Redis at {REDIS_URL}")
    if _pinning():
        os.sched_setaffinity(0, {1})

    work = Path(tempfile.mkdtemp(prefix="bench-redis-"))
    (work / "logs").mkdir()
    prefix = f"bench-redis-{uuid.uuid4().hex[:10]}"
    policies = [policy for policy in args.ledger_fsync.split(",") if policy]
    configs = {
        ("broker" if number == 0 else f"broker, fsync {policy}"): write_config(
            work / f"broker-{policy}",
            redis_url=REDIS_URL,
            prefix=prefix,
            service={"ledger_fsync": policy},
        )
        for number, policy in enumerate(policies)
    }
    sides = ["bare", *configs]
    rows: dict[str, list[tuple[float, float, float, float]]] = {side: [] for side in sides}
    try:
        for round_no in range(args.rounds):
            # The box drifts (other tenants, clock speed): the order of the sides turns every
            # round, and the ratios are also given paired by round (the sides of one round saw
            # the same state of the box).
            turn = round_no % len(sides)
            for side in sides[turn:] + sides[:turn]:
                if side == "bare":
                    result, cpu_ms = measure_bare(
                        work / "logs", round_no, args.connections, args.seconds
                    )
                else:
                    tag = f"{side.replace(' ', '').replace(',', '-')}-{round_no}"
                    result, cpu_ms = measure_broker(
                        work, configs[side], tag, args.connections, args.seconds
                    )
                print(
                    f"round {round_no + 1}: {side:<20} {result.summary()}  "
                    f"server CPU {cpu_ms:.3f} ms/req",
                    flush=True,
                )
                rows[side].append(
                    (result.rps, result.percentile(50), result.percentile(99), cpu_ms)
                )
    finally:
        deleted = delete_prefix(REDIS_URL, prefix)
    pinned = "servers on core 0, load on core 1" if _pinning() else "unpinned"
    print(
        f"\nmedian of {args.rounds} rounds, {args.connections} connections, {PROCESSES} processes "
        f"per side ({pinned}); brokers on {REDIS_URL}, {deleted} keys cleaned up:"
    )
    print(_report(rows, policies[0]))

    if args.count_on != "none":
        _count_all(work, args.count_on, args.count)
    shutil.rmtree(work, ignore_errors=True)


def _report(rows: dict[str, list[tuple[float, float, float, float]]], policy: str) -> str:
    med = {
        side: [statistics.median(col) for col in zip(*r, strict=True)] for side, r in rows.items()
    }
    lines = []
    for side, (rps, p50, p99, cpu_ms) in med.items():
        lines.append(
            f"  {side:<20} {rps:8.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
            f"server CPU {cpu_ms:.3f} ms/req"
        )
    for side in rows:
        if side == "bare":
            continue
        ratios = [b[0] / a[0] for a, b in zip(rows["bare"], rows[side], strict=True) if a[0]]
        held = f"ledger_fsync {policy}; target >= 0.30" if side == "broker" else "beside"
        lines.append(
            f"  {side}: throughput / bare {med[side][0] / med['bare'][0]:.2f} ({held}; "
            f"paired by round: median {statistics.median(ratios):.2f}, "
            f"{min(ratios):.2f}-{max(ratios):.2f}); p99 / bare "
            f"{med[side][2] / med['bare'][2]:.2f}" + (" (target <= 5)" if side == "broker" else "")
        )
    return "\n".join(lines)


def _count_all(work: Path, where: str, n: int) -> None:
    if where == "private" and shutil.which("redis-server"):
        private = PrivateRedis(work / "redis")
        private.start()
        try:
            count_commands(private.url, "a private redis-server", work / "counts", n)
        finally:
            private.stop()
    else:
        count_commands(REDIS_URL, REDIS_URL, work / "counts", n)


if __name__ == "__main__":
    main()
