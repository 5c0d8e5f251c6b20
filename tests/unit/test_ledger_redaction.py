"""Redaction hides sensitive values at any depth and keeps every record hashable."""

from __future__ import annotations

import datetime as dt
import math

from broker.ledger.redaction import REDACTED, redact, sensitive_key_set

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
