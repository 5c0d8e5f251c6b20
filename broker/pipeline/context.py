"""One proposal on its way through the chain: what every step reads, and what each one learns.

The pipeline builds a :class:`Decided` per proposal and hands it to each step in turn; a step
that learns something a later step needs (the tool, the key, the admission) sets it here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import msgspec

from broker.ledger.model import MediationReceipt, ValidatorVerdict
from broker.model import Principal, ProposalRequest
from broker.plugins import AdapterContext
from broker.stores import Admitted, ClaimRequest, Limited, RateHit, StoredResponse
from broker.tools.runtime import ToolRuntime
from broker.validators import Rejection
from broker.validators.repair import Repair

__all__ = ["Decided", "Meta", "adapter_context", "trace_id_for"]

# W3C trace context: version ff and all-zero trace or parent ids are invalid and ignored.
_TRACEPARENT = re.compile(
    r"^(?!ff)[0-9a-f]{2}-(?!0{32})([0-9a-f]{32})-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$"
)
_TRACE_ID = re.compile(r"^[\x21-\x7e]{1,128}$")


class Meta(msgspec.Struct, frozen=True):
    """What every answer to one proposal repeats (a struct: a named tuple's constructor is
    Python code, and a few are built per proposal)."""

    proposal_id: str
    trace_id: str
    tool: str | None
    dry_run: bool


class Decided(msgspec.Struct):
    """The validator chain's verdict on one proposal, before anything executes.

    Exactly one of ``rejection``, ``replay`` and ``admitted`` is set once the chain has run. A
    struct rather than a dataclass: one is built per proposal, and a struct's constructor is a
    third of the cost.
    """

    meta: Meta
    principal: Principal
    request: ProposalRequest
    tenant: str = ""
    route: str = ""
    header_key: str | None = None
    """The ``Idempotency-Key`` header, for the key step to reconcile with the body's."""
    tool: ToolRuntime | None = None
    """Set by ``tool_authz``: the tool as this tenant's calls see it."""
    key: str | None = None
    claim: ClaimRequest | None = None
    """Set by ``idempotency_key`` when the proposal has a key: what admission claims."""
    policy_hits: tuple[RateHit, ...] = ()
    """Set by ``policy_rules``: loop thresholds admission counts with the proposal's own hits."""
    policy_refusals: dict[str, Callable[[Limited], Rejection]] | None = None
    """Set with ``policy_hits``: the refusal for each of them, should admission find it full."""
    rejection: Rejection | None = None
    replay: StoredResponse | None = None
    admitted: Admitted | None = None
    approval_reason: str | None = None
    """Set by ``broker.approvals.gate.require_approval``: answer 202 and wait for a person."""
    approval_expires_s: float | None = None
    verdicts: list[ValidatorVerdict] = msgspec.field(default_factory=list)
    """``(validator, verdict, elapsed µs)`` in chain order, for the ledger."""
    started: float = 0.0
    """``time.perf_counter()`` when the chain started."""
    mark: float = 0.0
    """When the step being timed started."""
    receipt: MediationReceipt | None = None
    """Set by ``mediation``: what the route's model was offered of the tool."""
    via: str | None = None
    """The catalog mode (``gateway``, ``proxy``) whose ``tool_execute`` made the proposal."""
    repairs: tuple[Repair, ...] = ()
    """Set by ``schema`` on routes with ``argument_repair``: the coercions that made the
    arguments valid (``request.args`` holds the repaired ones)."""
    phase: str = "execution"
    """The call's lifecycle phase, as its front door derived it (``broker.phases``)."""

    def approved(self) -> tuple[ToolRuntime, Admitted]:
        """The tool and admission of an approved proposal (``decide`` sets both together)."""
        if self.tool is None or self.admitted is None:
            raise RuntimeError("the proposal was not admitted")
        return self.tool, self.admitted

    def record(self, step: str, verdict: str) -> None:
        """Keep ``step``'s verdict and how long it took since the previous step, for the ledger."""
        now = time.perf_counter()
        self.verdicts.append(ValidatorVerdict(step, verdict, int((now - self.mark) * 1_000_000)))
        self.mark = now

    def passed(self, step: str) -> None:
        self.record(step, "pass")

    def reject(self, step: str, rejection: Rejection) -> Decided:
        self.rejection = rejection
        self.record(step, f"reject:{rejection.code.value}")
        return self

    def replayed(self, step: str, response: StoredResponse) -> Decided:
        self.replay = response
        self.record(step, "replay")
        return self


def trace_id_for(body_trace_id: str | None, traceparent: str | None, ulid: str) -> str:
    """The caller's trace id if it is usable, else the W3C parent's, else the proposal's own."""
    if body_trace_id and _TRACE_ID.fullmatch(body_trace_id):
        return body_trace_id
    if traceparent:
        match = _TRACEPARENT.fullmatch(traceparent.strip())
        if match:
            return match.group(1)
    return f"trc_{ulid}"  # the proposal's own id: one trace, one proposal


def adapter_context(decided: Decided, tool: ToolRuntime, traceparent: str | None) -> AdapterContext:
    """What the adapter is told of the proposal it runs (``broker.plugins``)."""
    return AdapterContext(
        tenant=decided.tenant,
        route=decided.route,
        tool=tool.name,
        proposal_id=decided.meta.proposal_id,
        trace_id=decided.meta.trace_id,
        idempotency_key=decided.key,
        deadline=time.monotonic() + tool.config.timeout_s,
        credentials=tool.credentials,
        traceparent=traceparent,
    )
