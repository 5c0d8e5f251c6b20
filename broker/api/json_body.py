"""JSON request bodies as I-JSON (RFC 7493) has them: a JSON media type, and one value per key.

Why duplicate keys are refused: msgspec (like most decoders) keeps the last of ``"dry_run": true,
"dry_run": false``, while a proxy or a log that keeps the first saw a dry run; the two readings
of one body must never differ, so such a body is answered 400 with a pointer to every repeated
key, on every endpoint that takes JSON.

Why a second look, and why this one: msgspec cannot report duplicates (a ``Struct`` with
``forbid_unknown_fields`` does not either). A cheap exact screen settles nearly every body: every
member of every object has exactly one ``:`` outside strings, so a body whose ``:`` count equals
the number of distinct keys msgspec decodes (about 2 µs for a proposal) repeats none; a caller
whose own decoding already tells that number passes it (a proposal's does). Only a body that
fails the screen (a repeat, or a ``:`` inside a string) is scanned again by the standard
library's C scanner with an ``object_pairs_hook`` that compares lengths (about 4 µs more), and
only a body with a repeat is parsed a third time, to locate every repeat.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
from litestar import Request, Response

from broker.api.errors import problem_response
from broker.model import FieldError
from broker.taxonomy import Code

__all__ = [
    "REPEATED_KEYS",
    "count_keys",
    "duplicate_key_pointers",
    "is_json_media_type",
    "located",
    "not_json_detail",
    "read_json_body",
    "repeated_key_errors",
]

REPEATED_KEYS = "the body repeats an object key (I-JSON, RFC 7493: each key once)"


class _Repeated(Exception):
    """Raised from the hook: the first repeated key ends the scan."""


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> None:
    # Returns None: the values are never used, only the scan's verdict.
    if len(pairs) > 1 and len(dict(pairs)) != len(pairs):
        raise _Repeated


_scanner = json.JSONDecoder(object_pairs_hook=_refuse_repeats)


class _Object:
    """An object as the locating pass sees it: its members in order, repeats kept."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


_locator = json.JSONDecoder(object_pairs_hook=_Object)


def duplicate_key_pointers(body: bytes, distinct_keys: int | None = None) -> list[str]:
    """JSON Pointers (RFC 6901) to every repeated key of every object, in document order;
    ``[]`` when there is none, or when ``body`` is not JSON at all (the caller's own decoder
    says what is wrong with it).

    ``distinct_keys``: how many distinct keys the objects of ``body`` have, summed, when the
    caller's own decoding of it can tell without decoding it again (``broker.api.proposals``);
    a count too low only costs the scan. Counted here when not given.
    """
    colons = body.count(b":")
    if colons < 2:
        return []
    if distinct_keys is None:
        distinct_keys = _distinct_keys(body)
    if distinct_keys == colons:
        return []
    text = body.decode("utf-8", errors="replace")  # invalid UTF-8 is the caller's decoder's
    try:
        _scanner.decode(text)
    except _Repeated:
        try:
            return _locate(_locator.decode(text))
        except (ValueError, RecursionError):  # a repeat, then something that is not JSON
            return []
    except (ValueError, RecursionError):  # not JSON: the caller's decoder says why
        return []
    return []


_generic = msgspec.json.Decoder()


def _distinct_keys(body: bytes) -> int:
    """How many distinct keys the objects of ``body`` have, summed; -1 when it is not JSON."""
    try:
        document = _generic.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return -1
    return count_keys(document) if type(document) in _NESTING else -1


_NESTING = (dict, list)


def count_keys(value: Any) -> int:
    """How many keys the objects in a decoded JSON object or array have, summed."""
    count = 0
    if type(value) is dict:
        count = len(value)
        value = value.values()
    for item in value:
        if type(item) in _NESTING:  # one type() a member: scalars are most of them
            count += count_keys(item)
    return count


def _locate(document: Any) -> list[str]:
    found: list[str] = []

    def walk(value: Any, pointer: str) -> None:
        if isinstance(value, _Object):
            seen: set[str] = set()
            for key, item in value.pairs:
                where = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
                if key in seen and where not in found:
                    found.append(where)
                seen.add(key)
                walk(item, where)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{pointer}/{index}")

    walk(document, "")
    return found


def is_json_media_type(content_type: bytes | str | None) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters aside; a request
    without ``Content-Type`` is taken as JSON (clients that send none still mean it)."""
    if content_type is None or content_type == b"application/json":  # what nearly all send
        return True
    text = content_type.decode("latin-1") if isinstance(content_type, bytes) else content_type
    media = text.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def repeated_key_errors(pointers: list[str]) -> list[FieldError]:
    return [
        FieldError(pointer, "this key appears more than once in its object") for pointer in pointers
    ]


def not_json_detail(content_type: bytes | str | None) -> str | None:
    """Why a request's ``Content-Type`` is refused (415), or ``None`` when it is JSON."""
    if is_json_media_type(content_type):
        return None
    text = content_type.decode("latin-1") if isinstance(content_type, bytes) else content_type
    return f"the body must be application/json, not {str(text)[:100]!r}"


async def read_json_body(request: Request[Any, Any, Any]) -> bytes | Response[bytes]:
    """The body of a JSON endpoint, or the problem answering it: 415 for a media type that is not
    JSON (before reading a byte), 400 with a pointer to every repeated key."""
    unsupported = not_json_detail(request.headers.get("content-type"))
    if unsupported is not None:
        return problem_response(Code.UNSUPPORTED_MEDIA_TYPE, unsupported)
    body = await request.body()
    repeated = duplicate_key_pointers(body)
    if repeated:
        return problem_response(
            Code.MALFORMED_REQUEST, REPEATED_KEYS, errors=repeated_key_errors(repeated)
        )
    return body


_AT = re.compile(r"^(.*) - at `\$(.*)`$", re.S)
_FIELD = re.compile(r"(?:unknown|missing required) field `([^`]+)`")


def located(exc: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's ``Expected ... - at `$.a[0].b` `` as a JSON Pointer (``/a/0/b``) and the
    message; a missing or unknown member is pointed at itself (``/comment``)."""
    text = str(exc)
    match = _AT.match(text)
    message, path = (match.group(1), match.group(2)) if match else (text, "")
    steps = re.findall(r"\.([^.\[]+)|\[(\d+)\]", path)
    pointer = "".join("/" + (name or index) for name, index in steps)
    field = _FIELD.search(message)
    if field is not None:
        pointer += "/" + field.group(1)
    return pointer, message
