"""The ledger's data: what the pipeline hands over (LedgerEntry) and what is sealed (LedgerRecord)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from broker.ledger.canonical import MAX_SAFE_INT

__all__ = [
    "GENESIS_HASH",
    "AuditRef",
    "LedgerEntry",
    "LedgerRecord",
    "MediationReceipt",
    "RecordedCheck",
    "RecordedError",
    "RecordedRepair",
    "ValidatorVerdict",
]

GENESIS_HASH = "sha256:" + "0" * 64
"""The ``prev_hash`` of record 1."""


class ValidatorVerdict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One validator's verdict on a proposal, with how long it took."""

    # Sealed as broker.ledger.sealing._CheckedVerdict, which bounds elapsed_us to what JCS can
    # represent and declares the fields in JCS order.
    name: str
    verdict: str
    elapsed_us: Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INT, le=MAX_SAFE_INT)]


class RecordedError(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One located problem of a rejected proposal (fields in JCS order)."""

    message: str
    path: str


class RecordedRepair(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One coercion of a proposal's arguments by argument repair (fields in JCS order). The
    values are JSON texts, so a record's hash never depends on how a float is written."""

    from_: str = msgspec.field(name="from")
    """The value as sent, as JSON (``"\"12\""``)."""
    kind: str
    path: str
    """RFC 6901 pointer into the proposal (``/args/amount``)."""
    to: str
    """The value the tool received, as JSON (``"12"``)."""


class RecordedCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The check that refused a proposal (``failed_check`` of its answer; fields in JCS order)."""

    kind: str
    name: str | None


class MediationReceipt(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Where a proposal's tool came from and what the model saw of it (issue 22; fields in JCS
    order). The hashes are ``"sha256:" + hex(SHA-256(RFC 8785 JSON))`` of the declaration
    ``{name, description, input_schema}`` as configured and as the route's model saw it."""

    declared_by: str
    """``config`` (the operator's file), ``backend`` (registered through the API) or ``mcp``
    (registered with an MCP adapter: the upstream server's own declaration)."""
    dry_run_argument: bool = False
    """The model set the ``dry_run`` argument an ``offer_dry_run`` rule offered: it ran dry."""
    executed_by: str
    """The adapter kind that runs it: ``python``, ``http`` or ``mcp``."""
    fidelity: str
    """``pass_through`` (declared as configured), ``normalized`` (the route's rules changed it) or
    ``emulated`` (a ``replace`` rule's declaration, its arguments mapped onto the tool's)."""
    original_hash: str
    policy_state: str
    """``allowed``, ``hidden``, ``renamed``, ``replaced`` or ``wrapped`` (augmented, or a reason
    required)."""
    redacted: tuple[str, ...] = ()
    """The result keys the tool's ``redact_result`` took out of what the agent received."""
    rules: tuple[str, ...] = ()
    """The ids of the route's rules that changed the declaration, in config order."""
    visible_hash: str
    visible_name: str | None = None
    """The name the model called it by, when a rule renamed it."""


class AuditRef(msgspec.Struct, frozen=True):
    """Where a record landed in the chain: returned by ``append`` and by ``head``."""

    seq: int
    hash: str


class LedgerEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One proposal's outcome as the pipeline hands it over: args and result NOT yet redacted.

    ``sensitive_keys`` names object keys (matched case-insensitively, at any depth of ``args`` and
    ``result``) whose values are replaced by ``"[REDACTED]"`` before anything is hashed or stored.
    """

    time: str
    """RFC 3339 UTC with milliseconds, e.g. ``2026-11-22T10:00:00.000Z``."""
    trace_id: str
    proposal_id: str
    route: str
    tenant: str
    service_account: str
    tool: str
    config_hash: str
    args: Any
    decision: str
    """``approved`` or ``rejected``."""
    decision_us: int
    session_id: str | None = None
    tool_id: str | None = None
    result: Any | None = None
    sensitive_keys: frozenset[str] = frozenset()
    category: str | None = None
    code: str | None = None
    reason: str | None = None
    remediation: str | None = None
    """What the agent was told to do next (rejections and failures)."""
    errors: tuple[RecordedError, ...] = ()
    """The located problems of a schema rejection."""
    validators: tuple[ValidatorVerdict, ...] = ()
    execution_status: str | None = None
    """``succeeded``, ``failed``, ``dry_run`` or ``None`` (not executed)."""
    attempts: int = 0
    dry_run: bool = False
    replayed: bool = False
    execution_us: int | None = None
    idempotency_key_hash: str | None = None
    failed_check: RecordedCheck | None = None
    """Which check refused (rejections and failed executions)."""
    preconditions: tuple[str, ...] = ()
    """The preconditions the proposal listed."""
    proposal_reason: str | None = None
    """The ``reason`` the proposal gave (``reason`` is the broker's, for a refusal)."""
    started_at: str | None = None
    ended_at: str | None = None
    """When the execution started and ended (RFC 3339 UTC), for executed proposals."""
    attempt_outcomes: tuple[str, ...] = ()
    """How each call to the backend ended, in order: ``succeeded`` or the failure's code."""
    receipt: MediationReceipt | None = None
    """What the route's model was offered of the tool (``broker.mediation``)."""
    repairs: tuple[RecordedRepair, ...] = ()
    """What argument repair changed in ``args`` (which holds the repaired arguments)."""
    cache: str | None = None
    """Tools with ``read_cache``: ``hit`` (answered from the cache, the backend not called),
    ``miss`` (called, not cached) or ``stored`` (called, and its result cached)."""
    phase: str | None = None
    """The call's lifecycle phase, where its front door knows it (``broker.phases``)."""


class LedgerRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The sealed, stored form of one entry: redacted, content-hashed and chained.

    ``hash`` is ``"sha256:" + hex(SHA-256(RFC 8785 JSON of this record without "hash"))``, so it
    covers ``seq`` and ``prev_hash``; ``args_hash``/``result_hash`` are the same digest of the
    redacted values, so verifying never needs a secret.
    """

    seq: int
    prev_hash: str
    hash: str
    time: str
    trace_id: str
    session_id: str | None
    proposal_id: str
    route: str
    tenant: str
    service_account: str
    tool: str
    tool_id: str | None
    config_hash: str
    args_redacted: Any
    result_redacted: Any
    args_hash: str
    result_hash: str | None
    decision: str
    category: str | None
    code: str | None
    reason: str | None
    validators: tuple[ValidatorVerdict, ...]
    remediation: str | None = None
    errors: tuple[RecordedError, ...] = ()
    execution_status: str | None
    attempts: int
    dry_run: bool
    replayed: bool
    decision_us: int
    execution_us: int | None
    idempotency_key_hash: str | None
    # Newer fields: absent from older records (and from records that have nothing to put there).
    failed_check: RecordedCheck | None = None
    preconditions: tuple[str, ...] = ()
    proposal_reason: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    attempt_outcomes: tuple[str, ...] = ()
    receipt: MediationReceipt | None = None
    repairs: tuple[RecordedRepair, ...] = ()
    cache: str | None = None
    phase: str | None = None

    @property
    def ref(self) -> AuditRef:
        return AuditRef(self.seq, self.hash)
