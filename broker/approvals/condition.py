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
    test: Callable[[Any], bool] = field(init=False, repr=False, compare=False)
    """Whether the condition holds for the argument's value: chosen once, for the literal's
    kind, since every proposal of the tool asks."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", _test_for(self.op, self.literal))

    def holds(self, args: Mapping[str, Any]) -> bool:
        if self.arg not in args:
            return True  # fail closed: nothing to compare, a person decides
        return self.test(args[self.arg])


def _test_for(op: str, literal: Any) -> Callable[[Any], bool]:
    if op in _EQUALITY:
        equal = _EQUALITY[op]
        return lambda value: bool(equal(value, literal))
    compare: Callable[[Any, Any], bool] = _ORDERING[op]
    if _is_number(literal):

        def with_number(value: Any) -> bool:
            if _is_number(value):
                return compare(value, literal)
            return True  # not comparable: fail closed

        return with_number

    def with_string(value: Any) -> bool:  # ordering takes a number or a string literal
        if isinstance(value, str):
            return compare(value, literal)
        return True  # not comparable: fail closed

    return with_string


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
