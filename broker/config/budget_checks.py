"""Whether a budget fits the tool that names it: what it adds up, and what it is kept per.

Shared by the config's cross-checks and by ``POST /v1/tools`` (a registration naming a budget),
so a budget means the same on a config tool and a registered one.
"""

from __future__ import annotations

from typing import Any

from broker.config.model import BudgetConfig

__all__ = ["budget_fit_problems"]

_PER_ARG_TYPES = ("string", "integer", "boolean")


def budget_fit_problems(name: str, budget: BudgetConfig, input_schema: dict[str, Any]) -> list[str]:
    """Why budget ``name`` cannot be charged by a tool with ``input_schema`` (empty if it can)."""
    problems: list[str] = []
    properties = input_schema.get("properties", {})
    properties = properties if isinstance(properties, dict) else {}
    required = input_schema.get("required", [])
    if budget.kind == "sum" and budget.field:
        field_schema = properties.get(budget.field, {})
        if not isinstance(field_schema, dict) or field_schema.get("type") not in (
            "number",
            "integer",
        ):
            problems.append(
                f"budget {name!r} adds up {budget.field!r}, which the input schema "
                "does not declare as a number"
            )
        elif budget.field not in required:
            problems.append(f"{budget.field!r} must be a required argument")
        elif not _bounded_below_by_zero(field_schema):
            # A negative amount would hand budget back to the caller.
            problems.append(f"{budget.field!r} needs a minimum or exclusiveMinimum of at least 0")
    if budget.per_arg is not None:
        # One counter per value: the value must always be there, and be a plain scalar (an
        # amount in one currency is never added to an amount in another).
        arg_schema = properties.get(budget.per_arg, {})
        scalar = isinstance(arg_schema, dict) and (
            "enum" in arg_schema
            or "const" in arg_schema
            or arg_schema.get("type") in _PER_ARG_TYPES
        )
        if budget.per_arg not in required or not scalar:
            problems.append(
                f"budget {name!r} is kept per {budget.per_arg!r}, which must be a required "
                "string, integer, boolean or enum argument"
            )
    return problems


def _bounded_below_by_zero(schema: dict[str, Any]) -> bool:
    bounds = [schema.get("minimum"), schema.get("exclusiveMinimum")]
    return any(isinstance(b, int | float) and b >= 0 for b in bounds)
