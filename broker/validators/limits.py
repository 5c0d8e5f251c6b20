"""Budgets and rate limits: what one proposal would charge, for the store to take atomically."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import lru_cache
from typing import Any

import msgspec

from broker.model import FailedCheck
from broker.stores import BudgetCharge, Limited, RateHit
from broker.taxonomy import Code
from broker.tools.runtime import ToolRuntime
from broker.validators import Rejection

__all__ = ["MICROS", "limit_rejection", "limits_for", "to_micros"]

_json = msgspec.json.Encoder().encode

MICROS = 1_000_000
"""Budgets count in integer micro-units so sums are exact in memory and in Redis."""


@lru_cache(maxsize=8192)
def to_micros(value: float, *, up: bool) -> int:
    """Exact micro-units of a JSON number; charges round up so no amount is ever free."""
    micros = Decimal(repr(value)) * MICROS  # repr: the shortest decimal that round-trips
    return int(micros.to_integral_value(rounding=ROUND_CEILING if up else ROUND_FLOOR))


def _scope(per: tuple[str, ...], tenant: str, route: str, tool: str) -> str:
    """``tenant=acme|route=billing_help``: which counter a limit uses."""
    values = {"tenant": tenant, "route": route, "tool": tool}
    return "|".join(f"{dim}={values[dim]}" for dim in sorted(per))


# What a tool's limits are for one tenant and route never changes while the tool object does
# not (tools are immutable and replaced whole), so the hot path builds it once per (tool,
# tenant, route) rather than per proposal. Bounded: cleared when it grows large.
_Static = tuple[tuple[tuple[str, str, int, int, str | None, str | None], ...], tuple[RateHit, ...]]
_static: dict[tuple[int, str, str], tuple[ToolRuntime, _Static]] = {}
_STATIC_MAX = 8192


def _limits(tool: ToolRuntime, tenant: str, route: str) -> _Static:
    # Keyed by the tool object itself (kept alive in the entry, so its id cannot be reused).
    key = (id(tool), tenant, route)
    entry = _static.get(key)
    if entry is not None and entry[0] is tool:
        return entry[1]
    if len(_static) >= _STATIC_MAX:
        _static.clear()
    budgets = tuple(
        (
            name,
            _scope(budget.per, tenant, route, tool.name),
            to_micros(budget.limit, up=False),
            budget.window_s,
            budget.field if budget.kind == "sum" else None,  # None: a count
            budget.per_arg,
        )
        for name, budget in tool.budgets
    )
    hits = tuple(
        RateHit(
            name=name,
            scope=_scope(limit.per, tenant, route, tool.name),
            limit=limit.limit,
            window_s=limit.window_s,
        )
        for name, limit in tool.rate_limits
    )
    found: _Static = (budgets, hits)
    _static[key] = (tool, found)
    return found


def limits_for(
    tool: ToolRuntime, args: dict[str, Any], *, tenant: str, route: str
) -> tuple[tuple[BudgetCharge, ...], tuple[RateHit, ...]]:
    """What one proposal charges to each budget and counts against each rate limit."""
    budgets, hits = _limits(tool, tenant, route)
    if not budgets:
        return (), hits
    charges = tuple(
        BudgetCharge(
            name=name,
            scope=scope if per_arg is None else _per_value(scope, per_arg, args[per_arg]),
            amount=to_micros(args[field], up=True) if field else MICROS,
            limit=limit,
            window_s=window_s,
        )
        for name, scope, limit, window_s, field, per_arg in budgets
    )
    return charges, hits


def _per_value(scope: str, arg: str, value: Any) -> str:
    """``tenant=acme|currency="USD"``: the counter of one value of ``arg``. The value is JSON, so
    no value can pass for another or carry a separator the stores split on (``|``, ``\x1f``)."""
    return f"{scope}|{arg}={_json(value).decode()}"


def limit_rejection(limited: Limited) -> Rejection:
    """Why admission refused: a budget would be exceeded, or a rate limit is reached."""
    if limited.kind == "budget":
        return Rejection(
            code=Code.BUDGET_EXCEEDED,
            reason=f"budget {limited.name!r} would be exceeded",
            remediation="ESCALATE: the limit is reached; ask a human or retry after the window",
            retry_after_s=limited.retry_after_s,
            failed_check=FailedCheck("budget", limited.name),
        )
    return Rejection(
        code=Code.RATE_LIMITED,
        reason=f"rate limit {limited.name!r} reached",
        remediation="RETRY: wait for Retry-After seconds",
        retry_after_s=limited.retry_after_s,
        failed_check=FailedCheck("rate_limit", limited.name),
    )
