"""Pass 1 of loading: convert raw data to a struct field by field, collecting every problem.

``msgspec.convert`` stops at the first bad value; walking the struct's fields first means one
bad key does not hide the next. Problems carry their location as a config key path
(``tools.issue_credit.timeout_s``) or, for the API's registrations, a JSON Pointer.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

__all__ = [
    "KEY_PATH",
    "POINTER",
    "PathStyle",
    "collect_conversion_problems",
    "join_key",
    "quote_key",
]


class PathStyle(NamedTuple):
    """How problem locations are written: config key paths, or JSON Pointers for the API."""

    join: Callable[[str, str], str]
    item: Callable[[str, int], str]
    suffix: Callable[[str], str]
    """msgspec's own location (``.kind``, ``[0]``) appended to a path of this style."""


def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _pointer_suffix(where: str) -> str:
    parts = re.findall(r"\.([^.\[]+)|\[(\d+)\]", where)
    return "".join("/" + _pointer_token(name or index) for name, index in parts)


POINTER = PathStyle(
    join=lambda path, key: f"{path}/{_pointer_token(key)}",
    item=lambda path, i: f"{path}/{i}",
    suffix=_pointer_suffix,
)


def collect_conversion_problems(
    value: Any,
    typ: Any,
    path: str,
    problems: list[tuple[str, str]],
    style: PathStyle | None = None,
) -> None:
    """Convert ``value`` to ``typ`` field by field so every bad key is reported, not only the first."""
    style = style or KEY_PATH
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct) and isinstance(value, dict):
        fields = {f.encode_name: f for f in msgspec.structs.fields(typ)}
        tag_field = typ.__struct_config__.tag_field
        for key in value:
            if key not in fields and key != tag_field:
                problems.append((style.join(path, key), "unknown key"))
        for name, field in fields.items():
            if name in value:
                collect_conversion_problems(
                    value[name], field.type, style.join(path, name), problems, style
                )
            elif field.required:
                problems.append((style.join(path, name), "required key is missing"))
        return
    optional = _optional_struct(typ)
    if optional is not None and isinstance(value, dict):  # e.g. a route's ``mediation``
        collect_conversion_problems(value, optional, path, problems, style)
        return
    tagged = _tagged_members(typ)
    if tagged and isinstance(value, dict):
        tag_field, by_tag = tagged
        kind = value.get(tag_field)
        member = by_tag.get(kind) if isinstance(kind, str) else None
        if member is None:
            choices = ", ".join(repr(k) for k in by_tag)
            problems.append((style.join(path, tag_field), f"{tag_field} must be one of {choices}"))
            return
        collect_conversion_problems(value, member, path, problems, style)
        return
    origin = getattr(typ, "__origin__", None)
    if origin is dict and isinstance(value, dict):
        _, value_type = typ.__args__
        for key, item in value.items():
            collect_conversion_problems(item, value_type, style.join(path, key), problems, style)
        return
    if origin is list and isinstance(value, list):
        (item_type,) = typ.__args__
        for index, item in enumerate(value):
            collect_conversion_problems(item, item_type, style.item(path, index), problems, style)
        return
    try:
        msgspec.convert(value, typ)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$")
        problems.append((path + style.suffix(where.rstrip("`")), message))


def _optional_struct(typ: Any) -> type[msgspec.Struct] | None:
    """``S`` of an optional section ``S | None``, so its keys are checked one by one too."""
    if not isinstance(typ, types.UnionType):
        return None
    members = [m for m in typing.get_args(typ) if m is not type(None)]
    if (
        len(members) == 1
        and isinstance(members[0], type)
        and issubclass(members[0], msgspec.Struct)
    ):
        return members[0]
    return None


def _tagged_members(typ: Any) -> tuple[str, dict[str, type[msgspec.Struct]]] | None:
    """For a union of tagged structs (the adapter kinds): the tag field and each tag's struct."""
    if not isinstance(typ, types.UnionType):
        return None
    members: list[type[msgspec.Struct]] = [
        m for m in typing.get_args(typ) if isinstance(m, type) and issubclass(m, msgspec.Struct)
    ]
    if not members or len(members) != len(typing.get_args(typ)):
        return None
    configs = [m.__struct_config__ for m in members]
    tag_field = configs[0].tag_field
    if tag_field is None or any(c.tag_field != tag_field for c in configs):
        return None
    return tag_field, {str(c.tag): m for c, m in zip(configs, members, strict=True)}


def join_key(path: str, key: str) -> str:
    """``tools`` + ``a b`` -> ``tools."a b"``: a key path, quoting keys that are not bare words."""
    key = key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else f'"{key}"'
    return f"{path}.{key}" if path else key


def quote_key(name: str) -> str:
    """One key as it appears inside a key path."""
    return join_key("", name)


KEY_PATH = PathStyle(join=join_key, item=lambda path, i: f"{path}[{i}]", suffix=lambda w: w)
