"""The read cache: a ``read`` tool's result served again, for its TTL, instead of a call.

Only tools that declare ``read_cache`` (and only ``risk = "read"`` tools may) go through it.
It sits where the adapter is called, after the whole chain: authorization, schema, policy,
rate limits and budgets all hold for a hit as for a call, and every hit is a proposal with its
own ledger record (``cache: hit``). Dry runs never get here (they preview), so they neither
read nor fill it.

Entries are keyed by tenant and the SHA-256 of the RFC 8785 form of ``[tool_id, tool, args]``:
one tenant never sees another's results, and arguments that differ only in key order or number
spelling share one entry. Only succeeded calls are kept, and only up to ``max_entry_bytes``.
They are the store's expiring values (``broker.stores.expiring``) under ``cache:`` keys (the
gateway keeps its own under others), each a :class:`CachedResult` as MessagePack.

A store that fails fails open: the call goes to the backend as if nothing were cached (the
read is what the caller asked for, and its backend can answer it), logged and counted as
``error``; a result that cannot be kept is answered all the same.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from broker.execution.executor import ExecutionReport
from broker.ledger.canonical import CanonicalizationError, canonical_json
from broker.logs import RateLimitedLog
from broker.model import Execution
from broker.stores import Settlement
from broker.stores.expiring import ExpiringValues
from broker.taxonomy import StoreUnavailableError
from broker.timestamps import utc_now

if TYPE_CHECKING:
    from broker.metrics import BrokerMetrics
    from broker.tools.runtime import ToolRuntime

__all__ = ["CachedResult", "ReadCache", "cache_key"]

log = logging.getLogger("broker.read_cache")
_faults = RateLimitedLog(log)

_result = msgspec.json.Decoder(dict[str, Any])
_encoder = msgspec.json.Encoder()


class CachedResult(msgspec.Struct, frozen=True, array_like=True):
    """One cached result: when it was stored (the storing process's clock) and the result."""

    stored_at: float
    body: bytes
    """The adapter's result object as JSON."""


_entry_encoder = msgspec.msgpack.Encoder()
_entry = msgspec.msgpack.Decoder(CachedResult)


def cache_key(tool: ToolRuntime, args: dict[str, Any]) -> str | None:
    """The entry's key for ``args`` of ``tool``, or ``None`` for arguments JCS cannot write."""
    try:
        canonical = canonical_json([tool.tool_id, tool.name, args])
    except CanonicalizationError:
        return None
    return "cache:" + hashlib.sha256(canonical).hexdigest()


class ReadCache:
    """Runs a cached tool's call through the store's cache; other tools never come here."""

    __slots__ = ("_clock", "_counter", "_metrics", "_store")

    def __init__(
        self, store: ExpiringValues, *, metrics: BrokerMetrics, clock: Callable[[], float]
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._counter = metrics.read_cache
        self._clock = clock

    async def execute(
        self,
        tool: ToolRuntime,
        args: dict[str, Any],
        tenant: str,
        call: Callable[[], Awaitable[ExecutionReport]],
    ) -> ExecutionReport:
        """The cached result if there is a live one; otherwise ``call()``, kept if it succeeded."""
        settings = tool.config.read_cache
        key = cache_key(tool, args)
        if settings is None or key is None:
            return await call()
        label = self._metrics.tool(tool.name)
        now = self._clock()
        try:
            found = await self._store.get_expiring(tenant, key)
            hit = None if found is None else _hit(_entry.decode(found), now)
        except (StoreUnavailableError, msgspec.DecodeError) as exc:
            _faults.warning("read cache unavailable, calling the backend: %s", exc)
            self._counter.labels(label, "error").inc()
        else:
            self._counter.labels(label, "miss" if hit is None else "hit").inc()
            if hit is not None:
                return hit
        report = await call()
        result = report.execution.result
        if report.settlement is not Settlement.SUCCEEDED or result is None:
            return msgspec.structs.replace(report, cache="miss")
        body = _encoder.encode(result)
        if len(body) > settings.max_entry_bytes:
            return msgspec.structs.replace(report, cache="miss")
        try:
            entry = _entry_encoder.encode(CachedResult(self._clock(), body))
            await self._store.put_expiring(tenant, key, entry, ttl_s=settings.ttl_s)
        except StoreUnavailableError as exc:
            _faults.warning("read cache unavailable, result not kept: %s", exc)
            self._counter.labels(label, "error").inc()
            return msgspec.structs.replace(report, cache="miss")
        self._counter.labels(label, "store").inc()
        return msgspec.structs.replace(report, cache="stored")


def _hit(found: CachedResult, now: float) -> ExecutionReport:
    at = utc_now()
    execution = Execution(
        status="succeeded",
        result=_result.decode(found.body),
        attempts=0,
        started_at=at,
        ended_at=at,
    )
    age_s = max(0.0, now - found.stored_at)
    return ExecutionReport(
        execution, Settlement.SUCCEEDED, None, 0, (), cache="hit", cached_age_s=age_s
    )
