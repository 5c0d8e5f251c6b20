"""Differential test: the hot-path validator (jsonschema-rs) agrees with python-jsonschema.

For the demo tools' schemas and a handful of extra ones, hypothesis builds instances that are
valid-ish by construction, then mutates some of them; ``ArgsValidator(schema).errors(x) == []``
must hold exactly when ``Draft202012Validator(schema).is_valid(x)``. Every reported error must also
point (RFC 6901, under ``/args``) into the instance.

Two known, documented places where the engines' *regex* semantics differ are kept out of the
generated strings and pinned separately below: Python's ``$`` also matches before a final
newline and its ``\\d`` matches non-ASCII digits; ECMA-262 (what JSON Schema specifies and what
the broker runs) does neither.
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.validators.schema import ArgsValidator
from tests.conftest import DEMO_CONFIG

with DEMO_CONFIG.open("rb") as _handle:
    _DEMO_TOOLS = tomllib.load(_handle)["tools"]

SCHEMAS: dict[str, dict[str, Any]] = {
    **{f"demo.{name}": tool["input_schema"] for name, tool in _DEMO_TOOLS.items()},
    "nested_objects": {
        "type": "object",
        "required": ["customer"],
        "properties": {
            "customer": {
                "type": "object",
                "required": ["id", "address"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": "^C-[0-9]{1,6}$"},
                    "address": {
                        "type": "object",
                        "properties": {
                            "zip": {"type": "string", "minLength": 4, "maxLength": 6},
                            "country": {"enum": ["DE", "FR", "US"]},
                        },
                        "required": ["country"],
                    },
                },
            },
            "note": {"type": ["string", "null"], "maxLength": 10},
        },
    },
    "arrays": {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 3},
                "minItems": 1,
                "maxItems": 4,
                "uniqueItems": True,
            },
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
                "items": False,
            },
            "scores": {
                "type": "array",
                "items": {"type": "number", "minimum": 0, "maximum": 1},
                "contains": {"const": 1},
            },
        },
        "additionalProperties": False,
    },
    "enums_and_consts": {
        "type": "object",
        "properties": {
            "mode": {"enum": ["fast", "slow", 1, None, [1, 2], {"a": 1}]},
            "version": {"const": 2},
            "flag": {"const": True},
        },
        "required": ["mode"],
    },
    "numbers": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000},
            "count": {"type": "integer", "minimum": -5, "exclusiveMaximum": 5},
            "step": {"type": "number", "multipleOf": 0.25},
            "whole": {"type": "integer", "multipleOf": 3},
        },
        "additionalProperties": False,
    },
    "patterns": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[a-z]{2,4}-[0-9]+$"},
            "contains_ab": {"type": "string", "pattern": "ab"},
            "alt": {"type": "string", "pattern": "^(?:USD|EUR)$"},
        },
        "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
    },
    "combinators": {
        "type": "object",
        "properties": {
            "one": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
            "any": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}]},
            "all": {"allOf": [{"type": "integer"}, {"minimum": 0}, {"maximum": 9}]},
            "not_str": {"not": {"type": "string"}},
            "cond": {
                "type": "object",
                "if": {"properties": {"kind": {"const": "card"}}, "required": ["kind"]},
                "then": {"required": ["last4"]},
                "else": {"not": {"required": ["last4"]}},
            },
        },
        "dependentRequired": {"one": ["any"]},
        "minProperties": 1,
        "maxProperties": 4,
    },
    "property_names": {
        "type": "object",
        "propertyNames": {"maxLength": 3, "pattern": "^[a-z]+$"},
        "additionalProperties": {"type": "integer"},
    },
}

# Strings without "\n" and without non-ASCII digits (see the module docstring), but with
# letters, ASCII digits, punctuation, whitespace and astral characters.
ALPHABET = st.sampled_from(
    [*"abcdefxyzABCDEFOCUSDER0123456789-_ .:/@", "\t", "é", "ß", "😀", "中", "\u00a0"]
)
TEXT = st.text(ALPHABET, max_size=12)
KEYS = st.sampled_from(
    ["a", "b", "x-a", "x-1", "kind", "last4", "id", "zip", "amount", "note", "zz"]
)
NUMBERS = st.one_of(
    st.integers(min_value=-10, max_value=1010),
    st.integers(min_value=-(2**70), max_value=2**70),
    # Floats stay within 2**53: beyond it jsonschema-rs misjudges multipleOf (pinned below).
    st.floats(min_value=-(2.0**53), max_value=2.0**53, allow_nan=False),
    st.floats(min_value=-10, max_value=1010, allow_nan=False),
    st.sampled_from([0, 0.0, 0.25, 0.5, 1.0, 1000, 1000.0, 1000.0001, 5, 5.0, 4.75, -0.0, 2.5e-7]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(KEYS, TEXT), inner, max_size=4)
    ),
    max_leaves=12,
)


def near(schema: Any) -> st.SearchStrategy[Any]:
    """Instances shaped by ``schema`` (often valid, sometimes at or past its edges)."""
    if not isinstance(schema, dict):
        return JSON
    options: list[st.SearchStrategy[Any]] = []
    if "const" in schema:
        options.append(st.just(schema["const"]))
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            options.extend(near(sub) for sub in schema[key])
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    for kind in types:
        options.append(_near_type(kind, schema))
    if not options:
        options.append(JSON)
    return st.one_of(options)


def _near_type(kind: str, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))

        @st.composite
        def build(draw: st.DrawFn) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name, sub in properties.items():
                if name in required or draw(st.booleans()):
                    out[name] = draw(near(sub))
            if draw(st.integers(0, 5)) == 0:
                out[draw(st.one_of(KEYS, TEXT))] = draw(JSON)
            return out

        return build()
    if kind == "array":
        prefix = [near(s) for s in schema.get("prefixItems", [])]
        items = near(schema["items"]) if isinstance(schema.get("items"), dict) else JSON
        tail = st.lists(items, max_size=5)
        if prefix:
            return st.tuples(*prefix).flatmap(lambda head: tail.map(lambda t: [*head, *t]))
        return tail
    if kind == "string":
        if "pattern" in schema:
            return st.one_of(
                st.from_regex(schema["pattern"], fullmatch=True, alphabet=ALPHABET), TEXT
            )
        return TEXT
    if kind == "integer":
        return st.one_of(st.integers(-20, 1010), NUMBERS.filter(lambda n: n == int(n)))
    if kind == "number":
        return NUMBERS
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return JSON


@st.composite
def mutated(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """A near-valid object, then maybe a key dropped, a value replaced or a key added."""
    instance = draw(near(schema))
    if not isinstance(instance, dict):
        instance = {}
    for _ in range(draw(st.integers(0, 2))):
        choice = draw(st.integers(0, 2))
        if choice == 0 and instance:
            del instance[draw(st.sampled_from(sorted(instance)))]
        elif choice == 1 and instance:
            instance[draw(st.sampled_from(sorted(instance)))] = draw(JSON)
        else:
            instance[draw(st.one_of(KEYS, TEXT))] = draw(JSON)
    return instance


_BROKER = {name: ArgsValidator(schema) for name, schema in SCHEMAS.items()}
_REFEREE = {name: jsonschema.Draft202012Validator(schema) for name, schema in SCHEMAS.items()}


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _parent_exists(pointer: str, instance: Any) -> bool:
    assert pointer == "/args" or pointer.startswith("/args/"), pointer
    tokens = [_unescape(t) for t in pointer.split("/")[2:]]
    node = instance
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def _agree(name: str, instance: dict[str, Any]) -> None:
    errors = _BROKER[name].errors(instance)
    expected = _REFEREE[name].is_valid(instance)
    assert (errors == []) == expected, (name, instance, errors)
    for error in errors:
        assert error.message
        assert _parent_exists(error.path, instance), (error.path, instance)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_the_broker_and_the_referee_agree(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    instance = data.draw(
        st.one_of(near(schema), mutated(schema)).filter(lambda x: isinstance(x, dict))
    )
    _agree(name, instance)


@pytest.mark.parametrize(
    "instance",
    [
        {"order_id": "O-55291", "amount": 25, "currency": "USD"},
        {"order_id": "O-55291", "amount": 25.0, "currency": "EUR"},
        {"order_id": "O-55291", "amount": 1000, "currency": "USD"},
        {"order_id": "O-55291", "amount": 1e-9, "currency": "USD"},
        {"order_id": "O-55291", "amount": 0, "currency": "USD"},
        {"order_id": "O-55291", "amount": 1000.0000001, "currency": "USD"},
        {"order_id": "O-55291", "amount": 2**64, "currency": "USD"},
        {"order_id": "O-55291", "amount": -(2**64), "currency": "USD"},
        {"order_id": "O-55291", "amount": True, "currency": "USD"},
        {"order_id": "O-55291", "amount": "25", "currency": "USD"},
        {"order_id": "O-", "amount": 25, "currency": "USD"},
        {"order_id": "O-1" + "0" * 40, "amount": 25, "currency": "USD"},
        {"order_id": "o-1", "amount": 25, "currency": "USD"},
        {"order_id": "O-55291", "amount": 25},
        {"order_id": "O-55291", "amount": 25, "currency": "USD", "tenant": "globex"},
    ],
)
def test_issue_credit_edges_agree(instance: dict[str, Any]) -> None:
    _agree("demo.issue_credit", instance)


@pytest.mark.parametrize("order_id", ["O-1\n", "O-55291\n", "O-١٢٣", "\nO-1"])
def test_the_broker_uses_ecma_regex_semantics_for_order_ids(order_id: str) -> None:
    """Where Python's regex would let a trailing newline or Arabic-Indic digits through, the
    broker (ECMA-262, as JSON Schema specifies) refuses them."""
    errors = _BROKER["demo.lookup_order"].errors({"order_id": order_id})
    assert [error.path for error in errors] == ["/args/order_id"]


@pytest.mark.parametrize(
    ("value", "multiple_of_3"),
    [(6.708593127471597e17, False), (1e300, True), (3.0 * 2**60, True), (2.0**60, False)],
)
def test_multiple_of_is_exact_for_large_floats(value: float, multiple_of_3: bool) -> None:
    """Found by the differential test: 6.708593127471597e17 is 670859312747159680, which leaves
    remainder 1 when divided by 3; 1e300 is an exact multiple of 3."""
    assert (int(value) % 3 == 0) is multiple_of_3
    validator = ArgsValidator({"type": "object", "properties": {"n": {"multipleOf": 3}}})
    referee = jsonschema.Draft202012Validator({"multipleOf": 3})
    assert referee.is_valid(value) is multiple_of_3
    assert (validator.errors({"n": value}) == []) is multiple_of_3


def test_float_multiple_of_follows_the_decimal_meaning() -> None:
    """0.07 is a multiple of 0.01: the broker says so (python-jsonschema's float division does not)."""
    validator = ArgsValidator({"type": "object", "properties": {"p": {"multipleOf": 0.01}}})
    assert validator.errors({"p": 0.07}) == []
    assert validator.errors({"p": 0.075}) != []


def test_non_finite_numbers_never_reach_the_validator_as_valid() -> None:
    validator = _BROKER["demo.issue_credit"]
    for value in (math.inf, -math.inf):
        assert validator.errors({"order_id": "O-1", "amount": value, "currency": "USD"}) != []
