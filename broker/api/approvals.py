"""``/v1/approvals``: approvers list, read, approve and deny pending approvals.

Approver tokens (``approver_tenants``) see and decide their tenants' approvals, admin tokens
every tenant's; route and backend tokens are refused (403): an agent never approves itself.
Another tenant's approval answers 404, exactly like a missing one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, Parameter

from broker.api.errors import problem_response
from broker.api.json_body import located, read_json_body
from broker.api.shared import broker_state, principal_of
from broker.approvals.model import ApprovalRecord, ApprovalView, may_decide
from broker.approvals.records import iso
from broker.approvals.service import Approvals, Refusal
from broker.ledger.redaction import redact
from broker.model import FieldError, Principal
from broker.taxonomy import Code

__all__ = ["ApprovalController", "ApprovalList", "ApproveRequest", "DenyRequest"]

_Comment = Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
_STATUSES = ("pending", "approved", "denied", "expired")


class ApproveRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/approvals/{id}/approve``: the digest the approver was shown."""

    digest: Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
    comment: _Comment | None = None


class DenyRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/approvals/{id}/deny``: why (the agent reads it in ``reason``)."""

    comment: _Comment


class ApprovalList(msgspec.Struct, frozen=True):
    """``GET /v1/approvals``."""

    approvals: list[ApprovalView]


_approve = msgspec.json.Decoder(ApproveRequest)
_deny = msgspec.json.Decoder(DenyRequest)
_encoder = msgspec.json.Encoder()


def _approvals(request: Request[Any, Any, Any]) -> Approvals:
    return broker_state(request).pipeline.approvals


def _approver(request: Request[Any, Any, Any]) -> Principal | Response[bytes]:
    principal = principal_of(request)
    if principal.admin or principal.approver_tenants:
        return principal
    return problem_response(
        Code.FORBIDDEN, "only approver and admin tokens read and decide approvals"
    )


def _view(request: Request[Any, Any, Any], record: ApprovalRecord) -> ApprovalView:
    tool = broker_state(request).registry.tools.get(record.tool)
    execution: Literal["waiting", "running", "done"] | None = None
    if record.status == "approved":
        execution = "waiting"
    elif record.status == "executing":
        execution = "running"
    elif record.status == "executed":
        execution = "done"
    return ApprovalView(
        id=record.id,
        status=record.public_status,
        tenant=record.tenant,
        route=record.route,
        tool=record.tool,
        args=redact(record.args, tool.sensitive if tool else frozenset()),
        reason=record.reason,
        proposal_reason=record.proposal_reason,
        proposal_id=record.proposal_id,
        trace_id=record.trace_id,
        digest=record.digest,
        requested_at=iso(record.requested_at),
        expires_at=iso(record.expires_at),
        decided_at=iso(record.decided_at) if record.decided_at is not None else None,
        decided_by=record.decided_by,
        comment=record.comment,
        execution=execution,
        final_status=record.final.status if record.final is not None else None,
    )


async def _decide(
    request: Request[Any, Any, Any], approval_id: str, action: Literal["approve", "deny"]
) -> Response[bytes]:
    """Approve or deny: the body read like every JSON endpoint's (415, repeated keys), then
    decided by the approvals service, whichever process or click comes first."""
    principal = principal_of(request)
    received = await read_json_body(request)
    if isinstance(received, Response):
        return received
    try:
        body = (_approve if action == "approve" else _deny).decode(received)
    except _BODY_ERRORS as exc:
        return _bad_body(exc)
    decided = await _approvals(request).decide(
        principal,
        approval_id,
        action,
        digest=body.digest if isinstance(body, ApproveRequest) else None,
        comment=body.comment,
    )
    if isinstance(decided, Refusal):
        return _refused(decided)
    return _json(_view(request, decided))


def _json(content: object) -> Response[bytes]:
    return Response(content=_encoder.encode(content), media_type="application/json")


def _refused(refusal: Refusal) -> Response[bytes]:
    errors = [FieldError(refusal.pointer, refusal.detail)] if refusal.pointer else None
    return problem_response(refusal.code, refusal.detail, errors=errors)


def _bad_body(exc: Exception) -> Response[bytes]:
    if isinstance(exc, msgspec.ValidationError):
        pointer, message = located(exc)
        return problem_response(
            Code.SCHEMA_INVALID,
            "the body is not a valid decision",
            errors=[FieldError(pointer, message)],
        )
    return problem_response(
        Code.MALFORMED_REQUEST,
        "the body is not valid JSON",
        errors=[FieldError("", "expected a JSON object")],
    )


_BODY_ERRORS = (msgspec.DecodeError, UnicodeDecodeError, RecursionError, ValueError)


class ApprovalController(Controller):
    path = "/v1/approvals"
    tags = ["approvals"]

    @get(
        "/",
        operation_id="listApprovals",
        summary="List approvals",
        description=(
            "Approvals of the tenants this approver decides for (an admin: all), oldest first; "
            "`status` narrows them to pending, approved, denied or expired. Expired ones are "
            "expired as they are read."
        ),
    )
    async def list_approvals(
        self,
        request: Request[Any, Any, Any],
        status: Annotated[
            str | None,
            Parameter(
                schema_extra={"enum": list(_STATUSES)},
                description="Only the approvals in this state.",
            ),
        ] = None,
    ) -> Response[bytes]:
        principal = _approver(request)
        if isinstance(principal, Response):
            return principal
        stray = sorted(set(request.query_params) - {"status"})
        if stray:
            return problem_response(
                Code.MALFORMED_REQUEST,
                f"unknown query parameter {stray[0]!r}; the only one is status",
            )
        if status is not None and status not in _STATUSES:
            return problem_response(
                Code.SCHEMA_INVALID,
                "unknown status",
                errors=[FieldError("/status", f"expected one of {', '.join(_STATUSES)}")],
            )
        records = await _approvals(request).find(status)
        views = [_view(request, r) for r in records if may_decide(principal, r.tenant)]
        return _json(ApprovalList(views))

    @get(
        "/{approval_id:str}",
        operation_id="getApproval",
        summary="Read an approval",
        description="The approval an approver decides on: tool, redacted args, reason, digest.",
    )
    async def read(
        self, request: Request[Any, Any, Any], approval_id: FromPath[str]
    ) -> Response[bytes]:
        principal = _approver(request)
        if isinstance(principal, Response):
            return principal
        record = await _approvals(request).get(approval_id)
        if record is None or not may_decide(principal, record.tenant):
            return problem_response(Code.NOT_FOUND, f"no approval {approval_id!r}")
        return _json(_view(request, record))

    @post(
        "/{approval_id:str}/approve",
        status_code=200,
        operation_id="approveApproval",
        summary="Approve: the broker executes the action at once",
        description=(
            "Send the `digest` shown (409 `approval_conflict` otherwise: the approval is bound "
            "to exactly that action). The broker re-checks preconditions and executes once, "
            "whichever process or click comes first; approving twice answers the same state."
        ),
    )
    async def approve(
        self, request: Request[Any, Any, Any], approval_id: FromPath[str]
    ) -> Response[bytes]:
        return await _decide(request, approval_id, "approve")

    @post(
        "/{approval_id:str}/deny",
        status_code=200,
        operation_id="denyApproval",
        summary="Deny: the proposal ends 403 approval_denied",
        description=(
            "The `comment` is the `reason` the agent reads. Held budgets are given back. "
            "Denying twice answers the same state; denying an approved one is 409."
        ),
    )
    async def deny(
        self, request: Request[Any, Any, Any], approval_id: FromPath[str]
    ) -> Response[bytes]:
        return await _decide(request, approval_id, "deny")
