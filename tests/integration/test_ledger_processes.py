"""Real OS processes appending to one ledger: no fork, no loss, and SIGKILL leaves a valid chain.

Each writer is a ``python -c`` child. It prints one line per acknowledged append, so the parent
knows exactly which records were promised (and kills a writer after a given number of them,
without sleeping).
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as redis_asyncio

from broker.ledger import (
    JsonlLedgerSink,
    LedgerEntry,
    LedgerRecord,
    LedgerSink,
    RedisLedgerSink,
    verify,
)
from tests.redis_helpers import REDIS_URL, own_prefix

WRITERS, PER_WRITER = 4, 200

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from broker.ledger import JsonlLedgerSink, LedgerEntry, RedisLedgerSink

    kind, target, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

    def entry(n):
        return LedgerEntry(
            time="2026-11-22T10:00:00.000Z", trace_id=f"{name}-trace", proposal_id=f"{name}-{n}",
            route="billing_help", tenant="acme", service_account="sa", tool="issue_credit",
            config_hash="sha256:" + "c" * 64,
            args={"order_id": f"O-{n}", "card_number": "canary-7f3a91"},
            sensitive_keys=frozenset({"card_number"}), decision="approved", decision_us=n,
        )

    async def main():
        if kind == "jsonl":
            sink = JsonlLedgerSink(target, fsync="never")
        else:
            import redis.asyncio as redis_asyncio
            client = redis_asyncio.Redis.from_url(sys.argv[5])
            sink = RedisLedgerSink(client, prefix=target)
        print("ready", flush=True)
        sys.stdin.readline()  # a start barrier, so the writers really race
        n = 0
        while count < 0 or n < count:
            # a few concurrent appends per round: group commit within, contention across processes
            refs = await asyncio.gather(*(sink.append(entry(n + i)) for i in range(4)))
            for i, ref in enumerate(refs):
                print(f"{name}-{n + i} {ref.seq}", flush=True)
            n += 4
        await sink.close()
        if kind == "redis":
            print(f"cas_retries {sink.cas_retries}", flush=True)

    asyncio.run(main())
    """
)


def start_writer(kind: str, target: str, name: str, count: int) -> subprocess.Popen[str]:
    """A writer that has opened the ledger and waits for ``go`` (see ``release``)."""
    args = [sys.executable, "-c", WRITER, kind, target, name, str(count), REDIS_URL]
    child = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n", child.stderr.read() if child.stderr else ""
    return child


def release(*children: subprocess.Popen[str]) -> None:
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()


def acknowledged(lines: list[str]) -> dict[str, int]:
    return {line.split()[0]: int(line.split()[1]) for line in lines if not line.startswith("cas_")}


async def records_of(sink: LedgerSink) -> list[LedgerRecord]:
    return [record async for record in sink.read()]


def interleavings(records: list[LedgerRecord]) -> int:
    """How often consecutive records come from different writers (1 per writer if serial)."""
    return sum(a.trace_id != b.trace_id for a, b in itertools.pairwise(records))


async def assert_one_unforked_chain(sink: LedgerSink, promised: dict[str, int]) -> None:
    report = await verify(sink)
    assert report.ok, report
    records = await records_of(sink)
    assert [record.seq for record in records] == list(range(1, len(records) + 1))
    prev_hashes = [record.prev_hash for record in records]
    assert len(set(prev_hashes)) == len(prev_hashes), "a prev_hash was used twice: forked chain"
    by_proposal = {record.proposal_id: record.seq for record in records}
    missing = {pid for pid in promised if pid not in by_proposal}
    assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
    assert all(by_proposal[pid] == seq for pid, seq in promised.items())
    assert report.records == len(records)


async def redis_prefixes() -> AsyncIterator[str]:
    async with own_prefix() as (_, prefix):
        yield prefix


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    async for prefix in redis_prefixes():
        yield prefix


@pytest.fixture(params=["jsonl", pytest.param("redis", marks=pytest.mark.redis)])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """(kind, where): a ledger file path, or a Redis key prefix."""
    if request.param == "jsonl":
        yield "jsonl", str(tmp_path / "ledger.jsonl")
        return
    async for prefix in redis_prefixes():
        yield "redis", prefix


