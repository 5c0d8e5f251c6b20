"""How the store's calls reach Redis: redis-py's public API.

:class:`StockTransport` answers three requests (a script, ``GET``, ``SET``) and turns every fault
into :class:`~broker.taxonomy.StoreUnavailableError`. Nothing is retried: a timed-out script may
still have run, and sending it again could charge twice; the caller fails closed instead.

On a standalone Redis the calls of one event-loop turn go as one write on one of redis-py's
pooled connections (:mod:`~broker.stores.redis_autopipe`), scripts as ``EVALSHA`` (``EVAL`` once
after ``NOSCRIPT``). On a Cluster each script is a redis-py ``Script`` and each call a command of
its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from broker.stores.redis_autopipe import AutoPipeline, Command
from broker.stores.redis_scripts import ScriptCall
from broker.taxonomy import StoreUnavailableError

__all__ = [
    "REDIS_FAULTS",
    "RedisClient",
    "StockTransport",
    "Transport",
    "unavailable",
]

RedisClient = Redis | RedisCluster
"""Either client works; a Cluster client routes each script by its (single) slot."""

REDIS_FAULTS = (RedisError, RedisClusterException, OSError)
"""Everything the client raises for an unreachable, loading, full, read-only or failing server
(OSError covers socket faults and ``asyncio.TimeoutError``)."""

_T = TypeVar("_T")


def unavailable(exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(f"redis: {type(exc).__name__}: {exc}")


async def guard(awaitable: Awaitable[_T]) -> _T:
    """Await one Redis command; any Redis fault becomes StoreUnavailableError."""
    try:
        return await awaitable
    except REDIS_FAULTS as exc:
        raise unavailable(exc) from exc


class Transport(Protocol):
    async def script(self, call: ScriptCall) -> Any:
        """The script's reply."""

    async def get(self, key: str) -> Any: ...

    async def set(self, key: str, value: bytes, ttl_ms: int) -> None: ...

    async def close(self) -> None: ...


class _Script(Protocol):
    """What ``register_script`` returns (redis-py's ``AsyncScript``)."""

    sha: str

    async def __call__(
        self,
        keys: Sequence[str] | None = None,
        args: Sequence[str | bytes] | None = None,
        client: Any = None,
    ) -> Any: ...


class StockTransport:
    """redis-py's public API.

    On a standalone Redis the calls go through :class:`~broker.stores.redis_autopipe.AutoPipeline`
    (the calls of one event-loop turn as one write), on a client of their own: the same pool
    settings, but no ``socket_timeout``, as the batch's deadline bounds the exchange as a whole
    (``socket_timeout`` is that deadline). A script is sent as ``EVALSHA``; after
    ``NOSCRIPT`` (a Redis that restarted or failed over: the script did not run) it goes again as
    ``EVAL``, which carries the source and caches it.

    On a Cluster each script is a redis-py ``Script`` and each call a command of its own.
    """

    def __init__(self, client: RedisClient, sources: Mapping[str, str]) -> None:
        self._client = client
        self._sources = dict(sources)
        self._shas = {name: _sha(source) for name, source in sources.items()}
        self._scripts: dict[str, _Script] = {}
        self._batches: AutoPipeline | None = None
        self._own_client: Redis | None = None
        if isinstance(client, Redis):
            self._own_client, timeout = _untimed_twin(client)
            self._batches = AutoPipeline(self._own_client, timeout)
        else:
            self._scripts = {
                name: cast(_Script, client.register_script(source))
                for name, source in sources.items()
            }

    async def script(self, call: ScriptCall) -> Any:
        if self._batches is None:
            try:
                return await self._scripts[call.script](keys=call.keys, args=call.args)
            except REDIS_FAULTS as exc:
                raise unavailable(exc) from exc
        return await self._run(self._batches, call)

    async def get(self, key: str) -> Any:
        if self._batches is None:
            return await guard(self._client.get(key))
        return await _one(self._batches, ("GET", key))

    async def set(self, key: str, value: bytes, ttl_ms: int) -> None:
        if self._batches is None:
            await guard(self._client.set(key, value, px=ttl_ms))
            return
        await _one(self._batches, ("SET", key, value, "PX", ttl_ms))

    async def close(self) -> None:
        if self._batches is not None:
            await self._batches.close()
        if self._own_client is not None:
            await guard(self._own_client.aclose())

    async def _run(self, batches: AutoPipeline, call: ScriptCall) -> Any:
        evalsha = ("EVALSHA", self._shas[call.script], len(call.keys), *call.keys, *call.args)
        try:
            (reply,) = await batches.exchange(evalsha)
            if isinstance(reply, NoScriptError):
                source = self._sources[call.script]
                (reply,) = await batches.exchange(
                    ("EVAL", source, len(call.keys), *call.keys, *call.args)
                )
            if isinstance(reply, Exception):
                raise reply
        except REDIS_FAULTS as exc:
            raise unavailable(exc) from exc
        return reply


def _sha(source: str) -> str:
    """The name Redis gives a cached script: the SHA-1 of its source (as redis-py's Script)."""
    return hashlib.sha1(source.encode("utf-8")).hexdigest()  # noqa: S324


def _untimed_twin(client: Redis) -> tuple[Redis, float | None]:
    """A client with ``client``'s connection settings but no ``socket_timeout``, and that timeout.

    Built from the pool's public settings (its connection class, its limit on connections and
    the keyword arguments it gives each connection), so host, credentials, TLS, database and
    protocol are the same. Never with retries, whatever ``client`` has: a resent batch could run
    a script twice.
    """
    pool = client.connection_pool
    settings = dict(pool.connection_kwargs)
    timeout: float | None = settings.pop("socket_timeout", None)
    settings["retry"] = Retry(NoBackoff(), 0)
    twin = ConnectionPool(
        connection_class=pool.connection_class,
        max_connections=pool.max_connections,
        socket_timeout=None,
        **settings,
    )
    return Redis.from_pool(twin), timeout


async def _one(batches: AutoPipeline, command: Command) -> Any:
    try:
        (reply,) = await batches.exchange(command)
    except REDIS_FAULTS as exc:
        raise unavailable(exc) from exc
    if isinstance(reply, Exception):
        raise unavailable(reply) from reply
    return reply
