"""Results too large to answer inline, kept aside, and ``tool_view``'s selectors into them.

A ``tool_execute`` result whose JSON is longer than :data:`INLINE_RESULT_BYTES` is not put in the
model's context whole: the broker keeps it in the store (``broker.stores.expiring``: shared by
every process on Redis) for :data:`KEPT_ASIDE_TTL_S` seconds and answers a handle, its size, an
outline of its shape and a preview. ``tool_view(handle, selector)`` then answers a part.

A handle is random (128 bits) and kept under the tenant, the route and the session that made
it: another session's or tenant's handle is ``HANDLE_NOT_FOUND``, word for word as a handle
that never existed. Without a ``session_id`` a result is kept for the route and tenant alone.

Selector grammar (the part answered must itself fit :data:`INLINE_RESULT_BYTES`)::

    selector = pointer [ "[" [ start ] ":" [ end ] "]" ]
    pointer  = RFC 6901 JSON Pointer ("" is the whole result, "/items/0/name" a member)
    start, end = integers, Python slice semantics (negative counts from the end)

The slice applies to the array or string the pointer selects (``/items[0:20]``,
``/body[:2000]``).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import msgspec

from broker.stores.expiring import ExpiringValues
from broker.taxonomy import StoreUnavailableError

__all__ = [
    "INLINE_RESULT_BYTES",
    "KEPT_ASIDE_TTL_S",
    "MAX_ASIDE_BYTES",
    "KeptAside",
    "ViewProblem",
    "keep_aside",
    "load_aside",
    "outline",
    "select",
]

INLINE_RESULT_BYTES = 16 * 1024
"""A result (or a selected part) whose JSON is longer than this is not answered inline."""

KEPT_ASIDE_TTL_S = 900
"""How long a kept-aside result can be viewed."""

MAX_ASIDE_BYTES = 1 << 20
"""The largest value the gateway keeps aside; larger ones are refused (``ValueError``)."""

_ASIDE = "aside:"
"""The gateway's keys among the store's expiring values (the read cache has ``cache:``)."""

PREVIEW_CHARS = 1000
_MAX_OUTLINED_KEYS = 50

_SLICE = re.compile(r"\[(-?\d{1,9})?:(-?\d{1,9})?\]$")
_INDEX = re.compile(r"^(?:0|[1-9]\d{0,9})$")

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode


class ViewProblem(Exception):
    """Why a view cannot be answered: a §3.4 code, a message and details."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


def outline(value: Any) -> dict[str, Any]:
    """The shape of ``value`` without its content: what a model needs to choose a selector."""
    if isinstance(value, dict):
        keys = list(value)[:_MAX_OUTLINED_KEYS]
        shown = {key: _kind(value[key]) for key in keys}
        described: dict[str, Any] = {"type": "object", "keys": shown}
        if len(value) > len(keys):
            described["more_keys"] = len(value) - len(keys)
        return described
    return _kind(value)


