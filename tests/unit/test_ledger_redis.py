"""Redis sink specifics: compare-and-append under contention, one hash slot, faults."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as redis_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from broker.ledger import (
    Checkpointer,
    LedgerCorruptError,
    LedgerEntry,
    LedgerUnavailableError,
    RedisCheckpointStore,
    RedisLedgerSink,
    redis_sink,
    verify,
)
from broker.ledger.sealing import seal
from tests.ledger_entries import make_entry as shared_entry
from tests.redis_helpers import REDIS_URL, own_prefix

pytestmark = pytest.mark.redis


def make_entry(n: int, **overrides: Any) -> LedgerEntry:
    # Trace ids with braces: the Redis sink must keep them out of its hash tags.
    return shared_entry(n, **{"trace_id": f"trace {{odd}} id-{n % 2}", **overrides})


@pytest.fixture
async def redis_prefix() -> AsyncIterator[tuple[redis_asyncio.Redis, str]]:
    async with own_prefix() as client_and_prefix:
        yield client_and_prefix


async def test_writers_racing_on_one_prefix_retry_instead_of_forking(
    redis_prefix: tuple[redis_asyncio.Redis, str],
) -> None:
    client, prefix = redis_prefix
    first = RedisLedgerSink(client, prefix=prefix)
    second = RedisLedgerSink(client, prefix=prefix)
    await first.append(make_entry(0))
    await second.append(make_entry(1))  # learns the head: not a retry
    assert second.cas_retries == 0
    await first.append(make_entry(2))  # its cached head is stale: one retry
    assert first.cas_retries == 1
    refs = await asyncio.gather(
        *(sink.append(make_entry(n)) for n in range(3, 43) for sink in (first, second))
    )
    assert sorted(ref.seq for ref in refs) == list(range(4, 84))
    report = await verify(first)
    assert (report.ok, report.records) == (True, 83)


async def test_every_key_lives_in_one_cluster_slot(
    redis_prefix: tuple[redis_asyncio.Redis, str],
) -> None:
    client, prefix = redis_prefix
    sink = RedisLedgerSink(client, prefix=prefix)
    for n in range(3):
        await sink.append(make_entry(n))
    await sink.ping()
    await Checkpointer(
        sink, Ed25519PrivateKey.generate(), RedisCheckpointStore(client, prefix=prefix)
    ).checkpoint()
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
    assert len(keys) == 7  # records, head, proposals, two traces, ping, checkpoints
    assert {key_slot(key) for key in keys} == {key_slot(b"{ledger}")}


async def test_a_lost_head_key_refuses_appends_rather_than_overwrite(
    redis_prefix: tuple[redis_asyncio.Redis, str],
) -> None:
    client, prefix = redis_prefix
    sink = RedisLedgerSink(client, prefix=prefix)
    await sink.append(make_entry(0))
    await client.delete(f"{prefix}:{{ledger}}:head")
    fresh = RedisLedgerSink(client, prefix=prefix)
    with pytest.raises(LedgerCorruptError, match="exists beyond the head"):
        await fresh.append(make_entry(1))
    assert len(await client.hgetall(f"{prefix}:{{ledger}}:records")) == 1


async def test_a_client_with_decoded_responses_works_too(
    redis_prefix: tuple[redis_asyncio.Redis, str],
) -> None:
    _, prefix = redis_prefix
    client = redis_asyncio.Redis.from_url(REDIS_URL, decode_responses=True)
    sink = RedisLedgerSink(client, prefix=prefix)
    await sink.append(make_entry(0, args={"city": "Zürich"}))
    found = await sink.by_proposal("prp_0")
    assert found is not None and found.args_redacted == {"city": "Zürich"}
    assert (await verify(sink)).ok
    await client.aclose()


async def filled(client: redis_asyncio.Redis, prefix: str, count: int) -> RedisLedgerSink:
    """A sink on ``prefix`` holding ``count`` records."""
    sink = RedisLedgerSink(client, prefix=prefix)
    for n in range(count):
        await sink.append(make_entry(n))
    return sink


async def test_reads_span_chunks_in_order_and_a_gap_at_a_chunk_edge_is_reported(
    redis_prefix: tuple[redis_asyncio.Redis, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, prefix = redis_prefix
    monkeypatch.setattr(redis_sink, "_READ_CHUNK", 3)
    monkeypatch.setattr(redis_sink, "_YIELD_EVERY", 2)
    sink = await filled(client, prefix, 10)
    assert [record.seq async for record in sink.read()] == list(range(1, 11))
    assert [record.seq async for record in sink.read(3, 8)] == list(range(3, 9))
    await client.hdel(f"{prefix}:{{ledger}}:records", "4")  # the first seq of the second chunk
    report = await verify(RedisLedgerSink(client, prefix=prefix))
    assert (report.ok, report.records, report.first_bad_seq) == (False, 3, 4)
    assert report.reason == "seq gap: expected 4 got 5"


async def test_a_failing_prefetch_fails_the_read_instead_of_hanging(
    redis_prefix: tuple[redis_asyncio.Redis, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, prefix = redis_prefix
    monkeypatch.setattr(redis_sink, "_READ_CHUNK", 3)
    sink = await filled(client, prefix, 7)
    real_hmget, calls = client.hmget, 0

    async def hmget_failing_on_the_second_chunk(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RedisConnectionError("connection reset by the test")
        return await real_hmget(*args, **kwargs)

    monkeypatch.setattr(client, "hmget", hmget_failing_on_the_second_chunk)
    seen: list[bytes] = []

    async def read_all() -> None:
        async for raw in sink.read_raw():
            seen.append(raw)

    with pytest.raises(LedgerUnavailableError, match="connection reset by the test"):
        await asyncio.wait_for(read_all(), timeout=10)
    assert len(seen) == 3  # the first chunk, then the failure: nothing after it is skipped to
    calls = 1  # verify, the caller that matters, fails the same way
    with pytest.raises(LedgerUnavailableError, match="connection reset by the test"):
        await asyncio.wait_for(verify(sink), timeout=10)


async def test_the_next_chunk_is_fetched_while_the_caller_works_through_this_one(
    redis_prefix: tuple[redis_asyncio.Redis, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, prefix = redis_prefix
    monkeypatch.setattr(redis_sink, "_READ_CHUNK", 20)
    monkeypatch.setattr(redis_sink, "_YIELD_EVERY", 1)
    sink = await filled(client, prefix, 40)
    real_hmget, fetched = client.hmget, 0

    async def counting_hmget(*args: Any, **kwargs: Any) -> Any:
        nonlocal fetched
        reply = await real_hmget(*args, **kwargs)
        fetched += 1
        return reply

    monkeypatch.setattr(client, "hmget", counting_hmget)
    fetched_when_handed: list[int] = []
    async for _ in sink.read_raw():
        fetched_when_handed.append(fetched)
        time.sleep(0.005)  # a CPU-bound caller like verify: it never yields to the loop itself
    # The second chunk arrived while the caller was still on the first (about 0.1 s of work).
    assert fetched_when_handed[19] == 2


async def test_a_deleted_last_record_is_caught_by_the_head_without_checkpoints(
    redis_prefix: tuple[redis_asyncio.Redis, str],
) -> None:
    client, prefix = redis_prefix
    sink = await filled(client, prefix, 5)
    await client.hdel(f"{prefix}:{{ledger}}:records", "5")
    report = await verify(sink)
    assert (report.ok, report.records, report.first_bad_seq) == (False, 4, 5)
    assert report.reason == "truncated: the ledger's head names seq 5 but the chain ends at seq 4"


async def test_a_last_record_rewritten_with_a_recomputed_hash_differs_from_the_head(
    redis_prefix: tuple[redis_asyncio.Redis, str],
) -> None:
    client, prefix = redis_prefix
    sink = RedisLedgerSink(client, prefix=prefix)
    refs = [await sink.append(make_entry(n)) for n in range(3)]
    # Reseal seq 3 with other content after the true seq 2: a chain that checks on its own.
    forged, _ = seal(make_entry(99), refs[1])
    await client.hset(f"{prefix}:{{ledger}}:records", "3", forged.rstrip(b"\n"))
    report = await verify(sink)
    assert (report.ok, report.first_bad_seq) == (False, 3)
    assert report.reason == "record at seq 3 differs from the ledger's head"


async def test_an_unreachable_redis_is_reported_as_unavailable() -> None:
    client = redis_asyncio.Redis.from_url("redis://127.0.0.1:1", socket_connect_timeout=0.5)
    sink = RedisLedgerSink(client, prefix="test:unreachable")
    with pytest.raises(LedgerUnavailableError):
        await sink.append(make_entry(0))
    with pytest.raises(LedgerUnavailableError):
        await sink.ping()
    with pytest.raises(LedgerUnavailableError):
        await sink.head()
    await client.aclose()


async def test_a_prefix_with_braces_is_refused() -> None:
    client = redis_asyncio.Redis.from_url(REDIS_URL)
    with pytest.raises(ValueError, match="braces"):
        RedisLedgerSink(client, prefix="{tenant}")
    await client.aclose()
