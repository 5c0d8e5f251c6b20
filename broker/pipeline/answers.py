"""The answers to proposals: approvals, problems (RFC 9457), stored decisions, the log line.

Every answer, whatever its outcome, has the full decision shape (docs/api.md); a problem adds the
``type``/``title``/``status``/``detail`` members and takes its HTTP status from its code.
"""

from __future__ import annotations

import logging
import time
from typing import Literal

import msgspec

from broker.execution import ExecutionReport
from broker.model import (
    ArgumentRepair,
    Cached,
    Decision,
    Execution,
    FailedCheck,
    FieldError,
    Principal,
    Problem,
)
from broker.pipeline.context import Decided, Meta
from broker.responses import Answer, problem_fields
from broker.stores import DecisionRecord, Settlement, StoredResponse
from broker.taxonomy import CODE_STATUS, Code
from broker.validators.checks import check_of, default_check

__all__ = [
    "approved",
    "decision_record",
    "log_answer",
    "note_repairs",
    "outcome",
    "problem",
    "refusal_remediation",
]

answer_log = logging.getLogger("broker.proposals")

_REFUSALS = {
    Code.MALFORMED_REQUEST: "REPAIR: send one JSON proposal object as the API describes",
    Code.SCHEMA_INVALID: "REPAIR: fix the fields listed in errors and resend",
    Code.UNAUTHENTICATED: "ESCALATE: the runtime's broker credentials are missing or invalid",
    Code.TOKEN_EXPIRED: "RETRY: obtain a fresh token, then resend",
    Code.TENANT_MISMATCH: "ESCALATE: this token is not valid for that tenant",
    Code.FORBIDDEN: "REPLAN: propose with a route token, not an admin token",
    Code.PAYLOAD_TOO_LARGE: "REPAIR: proposals are small; send ids, not documents",
    Code.UNSUPPORTED_MEDIA_TYPE: "REPAIR: send the body as Content-Type: application/json",
}


def refusal_remediation(code: Code) -> str | None:
    """What to do about a request the chain could not even start on."""
    return _REFUSALS.get(code)


def approved(meta: Meta, execution: Execution | None) -> Decision:
    return Decision(
        proposal_id=meta.proposal_id,
        trace_id=meta.trace_id,
        tool=meta.tool,
        dry_run=meta.dry_run,
        decision="approved",
        execution=execution,
    )


def problem(
    meta: Meta,
    decision: Literal["approved", "rejected"],
    code: Code,
    reason: str,
    remediation: str | None,
    *,
    errors: list[FieldError] | None = None,
    execution: Execution | None = None,
    failed_check: FailedCheck | None = None,
) -> Problem:
    """``failed_check`` names what refused; without it, the kind of check behind ``code``."""
    category, _ = CODE_STATUS[code]
    type_uri, title, status = problem_fields(code)
    return Problem(
        proposal_id=meta.proposal_id,
        trace_id=meta.trace_id,
        tool=meta.tool,
        dry_run=meta.dry_run,
        decision=decision,
        category=category.value,
        code=code.value,
        reason=reason,
        remediation=remediation,
        errors=errors or [],
        execution=execution,
        type=type_uri,
        title=title,
        status=status,
        detail=reason,
        failed_check=failed_check or default_check(code),
    )


def outcome(meta: Meta, report: ExecutionReport) -> Decision:
    """An executed proposal's answer: a failed execution is an approved decision that carries
    the failure's category and code."""
    execution = report.execution
    if report.code is None:
        answer = approved(meta, execution)
        if report.cached_age_s is not None:  # served from the read cache: the backend was spared
            answer.cached = Cached(round(report.cached_age_s, 3))
        return answer
    message = execution.error.message if execution.error else report.code.value
    return problem(
        meta,
        "approved",
        report.code,
        message,
        _failure_remediation(report.settlement),
        execution=execution,
        # The backend refused or did not answer: the tool is what failed.
        failed_check=check_of(report.code, meta.tool),
    )


def _failure_remediation(settlement: Settlement) -> str:
    if settlement is Settlement.TRANSIENT_FAILURE:
        return "RETRY: the backend failed transiently; resend the same proposal later"
    if settlement is Settlement.UNKNOWN:
        return "ESCALATE: the action may or may not have happened; do not claim either"
    return "REPLAN: the backend refused this action; tell the user and do not claim success"


def note_repairs(body: Decision, decided: Decided) -> None:
    """Say in the answer which arguments were repaired (and so what the tool received)."""
    body.repairs = [ArgumentRepair(r.path, r.kind, r.original, r.repaired) for r in decided.repairs]


def decision_record(answer: Answer, decided: Decided) -> DecisionRecord:
    """The answer as the store keeps it for ``GET /v1/proposals/{id}`` and for replays."""
    return DecisionRecord(
        proposal_id=decided.meta.proposal_id,
        tenant=decided.principal.tenant or "",
        route=decided.principal.route or "",
        response=StoredResponse(answer.status, answer.body),
    )


class _Summary(msgspec.Struct):
    """The fields of an answer that its log line repeats (decoded back: about a microsecond)."""

    proposal_id: str
    trace_id: str
    decision: str
    category: str | None = None
    code: str | None = None
    replayed: bool = False
    dry_run: bool = False


_summary = msgspec.json.Decoder(_Summary)


def log_answer(principal: Principal, tool: str, answer: Answer, started: float, level: int) -> None:
    """One structured log line per answered proposal (the ledger keeps every proposal)."""
    summary = _summary.decode(answer.body)
    answer_log.log(
        level,
        "proposal %s",
        summary.decision,
        extra={
            "trace_id": summary.trace_id,
            "proposal_id": summary.proposal_id,
            "route": principal.route,
            "tenant": principal.tenant,
            "tool": tool,
            "decision": summary.decision,
            "category": summary.category,
            "code": summary.code,
            "status": answer.status,
            "replayed": summary.replayed or None,
            "dry_run": summary.dry_run or None,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    )
