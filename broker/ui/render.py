"""How the inbox answers: HTML pages from its templates, with the headers every page carries,
and the session cookie set or cleared. Errors are pages too (the JSON API keeps problem+json).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.exceptions import HTTPException
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Template
from litestar.template import TemplateConfig
from litestar.types import ExceptionHandlersMap

from broker.ledger.errors import LedgerUnavailableError
from broker.taxonomy import StoreUnavailableError
from broker.ui.sessions import COOKIE_NAME, COOKIE_PATH

__all__ = [
    "PAGE_HEADERS",
    "clear_cookie",
    "error_page",
    "page",
    "session_cookie",
    "template_config",
    "ui_exception_handlers",
]

log = logging.getLogger("broker.ui")

TEMPLATES = Path(__file__).parent / "templates"

PAGE_HEADERS = {
    # Everything the pages use is served from here: no inline script or style, no framing.
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: with it, browsers send ``Origin: null`` on the inbox's own form posts.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Jinja with autoescaping (Litestar's default for it): every value is escaped."""
    return TemplateConfig(directory=TEMPLATES, engine=JinjaTemplateEngine)


def page(
    name: str,
    context: dict[str, Any],
    *,
    status: int = 200,
    cookies: list[Cookie] | None = None,
    headers: dict[str, str] | None = None,
) -> Template:
    return Template(
        template_name=name,
        context=context,
        status_code=status,
        headers={**PAGE_HEADERS, **(headers or {})},
        cookies=cookies or [],
        media_type="text/html",
    )


def error_page(
    status: int,
    title: str,
    detail: str,
    *,
    context: dict[str, Any] | None = None,
    cookies: list[Cookie] | None = None,
    headers: dict[str, str] | None = None,
) -> Template:
    return page(
        "error.html",
        {**(context or {}), "title": title, "detail": detail, "status": status},
        status=status,
        cookies=cookies,
        headers=headers,
    )


def session_cookie(request: Request[Any, Any, Any], value: str, max_age_s: float) -> Cookie:
    return Cookie(
        key=COOKIE_NAME,
        value=value,
        path=COOKIE_PATH,
        max_age=int(max_age_s),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(request: Request[Any, Any, Any]) -> Cookie:
    return Cookie(
        key=COOKIE_NAME,
        value="",
        path=COOKIE_PATH,
        max_age=0,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _store_down(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.warning("approver inbox: %s", exc)
    return error_page(
        503,
        "The broker cannot reach its state",
        "Nothing was decided. Try again in a moment.",
        headers={"Retry-After": "1"},
    )


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    detail = exc.detail if exc.status_code < 500 else "Something went wrong; nothing was decided."
    return error_page(exc.status_code, "The request was refused", detail)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.exception("approver inbox: unexpected error on %s %s", request.method, request.url.path)
    return error_page(500, "Something went wrong", "Nothing was decided; the error is logged.")


def ui_exception_handlers() -> ExceptionHandlersMap:
    return {
        StoreUnavailableError: _store_down,
        LedgerUnavailableError: _store_down,
        HTTPException: _http_error,
        Exception: _unexpected,
    }
