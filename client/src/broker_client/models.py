"""The broker's answers as typed values.

Fields the broker adds in later versions are ignored rather than refused, so an older client keeps
working against a newer broker.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "Approval",
    "ApprovalInfo",
    "Audit",
    "Decision",
    "Execution",
    "ExecutionError",
    "FailedCheck",
    "FieldError",
    "ImpliedWriteReport",
    "Tool",
    "ToolCallsAnswer",
]


class FieldError(msgspec.Struct, frozen=True):
    """One problem with the input, located by a JSON Pointer."""

    path: str
    message: str


class FailedCheck(msgspec.Struct, frozen=True):
    """What refused a proposal: its kind (``precondition``, ``budget``, …) and its config name."""

    kind: str
    name: str | None = None


class ExecutionError(msgspec.Struct, frozen=True):
    category: str
    code: str
    message: str


class Execution(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["succeeded", "failed", "dry_run"]
    result: dict[str, Any] | None = None
    error: ExecutionError | None = None
    attempts: int = 0
    started_at: str | None = None
    ended_at: str | None = None
    redacted: tuple[str, ...] = ()
    """Result keys the tool's ``redact_result`` took out before the answer (empty: none)."""


class Audit(msgspec.Struct, frozen=True):
    """Where the decision sits in the ledger's hash chain."""

    seq: int
    hash: str


class ApprovalInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``202 pending_approval`` answer says of the approval it waits for."""

    id: str
    status: Literal["pending", "approved", "denied", "expired"]
    expires_at: str
    digest: str
    """What an approver must send back to approve exactly this action."""


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    """One approval as an approver sees it (``GET /v1/approvals/{id}``; args redacted)."""

    id: str
    status: Literal["pending", "approved", "denied", "expired"]
    tenant: str
    route: str
    tool: str
    args: Any
    reason: str
    digest: str
    proposal_id: str
    trace_id: str
    requested_at: str
    expires_at: str
    proposal_reason: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    comment: str | None = None
    execution: Literal["waiting", "running", "done"] | None = None
    """After approval: whether the broker has executed the action yet."""
    final_status: int | None = None
    """The HTTP status of the proposal's final answer, once it has one."""


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """The broker's answer to one proposal, whatever the outcome.

    ``status`` is the HTTP status it came with (a replay keeps the original's). A proposal that
    waits for a person is ``pending`` (``202``), with its ``approval``: nothing has run yet.
    """

    proposal_id: str
    trace_id: str
    tool: str | None
    decision: str
    category: str | None = None
    code: str | None = None
    reason: str | None = None
    remediation: str | None = None
    errors: list[FieldError] = []
    failed_check: FailedCheck | None = None
    dry_run: bool = False
    replayed: bool = False
    execution: Execution | None = None
    audit: Audit | None = None
    approval: ApprovalInfo | None = None
    status: int = 200

    @property
    def approved(self) -> bool:
        return self.decision == "approved"

    @property
    def pending(self) -> bool:
        """Waiting for a person's approval (see ``Client.wait_for_decision``)."""
        return self.decision == "pending_approval"

    @property
    def result(self) -> dict[str, Any] | None:
        """The execution's result, when it ran and succeeded."""
        if self.execution is None or self.execution.status != "succeeded":
            return None
        return self.execution.result


class Tool(msgspec.Struct, frozen=True, kw_only=True):
    """One tool of the route's catalog, in the broker's own format."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}
    risk: str = "write"
    preconditions: list[str] = []
    idempotent: bool = False
    tool_id: str | None = None


class ToolCallsAnswer(msgspec.Struct, frozen=True):
    """``POST /v1/tool-calls``: the results in the provider's shape, and each call's decision."""

    format: str
    results: Any
    decisions: list[Decision]


class ImpliedWriteReport(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /v1/implied-writes/check``: claims the text makes and those no execution backs."""

    violations: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    executions: int | None = None

    @property
    def ok(self) -> bool:
        return not self.violations
