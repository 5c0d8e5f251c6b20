"""Redis sink specifics: compare-and-append under contention, one hash slot, faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as redis_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from redis.crc import key_slot

from broker.ledger import (
    Checkpointer,
    LedgerCorruptError,
    LedgerEntry,
    LedgerUnavailableError,
    RedisCheckpointStore,
    RedisLedgerSink,
    verify,
)
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
