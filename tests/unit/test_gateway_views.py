"""``tool_view``'s selector grammar (broker.gateway.views): an RFC 6901 pointer, optionally
ending in a slice with Python's semantics; every refusal a §3.4 code."""

from __future__ import annotations

from typing import Any

import pytest

from broker.gateway.views import ViewProblem, outline, select

DOC: dict[str, Any] = {
    "title": "report",
    "rows": [{"id": i, "name": f"row {i}"} for i in range(10)],
    "a/b": {"~x": 1},
    "body": "abcdefghij",
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", DOC),
        ("/title", "report"),
        ("/rows/3/name", "row 3"),
        ("/rows[2:4]", [{"id": 2, "name": "row 2"}, {"id": 3, "name": "row 3"}]),
        ("/rows[-1:]", [{"id": 9, "name": "row 9"}]),
        ("/rows[:0]", []),
        ("/body[:3]", "abc"),
        ("/a~1b/~0x", 1),
    ],
)
def test_selectors_that_name_a_part(selector: str, expected: Any) -> None:
    assert select(DOC, selector) == expected


@pytest.mark.parametrize(
    ("selector", "code"),
    [
        ("title", "SELECTOR_INVALID"),
        ("/rows/-", "SELECTOR_INVALID"),
        ("/rows/01", "SELECTOR_INVALID"),
        ("/title[0:1]x", "SELECTOR_NOT_FOUND"),  # no slice at the end: a member name
        ("/a~1b[0:1]", "SELECTOR_INVALID"),  # a slice of an object
        ("/nope", "SELECTOR_NOT_FOUND"),
        ("/rows/10", "SELECTOR_NOT_FOUND"),
        ("/title/x", "SELECTOR_NOT_FOUND"),
    ],
)
def test_selectors_that_do_not(selector: str, code: str) -> None:
    with pytest.raises(ViewProblem) as refused:
        select(DOC, selector)
    assert refused.value.code == code


def test_an_outline_shows_shape_not_content() -> None:
    shape = outline(DOC)
    assert shape["keys"]["rows"] == {"type": "array", "length": 10}
    assert shape["keys"]["body"] == {"type": "string", "length": 10}
    assert "report" not in str(shape)
