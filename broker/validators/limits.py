"""Budgets and rate limits: what one proposal would charge, for the store to take atomically."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import lru_cache
from typing import Any

from broker.registry import ToolRuntime
from broker.stores import BudgetCharge, RateHit

__all__ = ["MICROS", "charges_for", "hits_for", "to_micros"]

MICROS = 1_000_000
"""Budgets count in integer micro-units so sums are exact in memory and in Redis."""


@lru_cache(maxsize=8192)
def to_micros(value: float, *, up: bool) -> int:
    """Exact micro-units of a JSON number; charges round up so no amount is ever free."""
    micros = Decimal(repr(value)) * MICROS  # repr: the shortest decimal that round-trips
    return int(micros.to_integral_value(rounding=ROUND_CEILING if up else ROUND_FLOOR))


def _scope(per: tuple[str, ...], tenant: str, route: str, tool: str) -> str:
    """``tenant=acme|route=billing_help``: which counter a limit uses (cached: few distinct)."""
    values = {"tenant": tenant, "route": route, "tool": tool}
    return "|".join(f"{dim}={values[dim]}" for dim in sorted(per))


def charges_for(
    tool: ToolRuntime, args: dict[str, Any], *, tenant: str, route: str
) -> tuple[BudgetCharge, ...]:
    charges = []
    for name, budget in tool.budgets:
        amount = args[budget.field] if budget.kind == "sum" and budget.field else 1
        charges.append(
            BudgetCharge(
                name=name,
                scope=_scope(budget.per, tenant, route, tool.name),
                amount=to_micros(amount, up=True),
                limit=to_micros(budget.limit, up=False),
                window_s=budget.window_s,
            )
        )
    return tuple(charges)


def hits_for(tool: ToolRuntime, *, tenant: str, route: str) -> tuple[RateHit, ...]:
    return tuple(
        RateHit(
            name=name,
            scope=_scope(limit.per, tenant, route, tool.name),
            limit=limit.limit,
            window_s=limit.window_s,
        )
        for name, limit in tool.rate_limits
    )
