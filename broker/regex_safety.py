"""Refuse regex patterns that can backtrack catastrophically before they reach a tool schema.

The check is structural and conservative. ``re.compile`` decides whether the pattern is valid
(python-jsonschema validates with ``re``); then ``broker.regex_shape``, a parser of the
broker's own over the pattern's text (public APIs only: CPython's private ``re._parser`` is not
imported), reads it into groups, alternatives, repeats and characters, simplified as ``re``
simplifies them before matching, and the shapes behind exponential backtracking are refused:

* a repeat of variable count nested in another repeat (``(a+)+``, ``(a?){25}``, ``(a{1,2}){1,64}``),
  unless every turn of the outer repeat ends in a mandatory separator the inner repeat cannot
  start with, which makes the split unambiguous (``([a-z0-9]+\\.)*``, ``(\\d{1,3}\\.){3}``);
* an unbounded repeat over alternatives that can start alike (``(a|ab)*``);
* backreferences (``\\1``, ``(?P=name)``, ``(?(1)...)``).

Polynomial shapes such as ``\\d+\\d+`` are allowed; schemas should bound such strings with
``maxLength``.

Where the parser is unsure what a character can be, it assumes anything. Atomic groups are
walked like any group: inside one, a nested repeat still backtracks until the group first
matches.
"""

from __future__ import annotations

import re

from broker.regex_shape import BackRef, Branch, Char, Group, Node, Repeat, parse

__all__ = ["unsafe_pattern_reason"]

_BOUNDED = 64
"""An "unbounded" repeat, for the alternation check: above this count it behaves like ``*``."""


def unsafe_pattern_reason(pattern: str) -> str | None:
    """Return why ``pattern`` is refused, or ``None`` when it is safe to use in a schema."""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    try:
        items = parse(pattern)
        return _walk(items)
    except RecursionError:
        return "the pattern is nested too deeply to check"


def _walk(items: tuple[Node, ...]) -> str | None:
    for node in items:
        reason: str | None = None
        if isinstance(node, BackRef):
            return "backreferences can backtrack exponentially"
        if isinstance(node, Repeat):
            if node.high > 1 and _ambiguous_turns(node.body):
                return "nested quantifiers (a variable repeat inside a repeat) can backtrack"
            if node.high > _BOUNDED and _has_overlapping_branches(node.body):
                return "an unbounded repeat over alternatives that can start alike can backtrack"
            reason = _walk(node.body)
        elif isinstance(node, Group):
            reason = _walk(node.items)
        elif isinstance(node, Branch):
            reason = next((r for b in node.alternatives if (r := _walk(b))), None)
        if reason:
            return reason
    return None


def _ambiguous_turns(body: tuple[Node, ...]) -> bool:
    """True when one turn of a repeat can end in more than one place (a variable inner repeat)
    and no mandatory separator, disjoint from that inner repeat, closes every turn."""
    inner = _variable_repeats(body)
    if not inner:
        return False
    flat = _flatten(body)
    if not flat or not isinstance(flat[-1], Char) or flat[-1].chars is None:
        return True
    separator = flat[-1].chars
    for repeat_body in inner:
        chars = _first(repeat_body)
        if chars is None or chars & separator:
            return True
    return False


def _variable_repeats(items: tuple[Node, ...]) -> list[tuple[Node, ...]]:
    """Bodies of the repeats in ``items`` that can match a variable number of times."""
    found: list[tuple[Node, ...]] = []
    for node in items:
        if isinstance(node, Repeat):
            if node.low != node.high:
                found.append(node.body)
            found.extend(_variable_repeats(node.body))
        elif isinstance(node, Group) and node.kind != "look":
            found.extend(_variable_repeats(node.items))
        elif isinstance(node, Branch):
            for alternative in node.alternatives:
                found.extend(_variable_repeats(alternative))
    return found


def _flatten(items: tuple[Node, ...]) -> list[Node]:
    """The sequence with plain groups opened up (their last element is what ends a turn)."""
    flat: list[Node] = []
    for node in items:
        if isinstance(node, Group) and node.kind == "group":
            flat.extend(_flatten(node.items))
        else:
            flat.append(node)
    return flat


def _has_overlapping_branches(items: tuple[Node, ...]) -> bool:
    """Whether alternatives in ``items`` (inside its groups too) can start with one character."""
    for node in items:
        if isinstance(node, Group) and node.kind != "look":
            if _has_overlapping_branches(node.items):
                return True
        elif isinstance(node, Branch):
            firsts = [_first(alternative) for alternative in node.alternatives]
            for i, a in enumerate(firsts):
                for b in firsts[i + 1 :]:
                    if a is None or b is None or a & b:
                        return True
    return False


def _first(items: tuple[Node, ...]) -> frozenset[int] | None:
    """The code points a sequence can start with, or ``None`` when unsure."""
    if not items:
        return None
    node = items[0]
    if isinstance(node, Char):
        return node.chars
    if isinstance(node, Group) and node.kind != "look":
        return _first(node.items)
    if isinstance(node, Repeat) and node.low > 0:
        return _first(node.body)
    return None
