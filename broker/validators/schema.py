"""Argument validation against a tool's JSON Schema, every error located by a JSON Pointer.

jsonschema-rs runs on the hot path (about a microsecond per call, where python-jsonschema costs
tens); python-jsonschema stays the referee that checks schemas when they are loaded, and a
differential test holds the two to the same verdicts.
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs

from broker.model import FieldError

__all__ = ["ArgsValidator", "json_pointer"]


def json_pointer(parts: list[str | int] | tuple[str | int, ...]) -> str:
    """RFC 6901: ``["args", "a/b"]`` -> ``/args/a~1b``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class ArgsValidator:
    """A compiled validator for one tool's ``input_schema``."""

    __slots__ = ("_validator",)

    def __init__(self, schema: dict[str, Any]) -> None:
        # ECMA-262 regex semantics are what JSON Schema specifies; patterns were already
        # screened for catastrophic backtracking when the config was loaded.
        self._validator = jsonschema_rs.Draft202012Validator(schema)

    def errors(self, args: dict[str, Any]) -> list[FieldError]:
        """Every problem with ``args``; empty when valid. Paths point into the proposal body."""
        if self._validator.is_valid(args):
            return []
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
