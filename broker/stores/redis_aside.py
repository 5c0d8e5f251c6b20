"""Values kept aside (``broker.stores.aside``) in Redis: one string per value, with its TTL.

``<prefix>:{<tenant>}:aside:<sha256(key)>``: in the tenant's slot, the caller's key hashed, as
every other key of the tenant (``broker.stores.redis_keys``).
"""

from __future__ import annotations

from typing import Any

from broker.stores.aside import MAX_ASIDE_BYTES
from broker.stores.redis_keys import KeySpace, digest
from broker.stores.redis_transport import Transport, guard

__all__ = ["RedisAside"]


class RedisAside:
    """The aside side of :class:`~broker.stores.redis.RedisStore`."""

    def __init__(self, client: Any, transport: Transport, keys: KeySpace) -> None:
        self._client = client
        self._transport = transport
        self._keys = keys

    def _key(self, tenant: str, key: str) -> str:
        return f"{self._keys.tenant_prefix(tenant)}aside:{digest(key)}"

    async def keep_aside(self, tenant: str, key: str, value: bytes, *, ttl_s: int) -> None:
        if len(value) > MAX_ASIDE_BYTES:
            raise ValueError(f"at most {MAX_ASIDE_BYTES} bytes are kept aside")
        where = self._key(tenant, key)
        if ttl_s <= 0:
            await guard(self._client.delete(where))
            return
        await self._transport.set(where, value, ttl_s * 1000)

    async def load_aside(self, tenant: str, key: str) -> bytes | None:
        raw = await self._transport.get(self._key(tenant, key))
        if raw is None:
            return None
        return bytes(raw)
