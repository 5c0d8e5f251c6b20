"""The approver inbox at ``/ui``: sign in, the pending list, one approval, approve or deny.

Decisions go through the very service call the JSON API makes (``Approvals.decide``), so the
digest binding, the 409 on the other decision, exactly-once execution and the ledger records
are the API's; the pages only read forms and explain the outcome. Every POST that changes
anything needs a signed-in session and its CSRF token (``broker.ui.csrf``).
"""

from __future__ import annotations

from typing import Any, Literal

from litestar import Controller, Request, Response, Router, get, post
from litestar.params import FromPath
from litestar.response import Redirect
from litestar.status_codes import HTTP_303_SEE_OTHER

from broker.api.shared import broker_state
from broker.approvals.model import ApprovalRecord, may_decide
from broker.approvals.records import iso
from broker.approvals.service import Approvals, Refusal
from broker.auth import hash_token
from broker.taxonomy import CODE_STATUS, AuthError, Code
from broker.ui import csrf
from broker.ui.access import (
    BadForm,
    SignedIn,
    checked_post,
    inbox_state,
    not_configured,
    read_form,
    sign_in_page,
    signed_in,
)
from broker.ui.render import error_page, page, session_cookie, ui_exception_handlers
from broker.ui.static import InboxAssets
from broker.ui.views import approval_row, outcome_of, trace_rows

__all__ = ["InboxPages", "inbox_router"]

MAX_COMMENT = 2000
"""As ``POST /v1/approvals/{id}/approve|deny`` allow."""
MAX_TOKEN = 4096
REFRESH_S = 30
"""How often the list reloads itself while visible (with JavaScript; a link without)."""

LIST = "/ui/approvals"


def _approvals(request: Request[Any, Any, Any]) -> Approvals:
    return broker_state(request).pipeline.approvals


def _sensitive(request: Request[Any, Any, Any], tool: str) -> frozenset[str]:
    found = broker_state(request).registry.tools.get(tool)
    return found.sensitive if found is not None else frozenset()


async def _detail(
    request: Request[Any, Any, Any],
    who: SignedIn,
    record: ApprovalRecord,
    *,
    status: int = 200,
    form_error: str | None = None,
    comment: str = "",
) -> Response[Any]:
    sensitive = _sensitive(request, record.tool)
    records = await broker_state(request).ledger.sink.by_trace(record.trace_id)
    return page(
        "detail.html",
        {
            **who.context(),
            "title": f"Approval {record.id}",
            "approval": approval_row(record, sensitive, who.keys.clock()),
            "outcome": outcome_of(record, sensitive),
            "trace": trace_rows(records, record.tenant),
            "form_error": form_error,
            "comment": comment,
            "max_comment": MAX_COMMENT,
        },
        status=status,
    )


def _unknown(who: SignedIn, approval_id: str) -> Response[Any]:
    return error_page(
        404,
        "No such approval",
        f"There is no approval {approval_id!r} that you may decide. Nothing was decided.",
        context=who.context(),
    )


async def _decide(
    request: Request[Any, Any, Any], approval_id: str, verdict: Literal["approve", "deny"]
) -> Response[Any]:
    checked = await checked_post(request)
    if isinstance(checked, Response):
        return checked
    who, fields = checked
    comment = fields.get("comment", "").strip()
    problem = None
    if len(comment) > MAX_COMMENT:
        problem = f"The comment is longer than {MAX_COMMENT} characters."
    elif verdict == "deny" and not comment:
        problem = "A denial needs a comment: the agent reads it as the reason."
    elif verdict == "approve" and not fields.get("digest"):
        problem = "The form lacks the digest of the action you saw; reload the page."
    if problem is not None:
        record = await _approvals(request).get(approval_id)
        if record is None or not may_decide(who.principal, record.tenant):
            return _unknown(who, approval_id)
        return await _detail(
            request, who, record, status=422, form_error=problem, comment=comment[:MAX_COMMENT]
        )
    decided = await _approvals(request).decide(
        who.principal,
        approval_id,
        verdict,
        digest=fields.get("digest") if verdict == "approve" else None,
        comment=comment or None,
    )
    if isinstance(decided, Refusal):
        return await _refused(request, who, approval_id, verdict, decided)
    sensitive = _sensitive(request, decided.tool)
    return page(
        "decided.html",
        {
            **who.context(),
            "title": "Approved" if decided.public_status == "approved" else "Denied",
            "approval": approval_row(decided, sensitive, who.keys.clock()),
            "internal_status": decided.status,
            "outcome": outcome_of(decided, sensitive),
        },
    )


async def _refused(
    request: Request[Any, Any, Any],
    who: SignedIn,
    approval_id: str,
    verdict: Literal["approve", "deny"],
    refusal: Refusal,
) -> Response[Any]:
    """Say why nothing was decided, with the approval as it stands now when there is one."""
    if refusal.code is Code.NOT_FOUND:
        return _unknown(who, approval_id)
    _, status = CODE_STATUS[refusal.code]
    record = await _approvals(request).get(approval_id)
    if refusal.pointer == "/digest":
        title = "Not approved: the action is not the one shown"
        detail = (
            "The digest sent with the form is not this approval's, so approving it could "
            "approve another action than the one you read. Nothing was approved; open the "
            "approval again and check it."
        )
    elif record is not None and record.public_status == "expired":
        title = "Too late: the approval expired"
        detail = (
            f"It expired at {iso(record.expires_at)} before anyone decided; the agent is told "
            "approval_expired and nothing ran."
        )
    elif record is not None and record.decided_by is not None:
        wanted = "approved" if verdict == "approve" else "denied"
        title = f"Already {record.public_status}: it cannot be {wanted} now"
        detail = (
            f"{record.decided_by} {record.public_status} it at "
            f"{iso(record.decided_at or record.requested_at)}"
            + (f" ({record.comment})" if record.comment else "")
            + ". A decision is final; yours changed nothing (409)."
        )
    else:
        title = "Nothing was decided"
        detail = refusal.detail
    return error_page(
        int(status),
        title,
        detail,
        context={**who.context(), "approval_id": approval_id},
    )


