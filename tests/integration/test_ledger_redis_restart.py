"""Why ``test_redis_outage[redis]`` once saw 95 answers and 94 Redis ledger records.

After Redis restarts, every connection the client pooled before is dead, and the broker's client
never retries a command (a resent script could run twice). So the first appends after the
restart each failed on a dead pooled connection, although Redis was up: the proposal was answered
(``audit: null``, the entry only in the log) without its record. The Redis ledger now drops the
pool's idle connections on a connection fault, checks whether the batch landed (its proposal ids
in the ledger's index), and appends it once more only if it did not: no record lost, none twice.

Real ``redis-server`` (private, restartable, AOF on), the sink as the broker builds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.ledger import RedisLedgerSink, verify
from broker.stores.redis import RedisStore
from tests.integration.procs import REDIS_SERVER, PrivateRedis
from tests.ledger_entries import make_entry

pytestmark = pytest.mark.redis


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if not Path(REDIS_SERVER).exists():
        pytest.skip(f"{REDIS_SERVER} is missing")
    server = PrivateRedis(tmp_path / "redis", persistent=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_appends_right_after_a_redis_restart_keep_their_records(
    private_redis: PrivateRedis,
) -> None:
    store = RedisStore.from_url(private_redis.url, prefix="restart")  # the broker's own client
    sink = RedisLedgerSink(store.client, prefix="restart:ledger")  # type: ignore[arg-type]
    try:
        # Several connections in the pool, as under load: concurrent appends and pings.
        await asyncio.gather(*(sink.append(make_entry(n)) for n in range(1, 9)))
        await asyncio.gather(*(store.ping() for _ in range(8)))
        await asyncio.to_thread(private_redis.stop)
        await asyncio.to_thread(private_redis.start)  # up again: only the pooled sockets are dead

        refs = await asyncio.gather(*(sink.append(make_entry(n)) for n in range(9, 13)))
        assert sorted(ref.seq for ref in refs) == [9, 10, 11, 12]
        for n in range(13, 16):
            assert (await sink.append(make_entry(n))).seq == n
        report = await verify(sink)
        assert (report.ok, report.records) == (True, 15), report
        proposal_ids = [record.proposal_id async for record in sink.read(1)]
        assert len(proposal_ids) == len(set(proposal_ids)) == 15  # none twice
    finally:
        await sink.close()
        await store.close()
