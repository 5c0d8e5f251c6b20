"""A proposal's ledger entry, and its answer read back from the ledger's record.

Every proposal, whatever its outcome, gets one entry before it is answered: the decision, the
verdict of each step in chain order, the execution, and hashes (never the key itself).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal

import msgspec

from broker.execution import ExecutionReport
from broker.ledger.model import LedgerEntry, RecordedCheck, RecordedError, RecordedRepair
from broker.model import (
    ArgumentRepair,
    AuditInfo,
    Decision,
    Execution,
    FailedCheck,
    FieldError,
    Problem,
)
from broker.pipeline.agent_redaction import with_redacted
from broker.pipeline.answers import approved, problem
from broker.pipeline.context import Decided, Meta
from broker.prose_audit import CHECK_TOOL
from broker.responses import Answer, render
from broker.stores import DecisionRecord, StoredResponse
from broker.taxonomy import CODE_STATUS, Code
from broker.timestamps import utc_now

if TYPE_CHECKING:
    from broker.ledger import LedgerRecord
    from broker.validators.repair import Repair

__all__ = ["DETAIL_PATH", "from_ledger", "key_hash", "ledger_entry"]

DETAIL_PATH = "/execution/error/detail"
"""Where a failed execution's backend detail is recorded among the record's ``errors``: the ledger
keeps what the backend said, while answers (and answers rebuilt from the ledger) never carry it."""


def key_hash(key: str) -> str:
    """How the ledger names an idempotency key: its hash, never the key itself."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def ledger_entry(
    decided: Decided,
    answer: Decision | Answer,
    decision_us: int,
    replay: bool,
    report: ExecutionReport | None,
    contract_hash: str,
) -> LedgerEntry:
    meta, principal, tool = decided.meta, decided.principal, decided.tool
    execution = answer.execution if isinstance(answer, Decision) else None
    category = code = reason = None
    decision = "approved"
    if decided.rejection is not None:
        decision = "rejected"
        category = CODE_STATUS[decided.rejection.code][0].value
        code, reason = decided.rejection.code.value, decided.rejection.reason
    elif report is not None and report.code is not None:
        category, code = CODE_STATUS[report.code][0].value, report.code.value
        reason = execution.error.message if execution and execution.error else None
    elif decided.approval_reason is not None and report is None and not replay:
        decision, reason = "pending_approval", decided.approval_reason
    errors: tuple[RecordedError, ...] = ()
    if isinstance(answer, Decision) and answer.errors:
        errors = tuple(RecordedError(e.message, e.path) for e in answer.errors)
    if report is not None and report.detail:  # the backend's own words: recorded, not answered
        errors += (RecordedError(report.detail, DETAIL_PATH),)
    check = answer.failed_check if isinstance(answer, Problem) else None
    request = decided.request
    return LedgerEntry(
        time=utc_now(),
        trace_id=meta.trace_id,
        session_id=decided.request.session_id,
        proposal_id=meta.proposal_id,
        route=principal.route or "",
        tenant=principal.tenant or "",
        service_account=principal.service_account,
        tool=meta.tool or "",
        tool_id=tool.tool_id if tool else None,
        config_hash=contract_hash,
        args=decided.request.args,
        result=execution.result if execution else None,
        sensitive_keys=tool.sensitive if tool else frozenset(),
        decision=decision,
        category=category,
        code=code,
        reason=reason,
        remediation=answer.remediation if isinstance(answer, Decision) else None,
        errors=errors,
        validators=tuple(decided.verdicts),
        execution_status=execution.status if execution else None,
        attempts=execution.attempts if execution else 0,
        dry_run=meta.dry_run,
        replayed=replay,
        decision_us=decision_us,
        execution_us=report.elapsed_us if report else None,
        idempotency_key_hash=key_hash(decided.key) if decided.key else None,
        failed_check=RecordedCheck(check.kind, check.name) if check else None,
        preconditions=tuple(request.preconditions),
        proposal_reason=request.reason,
        started_at=execution.started_at if execution else None,
        ended_at=execution.ended_at if execution else None,
        attempt_outcomes=report.attempt_outcomes if report else (),
        receipt=decided.receipt,
        repairs=_recorded(decided.repairs) if decided.repairs else (),
        cache=report.cache if report else None,
        phase=decided.phase,
    )


def _recorded(repairs: tuple[Repair, ...]) -> tuple[RecordedRepair, ...]:
    return tuple(
        RecordedRepair(_json(r.original), r.kind, r.path, _json(r.repaired)) for r in repairs
    )


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()


def _from_json(text: str) -> object:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:  # a record written by hand: show what it says
        return text


def from_ledger(record: LedgerRecord) -> DecisionRecord | None:
    """Rebuild a proposal's answer from its ledger record (results as the ledger keeps them:
    redacted)."""
    if record.tool == CHECK_TOOL or record.decision not in ("approved", "rejected"):
        return None
    decision: Literal["approved", "rejected"] = (
        "approved" if record.decision == "approved" else "rejected"
    )
    meta = Meta(record.proposal_id, record.trace_id, record.tool or None, record.dry_run)
    execution = None
    if record.execution_status in ("succeeded", "failed", "dry_run"):
        execution = Execution(
            status=record.execution_status,  # type: ignore[arg-type]
            result=record.result_redacted if isinstance(record.result_redacted, dict) else None,
            attempts=record.attempts,
            started_at=record.started_at,
            ended_at=record.ended_at,
        )
        if record.receipt is not None:  # the keys taken out of what the agent received
            execution = with_redacted(execution, record.receipt.redacted)
    body: Decision
    if record.code:
        try:
            code = Code(record.code)
        except ValueError:
            return None
        errors = [FieldError(e.path, e.message) for e in record.errors if e.path != DETAIL_PATH]
        reason = record.reason or code.value
        check = record.failed_check
        body = problem(
            meta,
            decision,
            code,
            reason,
            record.remediation,
            errors=errors,
            execution=execution,
            failed_check=FailedCheck(check.kind, check.name) if check else None,
        )
    else:
        body = approved(meta, execution)
    body.audit = AuditInfo(record.seq, record.hash)
    if record.repairs:  # as answered, but for values the ledger keeps redacted
        body.repairs = [
            ArgumentRepair(r.path, r.kind, _from_json(r.from_), _from_json(r.to))
            for r in record.repairs
        ]
    answer = render(body)
    return DecisionRecord(
        proposal_id=record.proposal_id,
        tenant=record.tenant,
        route=record.route,
        response=StoredResponse(answer.status, answer.body),
    )
