"""The approval's ledger records and answers: pending, decided, expired, in the proposal's chain.

Each record is a ledger entry of the proposal's trace (same ``proposal_id`` and ``trace_id``),
so ``GET /v1/traces/{id}`` shows request, decision, expiry and execution in order.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from broker.approvals.model import ApprovalInfo, ApprovalRecord
from broker.ledger.errors import LedgerUnavailableError
from broker.ledger.model import LedgerEntry
from broker.model import Decision, FailedCheck
from broker.pipeline.answers import problem
from broker.pipeline.context import Meta
from broker.responses import Answer, render
from broker.timestamps import at_millisecond, utc_now

if TYPE_CHECKING:
    from broker.ledger import LedgerSink
    from broker.taxonomy import Code

__all__ = [
    "PendingDecision",
    "iso",
    "ledger_note",
    "pending_answer",
    "pending_content",
    "refusal",
]

log = logging.getLogger("broker.approvals")

_encoder = msgspec.json.Encoder()


def iso(epoch: float) -> str:
    return at_millisecond(epoch)


class PendingDecision(Decision, kw_only=True):
    """``202``: the full decision shape plus the approval it waits for."""

    decision: Literal["pending_approval"]  # type: ignore[assignment]
    approval: ApprovalInfo


def meta_of(record: ApprovalRecord) -> Meta:
    return Meta(record.proposal_id, record.trace_id, record.tool, False)


def pending_answer(record: ApprovalRecord, *, replay: bool = False) -> Answer:
    body = PendingDecision(
        proposal_id=record.proposal_id,
        trace_id=record.trace_id,
        tool=record.tool,
        decision="pending_approval",
        reason=record.reason,
        remediation="WAIT: a person must approve this action; resend the same proposal (same "
        "key) later for its outcome",
        replayed=replay,
        approval=ApprovalInfo(
            id=record.id,
            status=record.public_status,
            expires_at=iso(record.expires_at),
            digest=record.digest,
        ),
    )
    headers = {"Idempotent-Replayed": "true"} if replay else {}
    return Answer(202, _encoder.encode(body), "application/json", headers)


def pending_content(decision: dict[str, Any]) -> dict[str, Any]:
    """What a model is told of a pending proposal in a tool result (MCP, native tool calls):
    an error result, so that it never reads the empty result as done."""
    return {
        "pending_approval": {
            "approval": decision.get("approval"),
            "reason": decision.get("reason"),
            "remediation": decision.get("remediation"),
        }
    }


def refusal(record: ApprovalRecord, code: Code, reason: str, remediation: str) -> Answer:
    """The final answer of a denied or expired approval."""
    body = problem(
        meta_of(record),
        "rejected",
        code,
        reason,
        remediation,
        failed_check=FailedCheck("approval", record.id),
    )
    return render(body)


async def ledger_note(
    sink: LedgerSink | None,
    record: ApprovalRecord,
    *,
    decision: Literal[
        "pending_approval", "approval_approved", "approval_denied", "approval_expired"
    ],
    by: str,
    reason: str | None,
    config_hash: str,
    sensitive: frozenset[str],
    code: str | None = None,
    category: str | None = None,
) -> None:
    """Append one approval event to the proposal's trace (never silently lost: logged whole)."""
    if sink is None:
        return
    started = time.perf_counter()
    entry = LedgerEntry(
        time=utc_now(),
        trace_id=record.trace_id,
        session_id=record.session_id,
        proposal_id=record.proposal_id,
        route=record.route,
        tenant=record.tenant,
        service_account=by,
        tool=record.tool,
        config_hash=config_hash,
        args=record.args,
        sensitive_keys=sensitive,
        decision=decision,
        category=category,
        code=code,
        reason=reason,
        decision_us=int((time.perf_counter() - started) * 1_000_000),
        failed_check=None,
        proposal_reason=f"approval {record.id}",
        phase=record.phase,
    )
    try:
        await sink.append(entry)
    except LedgerUnavailableError:
        log.critical("ledger unavailable; unrecorded approval event follows: %r", entry)
