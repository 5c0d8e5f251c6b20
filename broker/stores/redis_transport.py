"""How the store's calls reach Redis: redis-py's public API (the default), or the wire (opt-in).

Both answer the same four requests (a script; a script with the decision record's ``SET`` behind
it; ``GET``; ``SET``) and turn every fault into :class:`~broker.taxonomy.StoreUnavailableError`,
so the store above them cannot tell which one it has. Nothing is retried: a timed-out script may
still have run, and sending it again could charge twice; the caller fails closed instead.

* :class:`StockTransport` (``[service] redis_client = "stock"``, and always on a Cluster): each
  script is a redis-py ``Script`` (``EVALSHA``; after ``NOSCRIPT``, from a Redis that restarted or
  failed over, it loads the source and sends it again). The settlement and its decision record go
  as one pipeline on a standalone Redis; on a Cluster they live in different slots and are sent
  concurrently.
* :class:`WireTransport` (``"wire"``): the same commands over :mod:`broker.stores.redis_wire`,
  which packs with hiredis, keeps connections of its own and sends the exchanges of one event-loop
  turn as one pipeline. In ``bench/bench_redis.py`` it costs a broker process much less CPU per
  proposal; it is built on redis-py internals, hence the upper bound on redis in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from broker.stores.redis_scripts import ScriptCall
from broker.stores.redis_wire import Command, Wire
from broker.taxonomy import StoreUnavailableError

__all__ = [
    "REDIS_FAULTS",
    "RedisClient",
    "StockTransport",
    "Transport",
    "WireTransport",
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

    async def script_then_set(self, call: ScriptCall, key: str, value: bytes, ttl_ms: int) -> Any:
        """The script's reply, once the script has run and ``SET key value PX ttl_ms`` is done."""

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
    """redis-py's public API: ``Script`` objects, commands, one pipeline per settlement."""

    def __init__(self, client: RedisClient, sources: Mapping[str, str]) -> None:
        self._client = client
        self._scripts: dict[str, _Script] = {
            name: cast(_Script, client.register_script(source)) for name, source in sources.items()
        }
        self._pipelined = isinstance(client, Redis)

    async def script(self, call: ScriptCall) -> Any:
        try:
            return await self._scripts[call.script](keys=call.keys, args=call.args)
        except REDIS_FAULTS as exc:
            raise unavailable(exc) from exc

    async def script_then_set(self, call: ScriptCall, key: str, value: bytes, ttl_ms: int) -> Any:
        if not self._pipelined:  # a Cluster: the record lives in another slot
            reply, _ = await _both(self.script(call), self.set(key, value, ttl_ms))
            return reply
        script = self._scripts[call.script]
        # EVALSHA itself rather than ``script(..., client=pipeline)``: redis-py's pipeline then
        # asks SCRIPT EXISTS before every execution, a second round trip per settlement.
        pipeline = self._client.pipeline(transaction=False)
        pipeline.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
        pipeline.set(key, value, px=ttl_ms)
        try:
            reply, stored = await pipeline.execute(raise_on_error=False)
            if isinstance(stored, Exception):
                raise stored
            if isinstance(reply, NoScriptError):  # it did not run: Script loads it and runs it
                reply = await script(keys=call.keys, args=call.args)
            elif isinstance(reply, Exception):
                raise reply
        except REDIS_FAULTS as exc:
            raise unavailable(exc) from exc
        return reply

    async def get(self, key: str) -> Any:
        return await guard(self._client.get(key))

    async def set(self, key: str, value: bytes, ttl_ms: int) -> None:
        await guard(self._client.set(key, value, px=ttl_ms))

    async def close(self) -> None:
        return None  # the connections are the client's


class WireTransport:
    """The same requests over :class:`~broker.stores.redis_wire.Wire` (standalone Redis only)."""

    def __init__(self, client: Redis, sources: Mapping[str, str]) -> None:
        self._wire = Wire(client.connection_pool)
        self._sources = dict(sources)
        # Redis names a cached script by the SHA-1 of its source (as redis-py's Script does).
        self._shas = {
            name: hashlib.sha1(source.encode("utf-8")).hexdigest()  # noqa: S324
            for name, source in sources.items()
        }

    async def script(self, call: ScriptCall) -> Any:
        return await self._run(call)

    async def script_then_set(self, call: ScriptCall, key: str, value: bytes, ttl_ms: int) -> Any:
        # The settlement and its decision record in one exchange (one write, one read).
        return await self._run(call, ("SET", key, value, "PX", ttl_ms))

    async def get(self, key: str) -> Any:
        return await self._one(("GET", key))

    async def set(self, key: str, value: bytes, ttl_ms: int) -> None:
        await self._one(("SET", key, value, "PX", ttl_ms))

    async def close(self) -> None:
        await self._wire.close()

    async def _one(self, command: Command) -> Any:
        try:
            (reply,) = await self._wire.exchange(command)
        except REDIS_FAULTS as exc:
            raise unavailable(exc) from exc
        if isinstance(reply, Exception):
            raise unavailable(reply) from reply
        return reply

    async def _run(self, call: ScriptCall, *after: Command) -> Any:
        """The script's reply; ``after``: commands sent behind it, whose error replies are raised."""
        evalsha = ("EVALSHA", self._shas[call.script], len(call.keys), *call.keys, *call.args)
        try:
            reply, *replies_after = await self._wire.exchange(evalsha, *after)
            for extra in replies_after:
                if isinstance(extra, Exception):
                    raise extra
            if isinstance(reply, NoScriptError):
                # A Redis that restarted or failed over has forgotten the script (it did not
                # run): the script alone goes again as EVAL, which carries the source and caches it.
                source = self._sources[call.script]
                (reply,) = await self._wire.exchange(
                    ("EVAL", source, len(call.keys), *call.keys, *call.args)
                )
            if isinstance(reply, Exception):
                raise reply
        except REDIS_FAULTS as exc:
            raise unavailable(exc) from exc
        return reply


async def _both(first: Awaitable[_T], second: Awaitable[Any]) -> tuple[_T, Any]:
    """Run both to completion (neither is abandoned half-way), then raise the first fault."""
    results = await asyncio.gather(first, second, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return cast(_T, results[0]), results[1]
