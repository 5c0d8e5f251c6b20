"""Argument repair, the walk alone: each coercion, and every near-miss whose repair could change
its meaning left as sent (the HTTP tests show the same through a served broker)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.validators.repair import Repair, repair_args

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "price": {"type": "number"},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}]},
        "priority": {"enum": ["low", "normal", "high"]},
        "code": {"enum": ["ABC", "abc", "xyz"]},
        "item": {"$ref": "#/$defs/item"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "nullable": {"type": ["number", "null"]},
        "a/b": {"type": "integer"},
        "remote": {"$ref": "https://example.com/schema#/int"},
    },
    "$defs": {"item": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
}


def repaired(args: dict[str, Any]) -> tuple[Any, list[tuple[str, str, Any, Any]]]:
    fixed, repairs = repair_args(SCHEMA, args)
    return fixed, [(r.path, r.kind, r.original, r.repaired) for r in repairs]


@pytest.mark.parametrize(
    ("args", "expected", "repair"),
    [
        ({"count": "12"}, {"count": 12}, ("/args/count", "string_to_integer", "12", 12)),
        ({"count": "-3"}, {"count": -3}, ("/args/count", "string_to_integer", "-3", -3)),
        ({"count": "12.0"}, {"count": 12}, ("/args/count", "string_to_integer", "12.0", 12)),
        ({"count": "0"}, {"count": 0}, ("/args/count", "string_to_integer", "0", 0)),
        ({"price": "40"}, {"price": 40}, ("/args/price", "string_to_number", "40", 40)),
        ({"price": "12.50"}, {"price": 12.5}, ("/args/price", "string_to_number", "12.50", 12.5)),
        ({"price": "-0.07"}, {"price": -0.07}, ("/args/price", "string_to_number", "-0.07", -0.07)),
        ({"urgent": "true"}, {"urgent": True}, ("/args/urgent", "string_to_boolean", "true", True)),
        ({"urgent": "false"}, {"urgent": False}, ("/args/urgent", "string_to_boolean", "false", False)),
        ({"tags": "vip"}, {"tags": ["vip"]}, ("/args/tags", "wrap_in_array", "vip", ["vip"])),
        ({"priority": "HIGH"}, {"priority": "high"}, ("/args/priority", "enum_case", "HIGH", "high")),
        ({"code": "XYZ"}, {"code": "xyz"}, ("/args/code", "enum_case", "XYZ", "xyz")),
        ({"item": {"qty": "2"}}, {"item": {"qty": 2}}, ("/args/item/qty", "string_to_integer", "2", 2)),
        ({"maybe": "7"}, {"maybe": 7}, ("/args/maybe", "string_to_integer", "7", 7)),
        ({"nullable": "1.5"}, {"nullable": 1.5}, ("/args/nullable", "string_to_number", "1.5", 1.5)),
        ({"a/b": "1"}, {"a/b": 1}, ("/args/a~1b", "string_to_integer", "1", 1)),
    ],
)  # fmt: skip
def test_each_coercion(
    args: dict[str, Any], expected: dict[str, Any], repair: tuple[str, str, Any, Any]
) -> None:
    fixed, repairs = repaired(args)
    assert fixed == expected
    assert repairs == [repair]
    assert type(fixed[next(iter(fixed))]) is type(next(iter(expected.values())))


def test_a_single_value_is_wrapped_then_its_item_repaired() -> None:
    fixed, repairs = repaired({"ids": "5"})
    assert fixed == {"ids": [5]}
    assert repairs == [
        ("/args/ids", "wrap_in_array", "5", ["5"]),
        ("/args/ids/0", "string_to_integer", "5", 5),
    ]


def test_items_of_an_array_are_repaired_in_place() -> None:
    fixed, repairs = repaired({"ids": [1, "2", 3]})
    assert fixed == {"ids": [1, 2, 3]}
    assert repairs == [("/args/ids/1", "string_to_integer", "2", 2)]


@pytest.mark.parametrize(
    "args",
    [
        {"count": "1e400"},
        {"count": "1e3"},
        {"price": "1E2"},
        {"price": "NaN"},
        {"price": "Infinity"},
        {"price": "-inf"},
        {"count": " 12 "},
        {"count": "12 "},
        {"count": "1 2"},
        {"price": "1,5"},
        {"price": "1,000"},
        {"count": "012"},
        {"count": "+5"},
        {"count": "12.5"},
        {"count": "١٢"},  # Arabic-Indic digits: not ASCII
        {"count": "0x10"},
        {"count": ""},
        {"count": "-"},
        {"price": ".5"},
        {"price": "5."},
        {"urgent": "True"},
        {"urgent": "yes"},
        {"urgent": "1"},
        {"code": "Abc"},  # "ABC" and "abc" both match: ambiguous
        {"priority": "urgent"},
        {"tags": None},  # null is not one value
        {"pair": "x"},  # prefixItems: no single item type
        {"either": "7"},  # two readings
        {"remote": "7"},  # a $ref outside the schema
        {"unknown": "7"},
        {"count": 12},
    ],
)
def test_near_misses_that_could_change_meaning_are_left_as_sent(args: dict[str, Any]) -> None:
    fixed, repairs = repaired(args)
    assert repairs == []
    assert fixed == args


def test_huge_digit_runs_are_not_numbers() -> None:
    fixed, repairs = repaired({"count": "9" * 41})
    assert repairs == [] and fixed == {"count": "9" * 41}


def test_a_ref_cycle_ends() -> None:
    schema = {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}
    assert repair_args(schema, {"x": "1"}) == ({"x": "1"}, [])


def test_deep_arguments_end() -> None:
    schema: dict[str, Any] = {"$ref": "#/$defs/node"}
    schema["$defs"] = {
        "node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}
    }  # fmt: skip
    args: dict[str, Any] = {"v": "1"}
    for _ in range(100):
        args = {"n": args}
    fixed, repairs = repair_args(schema, args)
    assert repairs == []  # past the depth bound nothing is repaired (the schema refuses it)
    assert fixed == args


def test_a_repair_is_a_value_object() -> None:
    assert Repair("/args/a", "enum_case", "X", "x") == Repair("/args/a", "enum_case", "X", "x")
