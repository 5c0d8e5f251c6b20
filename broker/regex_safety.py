"""Refuse regex patterns that can backtrack catastrophically before they reach a tool schema.

The check is structural and conservative: it parses the pattern with Python's own regex parser
(python-jsonschema validates with ``re``) and refuses the shapes behind exponential backtracking:
a repeat nested in an unbounded repeat (``(a+)+``, ``(.*a){12}``), an unbounded repeat over alternatives that can
start alike (``(a|ab)*``), and backreferences. Polynomial shapes such as ``\\d+\\d+`` are allowed;
schemas should bound such strings with ``maxLength``.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

# Python's own regex parser: private by name, but it is exactly what python-jsonschema runs.
_c: Any = importlib.import_module("re._constants")
_parser: Any = importlib.import_module("re._parser")

__all__ = ["unsafe_pattern_reason"]

_MAXREPEAT = _c.MAXREPEAT
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}
_ANY_FIRST = object()
# Repeats up to this count are "bounded": nesting them costs a polynomial with a small degree.
_BOUNDED = 64


def unsafe_pattern_reason(pattern: str) -> str | None:
    """Return why ``pattern`` is refused, or ``None`` when it is safe to use in a schema."""
    try:
        re.compile(pattern)
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    return _walk(list(parsed), outer=None)


def _walk(items: list[Any], *, outer: int | None) -> str | None:
    """Walk the parse tree; ``outer`` is the max count of the innermost enclosing repeat."""
    for op, arg in items:
        if op == _c.GROUPREF or op == getattr(_c, "GROUPREF_EXISTS", None):
            return "backreferences can backtrack exponentially"
        if op in _REPEATS:
            low, high, body = arg
            body_items = list(body)
            unbounded = high > _BOUNDED
            if outer is not None and low != high and (unbounded or outer > _BOUNDED):
                return "nested quantifiers (a repeat inside a repeat) can backtrack"
            if unbounded and _has_overlapping_branches(body_items):
                return "an unbounded repeat over alternatives that can start alike can backtrack"
            enclosing = outer if high <= 1 else max(high, outer or 0)
            reason = _walk(body_items, outer=enclosing)
            if reason:
                return reason
        elif op == _c.SUBPATTERN:
            reason = _walk(list(arg[-1]), outer=outer)
            if reason:
                return reason
        elif op == _c.BRANCH:
            for branch in arg[1]:
                reason = _walk(list(branch), outer=outer)
                if reason:
                    return reason
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            reason = _walk(list(arg[1]), outer=outer)
            if reason:
                return reason
    return None


def _has_overlapping_branches(items: list[Any]) -> bool:
    for op, arg in items:
        if op == _c.SUBPATTERN:
            return _has_overlapping_branches(list(arg[-1]))
        if op == _c.BRANCH:
            firsts = [_first(list(branch)) for branch in arg[1]]
            for i, a in enumerate(firsts):
                for b in firsts[i + 1 :]:
                    if a is _ANY_FIRST or b is _ANY_FIRST or (a & b):
                        return True
    return False


def _first(items: list[Any]) -> Any:
    """The set of code points a sequence can start with, or ``_ANY_FIRST`` when unsure."""
    if not items:
        return _ANY_FIRST
    op, arg = items[0]
    if op == _c.LITERAL:
        return {arg}
    if op == _c.IN:
        chars: set[int] = set()
        for sub_op, sub_arg in arg:
            if sub_op == _c.LITERAL:
                chars.add(sub_arg)
            elif sub_op == _c.RANGE and sub_arg[1] - sub_arg[0] < 512:
                chars.update(range(sub_arg[0], sub_arg[1] + 1))
            else:
                return _ANY_FIRST
        return chars
    if op == _c.SUBPATTERN:
        return _first(list(arg[-1]))
    if op in _REPEATS and arg[0] > 0:
        return _first(list(arg[2]))
    return _ANY_FIRST
