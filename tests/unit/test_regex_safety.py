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
