"""What every config struct shares: the base that refuses unknown keys, and the constrained
field types the sections use."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = [
    "Credentials",
    "HttpUrl",
    "Name",
    "Namespace",
    "PositiveFloat",
    "PositiveInt",
    "Scope",
    "Section",
]

Scope = Literal["tenant", "route", "tool"]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
Name = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")]
Namespace = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]
HttpUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://", max_length=2048)]
Credentials = dict[str, str]


class Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every config struct: keyword-only fields, and unknown keys are errors."""
