"""What the inbox's templates show of an approval, its trace and its outcome: plain values,
already redacted and formatted, so the templates stay free of logic."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from broker.approvals.model import ApprovalRecord
from broker.approvals.records import iso
from broker.ledger.model import LedgerRecord
from broker.ledger.redaction import redact

__all__ = [
    "ApprovalRow",
    "Outcome",
    "TraceRow",
    "amount_fields",
    "approval_row",
    "duration",
    "outcome_of",
    "trace_rows",
]

_CURRENCY_KEYS = frozenset({"currency", "currency_code"})


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``: how long, for a person."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def amount_fields(args: Any) -> list[tuple[str, str]]:
    """The top-level numbers of the (redacted) args, and their currency: what a person weighs
    first. A redacted value shows as redacted, never as the number it hides."""
    if not isinstance(args, dict):
        return []
    currency = next(
        (str(v) for k, v in args.items() if k.lower() in _CURRENCY_KEYS and isinstance(v, str)),
        None,
    )
    shown = []
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        text = f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
        shown.append((name, f"{text} {currency}" if currency else text))
    if currency is not None and not shown:
        shown.append(("currency", currency))
    return shown


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """One approval as the list and the detail page show it."""

    id: str
    status: str
    tool: str
    tenant: str
    route: str
    reason: str
    proposal_reason: str | None
    proposal_id: str
    trace_id: str
    digest: str
    args_json: str
    amounts: list[tuple[str, str]]
    requested_at: str
    age: str
    expires_at: str
    expires_in: str
    decided_at: str | None
    decided_by: str | None
    comment: str | None


def approval_row(record: ApprovalRecord, sensitive: frozenset[str], now: float) -> ApprovalRow:
    args = redact(record.args, sensitive)  # exactly as GET /v1/approvals/{id} shows them
    return ApprovalRow(
        id=record.id,
        status=record.public_status,
        tool=record.tool,
        tenant=record.tenant,
        route=record.route,
        reason=record.reason,
        proposal_reason=record.proposal_reason,
        proposal_id=record.proposal_id,
        trace_id=record.trace_id,
        digest=record.digest,
        args_json=json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True),
        amounts=amount_fields(args),
        requested_at=iso(record.requested_at),
        age=duration(now - record.requested_at),
        expires_at=iso(record.expires_at),
        expires_in=duration(record.expires_at - now),
        decided_at=iso(record.decided_at) if record.decided_at is not None else None,
        decided_by=record.decided_by,
        comment=record.comment,
    )


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One ledger record of the approval's trace, as ``GET /v1/traces/{id}`` holds it."""

    seq: int
    time: str
    decision: str
    by: str
    code: str | None
    reason: str | None
    execution: str | None
    hash: str


def trace_rows(records: list[LedgerRecord], tenant: str) -> list[TraceRow]:
    """The trace's records of the approval's tenant (the approver decides for it), in order."""
    return [
        TraceRow(
            seq=r.seq,
            time=r.time,
            decision=r.decision,
            by=r.service_account,
            code=r.code,
            reason=r.reason,
            execution=r.execution_status,
            hash=r.hash,
        )
        for r in sorted(records, key=lambda r: r.seq)
        if r.tenant == tenant
    ]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The proposal's final answer, as the agent's retry will read it."""

    status: int
    decision: str | None
    code: str | None
    reason: str | None
    execution_status: str | None
    result_json: str | None


_answer = msgspec.json.Decoder(dict[str, Any])


def outcome_of(record: ApprovalRecord, sensitive: frozenset[str]) -> Outcome | None:
    if record.final is None:
        return None
    try:
        body = _answer.decode(record.final.body)
    except msgspec.DecodeError:
        body = {}
    execution = body.get("execution") if isinstance(body.get("execution"), dict) else None
    result = execution.get("result") if execution is not None else None
    return Outcome(
        status=record.final.status,
        decision=_text(body.get("decision")),
        code=_text(body.get("code")),
        reason=_text(body.get("reason")) or _text(body.get("detail")),
        execution_status=_text(execution.get("status")) if execution is not None else None,
        result_json=(
            json.dumps(redact(result, sensitive), indent=2, ensure_ascii=False, sort_keys=True)
            if result is not None
            else None
        ),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
