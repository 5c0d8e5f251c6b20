"""Argument validation against a tool's JSON Schema, every error located by a JSON Pointer.

jsonschema-rs runs on the hot path (about a microsecond per call, where python-jsonschema costs
tens); python-jsonschema stays the referee that checks schemas when they are loaded, and a
differential test holds the two to the same verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import jsonschema
import jsonschema_rs

from broker.model import FailedCheck, FieldError
from broker.taxonomy import Code
from broker.validators import Rejection

__all__ = ["ArgsValidator", "json_pointer", "schema_rejection"]


def _exact_multiple_of(
    validator: Any, divisor: Any, instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    if isinstance(instance, bool) or not isinstance(instance, int | float):
        return
    if isinstance(instance, float) and not math.isfinite(instance):
        yield jsonschema.ValidationError(f"{instance!r} is not a finite number")
        return
    if _exact(instance) % _exact(divisor) != 0:
        yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {divisor!r}")


def _exact(number: float) -> Fraction:
    """Integral values as the integers an adapter receives; fractions as their shortest
    decimal text, so that 0.07 is exactly 7 * 0.01."""
    if isinstance(number, int) or number.is_integer():
        return Fraction(number)
    return Fraction(repr(number))


_ExactValidator: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator, {"multipleOf": _exact_multiple_of}
)


def _uses(schema: Any, keyword: str) -> bool:
    if isinstance(schema, dict):
        return keyword in schema or any(_uses(v, keyword) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses(v, keyword) for v in schema)
    return False


def json_pointer(parts: list[str | int] | tuple[str | int, ...]) -> str:
    """RFC 6901: ``["args", "a/b"]`` -> ``/args/a~1b``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class ArgsValidator:
    """A compiled validator for one tool's ``input_schema``."""

    __slots__ = ("_referee", "_validator")

    def __init__(self, schema: dict[str, Any]) -> None:
        # ECMA-262 regex semantics are what JSON Schema specifies; patterns were already
        # screened for catastrophic backtracking when the config was loaded.
        self._validator = jsonschema_rs.Draft202012Validator(schema)
        # jsonschema-rs gets multipleOf wrong for floats beyond 2**53 and python-jsonschema
        # for decimals such as 0.07 / 0.01 (the differential test found both); schemas that
        # use it are judged by python-jsonschema with an exact decimal multipleOf.
        self._referee = _ExactValidator(schema) if _uses(schema, "multipleOf") else None

    def errors(self, args: dict[str, Any]) -> list[FieldError]:
        """Every problem with ``args``; empty when valid. Paths point into the proposal body."""
        try:
            if self._referee is not None:
                return self._refereed_errors(args)
            if self._validator.is_valid(args):
                return []
            return self._located_errors(args)
        except (ValueError, RecursionError):  # jsonschema-rs: "Recursion limit reached"
            return [FieldError("/args", "the arguments are nested too deeply")]

    def valid(self, args: dict[str, Any]) -> bool:
        """Whether ``args`` pass, without locating what does not (cheaper than ``errors``)."""
        try:
            if self._referee is not None:
                return bool(self._referee.is_valid(args))
            return bool(self._validator.is_valid(args))
        except (ValueError, RecursionError):
            return False

    def _refereed_errors(self, args: dict[str, Any]) -> list[FieldError]:
        assert self._referee is not None  # noqa: S101 (only called when set)
        if self._referee.is_valid(args):
            return []
        found = self._located_errors(args) if not self._validator.is_valid(args) else []
        return found or [
            FieldError(json_pointer(["args", *error.absolute_path]), error.message)
            for error in self._referee.iter_errors(args)
        ]

    def _located_errors(self, args: dict[str, Any]) -> list[FieldError]:
        found: list[FieldError] = []
        for error in self._validator.iter_errors(args):
            base: list[str | int] = ["args", *error.instance_path]
            kind = error.kind
            if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
                found.append(FieldError(json_pointer([*base, kind.property]), error.message))
            elif isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
                for name in kind.unexpected:
                    found.append(
                        FieldError(json_pointer([*base, name]), f"unexpected property {name!r}")
                    )
            else:
                found.append(FieldError(json_pointer(base), error.message))
        return sorted(found, key=lambda e: e.path)


def schema_rejection(tool: str, errors: list[FieldError]) -> Rejection:
    """Every problem with a proposal's arguments, in one rejection the agent can repair from."""
    return Rejection(
        code=Code.SCHEMA_INVALID,
        reason=f"{len(errors)} problem(s) with the arguments of {tool}",
        remediation="REPAIR: fix the arguments listed in errors and resend",
        errors=tuple(errors),
        failed_check=FailedCheck("schema", tool),  # the tool's input_schema
    )
