"""CSRF for the inbox's forms: a synchronizer token bound to the session, and the browser's
own word on where a request comes from.

The token is an HMAC of the session's random nonce under the session key, so it is the same
on every page of one session, different in every other, and needs no server-side state. A
POST that changes anything must carry it in the form's ``csrf`` field. Litestar's
``CSRFConfig`` is not used: it is app-wide middleware (every JSON endpoint would need
excluding) and its double-submit token is not bound to the signed-in approver.

Browsers also say where a request comes from: ``Origin`` (sent with every form POST) must be
this very origin, and ``Sec-Fetch-Site``, when sent, ``same-origin`` (or ``none``: typed by
the user). A request without either header (not a browser, or an old one) rests on the token.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Request

from broker.ui.sessions import Session, SessionKeys

__all__ = ["FIELD", "cross_site", "csrf_token", "valid_csrf"]

FIELD = "csrf"
"""The form field every state-changing POST carries."""
_LABEL = "csrf"


def csrf_token(keys: SessionKeys, session: Session) -> str:
    return keys.mac(_LABEL, session.nonce)


def valid_csrf(keys: SessionKeys, session: Session, given: str | None) -> bool:
    if not given:
        return False
    expected = csrf_token(keys, session).encode("ascii")
    return hmac.compare_digest(expected, given.encode("utf-8", "replace"))


def cross_site(request: Request[Any, Any, Any]) -> str | None:
    """Why the browser says this request comes from elsewhere, or ``None``."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return f"the browser says the form was sent from a {fetch_site} page"
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != own:
            return f"the form was sent from {origin}, not from this inbox"
    return None
