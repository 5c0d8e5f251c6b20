"""Who is asking: the signed-in approver of an inbox request, and the checks every
state-changing form passes (session, origin, CSRF token) before anything is decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request, Response
from litestar.response import Redirect
from litestar.status_codes import HTTP_303_SEE_OTHER

from broker.api.shared import broker_state
from broker.model import Principal
from broker.taxonomy import AuthError
from broker.ui import csrf
from broker.ui.render import clear_cookie, error_page, page
from broker.ui.sessions import COOKIE_NAME, Session, SessionKeys

__all__ = [
    "SIGN_IN",
    "BadForm",
    "InboxState",
    "SignedIn",
    "checked_post",
    "forbidden",
    "inbox_state",
    "not_configured",
    "read_form",
    "sign_in_page",
    "signed_in",
]

SIGN_IN = "/ui/sign-in"


@dataclass(frozen=True, slots=True)
class InboxState:
    """The inbox's part of the app: its session keys (``None``: no key configured)."""

    keys: SessionKeys | None


@dataclass(frozen=True, slots=True)
class SignedIn:
    principal: Principal
    session: Session
    keys: SessionKeys

    def context(self) -> dict[str, Any]:
        return {
            "signed_in_as": self.principal.service_account,
            "csrf": csrf.csrf_token(self.keys, self.session),
        }


class BadForm(Exception):
    """A form that cannot be read as one value per field."""


def inbox_state(request: Request[Any, Any, Any]) -> InboxState:
    state: InboxState = request.app.state.inbox
    return state


def not_configured() -> Response[Any]:
    return error_page(
        503,
        "The inbox is not configured",
        "This broker has no key to sign inbox sessions with: set the environment variable "
        "named by [service] ui_session_key_env (BROKER_UI_SESSION_KEY by default) or the token "
        "signing key. The JSON API (/v1/approvals) works without it.",
    )


def sign_in_page(
    request: Request[Any, Any, Any],
    *,
    status: int = 200,
    error: str | None = None,
    notice: str | None = None,
    clear: bool = False,
) -> Response[Any]:
    """The sign-in form, saying why it is shown (``clear``: the session cookie is dropped)."""
    return page(
        "sign_in.html",
        {"title": "Sign in", "error": error, "notice": notice},
        status=status,
        cookies=[clear_cookie(request)] if clear else None,
    )


def signed_in(request: Request[Any, Any, Any], *, posting: bool) -> SignedIn | Response[Any]:
    """The session's approver, or the page that says why there is none."""
    keys = inbox_state(request).keys
    if keys is None:
        return not_configured()
    cookie = request.cookies.get(COOKIE_NAME)
    session = keys.read(cookie)
    if session is None:
        if keys.expired(cookie):
            return sign_in_page(
                request,
                status=401,
                error="Your session has expired; sign in again."
                + (" Nothing was decided." if posting else ""),
                clear=True,
            )
        if posting:
            return sign_in_page(
                request,
                status=401,
                error="Sign in first. Nothing was decided.",
                clear=cookie is not None,
            )
        return Redirect(path=SIGN_IN, status_code=HTTP_303_SEE_OTHER)
    try:
        principal = broker_state(request).authenticator.static_principal(session.sub)
    except AuthError:
        return sign_in_page(
            request,
            status=401,
            error="The token you signed in with is no longer valid.",
            clear=True,
        )
    if not (principal.admin or principal.approver_tenants):
        return sign_in_page(
            request, status=403, error="This token may not decide approvals.", clear=True
        )
    return SignedIn(principal, session, keys)


async def read_form(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The form's fields, each at most once (a repeated field is refused, never guessed)."""
    form = await request.form()
    fields: dict[str, str] = {}
    for name, value in form.multi_items():
        if not isinstance(value, str):
            raise BadForm(f"the field {name!r} must be text")
        if name in fields:
            raise BadForm(f"the field {name!r} is given twice")
        fields[name] = value
    return fields


async def checked_post(
    request: Request[Any, Any, Any],
) -> tuple[SignedIn, dict[str, str]] | Response[Any]:
    """A state-changing POST: signed in, from this origin, with the session's CSRF token."""
    who = signed_in(request, posting=True)
    if isinstance(who, Response):
        return who
    elsewhere = csrf.cross_site(request)
    if elsewhere is not None:
        return forbidden(who, f"Refused: {elsewhere}. Nothing was decided.")
    try:
        fields = await read_form(request)
    except BadForm as exc:
        return error_page(400, "The form is not valid", f"{exc}. Nothing was decided.")
    if not csrf.valid_csrf(who.keys, who.session, fields.get(csrf.FIELD)):
        return forbidden(
            who,
            "The form's CSRF token is missing or not this session's. Nothing was decided; "
            "reload the page and try again.",
        )
    return who, fields


def forbidden(who: SignedIn, detail: str) -> Response[Any]:
    return error_page(403, "Forbidden", detail, context=who.context())
