"""Wire and domain structs: what comes in, what goes out, who is asking."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

__all__ = [
    "ArgumentRepair",
    "AuditInfo",
    "Cached",
    "Decision",
    "Execution",
    "ExecutionError",
    "FailedCheck",
    "FieldError",
    "Principal",
    "Problem",
    "ProblemDetails",
    "ProposalRequest",
    "Risk",
    "TraceId",
]

Risk = Literal["read", "write", "irreversible"]
TraceId = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[!-~]+\Z")]
"""A caller's ``trace_id`` or ``session_id``: 1-128 visible ASCII characters (no spaces or line
breaks), since it is echoed, logged, recorded and sent to backends."""
DecisionKind = Literal["approved", "rejected"]
ExecutionStatus = Literal["succeeded", "failed", "dry_run"]


class ProposalRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A model's proposal. Unknown fields are refused so a caller cannot smuggle ``tenant``.
    Exactly one of ``tool`` and ``tool_id`` names the tool."""

    # Decoding checks that exactly one was sent (broker.api.proposal_body): ``tool`` is ""
    # for a proposal that names its tool by ``tool_id``, until the chain's first step resolves it.
    tool: str = ""
    args: dict[str, Any]
    preconditions: list[str] = []
    idempotency_key: str | None = None
    reason: str | None = None
    trace_id: TraceId | None = None
    session_id: TraceId | None = None
    dry_run: bool = False
    tool_id: str | None = None


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """Who is calling, derived from the bearer token alone; nothing in a body widens it."""

    service_account: str
    route: str | None
    tenant: str | None
    tools: frozenset[str]
    expires_at: float | None = None
    admin: bool = False
    narrowed: bool = False
    """The token names its tools: tools registered later for its route do not widen it."""
    namespace: str | None = None
    """A backend token: the namespace whose tools it may register, read and remove."""
    grants: frozenset[str] = frozenset()
    """A backend token: the routes its registrations may grant tools to."""
    approver_tenants: frozenset[str] = frozenset()
    """An approver token: the tenants whose pending approvals it may decide."""


class FieldError(msgspec.Struct, frozen=True):
    """One problem with the input, located by an RFC 6901 JSON Pointer into the proposal."""

    path: str
    message: str


class FailedCheck(msgspec.Struct, frozen=True):
    """Which check refused, for programs: its kind and the config name of what refused (the
    precondition, budget, rate limit or rule), null where nothing has a name."""

    kind: str
    name: str | None = None


class ProblemDetails(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An RFC 9457 problem answered outside mediation: authentication on the read endpoints, not
    found, the broker's own state unreachable, unexpected faults. ``errors`` appears only when
    it is not empty."""

    type: str
    title: str
    status: int
    detail: str
    category: str
    code: str
    errors: list[FieldError] = []


class ExecutionError(msgspec.Struct, frozen=True):
    category: str
    code: str
    message: str


class Execution(msgspec.Struct, kw_only=True):
    status: ExecutionStatus
    result: dict[str, Any] | None = None
    error: ExecutionError | None = None
    attempts: int = 0
    started_at: str | None = None
    ended_at: str | None = None
    redacted: list[str] | msgspec.UnsetType = msgspec.UNSET
    """The result's keys the tool's ``redact_result`` took out (absent when none was)."""


class AuditInfo(msgspec.Struct, frozen=True):
    seq: int
    hash: str


class ArgumentRepair(msgspec.Struct, frozen=True):
    """One coercion argument repair applied before the schema accepted the arguments."""

    path: str
    """RFC 6901 pointer into the proposal, e.g. ``/args/amount``."""
    kind: str
    """``string_to_integer``, ``string_to_number``, ``string_to_boolean``, ``wrap_in_array``
    or ``enum_case``."""
    from_: Any = msgspec.field(name="from")
    to: Any


class Cached(msgspec.Struct, frozen=True):
    """An answer served from the read cache: the backend was not called for it."""

    age_s: float
    """Seconds since the result was stored."""


class Decision(msgspec.Struct, kw_only=True):
    """The broker's answer for every outcome of mediation (approved, rejected, replayed, dry run)."""

    proposal_id: str
    trace_id: str
    tool: str | None
    """``None`` only when the body could not be read as a proposal."""
    decision: DecisionKind
    category: str | None = None
    code: str | None = None
    reason: str | None = None
    remediation: str | None = None
    errors: list[FieldError] = []
    dry_run: bool = False
    replayed: bool = False
    execution: Execution | None = None
    audit: AuditInfo | None = None
    repairs: list[ArgumentRepair] | msgspec.UnsetType = msgspec.UNSET
    """Present only when argument repair changed the arguments (``request.args`` as executed)."""
    cached: Cached | msgspec.UnsetType = msgspec.UNSET
    """Present only on an answer served from the read cache."""


class Problem(Decision, kw_only=True):
    """A rejection or failed execution: the decision plus RFC 9457 problem members."""

    type: str
    title: str
    status: int
    detail: str
    failed_check: FailedCheck | None = None
