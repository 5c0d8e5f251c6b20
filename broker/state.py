"""Choosing and checking where shared state lives: the embedded memory store or Redis."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from broker.config import BrokerConfig
from broker.stores import MemoryStore, Store
from broker.taxonomy import StoreUnavailableError

__all__ = ["open_store", "warn_about_store"]

log = logging.getLogger("broker.state")


def open_store(
    config: BrokerConfig, env: Mapping[str, str], *, clock: Callable[[], float]
) -> Store:
    """Redis when ``REDIS_URL`` or ``[service] redis_url`` names one, else the memory store."""
    url = env.get("REDIS_URL") or config.service.redis_url
    if not url:
        return MemoryStore(clock=clock)
    from broker.stores.redis import RedisStore

    return RedisStore.from_url(url, prefix=config.service.key_prefix)


async def warn_about_store(store: Store) -> None:
    """Say loudly at start when Redis could lose idempotency records."""
    from broker.stores.redis import RedisStore, check_redis_safety

    if not isinstance(store, RedisStore):
        return
    try:
        warnings = await check_redis_safety(store.client)
    except StoreUnavailableError:
        log.warning("Redis is not reachable yet; proposals fail closed (503) until it is")
        return
    for warning in warnings:
        log.warning("UNSAFE REDIS FOR IDEMPOTENCY: %s", warning)
