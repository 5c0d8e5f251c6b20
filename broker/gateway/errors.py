"""What the gateway surface reports when a call or a catalog is wrong (seeds/004 §1.5, §2.3, §3.4).

Two kinds, never mixed: a :class:`GatewayError` is the model's mistake (a malformed path, both
``query`` and ``path``), answered in the §3.4 shape and changing nothing; a :class:`CatalogError` is
the operator's (two tools with one id, a card that cannot fit its token cap), raised while the
catalog is built so it fails loudly before any model sees it.

``tool_browse`` reports only the three codes §3.4 names. The seed has no code of its own for a bad
query, so an empty or oversized ``query`` is ``ARGS_INVALID`` with ``details["field"] == "query"``;
``QUERY_INVALID`` stays in :data:`GatewayCode` only so the name is reserved and never reused with
another meaning. ``HANDLE_NOT_FOUND`` and ``SELECTOR_INVALID`` belong to ``tool_view``.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["CatalogError", "GatewayCode", "GatewayError"]

GatewayCode = Literal[
    "PATH_INVALID",
    "PATH_NOT_FOUND",
    "ARGS_INVALID",
    "QUERY_INVALID",
    "HANDLE_NOT_FOUND",
    "SELECTOR_INVALID",
]


class GatewayError(Exception):
    """A meta-tool call the gateway refuses, in the shape of seeds/004 §3.4.

    ``path`` is the offending path, or ``""`` when the fault is not a path's (§3.4 keeps the member
    either way); ``details`` is implementation-defined; here it always names the argument at fault
    under ``"field"`` and, as a JSON pointer into the call's arguments, under ``"pointer"`` (``""``
    when the fault is the arguments as a whole, such as both ``query`` and ``path``), with the rule
    broken under ``"reason"`` or, for ``PATH_NOT_FOUND``, the missing segment's ``"depth"``.
    """

    def __init__(
        self,
        code: GatewayCode,
        message: str,
        *,
        path: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code: GatewayCode = code
        self.message = message
        self.path = path
        self.details: dict[str, Any] = dict(details or {})

    def payload(self) -> dict[str, Any]:
        """The §3.4 error object: ``error``, ``message``, ``path`` and ``details``."""
        return {
            "error": self.code,
            "message": self.message,
            "path": self.path,
            "details": dict(self.details),
        }

    def __repr__(self) -> str:
        return f"GatewayError({self.code!r}, {self.message!r}, path={self.path!r})"


class CatalogError(Exception):
    """The catalog cannot be served as a gateway: two tools share an id (§1.5), or a card stays
    over the hard token cap after description truncation (§2.3)."""
