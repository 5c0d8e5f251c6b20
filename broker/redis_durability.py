"""Whether the Redis store can lose idempotency records, and what the broker does about it.

A Redis without persistence forgets every claim when it restarts, and one with an evicting
``maxmemory-policy`` drops records under memory pressure: either way a retried non-idempotent
call can run twice. So ``broker serve`` refuses to start on such a Redis, or on one that will not
say (``CONFIG`` renamed or denied by an ACL), unless the config accepts it in so many words:
``[service] allow_volatile_redis = true``. ``/readyz`` reports the verdict under
``checks.redis_durability``:

* ``ok``: persistence on and ``noeviction``;
* ``volatile_allowed``: it could lose records (or would not say), and the config accepts that;
* ``volatile``: it could lose records and the config does not accept it (not ready);
* ``unchecked``: Redis has not answered yet (the store check says unavailable meanwhile).

The check itself is :func:`broker.stores.redis.check_redis_safety`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Literal

from broker.config import BrokerConfig
from broker.stores.redis import RedisStore, check_redis_safety
from broker.taxonomy import StoreUnavailableError

__all__ = ["ALLOW_KEY", "RedisDurability", "Verdict", "durability_of", "refusal_at_start"]

log = logging.getLogger("broker.redis_durability")

ALLOW_KEY = "[service] allow_volatile_redis"

Verdict = Literal["ok", "volatile_allowed", "volatile", "unchecked"]


class RedisDurability:
    """The verdict on one store's Redis, checked until Redis first answers, then kept (its
    settings are an operator's, not something that changes under a running broker)."""

    def __init__(self, store: RedisStore, *, allow_volatile: bool) -> None:
        self._store = store
        self._allow = allow_volatile
        self._verdict: Verdict | None = None
        self.warnings: list[str] = []

    async def verdict(self) -> Verdict:
        if self._verdict is not None:
            return self._verdict
        try:
            self.warnings = await check_redis_safety(self._store.client)
        except StoreUnavailableError:
            return "unchecked"
        if not self.warnings:
            self._verdict = "ok"
        else:
            self._verdict = "volatile_allowed" if self._allow else "volatile"
        return self._verdict


def refusal_at_start(config: BrokerConfig, env: Mapping[str, str]) -> str | None:
    """The one line ``broker serve`` refuses to start with, or ``None`` to go on.

    Only the Redis store is checked. A Redis that does not answer yet is no reason to refuse:
    proposals fail closed (503) until it does, and ``/readyz`` then gives the verdict.
    """
    service = config.service
    url = env.get("REDIS_URL") or service.redis_url
    if (service.store or ("redis" if url else "sqlite")) != "redis" or not url:
        return None

    async def check() -> list[str] | None:
        store = RedisStore.from_url(url, prefix=service.key_prefix, socket_timeout=2.0)
        try:
            return await check_redis_safety(store.client)
        except StoreUnavailableError:
            return None
        finally:
            await store.close()

    warnings = asyncio.run(check())
    if warnings is None:
        log.warning("Redis is not reachable yet: its persistence is checked once it answers")
        return None
    if not warnings:
        return None
    if service.allow_volatile_redis:
        for warning in warnings:
            log.warning("accepted by %s = true: %s", ALLOW_KEY, warning)
        return None
    return f"{'; '.join(warnings)}. Set {ALLOW_KEY} = true to accept that"


def durability_of(store: object, config: BrokerConfig) -> RedisDurability | None:
    """The verdict keeper for ``/readyz`` when ``store`` is the Redis store, else ``None``."""
    if not isinstance(store, RedisStore):
        return None
    return RedisDurability(store, allow_volatile=config.service.allow_volatile_redis)
