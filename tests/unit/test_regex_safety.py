"""Which ``pattern`` values a tool schema may carry: a table of safe and unsafe regexes.

"Unsafe" means Python's backtracking engine (what python-jsonschema runs) can take exponential
time on some input; every unsafe row below has such an input.
"""

from __future__ import annotations

import pytest

from broker.regex_safety import unsafe_pattern_reason

SAFE = [
    "^O-[0-9]+$",
    "^C-[0-9]+$",
    "^[A-Za-z0-9_.-]{1,64}$",
    r"^\d+\d+$",  # polynomial, allowed: schemas bound such strings with maxLength
    "^(ab|cd)*$",  # alternatives that cannot start alike
    "^(a|b)*$",
    "^(a{2}){3}$",  # fixed counts do not backtrack
    "^(?:[ab]|a)*$",  # one character class after parsing
    "(a+)?",  # an optional group is not a repeat
    "^[a-z]+@[a-z]+\\.[a-z]{2,}$",
    "^$",
    "",
    "^(?:USD|EUR|GBP)$",
    "^[^\\s]+$",
    # What this module's own parser must read as ``re`` does:
    "^(ab|ac)*$",  # re takes the shared prefix out: a(?:b|c), whose alternatives differ
    "(?i)^(a|A)*$",  # re folds single-character alternatives into one class, [aA]
    "^[\\]a-]+$",  # a bracket and a hyphen inside a class
    "^(a)\\141$",  # \141 is an octal escape ("a"), not a backreference to group 14
    "^(\\d{1,3}\\.){3}\\d{1,3}$",
    "(?x) ^ (?: [a-z]+ - )* [a-z]+ $  # verbose: spaces and comments are not characters",
    "^(?#a comment)a{,3}b{2,}c{}$",  # {,3} and {2,} repeat; {} is two characters
]

UNSAFE = [
    "^(a+)+$",
    "^(a*)*$",
    "^(a+)*b",
    "(x+x+)+y",
    "^(\\w+\\s?)*$",
    "(.*a){12}",
    "^(a|a)*$",
    "^(a|ab)*$",
    "^(?:a|b|ab)+$",
    "^(a|.)*$",
    "^(\\d|1\\d)*$",
    "(?=(a+)+)b",
    "(a)\\1",
    "(?P<x>a)(?P=x)",
    # bounded repeats nested in a variable repeat still branch exponentially:
    # re.search("^(a{1,2}){1,64}$", "a" * 40 + "b") takes seconds.
    "^(a{1,2}){1,64}$",
    "^(a{1,64}){1,64}$",
    # a fixed count of optional items: "^(a?){25}a{25}$" on "a" * 25 + "b" takes a second,
    # doubling with every extra repetition.
    "^(a?){25}a{25}$",
    # Shapes the parser of CPython's own re module this check used before let through:
    # an atomic group still backtracks inside itself until it first matches: "a" * 22 takes
    # 0.2 s, doubling with every extra "a".
    "^(?>(a+)+b)",
    # under (?i) "a" and "A" start alike: "a" * 28 + "!" takes 0.09 s, x1.6 per extra "a".
    "(?i)^(a|Aa)+$",
    # verbose mode, a conditional on a group, and possessive or lazy quantifiers:
    "(?x) ( a + ) + $",
    "(a)?(?(1)b|c)",
    "^(a+?)+$",
    "^(a+)++$",
]

INVALID = ["(", "[", "a{2,1}", "(?P<x>a", "*a", "\\"]


@pytest.mark.parametrize("pattern", SAFE)
def test_safe_patterns_are_accepted(pattern: str) -> None:
    assert unsafe_pattern_reason(pattern) is None


@pytest.mark.parametrize("pattern", UNSAFE)
def test_unsafe_patterns_are_refused_with_a_reason(pattern: str) -> None:
    reason = unsafe_pattern_reason(pattern)
    assert reason, f"{pattern!r} was accepted"
    assert isinstance(reason, str)


@pytest.mark.parametrize("pattern", INVALID)
def test_invalid_patterns_are_refused(pattern: str) -> None:
    reason = unsafe_pattern_reason(pattern)
    assert reason is not None
    assert "not a valid regular expression" in reason


def test_absurdly_deep_patterns_are_refused_not_crashing() -> None:
    reason = unsafe_pattern_reason("(" * 5000 + "a" + ")" * 5000)
    assert reason is not None
