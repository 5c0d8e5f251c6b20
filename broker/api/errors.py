"""Every error the HTTP layer answers is problem+json with a taxonomy code, never a bare 500 page."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException

from broker.model import FieldError, ProblemDetails
from broker.responses import PROBLEM_JSON, problem_fields
from broker.taxonomy import CODE_STATUS, AuthError, Code, StoreUnavailableError

__all__ = ["exception_handlers", "problem_response"]

log = logging.getLogger("broker.api")

_STATUS_CODES = {
    400: Code.MALFORMED_REQUEST,
    401: Code.UNAUTHENTICATED,
    403: Code.FORBIDDEN,
    404: Code.NOT_FOUND,
    413: Code.PAYLOAD_TOO_LARGE,
    415: Code.UNSUPPORTED_MEDIA_TYPE,
}

_encoder = msgspec.json.Encoder()


def problem_response(
    code: Code,
    detail: str,
    *,
    errors: list[FieldError] | None = None,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response[bytes]:
    category, _ = CODE_STATUS[code]
    type_uri, title, default_status = problem_fields(code)
    body = ProblemDetails(
        type=type_uri,
        title=title,
        status=status or default_status,
        detail=detail,
        category=category.value,
        code=code.value,
        errors=errors or [],
    )
    return Response(
        content=_encoder.encode(body),
        status_code=status or default_status,
        media_type=PROBLEM_JSON,
        headers=headers or {},
    )


def _auth_error(_: Request[Any, Any, Any], exc: AuthError) -> Response[bytes]:
    return problem_response(exc.code, exc.detail, headers={"WWW-Authenticate": "Bearer"})


def _store_error(_: Request[Any, Any, Any], exc: StoreUnavailableError) -> Response[bytes]:
    return problem_response(
        Code.STORE_UNAVAILABLE, "the broker cannot reach its state", headers={"Retry-After": "1"}
    )


def _http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    code = _STATUS_CODES.get(exc.status_code)
    if code is None:
        code = Code.MALFORMED_REQUEST if exc.status_code < 500 else Code.INTERNAL_ERROR
    detail = exc.detail if exc.status_code < 500 else "internal error"
    if exc.status_code == 413:
        detail = "the request body is too large"
    return problem_response(code, detail, status=exc.status_code, headers=exc.headers)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    # A bug: log it whole, answer without leaking internals.
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(Code.INTERNAL_ERROR, "internal error")


exception_handlers = {
    AuthError: _auth_error,
    StoreUnavailableError: _store_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}
