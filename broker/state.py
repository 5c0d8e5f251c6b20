"""Where state lives: the store (SQLite, Redis or memory) and the ledger (a file or Redis)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker.config import BrokerConfig
from broker.stores import MemoryStore, SqliteStore, Store
from broker.taxonomy import ConfigError, StoreUnavailableError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from broker.ledger import CheckpointStore, LedgerSink

__all__ = [
    "Ledger",
    "open_ledger",
    "open_ledger_reader",
    "open_store",
    "store_path",
    "warn_about_store",
]

log = logging.getLogger("broker.state")


def open_store(
    config: BrokerConfig, env: Mapping[str, str], *, clock: Callable[[], float]
) -> Store:
    """The store ``[service] store`` names; unnamed, Redis when ``REDIS_URL`` or ``[service]
    redis_url`` gives one, else the SQLite file (:func:`store_path`).

    Raises:
        ConfigError: Redis named without a URL, or a SQLite file that cannot be trusted.
    """
    service = config.service
    url = env.get("REDIS_URL") or service.redis_url
    kind = service.store or ("redis" if url else "sqlite")
    if kind == "memory":
        return MemoryStore(clock=clock)
    if kind == "sqlite":
        return SqliteStore(store_path(config), synchronous=service.store_synchronous, clock=clock)
    if not url:
        raise ConfigError([("service.store", '"redis" needs redis_url (or REDIS_URL)')])
    from broker.stores.redis import RedisStore

    return RedisStore.from_url(url, prefix=service.key_prefix)


def store_path(config: BrokerConfig) -> Path:
    """``[service] store_path``, or ``state.sqlite3`` beside the ledger file: one data directory."""
    service = config.service
    if service.store_path:
        return Path(service.store_path)
    return Path(service.ledger_path).parent / "state.sqlite3"


async def warn_about_store(store: Store) -> None:
    """Say loudly at start when the store could lose idempotency records."""
    from broker.stores.redis import RedisStore, check_redis_safety

    if isinstance(store, SqliteStore):  # first: it is a MemoryStore that keeps its state
        log.info("state in %s (synchronous=%s)", store.path, store.synchronous)
        return
    if isinstance(store, MemoryStore):
        log.warning(
            "the memory store keeps idempotency keys, budgets and registered tools in this "
            "process only: a restart forgets them, and a retried proposal may execute again"
        )
        return
    if not isinstance(store, RedisStore):
        return
    try:
        warnings = await check_redis_safety(store.client)
    except StoreUnavailableError:
        log.warning("Redis is not reachable yet; proposals fail closed (503) until it is")
        return
    for warning in warnings:
        log.warning("UNSAFE REDIS FOR IDEMPOTENCY: %s", warning)


@dataclass(frozen=True, slots=True)
class Ledger:
    """The ledger sink, where its checkpoints go, and the key that signs them."""

    sink: LedgerSink
    checkpoints: CheckpointStore
    signer: Ed25519PrivateKey
    probe_before_write: bool = False
    """Ping the sink before every world-changing call: cheap for a local file (a few
    syscalls); a Redis ledger is trusted from the admission that just reached the same Redis."""


def open_ledger(config: BrokerConfig, store: Store) -> Ledger:
    """The file ledger (embedded default) or the Redis one (shared by every broker process).

    Raises:
        LedgerUnavailableError: the ledger cannot be opened; the broker must not start.
    """
    from broker.ledger import (
        JsonlCheckpointStore,
        JsonlLedgerSink,
        RedisCheckpointStore,
        RedisLedgerSink,
        load_or_create_signing_key,
    )
    from broker.stores.redis import RedisStore

    service = config.service
    signer = load_or_create_signing_key(service.ledger_key_path)
    if service.ledger == "redis":
        if not isinstance(store, RedisStore):
            raise ConfigError([("service.ledger", '"redis" needs the Redis store (redis_url)')])
        prefix = f"{service.key_prefix}:ledger"
        return Ledger(
            RedisLedgerSink(store.client, prefix=prefix),  # type: ignore[arg-type]
            RedisCheckpointStore(store.client, prefix=prefix),  # type: ignore[arg-type]
            signer,
        )
    sink = JsonlLedgerSink(service.ledger_path, fsync=service.ledger_fsync)
    checkpoints = JsonlCheckpointStore.for_ledger(service.ledger_path)
    return Ledger(sink, checkpoints, signer, probe_before_write=True)


async def open_ledger_reader(config: BrokerConfig) -> LedgerSink:
    """The configured ledger opened for reading only (offline tools: lint, verify)."""
    from broker.ledger import JsonlLedgerSink, RedisLedgerSink

    service = config.service
    if service.ledger == "redis":
        from redis.asyncio import Redis

        url = os.environ.get("REDIS_URL") or service.redis_url or ""
        return RedisLedgerSink(Redis.from_url(url), prefix=f"{service.key_prefix}:ledger")
    return JsonlLedgerSink(service.ledger_path, read_only=True)
