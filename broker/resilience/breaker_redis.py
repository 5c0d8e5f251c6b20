"""Open breakers shared through Redis: one small key per backend holding its open-until time.

``<prefix>:breaker:<backend>`` holds the open-until time in milliseconds of the Redis server's
own clock (``TIME``, read inside the scripts), so the processes' clocks never have to agree. The
key outlives its open-until time by ``open_s`` so that, once it has passed, exactly one caller
(the first to look) takes the probe, by moving open-until forward by the probe's deadline; a
successful probe deletes the key. A process that dies holding the probe delays the next one by
that deadline only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RedisBreakerStates"]

_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# ARGV[1]: the probe's deadline (ms). Returns -1 closed, 0 "you probe", else ms still open.
_CHECK = (
    _NOW_MS
    + """
local till = tonumber(redis.call('GET', KEYS[1]))
if not till then return -1 end
if now < till then return till - now end
redis.call('SET', KEYS[1], now + tonumber(ARGV[1]), 'PX', tonumber(ARGV[1]) * 2 + 1000)
return 0
"""
)

# ARGV[1]: how long it stays open (ms).
_OPEN = (
    _NOW_MS
    + """
local open_ms = tonumber(ARGV[1])
redis.call('SET', KEYS[1], now + open_ms, 'PX', open_ms * 2 + 1000)
return open_ms
"""
)


class RedisBreakerStates:
    """:class:`~broker.resilience.breaker.SharedBreakerStates` in Redis (redis-py's client)."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._check = client.register_script(_CHECK)
        self._open = client.register_script(_OPEN)

    def key(self, backend: str) -> str:
        return f"{self._prefix}:breaker:{backend}"

    async def check(self, backend: str, probe_s: float) -> float | None:
        ms = int(await self._check(keys=[self.key(backend)], args=[_ms(probe_s)]))
        return None if ms < 0 else ms / 1000

    async def open(self, backend: str, open_s: float) -> None:
        await self._open(keys=[self.key(backend)], args=[_ms(open_s)])

    async def close(self, backend: str) -> None:
        await self._client.delete(self.key(backend))


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
