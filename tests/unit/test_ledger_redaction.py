"""Redaction hides sensitive values at any depth and keeps every record hashable."""

from __future__ import annotations

import datetime as dt
import enum
import math
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.ledger.redaction import REDACTED, redact, redacted_canonical_json, sensitive_key_set

SENSITIVE = sensitive_key_set({"card_number", "Password", "api_key"})


def test_sensitive_keys_are_redacted_at_any_depth_and_case() -> None:
    args = {
        "order_id": "O-1",
        "CARD_NUMBER": "4111",
        "payment": {"card_number": "4111", "methods": [{"password": "x", "ok": 1}]},
        "list": [[{"Api_Key": {"nested": "object value"}}]],
    }
    assert redact(args, SENSITIVE) == {
        "order_id": "O-1",
        "CARD_NUMBER": REDACTED,
        "payment": {"card_number": REDACTED, "methods": [{"password": REDACTED, "ok": 1}]},
        "list": [[{"Api_Key": REDACTED}]],
    }


def test_input_is_not_mutated() -> None:
    args = {"password": "secret", "inner": {"password": "secret"}}
    redact(args, SENSITIVE)
    assert args == {"password": "secret", "inner": {"password": "secret"}}


def test_values_that_merely_look_sensitive_are_kept() -> None:
    assert redact({"note": "password"}, SENSITIVE) == {"note": "password"}
    assert redact(["card_number"], SENSITIVE) == ["card_number"]


def test_values_jcs_cannot_hash_are_normalized_not_refused() -> None:
    value = {
        "big": 2**64,
        "nan": math.nan,
        "inf": -math.inf,
        "tuple": (1, 2),
        1: "int key",
        "when": dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC),
        "surrogate": "a\ud800b",
        "bool": True,
        "float": 1.5,
    }
    assert redact(value, SENSITIVE) == {
        "big": str(2**64),
        "nan": "nan",
        "inf": "-inf",
        "tuple": [1, 2],
        "1": "int key",
        "when": "2026-11-22T10:00:00Z",
        "surrogate": "a\ufffd\ufffd\ufffdb",
        "bool": True,
        "float": 1.5,
    }


def test_unknown_objects_become_strings() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    assert redact({"x": Opaque()}, SENSITIVE) == {"x": "opaque"}


# Keys drawn so that sensitive ones, in any case, turn up often at every depth.
_REDACTION_KEYS = st.one_of(
    st.sampled_from(["card_number", "PASSWORD", "Api_Key", "order_id", "note", "é", "\ue000"]),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=8),
)
_REDACTION_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),  # past 2**53 too: normalized to strings
    st.floats(),  # NaN and infinities too: normalized to strings
    st.text(max_size=10),  # lone surrogates too: replaced
)
_REDACTION_VALUES = st.recursive(
    _REDACTION_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(_REDACTION_KEYS, children, max_size=5),
    ),
    max_leaves=20,
)


# Values redaction leaves as they are (no floats, tuples or subclasses) take the path that skips
# the walk; the rest take the walk. Both must come out exactly as the reference does.
_PLAIN_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.text(max_size=10),  # lone surrogates and high-plane characters too
)
_PLAIN_VALUES = st.recursive(
    _PLAIN_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_REDACTION_KEYS, children, max_size=5),
    ),
    max_leaves=20,
)


@given(st.one_of(_REDACTION_VALUES, _PLAIN_VALUES))
@settings(max_examples=800)
def test_the_canonical_form_is_rfc8785_of_the_redacted_value(value: Any) -> None:
    """What the ledger hashes equals the reference: rfc8785 over the redacted copy."""
    assert redacted_canonical_json(value, SENSITIVE) == rfc8785.dumps(redact(value, SENSITIVE))


@pytest.mark.parametrize(
    "value",
    [
        {"customer_id": "C-10429", "subject": "Billing discrepancy", "priority": "high"},
        {"amount": 25, "ok": True, "none": None, "PassWord": "hunter2"},
        {"big": 2**53, "small": -(2**53) + 1, "digits": 1234567890123456},
        {"\ue000": "high plane key", "a": "x"},
        {"lone": "\ud800", "é": "ü"},
        {1: "int key", "b": False},
        {},
    ],
)
def test_flat_objects_encode_like_the_walk(value: dict[Any, Any]) -> None:
    assert redacted_canonical_json(value, SENSITIVE) == rfc8785.dumps(redact(value, SENSITIVE))


def test_keys_seen_before_do_not_hide_a_sensitive_one() -> None:
    clean = {"order_id": "O-1", "note": "x"}
    assert redacted_canonical_json(clean, SENSITIVE) == rfc8785.dumps(clean)
    with_secret = {"order_id": "O-1", "note": "x", "Card_Number": "4111"}
    assert b"4111" not in redacted_canonical_json(with_secret, SENSITIVE)
    # Known-clean for one set of sensitive keys says nothing about another.
    assert b"O-1" not in redacted_canonical_json(clean, sensitive_key_set({"ORDER_ID"}))


class _Shown(str):
    def __str__(self) -> str:
        return "shown"


class _Mixed(str, enum.Enum):  # noqa: UP042 - str() is "_Mixed.KEY", unlike a StrEnum
    KEY = "key"


@pytest.mark.parametrize("key", [_Shown("plain"), _Mixed.KEY])
def test_string_subclass_keys_are_named_as_the_walk_names_them(key: str) -> None:
    value = {key: 1, "plain": 2}
    assert redacted_canonical_json(value, SENSITIVE) == rfc8785.dumps(redact(value, SENSITIVE))