def _kind(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {"type": "object", "size": len(value)}
    if isinstance(value, list):
        return {"type": "array", "length": len(value)}
    if isinstance(value, str):
        return {"type": "string", "length": len(value)}
    if isinstance(value, bool) or value is None:
        return {"type": "boolean" if isinstance(value, bool) else "null"}
    return {"type": "number"}


def select(document: Any, selector: str) -> Any:
    """The part of ``document`` that ``selector`` names; raises :class:`ViewProblem`."""
    pointer, window = selector, None
    sliced = _SLICE.search(selector)
    if sliced is not None:
        pointer = selector[: sliced.start()]
        window = slice(
            int(sliced.group(1)) if sliced.group(1) else None,
            int(sliced.group(2)) if sliced.group(2) else None,
        )
    if pointer and not pointer.startswith("/"):
        raise ViewProblem(
            "SELECTOR_INVALID",
            "a selector is a JSON Pointer ('' or starting with '/'), optionally ending in "
            "a slice such as [0:20]",
        )
    node = document
    walked = ""
    for raw in pointer.split("/")[1:] if pointer else ():
        token = raw.replace("~1", "/").replace("~0", "~")
        walked += "/" + raw
        if isinstance(node, dict):
            if token not in node:
                raise ViewProblem("SELECTOR_NOT_FOUND", f"no member at {walked!r}", outline(node))
            node = node[token]
        elif isinstance(node, list):
            if not _INDEX.fullmatch(token):
                raise ViewProblem("SELECTOR_INVALID", f"{walked!r}: an array index is a number")
            if int(token) >= len(node):
                raise ViewProblem(
                    "SELECTOR_NOT_FOUND", f"no item at {walked!r}", {"length": len(node)}
                )
            node = node[int(token)]
        else:
            raise ViewProblem("SELECTOR_NOT_FOUND", f"nothing inside the value at {walked!r}")
    if window is not None:
        if not isinstance(node, (list, str)):
            raise ViewProblem(
                "SELECTOR_INVALID", "a slice applies to an array or a string", _kind(node)
            )
        node = node[window]
    return node


async def keep_aside(
    store: ExpiringValues, tenant: str, key: str, value: bytes, *, ttl_s: int
) -> None:
    """Keep ``value`` under the gateway's ``key`` for ``ttl_s`` seconds (replacing any)."""
    if len(value) > MAX_ASIDE_BYTES:
        raise ValueError(f"at most {MAX_ASIDE_BYTES} bytes are kept aside")
    await store.put_expiring(tenant, _ASIDE + key, value, ttl_s=ttl_s)


async def load_aside(store: ExpiringValues, tenant: str, key: str) -> bytes | None:
    """The value kept under the gateway's ``key``, or ``None`` (never kept, or expired)."""
    return await store.get_expiring(tenant, _ASIDE + key)


class KeptAside:
    """Keeps large results aside and answers views into them, through the store."""

    def __init__(self, store: ExpiringValues) -> None:
        self._store = store

    @staticmethod
    def _key(route: str, session_id: str | None, handle: str) -> str:
        return f"result\x1f{route}\x1f{session_id or ''}\x1f{handle}"

    async def answer(
        self, tenant: str, route: str, session_id: str | None, result: Any
    ) -> dict[str, Any] | None:
        """``None`` when ``result`` fits inline; else what the model is answered instead.

        A result too large even to keep (past ``MAX_ASIDE_BYTES``) is answered by its outline
        and preview alone, and says so: it is never silently cut."""
        encoded = _encode(result)
        if len(encoded) <= INLINE_RESULT_BYTES:
            return None
        text = encoded.decode()
        preview = text[:PREVIEW_CHARS] + "…"
        summary: dict[str, Any] = {"bytes": len(encoded), "outline": outline(result)}
        if len(encoded) > MAX_ASIDE_BYTES:
            summary["kept"] = False
            summary["reason"] = f"larger than {MAX_ASIDE_BYTES} bytes: only this preview is shown"
            return {"kept_aside": summary, "preview": preview}
        handle = "rh_" + secrets.token_hex(16)
        try:
            await keep_aside(
                self._store,
                tenant,
                self._key(route, session_id, handle),
                encoded,
                ttl_s=KEPT_ASIDE_TTL_S,
            )
        except StoreUnavailableError:
            # The tool ran (and its result is in the ledger): say what the model gets, never
            # answer as if nothing happened.
            summary["kept"] = False
            summary["reason"] = "the store is unavailable: only this preview is shown"
            return {"kept_aside": summary, "preview": preview}
        summary.update(handle=handle, expires_in_s=KEPT_ASIDE_TTL_S)
        return {"kept_aside": summary, "preview": preview}

    async def view(
        self, tenant: str, route: str, session_id: str | None, handle: str, selector: str
    ) -> Any:
        """The selected part of a kept result; raises :class:`ViewProblem`."""
        raw = await load_aside(self._store, tenant, self._key(route, session_id, handle))
        if raw is None:
            raise ViewProblem(
                "HANDLE_NOT_FOUND",
                f"no kept result {handle!r} (it expired, or belongs to another session)",
            )
        part = select(_decode(raw), selector)
        size = len(_encode(part))
        if size > INLINE_RESULT_BYTES:
            raise ViewProblem(
                "SELECTION_TOO_LARGE",
                f"the selection is {size} bytes; select at most {INLINE_RESULT_BYTES} "
                "(a member, or a slice such as [0:20])",
                {"bytes": size, "outline": outline(part)},
            )
        return part
