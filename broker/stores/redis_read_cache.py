"""The read cache in Redis, shared by every broker process: one string per entry, expired by
Redis itself (``SET ... PX``), so nothing sweeps and a restart forgets nothing."""

from __future__ import annotations

import msgspec

from broker.stores.read_cache import CachedResult
from broker.stores.redis_keys import KeySpace
from broker.stores.redis_transport import RedisClient, guard
from broker.taxonomy import StoreUnavailableError

__all__ = ["RedisReadCache"]


class RedisReadCache:
    """The read cache's side of :class:`~broker.stores.redis.RedisStore`."""

    def __init__(self, client: RedisClient, keys: KeySpace) -> None:
        self._client = client
        self._keys = keys
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(CachedResult)

    async def cache_get(self, tenant: str, key: str, *, now: float) -> CachedResult | None:
        raw = await guard(self._client.get(self._keys.read_cache(tenant, key)))
        if raw is None:
            return None
        try:
            return self._decoder.decode(raw if isinstance(raw, bytes) else raw.encode())
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError("unreadable cached result in Redis") from exc

    async def cache_put(self, tenant: str, key: str, entry: CachedResult, *, ttl_s: float) -> None:
        ttl_ms = max(1, int(ttl_s * 1000))
        value = self._encoder.encode(entry)
        await guard(self._client.set(self._keys.read_cache(tenant, key), value, px=ttl_ms))
