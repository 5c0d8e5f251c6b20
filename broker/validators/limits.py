"""Budgets and rate limits: what one proposal would charge, for the store to take atomically."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from broker.registry import ToolRuntime
from broker.stores import BudgetCharge, RateHit

__all__ = ["MICROS", "charges_for", "hits_for"]

MICROS = 1_000_000
"""Budgets count in integer micro-units so sums are exact in memory and in Redis."""


@lru_cache(maxsize=8192)
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
                amount=round(amount * MICROS),
                limit=round(budget.limit * MICROS),
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
