"""How much of each order the demo has credited already: per process, or shared through Redis.

A credit must fit what is left of its order. The check before the call (the precondition) reads
the total; the credit itself adds to it only if it still fits, in one atomic step, so two credits
that both passed the precondition can never together exceed the order, in one process or in
several sharing a Redis. Amounts are kept in integer micro-units, so sums are exact.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

__all__ = ["CreditTotals", "MemoryCreditTotals", "RedisCreditTotals", "to_micros"]

_MICROS = Decimal(1_000_000)

# KEYS[1]: the order's credited total. ARGV: the credit, the order's total (micro-units).
_ADD_IF_WITHIN = """
local credited = tonumber(redis.call('GET', KEYS[1]) or '0')
if credited + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
return 1
"""


def to_micros(amount: float) -> int:
    """Exact micro-units of a JSON number (its shortest decimal form, rounded up)."""
    return int((Decimal(repr(amount)) * _MICROS).to_integral_value(rounding="ROUND_CEILING"))


def from_micros(micros: int) -> float:
    return float(Decimal(micros) / _MICROS)


class CreditTotals(Protocol):
    async def credited(self, tenant: str, order: str) -> int:
        """Micro-units credited on ``order`` so far."""
        ...

    async def add_if_within(self, tenant: str, order: str, amount: int, total: int) -> bool:
        """Add ``amount`` if the order's credits stay within ``total``; whether it was added."""
        ...


class MemoryCreditTotals:
    """Totals kept in this process: enough for one broker process."""

    def __init__(self) -> None:
        self._credited: dict[tuple[str, str], int] = {}

    async def credited(self, tenant: str, order: str) -> int:
        return self._credited.get((tenant, order), 0)

    async def add_if_within(self, tenant: str, order: str, amount: int, total: int) -> bool:
        # No await between the read and the write: atomic on the event loop.
        credited = self._credited.get((tenant, order), 0)
        if credited + amount > total:
            return False
        self._credited[(tenant, order)] = credited + amount
        return True


class RedisCreditTotals:
    """Totals shared by every broker process on one Redis, under ``namespace``."""

    def __init__(self, url: str, namespace: str) -> None:
        from redis.asyncio import Redis

        self._redis = Redis.from_url(url)
        self._namespace = namespace
        self._add = self._redis.register_script(_ADD_IF_WITHIN)

    def _key(self, tenant: str, order: str) -> str:
        return f"{self._namespace}:credited:{tenant}:{order}"

    async def credited(self, tenant: str, order: str) -> int:
        value = await self._redis.get(self._key(tenant, order))
        return int(value) if value is not None else 0

    async def add_if_within(self, tenant: str, order: str, amount: int, total: int) -> bool:
        added = await self._add(keys=[self._key(tenant, order)], args=[amount, total])
        return bool(int(added))

    async def aclose(self) -> None:
        await self._redis.aclose()
