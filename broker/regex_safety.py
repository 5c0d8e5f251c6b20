"""Refuse regex patterns that can backtrack catastrophically before they reach a tool schema.

The check is structural and conservative: it parses the pattern with Python's own regex parser
(python-jsonschema validates with ``re``) and refuses the shapes behind exponential backtracking:

* a repeat of variable count nested in another repeat (``(a+)+``, ``(a?){25}``, ``(a{1,2}){1,64}``),
  unless every turn of the outer repeat ends in a mandatory separator the inner repeat cannot
  match, which makes the split unambiguous (``([a-z0-9]+\\.)*``, ``(\\d{1,3}\\.){3}``);
* an unbounded repeat over alternatives that can start alike (``(a|ab)*``);
* backreferences.

Polynomial shapes such as ``\\d+\\d+`` are allowed; schemas should bound such strings with
``maxLength``.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_c: Any = importlib.import_module("re._constants")
_parser: Any = importlib.import_module("re._parser")

__all__ = ["unsafe_pattern_reason"]

_MAXREPEAT = _c.MAXREPEAT
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}
_ANY_FIRST = object()
# An "unbounded" repeat, for the alternation check: above this count it behaves like ``*``.
_BOUNDED = 64


def unsafe_pattern_reason(pattern: str) -> str | None:
    """Return why ``pattern`` is refused, or ``None`` when it is safe to use in a schema."""
    try:
        re.compile(pattern)
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    return _walk(list(parsed))


def _walk(items: list[Any]) -> str | None:
    for op, arg in items:
        if op == _c.GROUPREF or op == getattr(_c, "GROUPREF_EXISTS", None):
            return "backreferences can backtrack exponentially"
        if op in _REPEATS:
            _, high, body = arg
            body_items = list(body)
            if high > 1 and _ambiguous_turns(body_items):
                return "nested quantifiers (a variable repeat inside a repeat) can backtrack"
            if high > _BOUNDED and _has_overlapping_branches(body_items):
                return "an unbounded repeat over alternatives that can start alike can backtrack"
            reason = _walk(body_items)
        elif op == _c.SUBPATTERN:
            reason = _walk(list(arg[-1]))
        elif op == _c.BRANCH:
            reason = next((r for b in arg[1] if (r := _walk(list(b)))), None)
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            reason = _walk(list(arg[1]))
        else:
            reason = None
        if reason:
            return reason
    return None


def _ambiguous_turns(body: list[Any]) -> bool:
    """True when one turn of a repeat can end in more than one place (a variable inner repeat)
    and no mandatory separator, disjoint from that inner repeat, closes every turn."""
    inner = _variable_repeats(body)
    if not inner:
        return False
    flat = _flatten(body)
    if not flat:
        return True
    last_op, last_arg = flat[-1]
    separator = _first([(last_op, last_arg)]) if last_op in (_c.LITERAL, _c.IN) else _ANY_FIRST
    if separator is _ANY_FIRST:
        return True
    for repeat_body in inner:
        chars = _first(repeat_body)
        if chars is _ANY_FIRST or chars & separator:
            return True
    return False


def _variable_repeats(items: list[Any]) -> list[list[Any]]:
    """Bodies of the repeats in ``items`` that can match a variable number of times."""
    found: list[list[Any]] = []
    for op, arg in items:
        if op in _REPEATS:
            if arg[0] != arg[1]:
                found.append(list(arg[2]))
            found.extend(_variable_repeats(list(arg[2])))
        elif op == _c.SUBPATTERN:
            found.extend(_variable_repeats(list(arg[-1])))
        elif op == _c.BRANCH:
            for branch in arg[1]:
                found.extend(_variable_repeats(list(branch)))
    return found


def _flatten(items: list[Any]) -> list[Any]:
    """The sequence with plain groups opened up (their last element is what ends a turn)."""
    flat: list[Any] = []
    for op, arg in items:
        if op == _c.SUBPATTERN:
            flat.extend(_flatten(list(arg[-1])))
        else:
            flat.append((op, arg))
    return flat


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
            elif sub_op == _c.CATEGORY and sub_arg == _c.CATEGORY_DIGIT:
                chars.update(range(ord("0"), ord("9") + 1))
            else:
                return _ANY_FIRST
        return chars
    if op == _c.SUBPATTERN:
        return _first(list(arg[-1]))
    if op in _REPEATS and arg[0] > 0:
        return _first(list(arg[2]))
    return _ANY_FIRST
