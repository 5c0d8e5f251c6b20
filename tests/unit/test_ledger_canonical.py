"""The fast canonical encoder is byte-identical to rfc8785 on every JSON value a record can hold."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.ledger.canonical import (
    MAX_SAFE_INT,
    CanonicalizationError,
    canonical_json,
    canonical_json_from_bytes,
)

SAFE_INTS = st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
FINITE_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
# Every code point except lone surrogates (which no JSON decoder hands us).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
KEYS = st.one_of(
    TEXT,
    st.sampled_from(["a", "B", "é", "\ue000", "\uffff", "\U0001f600", "\U00010000", "", "\x00"]),
)
SCALARS = st.one_of(st.none(), st.booleans(), SAFE_INTS, FINITE_FLOATS, TEXT)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(KEYS, children, max_size=5),
    ),
    max_leaves=25,
)

EDGE_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -0,
    1,
    -1,
    MAX_SAFE_INT,
    -MAX_SAFE_INT,
    10**15,
    123456789012345,
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    0.1 + 0.2,
    1.5,
    25.0,
    1e21,
    1e20,
    123456789012345680000.0,
    1e-6,
    1e-7,
    1.5e-7,
    5e-324,
    1.7976931348623157e308,
    2.2250738585072014e-308,
    333333333.3333333,
    9007199254740993.0,
    -1e-300,
    "",
    "plain",
    '"quoted" \\ back/slash',
    "\b\f\n\r\t",
    "".join(chr(i) for i in range(0x20)),
    "\x7f\x80\x9f\xa0",
    "\u2028\u2029",
    "é ü ß ø 漢字 🙂 \U0010ffff",
    "\ufeff\ufffe\uffff",
    "1234567890123456789",
    {"b": 1, "a": 2, "A": 3, "aa": 4, "": 5},
    {"\ue000": 1, "\U0001f600": 2, "z": 3},  # UTF-16 order differs from code point order
    {"\uffff": 1, "\U00010000": 2},
    {"€": 1, "\r": 2, "1": 3, "10": 4, "9": 5},
    {"nested": {"list": [1, 2.5, {"x": None, "y": [True, False]}], "empty": {}, "e": []}},
    [[], {}, [[[]]], {"a": {"b": {"c": {}}}}],
    {"amount": 25.5, "currency": "EUR", "card_number": "[REDACTED]"},
    [1e21, 1e-7, 100.0, 0.000001, 123e-20],
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_edge_values_match_rfc8785(value: Any) -> None:
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected
    assert canonical_json_from_bytes(msgspec.json.encode(value)) == expected
    assert canonical_json_from_bytes(expected) == expected


@settings(max_examples=1500, deadline=None)
@given(JSON_VALUES)
def test_random_values_match_rfc8785(value: Any) -> None:
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected
    # What verify sees: the stored bytes (our canonical output) and msgspec's own rendering.
    assert canonical_json_from_bytes(expected) == expected
    assert canonical_json_from_bytes(msgspec.json.encode(value)) == expected


@settings(max_examples=500, deadline=None)
@given(FINITE_FLOATS)
def test_every_float_renders_like_ecmascript(value: float) -> None:
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected
    assert canonical_json_from_bytes(msgspec.json.encode(value)) == expected
    assert canonical_json_from_bytes(repr(value).encode()) == expected


@pytest.mark.parametrize(
    "value",
    [2**53, -(2**53), 2**64, math.nan, math.inf, "\ud800", {1: "int key"}],
    ids=["2**53", "-2**53", "2**64", "nan", "inf", "lone-surrogate", "int-key"],
)
def test_values_jcs_cannot_represent_are_refused_like_rfc8785(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        rfc8785.dumps(value)
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


def test_stored_integers_beyond_2_53_read_as_doubles_like_rfc8785_numbers() -> None:
    # JCS writes the float 1e20 as 100000000000000000000; reading it back must give it again.
    assert canonical_json_from_bytes(b"100000000000000000000") == b"100000000000000000000"
    assert canonical_json_from_bytes(b'{"n":9007199254740993}') == b'{"n":9007199254740992}'
    with pytest.raises(CanonicalizationError):
        canonical_json_from_bytes(b"1" + b"0" * 400)
