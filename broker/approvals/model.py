"""An approval as the broker keeps it, as approvers see it, and its digest.

The record carries everything needed to execute the proposal later, in any process: the
caller's route and tenant, the tool and args exactly as proposed, the key, and the budget
charges held for it (given back on denial or expiry, kept once it executes).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

from broker.ledger.canonical import canonical_json
from broker.model import Principal
from broker.remembered import Remembered
from broker.stores import BudgetCharge, StoredResponse

__all__ = [
    "APPROVED_STATES",
    "ApprovalInfo",
    "ApprovalRecord",
    "ApprovalView",
    "action_digest",
    "may_decide",
]

Status = Literal["pending", "approved", "executing", "executed", "denied", "expired"]
PublicStatus = Literal["pending", "approved", "denied", "expired"]
APPROVED_STATES = frozenset({"approved", "executing", "executed"})
"""Internal states an approver sees as ``approved`` (executing and executed follow it)."""


def action_digest(
    *, tenant: str, route: str, tool: str, args: dict[str, Any], idempotency_key: str | None
) -> str:
    """SHA-256 over the RFC 8785 form of exactly the action: what an approval is bound to.

    ``canonical_json`` is byte-identical to ``rfc8785.dumps`` (tests/unit/test_ledger_canonical.py)
    at a fraction of its cost: it is on the pending path of every proposal that waits. RFC 8785
    writes an object's members in key order, each value on its own: the action's text is that
    of ``args``, then of the key, then of ``route``, ``tenant`` and ``tool``, which are written
    once per route, tenant and tool (tests/unit/test_approval_digest.py)."""
    if idempotency_key is None:
        key = b"null"
    elif idempotency_key.isascii():
        # ASCII (every key admission accepts is printable ASCII) is written alike by msgspec
        # and RFC 8785: as is, but for the quote, the backslash and control characters, which
        # both escape alike (tested for each). isascii reads a flag; isprintable every character.
        key = _encoder.encode(idempotency_key)
    else:
        key = canonical_json(idempotency_key)
    text = b"".join(
        (
            b'{"args":',
            canonical_json(args),
            b',"idempotency_key":',
            key,
            _tails[(route, tenant, tool)],
        )
    )
    return "sha256:" + hashlib.sha256(text).hexdigest()


def _tail(names: tuple[str, str, str]) -> bytes:
    """``,"route":…,"tenant":…,"tool":…}``: the action's members after ``idempotency_key``."""
    route, tenant, tool = names
    return b"," + canonical_json({"route": route, "tenant": tenant, "tool": tool})[1:]


_encoder = msgspec.json.Encoder()
# Routes and tenants come from the config, tools from it or the catalog: few keys, kept.
_tails: Remembered[tuple[str, str, str], bytes] = Remembered(_tail, 1024)


class ApprovalRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One approval as the store keeps it (``ApprovalRow.body``). Members at their defaults
    are left out of the JSON (decoding restores them): a pending approval has no decision or
    final answer yet, so every store writes, and the pending path encodes, fewer bytes."""

    id: str
    status: Status
    proposal_id: str
    trace_id: str
    tenant: str
    route: str
    service_account: str
    tool: str
    args: dict[str, Any]
    idempotency_key: str | None
    session_id: str | None = None
    phase: str = "execution"
    """The proposal's lifecycle phase (``broker.phases``), kept for its execution's record."""
    preconditions: list[str] = []
    proposal_reason: str | None = None
    reason: str
    """Why it waits: the tool's rule or the policy's."""
    digest: str
    requested_at: float
    expires_at: float
    charges: tuple[tuple[BudgetCharge, int], ...] = ()
    """Budget charges held for it, each with its window (as a ticket keeps them: the ticket's
    own tuple, never copied)."""
    decided_at: float | None = None
    decided_by: str | None = None
    comment: str | None = None
    final: StoredResponse | None = None
    """The answer the proposal ends with (executed, denied, expired, refused on re-check)."""

    @property
    def public_status(self) -> PublicStatus:
        if self.status in APPROVED_STATES:
            return "approved"
        return self.status  # type: ignore[return-value]


class ApprovalInfo(msgspec.Struct, kw_only=True):
    """The ``approval`` member of a ``202 pending_approval`` answer."""

    id: str
    status: PublicStatus
    expires_at: str
    digest: str


class ApprovalView(msgspec.Struct, kw_only=True):
    """``GET /v1/approvals/{id}``: what an approver needs to decide (args redacted)."""

    id: str
    status: PublicStatus
    tenant: str
    route: str
    tool: str
    args: Any
    reason: str
    proposal_reason: str | None
    proposal_id: str
    trace_id: str
    digest: str
    requested_at: str
    expires_at: str
    decided_at: str | None
    decided_by: str | None
    comment: str | None
    execution: Literal["waiting", "running", "done"] | None
    """After approval: whether the broker has executed it yet."""
    final_status: int | None
    """The HTTP status of the proposal's final answer, once it has one."""


def may_decide(principal: Principal, tenant: str) -> bool:
    """Admins decide every tenant's approvals; approver tokens those of their tenants."""
    return principal.admin or tenant in principal.approver_tenants