class InboxPages(Controller):
    """Sign in and out, the pending list, one approval, and the two decisions."""

    @get("/", include_in_schema=False, sync_to_thread=False)
    def home(self) -> Redirect:
        return Redirect(path=LIST, status_code=HTTP_303_SEE_OTHER)

    @get("/sign-in", include_in_schema=False, sync_to_thread=False)
    def sign_in_form(self, request: Request[Any, Any, Any]) -> Response[Any]:
        if inbox_state(request).keys is None:
            return not_configured()
        return sign_in_page(request)

    @post("/sign-in", include_in_schema=False)
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        keys = inbox_state(request).keys
        if keys is None:
            return not_configured()
        elsewhere = csrf.cross_site(request)
        if elsewhere is not None:
            return error_page(403, "Forbidden", f"Refused: {elsewhere}.")
        try:
            token = (await read_form(request)).get("token", "").strip()
        except BadForm as exc:
            return sign_in_page(request, status=400, error=f"{exc}.")
        if not token:
            return sign_in_page(request, status=422, error="Enter your approver token.")
        if len(token) > MAX_TOKEN:
            return sign_in_page(request, status=401, error="This token is not known to the broker.")
        try:
            principal = broker_state(request).authenticator.authenticate(f"Bearer {token}")
        except AuthError as exc:
            expired = exc.code is Code.TOKEN_EXPIRED
            message = (
                "This token has expired." if expired else "This token is not known to the broker."
            )
            return sign_in_page(request, status=401, error=message)
        if not (principal.admin or principal.approver_tenants):
            kind = "a route token" if principal.route is not None else "a backend token"
            return sign_in_page(
                request,
                status=403,
                error=f"This is {kind}: it can never decide approvals (no agent approves itself). "
                "Sign in with an approver token.",
            )
        cookie, _ = keys.issue(hash_token(token))
        response: Response[Any] = Redirect(path=LIST, status_code=HTTP_303_SEE_OTHER)
        response.set_cookie(session_cookie(request, cookie, keys.ttl_s))
        return response

    @post("/sign-out", include_in_schema=False)
    async def sign_out(self, request: Request[Any, Any, Any]) -> Response[Any]:
        checked = await checked_post(request)
        if isinstance(checked, Response) and checked.status_code != 401:
            return checked
        return sign_in_page(request, notice="You are signed out.", clear=True)

    @get("/approvals", include_in_schema=False)
    async def approval_list(self, request: Request[Any, Any, Any]) -> Response[Any]:
        who = signed_in(request, posting=False)
        if isinstance(who, Response):
            return who
        now = who.keys.clock()
        records = await _approvals(request).find("pending")
        rows = [
            approval_row(r, _sensitive(request, r.tool), now)
            for r in records
            if may_decide(who.principal, r.tenant)
        ]
        return page(
            "list.html",
            {
                **who.context(),
                "title": "Pending approvals",
                "approvals": rows,
                "refresh_s": REFRESH_S,
                "as_of": iso(now),
            },
        )

    @get("/approvals/{approval_id:str}", include_in_schema=False)
    async def approval_detail(
        self, request: Request[Any, Any, Any], approval_id: FromPath[str]
    ) -> Response[Any]:
        who = signed_in(request, posting=False)
        if isinstance(who, Response):
            return who
        record = await _approvals(request).get(approval_id)
        if record is None or not may_decide(who.principal, record.tenant):
            return _unknown(who, approval_id)
        return await _detail(request, who, record)

    @get("/{rest:path}", include_in_schema=False, sync_to_thread=False)
    def unknown_page(self, rest: FromPath[str]) -> Response[Any]:
        """Any other address under ``/ui``: a page too, not the JSON API's problem+json."""
        return error_page(404, "No such page", f"The inbox has no page /ui{rest}.")

    @post("/approvals/{approval_id:str}/approve", include_in_schema=False)
    async def approve(
        self, request: Request[Any, Any, Any], approval_id: FromPath[str]
    ) -> Response[Any]:
        return await _decide(request, approval_id, "approve")

    @post("/approvals/{approval_id:str}/deny", include_in_schema=False)
    async def deny(
        self, request: Request[Any, Any, Any], approval_id: FromPath[str]
    ) -> Response[Any]:
        return await _decide(request, approval_id, "deny")


def inbox_router() -> Router:
    """Every inbox page under ``/ui``, outside the OpenAPI document, with HTML error pages."""
    return Router(
        path="/ui",
        route_handlers=[InboxPages, InboxAssets],
        include_in_schema=False,
        exception_handlers=ui_exception_handlers(),
    )