def run_writers_to_completion(kind: str, target: str) -> dict[str, int]:
    children = [start_writer(kind, target, f"w{i}", PER_WRITER) for i in range(WRITERS)]
    release(*children)
    promised: dict[str, int] = {}
    retries = 0
    for child in children:
        out, err = child.communicate(timeout=90)
        assert child.returncode == 0, err
        promised.update(acknowledged(out.splitlines()))
        retries += sum(int(line.split()[1]) for line in out.splitlines() if line.startswith("cas_"))
    assert len(promised) == WRITERS * PER_WRITER
    if kind == "redis":
        assert retries > 0, "the writers never contended: the test proves nothing"
    return promised


async def test_processes_share_one_file_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    promised = await asyncio.to_thread(run_writers_to_completion, "jsonl", str(path))
    async with JsonlLedgerSink(path, read_only=True) as sink:
        await assert_one_unforked_chain(sink, promised)
        records = await records_of(sink)
        assert len(records) == WRITERS * PER_WRITER
        assert interleavings(records) > WRITERS, "the writers never raced"
    assert b"canary-7f3a91" not in path.read_bytes()


@pytest.mark.redis
async def test_processes_share_one_redis_chain(redis_prefix: str) -> None:
    promised = await asyncio.to_thread(run_writers_to_completion, "redis", redis_prefix)
    client = redis_asyncio.Redis.from_url(REDIS_URL)
    sink = RedisLedgerSink(client, prefix=redis_prefix)
    await assert_one_unforked_chain(sink, promised)
    records = await records_of(sink)
    assert len(records) == WRITERS * PER_WRITER
    assert interleavings(records) > WRITERS, "the writers never raced"
    await client.aclose()


def kill_after(kind: str, target: str, name: str, appends: int) -> dict[str, int]:
    """Race an endless writer against a steady one; SIGKILL the endless one mid-loop.

    Returns every append either of them acknowledged. The steady writer must finish: the
    killed process's lock (flock) or half-done work must not wedge the ledger.
    """
    doomed = start_writer(kind, target, name, -1)
    steady = start_writer(kind, target, f"{name}-steady", 100)
    release(doomed, steady)
    assert doomed.stdout is not None
    lines = [doomed.stdout.readline() for _ in range(appends)]
    if "" in lines:  # it died on its own before the kill: say why
        doomed.kill()
        _, err = doomed.communicate(timeout=30)
        steady.kill()
        pytest.fail(f"the writer to be killed died first:\n{err}")
    doomed.send_signal(signal.SIGKILL)
    # Lines printed before the kill still count. Read them through the same buffered stream:
    # communicate() would read the pipe underneath it and miss what readline() read ahead.
    rest = doomed.stdout.read()
    doomed.communicate(timeout=30)  # reaps it and closes its pipes: nothing is left to read
    assert doomed.returncode == -signal.SIGKILL
    out, err = steady.communicate(timeout=60)
    assert steady.returncode == 0, err
    return acknowledged([*lines, *rest.splitlines(), *out.splitlines()])


async def test_a_writer_killed_mid_loop_leaves_a_chain_that_verifies_and_resumes(
    target: tuple[str, str],
) -> None:
    kind, where = target
    promised: dict[str, int] = {}
    for round_no, appends in enumerate((37, 101, 250)):
        killed = await asyncio.to_thread(kill_after, kind, where, f"k{round_no}", appends)
        promised.update(killed)
    client = redis_asyncio.Redis.from_url(REDIS_URL) if kind == "redis" else None
    sink: JsonlLedgerSink | RedisLedgerSink = (
        JsonlLedgerSink(where) if client is None else RedisLedgerSink(client, prefix=where)
    )
    await assert_one_unforked_chain(sink, promised)
    head = await sink.head()
    assert head is not None
    resumed = await sink.append(after_kill_entry())
    assert resumed.seq == head.seq + 1
    assert (await verify(sink)).ok
    await sink.close()
    if client is not None:
        await client.aclose()


def after_kill_entry() -> LedgerEntry:
    return LedgerEntry(
        time="2026-11-22T10:00:00.000Z",
        trace_id="t",
        proposal_id="after-kill",
        route="billing_help",
        tenant="acme",
        service_account="sa",
        tool="lookup_order",
        config_hash="sha256:" + "c" * 64,
        args={},
        decision="approved",
        decision_us=1,
    )
