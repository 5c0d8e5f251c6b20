"""The approval condition language: one comparison of a top-level argument with a literal.

``amount > 100``, ``currency == "EUR"``, ``express != true``: an argument name, one of
``< <= > >= == !=`` and a JSON literal (number, string in double quotes, ``true``, ``false``,
``null``). Nothing else: no expressions, calls or attribute access, so a config cannot make the
broker run code. Parsed once at startup; a condition that does not parse is a config error with
its key path.

Failing closed: when the argument is missing, or is not comparable with the literal (a string
against a number), the condition holds and the call waits for a person.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Condition", "ConditionError", "parse_condition"]

_FORM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]{0,127})\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$")
_ORDERING = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_EQUALITY = {"==": operator.eq, "!=": operator.ne}


class ConditionError(ValueError):
    """The condition is not ``<arg> <op> <literal>``; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed ``when``: ``holds(args)`` says whether the call needs approval."""

    arg: str
    op: str
    literal: Any
    source: str

    def holds(self, args: Mapping[str, Any]) -> bool:
        if self.arg not in args:
            return True  # fail closed: nothing to compare, a person decides
        value = args[self.arg]
        if self.op in _EQUALITY:
            return bool(_EQUALITY[self.op](value, self.literal))
        compare: Callable[[Any, Any], bool] = _ORDERING[self.op]
        if _is_number(value) and _is_number(self.literal):
            return compare(value, self.literal)
        if isinstance(value, str) and isinstance(self.literal, str):
            return compare(value, self.literal)
        return True  # not comparable: fail closed


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_condition(source: str) -> Condition:
    """Parse ``source`` or raise :class:`ConditionError`."""
    match = _FORM.match(source)
    if match is None:
        raise ConditionError(
            "expected one comparison '<arg> <op> <literal>' with op one of < <= > >= == !=, "
            'e.g. "amount > 100"'
        )
    arg, op, text = match.groups()
    try:
        literal = json.loads(text)
    except ValueError:
        raise ConditionError(
            f"{text!r} is not a literal: use a number, a string in double quotes, true, false "
            "or null"
        ) from None
    if isinstance(literal, dict | list):
        raise ConditionError(f"{text!r} is not a literal: objects and arrays are not compared")
    if op in _ORDERING and not (_is_number(literal) or isinstance(literal, str)):
        raise ConditionError(f"{op} compares numbers or strings, not {text}")
    return Condition(arg, op, literal, source)
