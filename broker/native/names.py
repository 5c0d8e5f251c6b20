"""Tool names as providers accept them: one reversible encoding, and the table that resolves it.

OpenAI, Anthropic and Gemini accept function names matching ``[A-Za-z0-9_-]{1,64}``; broker names
may hold ``.`` (``billing.refund``, every registered ``namespace.tool``) and run to 193
characters. The encoding uses ``-`` as its escape character, so names without ``.`` or ``-``
(``lookup_order``) are exposed unchanged:

- ``.`` becomes ``--`` and ``-`` becomes ``-_`` (``billing.refund`` → ``billing--refund``,
  ``ship-it`` → ``ship-_it``): decoding needs nothing but the name.
- A name still longer than the limit keeps its first characters and ends in ``-h`` and seven hex
  digits of the SHA-256 of the real name (64 characters in all); only the catalog's table
  (:class:`NameTable`) resolves those.

MCP accepts ``.`` (``[A-Za-z0-9_.-]{1,128}``): its names are only abridged past 128 characters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["PROVIDER_NAME", "NameTable", "decode_name", "expose_name"]

PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What OpenAI, Anthropic and Gemini accept as a function name."""

_HASH_DIGITS = 7


def expose_name(name: str, *, keep_dots: bool = False, limit: int = 64) -> str:
    """The name a provider sees for the broker tool ``name``."""
    exposed = name if keep_dots else name.replace("-", "-_").replace(".", "--")
    if len(exposed) <= limit:
        return exposed
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_DIGITS]
    return f"{exposed[: limit - 2 - _HASH_DIGITS]}-h{digest}"


def decode_name(exposed: str) -> str | None:
    """The broker name an (unabridged) exposed name encodes; ``None`` when it encodes none."""
    if "-" not in exposed:
        return exposed
    out: list[str] = []
    chars = iter(exposed)
    for char in chars:
        if char != "-":
            out.append(char)
            continue
        escaped = next(chars, "")
        if escaped == "-":
            out.append(".")
        elif escaped == "_":
            out.append("-")
        else:
            return None
    return "".join(out)


class NameTable:
    """Resolves the names a model calls back to broker names, for one catalog version."""

    __slots__ = ("_abridged", "_abridged_mcp")

    def __init__(self, names: Iterable[str]) -> None:
        self._abridged: dict[str, str] = {}
        self._abridged_mcp: dict[str, str] = {}
        for name in names:
            exposed = expose_name(name)
            if decode_name(exposed) != name:
                self._abridged[exposed] = name
            exposed = expose_name(name, keep_dots=True, limit=128)
            if exposed != name:
                self._abridged_mcp[exposed] = name

    def resolve(self, called: str) -> str:
        """The broker tool a name called through a provider means. A name that is neither
        exposed nor encoded is taken as it is (the chain then answers ``unknown_tool`` or
        ``tool_not_allowed``)."""
        found = self._abridged.get(called)
        if found is not None:
            return found
        return decode_name(called) or called

    def resolve_mcp(self, called: str) -> str:
        """The broker tool a name called through MCP means (MCP names keep their dots)."""
        return self._abridged_mcp.get(called, called)
