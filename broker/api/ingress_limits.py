"""Request headers the broker refuses, or does not pass on, before it reads a body.

* Two ``Authorization`` headers: which one a proxy checked and which one the broker reads could
  differ, so neither is used (401 ``unauthenticated``).
* A ``traceparent`` is forwarded to backends only when it is a W3C trace context
  (``00-<32 hex>-<16 hex>-<2 hex>``, lower case, no all-zero ids), the form whose trace id the
  proposal also takes (``broker.pipeline.context``); anything else (another version included) is
  dropped, as the W3C recommendation lets a receiver do, and the proposal starts a trace of its
  own. So what reaches a backend is at most 55 characters the broker understood, never the
  caller's bytes as they came.
"""

from __future__ import annotations

import re

from broker.taxonomy import AuthError, Code

__all__ = ["single_authorization", "valid_traceparent"]

_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def valid_traceparent(value: str | None) -> str | None:
    """``value`` when it is a W3C ``traceparent`` the broker may forward, else ``None``."""
    if value is None or len(value) != 55 or _TRACEPARENT.fullmatch(value) is None:
        return None
    return value


def single_authorization(first: str | None, repeated: bool) -> str | None:
    """The ``Authorization`` header to authenticate; :class:`AuthError` when it came twice."""
    if repeated:
        raise AuthError(Code.UNAUTHENTICATED, "send one Authorization header, not several")
    return first
