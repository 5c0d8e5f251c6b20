"""Expiring values (``broker.stores.expiring``) in Redis: one string per value, expired by Redis
itself (``SET ... PX``), so nothing sweeps, every process shares them and a restart forgets none.

``<prefix>:{<tenant>}:exp:<sha256(key)>``: in the tenant's slot, the caller's key hashed, as every
other key of the tenant (``broker.stores.redis_keys``).

:class:`RedisExpiring` keeps the values; :class:`RedisStoreExpiring` is the store protocol's
expiring-value methods, a base class of :class:`~broker.stores.redis.RedisStore`.
"""

from __future__ import annotations

from broker.stores.expiring import check_size
from broker.stores.redis_keys import KeySpace
from broker.stores.redis_transport import RedisClient, Transport, guard

__all__ = ["RedisExpiring", "RedisStoreExpiring"]


class RedisExpiring:
    """The expiring values' side of :class:`~broker.stores.redis.RedisStore`."""

    def __init__(self, client: RedisClient, transport: Transport, keys: KeySpace) -> None:
        self._client = client
        self._transport = transport
        self._keys = keys

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        check_size(value)
        where = self._keys.expiring(tenant, key)
        if ttl_s <= 0:
            await guard(self._client.delete(where))
            return
        # PX is whole milliseconds: a TTL under one is kept for one rather than refused.
        await self._transport.set(where, value, max(1, int(ttl_s * 1000)))

    async def get_expiring(self, tenant: str, key: str) -> bytes | None:
        raw = await self._transport.get(self._keys.expiring(tenant, key))
        if raw is None:
            return None
        return raw if isinstance(raw, bytes) else bytes(raw)


class RedisStoreExpiring:
    """The expiring-value methods of :class:`~broker.stores.redis.RedisStore`, which sets
    ``_expiring``."""

    _expiring: RedisExpiring

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        await self._expiring.put_expiring(tenant, key, value, ttl_s=ttl_s)

    async def get_expiring(self, tenant: str, key: str) -> bytes | None:
        return await self._expiring.get_expiring(tenant, key)
