"""Ledger throughput: append rate per sink and policy, verify rate over 100k records (median of 3).

Run: .venv/bin/python bench/bench_ledger_verify.py [--records 100000] [--redis-url URL]
Redis numbers are skipped when Redis is unreachable. Keys go under a random prefix and are
deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import redis.asyncio as redis_asyncio
import rfc8785

from broker.ledger import (
    JsonlLedgerSink,
    LedgerEntry,
    LedgerSink,
    RedisLedgerSink,
    ValidatorVerdict,
    verify,
)


def make_entry(n: int) -> LedgerEntry:
    """A realistic record: nested args with floats, a result, four validator verdicts."""
    return LedgerEntry(
        time="2026-11-22T10:00:00.000Z",
        trace_id=f"trace-{n // 3}",
        session_id="chat-881",
        proposal_id=f"prp_{n:08d}",
        route="billing_help",
        tenant="acme",
        service_account="sa-billing",
        tool="issue_credit",
        tool_id="tool_7f3a",
        config_hash="sha256:" + "c" * 64,
        args={
            "order_id": f"O-{55000 + n}",
            "amount": 25 + (n % 100) / 4,
            "currency": "USD",
            "card_number": "4111111111111111",
            "note": "customer asked for a partial refund — «ok»",
        },
        result={"credit_id": f"CR-{n}", "amount": 25.5, "status": "issued"},
        sensitive_keys=frozenset({"card_number"}),
        decision="approved",
        validators=tuple(
            ValidatorVerdict(v, "pass", 40) for v in ("authz", "schema", "policy", "budget")
        ),
        execution_status="succeeded",
        attempts=1,
        decision_us=812,
        execution_us=12_000,
        idempotency_key_hash="sha256:" + "d" * 64,
    )


async def append_rate(sink: LedgerSink, count: int, concurrency: int) -> float:
    start = time.perf_counter()
    per_task = count // concurrency

    async def worker(offset: int) -> None:
        for n in range(per_task):
            await sink.append(make_entry(offset + n))

    await asyncio.gather(*(worker(i * per_task) for i in range(concurrency)))
    return per_task * concurrency / (time.perf_counter() - start)


async def median_verify_rate(
    open_sink: Callable[[], Awaitable[LedgerSink]], records: int, jobs: int = 1
) -> float:
    rates = []
    for _ in range(3):
        sink = await open_sink()
        start = time.perf_counter()
        report = await verify(sink, jobs=jobs)
        elapsed = time.perf_counter() - start
        await sink.close()
        assert report.ok and report.records == records, report
        rates.append(records / elapsed)
    return statistics.median(rates)


async def _verify_in_workers(
    label: str, open_sink: Callable[[], Awaitable[LedgerSink]], records: int
) -> None:
    """What ``broker ledger verify`` does by default: one worker process per CPU."""
    jobs = os.cpu_count() or 1
    rate = await median_verify_rate(open_sink, records, jobs)
    print(f"{label} verify  --jobs {jobs}, median of 3              {rate:>9,.0f} records/s")
    print(f"{label}   wall time per record                       {per_record(rate)}")


def per_record(rate: float) -> str:
    """Microseconds per record at ``rate``: what a change to the per-record work moves."""
    return f"{1e6 / rate:>9.2f} us"


async def fill(sink: LedgerSink, records: int) -> None:
    await append_rate(sink, records, 100)


def rfc8785_only_rate(lines: list[bytes]) -> float:
    """The same three digests per record with the pure-Python rfc8785 encoder, for comparison."""
    start = time.perf_counter()
    for line in lines:
        stored = json.loads(line)
        del stored["hash"]
        for value in (stored["args_redacted"], stored["result_redacted"], stored):
            hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    return len(lines) / (time.perf_counter() - start)


async def bench_jsonl(directory: Path, records: int) -> None:
    for policy, count in (("never", 20_000), ("batch", 20_000), ("always", 2_000)):
        for concurrency in (1, 64):
            path = directory / f"append-{policy}-{concurrency}.jsonl"
            sink = JsonlLedgerSink(path, fsync=policy)  # type: ignore[arg-type]
            rate = await append_rate(sink, count, concurrency)
            await sink.close()
            print(
                f"jsonl  append  fsync={policy:<6} concurrency={concurrency:<3} {rate:>9,.0f} records/s"
            )
    path = directory / "verify.jsonl"
    sink = JsonlLedgerSink(path, fsync="never")
    await fill(sink, records)
    await sink.close()

    async def reopen() -> LedgerSink:
        return JsonlLedgerSink(path, read_only=True)

    start = time.perf_counter()
    await (await reopen()).close()
    print(
        f"jsonl  open (index {records:,} records)           {time.perf_counter() - start:>9.2f} s"
    )
    rate = await median_verify_rate(reopen, records)
    print(f"jsonl  verify  {records:,} records, median of 3        {rate:>9,.0f} records/s")
    print(f"jsonl    wall time per record                       {per_record(rate)}")
    await _verify_in_workers("jsonl ", reopen, records)
    slow = rfc8785_only_rate(path.read_bytes().splitlines()[:10_000])
    print(f"rfc8785 alone, 3 digests per record, no I/O        {slow:>9,.0f} records/s")
    print(f"verify speed-up over rfc8785 alone                 {rate / slow:>9.1f} x")


async def bench_redis(url: str, records: int) -> None:
    client = redis_asyncio.Redis.from_url(url)
    try:
        await client.ping()
    except (OSError, redis_asyncio.RedisError) as exc:
        print(f"redis  skipped: {exc}")
        await client.aclose()
        return
    prefixes = []
    try:
        for concurrency in (1, 64):
            prefix = f"bench:{uuid.uuid4().hex}"
            prefixes.append(prefix)
            sink = RedisLedgerSink(client, prefix=prefix)
            rate = await append_rate(sink, 20_000, concurrency)
            print(
                f"redis  append  concurrency={concurrency:<3}              {rate:>9,.0f} records/s"
            )
        prefix = f"bench:{uuid.uuid4().hex}"
        prefixes.append(prefix)
        await fill(RedisLedgerSink(client, prefix=prefix), records)

        async def reopen() -> LedgerSink:
            return RedisLedgerSink(client, prefix=prefix)

        rate = await median_verify_rate(reopen, records)
        print(f"redis  verify  {records:,} records, median of 3        {rate:>9,.0f} records/s")
        print(f"redis    wall time per record                       {per_record(rate)}")
        await _verify_in_workers("redis ", reopen, records)
    finally:
        for prefix in prefixes:
            keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            for start in range(0, len(keys), 1000):
                await client.delete(*keys[start : start + 1000])
        await client.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    )
    args = parser.parse_args()
    print(f"python ledger bench, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as directory:
        await bench_jsonl(Path(directory), args.records)
    await bench_redis(args.redis_url, args.records)


if __name__ == "__main__":
    asyncio.run(main())
