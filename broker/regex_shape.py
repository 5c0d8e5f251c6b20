"""A regex pattern's shape, read from its text: groups, alternatives, repeats, characters.

What ``broker.regex_safety`` judges. Only patterns ``re.compile`` accepted are read, so the
parser needs no error messages. It reads what Python's ``re`` reads (escapes, classes, ``{m,n}``
with its literal forms, lazy and possessive quantifiers, inline flags, verbose mode, lookarounds,
atomic groups, conditionals) and simplifies alternatives as ``re`` does before matching: a
prefix every alternative shares is taken out (``ab|ac`` is ``a(?:b|c)``), and alternatives that
are each one character or non-negated class become one class (``[ab]|a`` is ``[ab]``). Where it
is unsure what a character can be (``.``, ``\\w``, negated classes, wide ranges) it says
"anything"; under ``(?i)`` a letter is both of its cases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["BackRef", "Branch", "Char", "Group", "Node", "Repeat", "Zero", "parse"]

_MANY = 1 << 32
"""The count of ``*``, ``+`` and ``{m,}``."""
_WIDE = 512
"""A class range wider than this counts as "anything" (as ``\\w`` does): sets stay small."""
_DIGITS = frozenset(range(ord("0"), ord("9") + 1))
_SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
_ZERO_WIDTH_ESCAPES = frozenset("AbBZ")
# Matched at the parser's position (no slicing: a long pattern stays linear to read).
_COUNT = re.compile(r"(\d*)(,?)(\d*)\}")
_OCTAL_TAIL = re.compile(r"[0-7]{0,2}")


@dataclass(frozen=True)
class Char:
    """One character: the code points it can be (``None``: anything, as far as we know)."""

    chars: frozenset[int] | None
    mergeable: bool = True
    """A literal or non-negated class: ``re`` folds alternatives of these into one class."""
    source: str = ""
    """How the pattern wrote it: under ``(?i)`` ``a`` and ``A`` can be the same characters,
    yet ``re`` takes out only a prefix written alike."""


@dataclass(frozen=True)
class Zero:
    """Zero width: an anchor (``^``, ``$``, ``\\b``)."""


@dataclass(frozen=True)
class BackRef:
    pass


@dataclass(frozen=True)
class Group:
    items: tuple[Node, ...]
    kind: str = "group"
    """``group`` (capturing or not), ``look`` (a lookahead or lookbehind: zero width),
    ``atomic``."""


@dataclass(frozen=True)
class Branch:
    alternatives: tuple[tuple[Node, ...], ...]


@dataclass(frozen=True)
class Repeat:
    low: int
    high: int
    body: tuple[Node, ...]


Node = Char | Zero | BackRef | Group | Branch | Repeat


def parse(pattern: str) -> tuple[Node, ...]:
    """The nodes of ``pattern``, which ``re.compile`` accepted; ``RecursionError`` when it nests
    deeper than this parser recurses."""
    return _Parser(pattern).parse()


class _Parser:
    """Reads a pattern ``re.compile`` accepted (so errors need no messages) into nodes."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0
        # Flags ``re`` allows only at the start (or scoped to a group: then kept for the whole
        # pattern, which can only make the check stricter).
        flags = set(re.findall(r"\(\?[aiLmsux-]*[:)]", pattern))
        self.ignore_case = any("i" in flag.split("-")[0] for flag in flags)
        self.verbose = any("x" in flag.split("-")[0] for flag in flags)

    def parse(self) -> tuple[Node, ...]:
        return self._alternation()

    def _peek(self, ahead: int = 0) -> str:
        at = self.at + ahead
        return self.text[at] if at < len(self.text) else ""

    def _take(self) -> str:
        char = self.text[self.at]
        self.at += 1
        return char

    def _alternation(self) -> tuple[Node, ...]:
        alternatives = [self._sequence()]
        while self._peek() == "|":
            self.at += 1
            alternatives.append(self._sequence())
        return _simplified(alternatives)

    def _sequence(self) -> tuple[Node, ...]:
        items: list[Node] = []
        while self._peek() not in ("", "|", ")"):
            char = self._take()
            if self.verbose and char.isspace():
                continue
            if self.verbose and char == "#":
                while self._peek() not in ("", "\n"):
                    self.at += 1
                continue
            if char in "*+?" or (char == "{" and self._quantifier_follows()):
                self.at -= 1
                low, high = self._quantifier()
                items[-1] = Repeat(low, high, _unwrapped(items[-1]))
            else:
                start = self.at - 1
                node = self._atom(char)
                if isinstance(node, Char):
                    node = replace(node, source=self.text[start : self.at])
                if node is not None:
                    items.append(node)
        return tuple(items)

    def _quantifier_follows(self) -> bool:
        return _COUNT.match(self.text, self.at) is not None and self._peek() != "}"

    def _quantifier(self) -> tuple[int, int]:
        char = self._take()
        if char == "*":
            low, high = 0, _MANY
        elif char == "+":
            low, high = 1, _MANY
        elif char == "?":
            low, high = 0, 1
        else:
            match = _COUNT.match(self.text, self.at)
            assert match is not None  # noqa: S101 - _quantifier_follows said so
            self.at = match.end()
            low = int(match[1] or 0)
            high = int(match[3]) if match[3] else (_MANY if match[2] else low)
        if self._peek() in ("?", "+"):  # lazy or possessive: the same choices, tried in order
            self.at += 1
        return low, high

    def _atom(self, char: str) -> Node | None:
        if char == ".":
            return Char(None, mergeable=False)
        if char in "^$":
            return Zero()
        if char == "[":
            return self._class()
        if char == "\\":
            return self._escape()
        if char == "(":
            return self._group()
        return self._literal(ord(char))

    def _literal(self, code: int) -> Char:
        if code < 0:
            return Char(None)  # a named character (\N{...}): some character
        if self.ignore_case:
            text = chr(code)
            return Char(frozenset({code, *map(ord, text.lower()), *map(ord, text.upper())}))
        return Char(frozenset({code}))

    def _group(self) -> Node | None:
        kind = "group"
        if self._peek() == "?":
            self.at += 1
            char = self._take()
            if char == "#":  # a comment
                self.at = self.text.index(")", self.at) + 1
                return None
            if char == "P" and self._peek() == "=":
                self.at = self.text.index(")", self.at) + 1
                return BackRef()
            if char == "(":  # (?(group)yes|no): a condition on what a group matched
                self.at = self.text.index(")", self.at) + 1
                self._alternation()
                self.at += 1
                return BackRef()
            if char == "P":  # (?P<name>...)
                self.at = self.text.index(">", self.at) + 1
            elif char in "=!":
                kind = "look"
            elif char == "<":  # (?<= and (?<!: a lookbehind, zero width like a lookahead
                self.at += 1
                kind = "look"
            elif char == ">":
                kind = "atomic"
            else:  # flags: (?aiLmsux) alone, or (?flags-flags:...) scoping a group
                while self.text[self.at - 1] not in ":)":
                    self.at += 1
                if self.text[self.at - 1] == ")":
                    return None
        items = self._alternation()
        self.at += 1  # the closing parenthesis
        return Group(items, kind)

    def _escape(self) -> Node:
        char = self._take()
        if char in _ZERO_WIDTH_ESCAPES:
            return Zero()
        if char in "123456789":
            digits = char + self._peek() + self._peek(1)
            if re.fullmatch(r"[0-7]{3}", digits):  # \141 is "a", not group 14 and a "1"
                self.at += 2
                return self._literal(int(digits, 8))
            if self._peek().isdigit():
                self.at += 1
            return BackRef()
        if char in "dDwWsS":
            return Char(_DIGITS if char == "d" else None)
        return self._literal(self._escaped_code(char))

    def _escaped_code(self, char: str) -> int:
        """The code point of an escape outside a class or inside one (after the backslash)."""
        if char in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[char]
        lengths = {"x": 2, "u": 4, "U": 8}
        if char in lengths:
            digits = self.text[self.at : self.at + lengths[char]]
            self.at += lengths[char]
            return int(digits, 16)
        if char == "0":
            match = _OCTAL_TAIL.match(self.text, self.at)
            assert match is not None  # noqa: S101 - matches the empty string at least
            self.at = match.end()
            return int("0" + match[0], 8)
        if char == "N":  # \N{NAME}: some character (its name is not looked up here)
            self.at = self.text.index("}", self.at) + 1
            return -1
        return ord(char)

    def _class(self) -> Char:
        negated = self._peek() == "^"
        if negated:
            self.at += 1
        chars: set[int] | None = set()
        first = True
        while first or self._peek() != "]":
            first = False
            low = self._class_member()
            if self._peek() == "-" and self._peek(1) not in ("]", ""):
                self.at += 1
                high = self._class_member()
                if isinstance(low, int) and isinstance(high, int) and high - low < _WIDE:
                    if chars is not None:
                        chars.update(range(low, high + 1))
                else:
                    chars = None
            elif low is None or chars is None:
                chars = None
            elif isinstance(low, int):
                chars.add(low)
            else:
                chars.update(low)
        self.at += 1  # the closing bracket
        if negated or chars is None or -1 in chars:
            return Char(None, mergeable=not negated)
        if self.ignore_case:
            chars.update(ord(c) for code in list(chars) for c in chr(code).swapcase())
        return Char(frozenset(chars))

    def _class_member(self) -> int | frozenset[int] | None:
        """One member of a class: a code point, ``\\d``'s digits, or ``None`` (``\\w``...)."""
        char = self._take()
        if char != "\\":
            return ord(char)
        char = self._take()
        if char in "dDwWsS":
            return _DIGITS if char == "d" else None
        if char == "b":
            return 8  # a backspace inside a class
        if char in "1234567":  # an octal escape: classes hold no backreferences
            match = _OCTAL_TAIL.match(self.text, self.at)
            assert match is not None  # noqa: S101 - matches the empty string at least
            self.at = match.end()
            return int(char + match[0], 8)
        return self._escaped_code(char)


def _unwrapped(node: Node) -> tuple[Node, ...]:
    """What a quantifier repeats: a plain group is its items, anything else itself."""
    return node.items if isinstance(node, Group) and node.kind == "group" else (node,)


def _simplified(alternatives: list[tuple[Node, ...]]) -> tuple[Node, ...]:
    """Alternatives as ``re`` compiles them: a shared prefix taken out, then single characters
    folded into one class (see the module docstring)."""
    if len(alternatives) == 1:
        return alternatives[0]
    prefix: list[Node] = []
    while all(alternatives) and all(a[0] == alternatives[0][0] for a in alternatives):
        prefix.append(alternatives[0][0])
        alternatives = [a[1:] for a in alternatives]
    singles = [a[0] for a in alternatives if len(a) == 1]
    if len(singles) == len(alternatives) and all(
        isinstance(s, Char) and s.mergeable for s in singles
    ):
        sets = [s.chars for s in singles if isinstance(s, Char)]
        merged = None if None in sets else frozenset().union(*(s for s in sets if s is not None))
        return (*prefix, Char(merged))
    return (*prefix, Branch(tuple(alternatives)))
