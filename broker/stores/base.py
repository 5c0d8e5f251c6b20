"""The store protocols: one atomic admission per proposal, one settlement after it; and the
tool catalog, which registrations write and every process mirrors.

Why one call: check-then-act across two round trips is a race, so the idempotency claim, every
budget reservation and every rate-limit hit of a proposal are decided together, all or nothing
(in Redis, one Lua script). Settling (store the response, keep or refund the budget, release the
key) is the second and last call on the approved path.

A third call sits between them: ``dispatch`` marks the claim as sent, durably, just before the
adapter is called (after every check), so that recovery can tell a call that never left from
one that may have reached its backend.

Idempotency record states::

    (absent) --admit--> in_progress(owner, lease) --settle(succeeded|definite)--> completed
                              |         \\--settle(transient)--> (absent)
                              |          \\--settle(unknown)--> outcome_unknown
                              \\--lease expired (found by the completer, or a retry):
                                  never dispatched -> (absent), its budget charges refunded;
                                  dispatched, its ledger record final -> settled from it;
                                  dispatched, idempotent tool -> re-claimable;
                                  dispatched, otherwise -> outcome_unknown

    outcome_unknown --resolve(succeeded|failed)--> completed
                    --resolve(not_executed)------> (absent)

An ``outcome_unknown`` record never expires: only a resolution (``broker.resolution``) ends it,
since a key that expired would let the same call run again blindly.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Protocol

import msgspec

from broker.stores.expiring import ExpiringValues

__all__ = [
    "UNKNOWN_HOLD_S",
    "Admission",
    "AdmissionStore",
    "AdmitResult",
    "Admitted",
    "BudgetCharge",
    "ClaimCompleter",
    "ClaimRequest",
    "Conflict",
    "DecisionRecord",
    "Limited",
    "OutcomeSource",
    "RateHit",
    "RecordedOutcome",
    "RegisteredTool",
    "Replay",
    "Resolution",
    "ResolveVerdict",
    "Settlement",
    "Store",
    "StoredResponse",
    "StuckClaims",
    "Ticket",
    "ToolCatalogStore",
    "ToolSnapshot",
    "ToolWrite",
    "rate_retry_after",
]

UNKNOWN_HOLD_S = 86_400
"""How long an abandoned claim of a non-idempotent tool stays ``outcome_unknown`` once its lease
is seen to have expired: it may have reached the backend, so it is never run blindly again."""


def rate_retry_after(oldest: float, window_s: float, now: float) -> float:
    """Seconds until the oldest counted call leaves a full sliding window.

    Bounded by the window: with several processes, ``oldest`` was stamped by another process's
    clock and can lie a little ahead of this one's ``now``; a wait longer than the window is
    never needed.
    """
    return min(max(oldest + window_s - now, 0.001), window_s)


class ClaimRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Claim an idempotency key, scoped to (tenant, route)."""

    tenant: str
    route: str
    key: str
    fingerprint: str
    """Canonical hash of tool and args: equal args replay, different args conflict."""
    lease_s: float
    """How long the claim holds before it is presumed abandoned."""
    idempotent: bool
    """An abandoned claim of an idempotent tool may be re-claimed; otherwise its outcome is unknown."""


class BudgetCharge(msgspec.Struct, frozen=True, kw_only=True):
    """Reserve ``amount`` (integer micro-units) of a budget in the current fixed window."""

    name: str
    scope: str
    amount: int
    limit: int
    window_s: int


class RateHit(msgspec.Struct, frozen=True, kw_only=True):
    """Count one call against a sliding-log rate limit."""

    name: str
    scope: str
    limit: int
    window_s: float


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    tenant: str
    claim: ClaimRequest | None
    charges: tuple[BudgetCharge, ...] = ()
    hits: tuple[RateHit, ...] = ()


class StoredResponse(msgspec.Struct, frozen=True):
    """A response kept under its idempotency key for replay."""

    status: int
    body: bytes


class Ticket(msgspec.Struct, frozen=True, kw_only=True):
    """What was taken by an admission, so exactly that can be settled later."""

    tenant: str
    claim: ClaimRequest | None
    owner: str | None
    charges: tuple[tuple[BudgetCharge, int], ...]
    """Each charge with the window it was taken in (refunds go to that window)."""
    used: tuple[int, ...] = ()
    """Each budget's units used in its window right after this charge (for the remaining
    gauge); empty for a dry run."""


