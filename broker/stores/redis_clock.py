"""Redis's time, as every broker process sharing it reads it: one clock for leases and windows.

Each process stamps leases, key expiries and rate-limit entries in Redis with its own ``now``;
with a wall clock two hours off on one machine, its claims would look abandoned to the others
(or theirs to it), and its rate-limit entries would fall outside everyone else's windows. So
processes on Redis take the time from Redis: ``TIME`` is read (the midpoint of the round trip),
its offset from this process's monotonic clock kept, and ``now`` is then the monotonic clock
plus that offset: no round trip per proposal, no jump when this machine's clock is stepped.

The offset is read again every ``resync_s`` (Redis may have restarted on another host); until
the first reading succeeds (Redis unreachable at start) the process's steady clock stands in,
and the reading is retried every ``retry_s``. Proposals fail closed while Redis is unreachable,
so the stand-in serves at most the first ``retry_s`` after Redis comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio.cluster import RedisCluster

from broker.logs import RateLimitedLog
from broker.stores.redis_transport import REDIS_FAULTS, RedisClient

__all__ = ["RedisServerClock", "server_clock_for"]

log = logging.getLogger("broker.stores.redis_clock")


class RedisServerClock:
    """Seconds since the epoch by Redis's ``TIME``, advanced locally by ``time.monotonic``.

    Args:
        client: the store's client.
        stand_in: the clock used until Redis has answered once.
        resync_s: how often the offset is read again.
        retry_s: how soon a failed reading is tried again.
    """

    def __init__(
        self,
        client: RedisClient,
        stand_in: Callable[[], float],
        *,
        resync_s: float = 30.0,
        retry_s: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._stand_in = stand_in
        self._monotonic = monotonic
        self._offset: float | None = None
        self._resync_s = resync_s
        self._retry_s = retry_s
        self._task: asyncio.Task[None] | None = None
        self._faults = RateLimitedLog(log)

    @property
    def synced(self) -> bool:
        return self._offset is not None

    def __call__(self) -> float:
        offset = self._offset
        if offset is None:
            return self._stand_in()
        return self._monotonic() + offset

    async def sync(self) -> bool:
        """Read ``TIME`` once; whether it answered."""
        try:
            before = self._monotonic()
            reply: Any
            if isinstance(self._client, RedisCluster):  # one node's clock for every process
                reply = await self._client.time(target_nodes=RedisCluster.PRIMARIES)
                if isinstance(reply, dict):
                    reply = reply[min(reply)]
            else:
                reply = await self._client.time()
            after = self._monotonic()
        except REDIS_FAULTS as exc:
            self._faults.warning("cannot read Redis TIME: %s", exc)
            return False
        seconds, micros = reply
        first = self._offset is None
        self._offset = int(seconds) + int(micros) / 1e6 - (before + after) / 2
        if first:
            self._faults.recovered("cannot read Redis TIME: %s")
            log.info("leases and windows follow Redis TIME (this machine's clock is ignored)")
        return True

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="broker-redis-clock")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _follow(self) -> None:
        while True:
            synced = await self.sync()
            await asyncio.sleep(self._resync_s if synced else self._retry_s)


def server_clock_for(store: object, stand_in: Callable[[], float]) -> RedisServerClock | None:
    """Redis's clock for a Redis store (``stand_in`` until it answers), else ``None``."""
    from broker.stores.redis import RedisStore

    if not isinstance(store, RedisStore):
        return None
    return RedisServerClock(store.client, stand_in)
