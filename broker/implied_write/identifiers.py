"""Finds the identifiers a sentence cites and indexes the ones recorded in executions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = (
    "RecordedIdentifiers",
    "extract_identifiers",
    "mask_identifiers",
    "scan_identifiers",
)

_IDENTIFIER = re.compile(
    r"""
    (?<![\w@.-])(?:
        [0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}  # UUID
      | [A-Z][A-Z0-9]{0,11}(?:[-_][A-Z0-9]+)*[-_]\d[A-Z0-9]*(?:[-_][A-Z0-9]+)*  # T-77391, CR-1001
      | [A-Z]{2,6}\d{4,}                                      # INC0012345
      | [a-z]{2,5}_[A-Za-z0-9]{8,}                            # re_3NqX8f2K (provider ids)
      | v\d+(?:\.\d+){1,3}                                    # v2.4.1
      | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                          # e-mail address
      | \#\d{3,}                                              # #12345
      | \d{5,}(?![.,]\d)                                      # long digit runs
    )(?![\w@/]|-\w|\.\w)
    """,
    re.VERBOSE,
)
# A hex reference holds a digit and a letter; both are checked on each run found.
_HEX_REF = re.compile(r"(?<![\w-])[0-9a-f]{7,40}(?![\w-])")
_CURRENCY_AFTER = re.compile(r"\s*(?:USD|EUR|GBP|dollars?|euros?|\$|€|£)", re.IGNORECASE)
_HAS_DIGIT_OR_AT = re.compile(r"[\d@]")
_TOKEN_SPLIT = re.compile(r"[^\w.@#+-]+")


def extract_identifiers(text: str) -> tuple[str, ...]:
    """Identifiers cited in ``text``, in order of appearance, without duplicates."""
    return _scan(text, False)[0]


def mask_identifiers(text: str) -> str:
    """Blank out the identifiers in ``text`` (same length), so their digits are no quantity;
    digits beside a currency are an amount, not an identifier, and stay."""
    return scan_identifiers(text)[1]


def scan_identifiers(text: str) -> tuple[tuple[str, ...], str]:
    """The identifiers cited in ``text`` and the text with them blanked, in one pass."""
    return _scan(text, True)


def _scan(text: str, mask: bool) -> tuple[tuple[str, ...], str]:
    if _HAS_DIGIT_OR_AT.search(text) is None:
        return (), text
    found: list[str] = []
    masked = text
    for match in _IDENTIFIER.finditer(text):
        value = match.group(0)
        if value.isdigit():
            before = text[max(0, match.start() - 1) : match.start()]
            if before in ("$", "\u20ac", "\u00a3") or _CURRENCY_AFTER.match(text, match.end()):
                continue
        if mask:
            start, end = match.span()
            masked = masked[:start] + " " * (end - start) + masked[end:]
        if value not in found:
            found.append(value)
    for value in _HEX_REF.findall(text):
        if not value.isdigit() and not value.isalpha() and value not in found:
            found.append(value)
    return tuple(found), masked


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item)


class RecordedIdentifiers:
    """Every string value found in executions' args and results, searchable by identifier.

    An identifier is recorded when it equals a value (numbers compare by their decimal
    text) or a whole token of a string value, as in ``https://host/T-77391``.
    """

    __slots__ = ("_values",)

    def __init__(self, documents: Iterable[Mapping[str, Any] | None]) -> None:
        values: set[str] = set()
        for document in documents:
            if document is None:
                continue
            for text in _strings(document):
                values.add(text)
                if len(text) > 5:
                    for token in _TOKEN_SPLIT.split(text):
                        values.add(token)
                        values.add(token.rstrip(".-"))
        self._values = frozenset(values)

    def __contains__(self, identifier: object) -> bool:
        if not isinstance(identifier, str):
            return False
        if identifier in self._values:
            return True
        return identifier.startswith("#") and identifier[1:] in self._values
