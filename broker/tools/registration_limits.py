"""The budgets and rate limits a ``POST /v1/tools`` body names: they must exist, fit the tool,
and be granted to the caller.

An admin may name any budget or rate limit of the config. A backend token may name only those
granted to its namespace: ``namespaces = ["billing"]`` under ``[budgets.NAME]`` or
``[rate_limits.NAME]``. Without that grant a backend could register a tool that escapes the
operator's limits, or spend a budget meant for other tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.config import BrokerConfig, BudgetConfig, RateLimitConfig
from broker.config.budget_checks import budget_fit_problems
from broker.model import Principal

if TYPE_CHECKING:  # registration.py imports this module to check bodies
    from broker.tools.registration import Registration

__all__ = ["limit_problems", "registered_limits"]


def limit_problems(
    raw: dict[str, Any], config: BrokerConfig, principal: Principal
) -> list[tuple[str, str]]:
    """Every problem with the body's ``budgets`` and ``rate_limits``, located by JSON Pointer."""
    problems: list[tuple[str, str]] = []
    schema = raw.get("input_schema")
    schema = schema if isinstance(schema, dict) else {}
    for key, known, noun in (
        ("budgets", config.budgets, "budget"),
        ("rate_limits", config.rate_limits, "rate limit"),
    ):
        names = raw.get(key)
        if not isinstance(names, list):
            continue  # a wrong shape is the conversion's problem, reported beside these
        seen: set[str] = set()
        for i, name in enumerate(names):
            if not isinstance(name, str):
                continue
            where = f"/{key}/{i}"
            limit = known.get(name)
            if limit is None:
                problems.append((where, f"unknown {noun} {name!r}"))
            elif not principal.admin and principal.namespace not in limit.namespaces:
                problems.append(
                    (where, f"{noun} {name!r} is not granted to namespace {principal.namespace!r}")
                )
            elif isinstance(limit, BudgetConfig):
                problems.extend((where, m) for m in budget_fit_problems(name, limit, schema))
            if name in seen:
                problems.append((where, f"{name!r} is listed twice"))
            seen.add(name)
    return problems


def registered_limits(
    registration: Registration, config: BrokerConfig, problems: list[str]
) -> tuple[
    tuple[tuple[str, BudgetConfig], ...] | None, tuple[tuple[str, RateLimitConfig], ...] | None
]:
    """A stored registration's budgets and rate limits as this process's config has them; ``None``
    (with the reasons added to ``problems``) when a name is gone from the config or a budget no
    longer fits: the tool is then inactive rather than run without its limits."""
    before = len(problems)
    budgets: list[tuple[str, BudgetConfig]] = []
    for name in registration.budgets:
        budget = config.budgets.get(name)
        if budget is None:
            problems.append(f"budget {name!r} no longer exists")
        else:
            problems.extend(budget_fit_problems(name, budget, registration.input_schema))
            budgets.append((name, budget))
    budgets_ok = len(problems) == before
    rate_limits: list[tuple[str, RateLimitConfig]] = []
    for name in registration.rate_limits:
        limit = config.rate_limits.get(name)
        if limit is None:
            problems.append(f"rate limit {name!r} no longer exists")
        else:
            rate_limits.append((name, limit))
    rates_ok = len(rate_limits) == len(registration.rate_limits)
    return (tuple(budgets) if budgets_ok else None, tuple(rate_limits) if rates_ok else None)
