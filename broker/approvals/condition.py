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
from dataclasses import dataclass, field
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
    holds: Callable[[Mapping[str, Any]], bool] = field(init=False, repr=False, compare=False)
    """Whether the call needs approval, for its args: a function chosen once for the literal's
    kind (every proposal of the tool asks, and calls the comparison directly)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "holds", _holds_for(self.arg, self.op, self.literal))


def _holds_for(arg: str, op: str, literal: Any) -> Callable[[Mapping[str, Any]], bool]:
    # Fail closed: when the argument is missing, or not comparable, a person decides.
    if op in _EQUALITY:
        equal = _EQUALITY[op]
        return lambda args: arg not in args or bool(equal(args[arg], literal))
    compare: Callable[[Any, Any], bool] = _ORDERING[op]
    if _is_number(literal):

        def with_number(args: Mapping[str, Any]) -> bool:
            if arg not in args:
                return True
            value = args[arg]
            if isinstance(value, _NUMBERS) and not isinstance(value, bool):  # as _is_number
                return compare(value, literal)
            return True

        return with_number

    def with_string(args: Mapping[str, Any]) -> bool:  # ordering takes a number or a string
        if arg not in args:
            return True
        value = args[arg]
        if isinstance(value, str):
            return compare(value, literal)
        return True

    return with_string


# A tuple: ``int | float`` is built anew each time it is evaluated, and isinstance reads a
# union through its __instancecheck__, several times a tuple's cost.
_NUMBERS = (int, float)


def _is_number(value: object) -> bool:
    return isinstance(value, _NUMBERS) and not isinstance(value, bool)


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