class Admitted(msgspec.Struct, frozen=True, tag="admitted"):
    ticket: Ticket


class Replay(msgspec.Struct, frozen=True, tag="replay"):
    response: StoredResponse


class Conflict(msgspec.Struct, frozen=True, tag="conflict"):
    kind: Literal["reused", "in_progress", "outcome_unknown"]
    retry_after_s: float | None = None


class Limited(msgspec.Struct, frozen=True, tag="limited"):
    kind: Literal["budget", "rate"]
    name: str
    retry_after_s: float


AdmitResult = Admitted | Replay | Conflict | Limited


class Settlement(StrEnum):
    """How an admitted proposal ended, which decides what happens to its key and budget."""

    SUCCEEDED = "succeeded"
    """Keep the charges; store the response for replay."""
    DEFINITE_FAILURE = "definite_failure"
    """Refund the charges; store the response (a definite failure replays too)."""
    TRANSIENT_FAILURE = "transient_failure"
    """Refund the charges; release the key so a retry runs again."""
    UNKNOWN = "unknown"
    """The call may have reached the backend: keep the charges, mark the key outcome_unknown."""


class Resolution(StrEnum):
    """What an operator or the tool's backend found out about a call of unknown outcome."""

    SUCCEEDED = "succeeded"
    """It ran and succeeded: the key completes and replays the given result."""
    FAILED = "failed"
    """It ran and failed: the key completes and replays the failure."""
    NOT_EXECUTED = "not_executed"
    """It never reached the backend: the key is released, so a retry executes."""


ResolveVerdict = Literal["resolved", "absent", "reused", "in_progress", "settled"]
"""What ``resolve`` found: the key was of unknown outcome and is now resolved; or there is no
such key, it was claimed with other tool/args, its call is still running, or it has a known
outcome already (then nothing changed)."""


class DecisionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one proposal, kept for ``GET /v1/proposals/{id}``."""

    proposal_id: str
    tenant: str
    route: str
    response: StoredResponse


class RegisteredTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool registered through the API, as the store keeps it."""

    name: str
    spec: bytes
    """The registration as accepted (JSON); the store does not interpret it."""
    signing_secret: str
    """The key the broker signs this tool's requests with; never returned by the API again."""
    updated_at: float
    updated_by: str


class ToolWrite(msgspec.Struct, frozen=True, kw_only=True):
    """What a registration write did."""

    version: int
    """The catalog version after the write (every write bumps it)."""
    created: bool
    secret_kept: bool
    """The tool existed and kept its earlier signing secret (the one passed in was dropped)."""


class ToolSnapshot(msgspec.Struct, frozen=True):
    """Every registered tool at one catalog version, read atomically."""

    version: int
    tools: tuple[RegisteredTool, ...]


class RecordedOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a proposal ended, as its final ledger record says: what its key is settled with when
    the process that called the backend died between writing that record and settling."""

    settlement: Settlement
    response: StoredResponse
    """The answer its key replays (rebuilt from the record; results as the ledger keeps them)."""
    ttl_s: int
    """How long the settled key replays it (the idempotency TTL)."""


class OutcomeSource(Protocol):
    """Where a store looks up how a dispatched call ended when its claim outlived its process:
    the ledger (``broker.recovery.LedgerOutcomes``)."""

    async def outcome_of(self, proposal_id: str) -> RecordedOutcome | None:
        """The proposal's recorded outcome; ``None`` when there is no final record, or when it
        says the outcome is unknown (then the claim ends ``outcome_unknown``, as without one)."""
        ...


class AdmissionStore(Protocol):
    """What the validator chain and its settlement need: idempotency, budgets, rate limits and
    decision records, each call atomic.

    The pipeline depends on this alone, so a proposal's path cannot reach the tool catalog.
    """

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        """Claim, reserve and count together, or take nothing; a dry run only evaluates."""
        ...

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        """What the key would answer (replay or conflict), without claiming it."""
        ...

    async def dispatch(self, ticket: Ticket, *, proposal_id: str, now: float) -> bool:
        """Mark the ticket's claim as sent, durably, before its adapter is called.

        ``False`` when the claim is no longer ours (its lease lapsed and it was taken over or
        recovered): the call must then not be sent. A ticket without a claim is ``True`` and
        writes nothing. Once marked, a claim that outlives its process may have reached the
        backend; unmarked, it never did, and recovery releases it (its budget charges refunded).
        """
        ...

    async def settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        """Finish an admission, once per ticket; ``False`` if the claim was no longer ours.

        A failure refunds the ticket's own charges even then: they were taken for this call.
        """
        ...

    async def resolve(
        self,
        claim: ClaimRequest,
        resolution: Resolution,
        *,
        response: StoredResponse | None,
        ttl_s: int,
        now: float,
    ) -> ResolveVerdict:
        """End an ``outcome_unknown`` key (matched on ``claim``'s key and fingerprint).

        ``succeeded``/``failed`` complete it with ``response`` (replayed for ``ttl_s``);
        ``not_executed`` releases it. Any other state is left untouched. Budget charges stay
        taken: they were kept when the outcome became unknown, and a resolution does not know
        them.
        """
        ...

    async def unknown_keys(self) -> int:
        """How many keys are ``outcome_unknown`` now (the alerting gauge; not on the hot path).

        A claim abandoned mid-call counts once its expired lease was seen (by a retry, a
        look-up or a resolution)."""
        ...

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        """Keep the answer to a proposal that was never admitted (rejections, dry runs)."""
        ...

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None: ...

    async def ping(self) -> None:
        """Raise :class:`~broker.taxonomy.StoreUnavailableError` when state is unreachable."""
        ...

    async def close(self) -> None: ...


class ToolCatalogStore(Protocol):
    """Tools registered through the API, under a catalog version every write bumps.

    Registered tools are few and read rarely: each process keeps them in memory and re-reads
    them when the catalog version moves (see ``broker.tools.sync``), never per proposal.
    """

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        """Register or replace ``tool.name`` and bump the catalog version.

        With ``keep_secret`` an existing tool keeps its signing secret; a new one (or any tool,
        without it) takes ``tool.signing_secret``.
        """
        ...

    async def get_tool(self, name: str) -> RegisteredTool | None: ...

    async def delete_tool(self, name: str) -> int | None:
        """Remove a registered tool; the new catalog version, or ``None`` if there was none."""
        ...

    async def list_tools(self) -> ToolSnapshot: ...

    async def tools_version(self) -> int:
        """The catalog version: 0 before the first registration, then bumped by every write."""
        ...

    async def wait_tools_changed(self, timeout_s: float) -> None:
        """Return when the catalog may have changed (pub/sub), or after ``timeout_s``."""
        ...


class StuckClaims(msgspec.Struct, frozen=True):
    """What one pass of :meth:`ClaimCompleter.complete_stuck` did to claims past their lease."""

    released: int = 0
    """Claims given back: never dispatched (their budget charges refunded), or of an idempotent
    tool (running it again is harmless), or recorded as a transient failure: a retry runs them."""
    unknown: int = 0
    """Dispatched claims of other tools, now ``outcome_unknown``: the call may have reached the
    backend, and no final ledger record says how it ended."""
    settled: int = 0
    """Dispatched claims settled from their proposal's final ledger record: a retry replays."""


class ClaimCompleter(Protocol):
    """Drives claims whose lease lapsed to their next state without waiting for a retry of the
    key (``broker.completer`` calls it periodically): the very transition a later admit or
    lookup of that key would make, made now, so the stuck claim shows in metrics and alerts."""

    async def complete_stuck(self, *, now: float, limit: int) -> StuckClaims:
        """Complete at most ``limit`` claims in progress whose lease ended at or before ``now``."""
        ...

    def recover_from(self, outcomes: OutcomeSource | None) -> None:
        """Where a dispatched claim whose lease lapsed is looked up before it is completed
        (the ledger), by the completer and by a retry alike; ``None``: nowhere."""
        ...


class Store(AdmissionStore, ToolCatalogStore, ClaimCompleter, ExpiringValues, Protocol):
    """Both halves in one backend, as every store implements them: the app opens one store and
    hands the pipeline its admission side and the catalog its tool side."""
