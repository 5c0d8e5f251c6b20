"""Pending approvals: opened by the pipeline, decided by approvers, expired by the broker.

Every transition is a compare-and-set in the store (``swap_approval``), so each is taken once
however many processes race: ``pending → approved | denied | expired`` by whoever decides or
expires first, ``approved → executing`` by the one process that then executes, ``executing →
executed`` with the final answer. Budgets held since admission are given back once (by the
process that took ``denied`` or ``expired``) and kept once the action has executed.

The proposal's idempotency key keeps the 202 it answered; a retry reads the approval to learn
the final answer (:meth:`Approvals.replay`), so the key's own record never needs rewriting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

import msgspec

from broker.approvals.execution import decided_for
from broker.approvals.metrics import ApprovalMetrics
from broker.approvals.model import ApprovalRecord, action_digest, may_decide
from broker.approvals.records import ledger_note, pending_answer, refusal
from broker.logs import RateLimitedLog
from broker.model import Principal
from broker.pipeline.context import Decided
from broker.responses import Answer, replayed
from broker.stores import Admitted, DecisionRecord, Settlement, StoredResponse, Ticket
from broker.stores.approvals import ApprovalRow, ApprovalStore
from broker.taxonomy import Code, StoreUnavailableError

if TYPE_CHECKING:
    from broker.approvals.webhook import ApprovalWebhook
    from broker.config import BrokerConfig
    from broker.ledger import LedgerSink
    from broker.stores import AdmissionStore
    from broker.tools.runtime import Registry

__all__ = ["Approvals", "Refusal"]

log = logging.getLogger("broker.approvals")
_sweep_faults = RateLimitedLog(log)  # a store down says so once a minute, not every sweep
_SWEEP_SKIPPED = "approval sweep skipped: store unavailable"

_records = msgspec.json.Decoder(ApprovalRecord)
_encoder = msgspec.json.Encoder()
_pending_id = msgspec.json.Decoder(dict[str, object])
DEFAULT_EXPIRES_S = 3600.0
ORPHAN_AFTER_S = 5.0
"""How long an approved action may wait for the approving process to execute it before any
process's sweeper does (the approving process normally takes milliseconds)."""


class Refusal(msgspec.Struct, frozen=True):
    """Why an approver's call changed nothing."""

    code: Code
    detail: str
    pointer: str | None = None


EntryNote = Callable[[Decided, Answer, int], Awaitable[object]]
"""Records a proposal's ledger entry (``LedgerRecorder.record``)."""

Executor = Callable[[Decided], Awaitable[Answer]]
"""Runs an approved proposal (preconditions again, then the adapter), records and settles it."""


class Approvals:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        registry: Registry,
        store: AdmissionStore,
        ledger: LedgerSink | None,
        metrics: ApprovalMetrics,
        config_hash: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._registry = registry
        self._store = store
        self._approvals: ApprovalStore = store  # type: ignore[assignment]
        self._ledger = ledger
        self._metrics = metrics
        self._config_hash = config_hash
        self._clock = clock
        self._ttl_s = config.service.idempotency_ttl_s
        self.executor: Executor | None = None
        """Set by the pipeline that owns this service."""
        self.webhook: ApprovalWebhook | None = None
        """Told of each decision this process took, once stored (``[approvals.webhook]``)."""

    # -- opening ----------------------------------------------------------------------------------

    async def hold(self, decided: Decided, entry_note: EntryNote, decision_us: int) -> Answer:
        """Answer an admitted proposal 202 and keep what admission took until someone decides;
        ``entry_note(decided, answer, decision_us)`` records the proposal's entry first."""
        tool, admitted = decided.approved()
        now = self._clock()
        expires_s = decided.approval_expires_s or (
            tool.config.approval.expires_s if tool.config.approval else DEFAULT_EXPIRES_S
        )
        # Each value read once into a local (several are written twice: record and digest).
        request, key, meta = decided.request, decided.key, decided.meta
        proposal_id, tenant, route = meta.proposal_id, decided.tenant, decided.route
        name, args = tool.name, request.args
        # At most fifteen keywords: past that CPython builds a dict for the call (which msgspec
        # then reads back), several times what the call costs; the rest are set after.
        record = ApprovalRecord(
            # The proposal's own ULID: one proposal waits for at most one approval.
            id="apr_" + proposal_id.removeprefix("prp_"),
            status="pending",
            proposal_id=proposal_id,
            trace_id=meta.trace_id,
            tenant=tenant,
            route=route,
            service_account=decided.principal.service_account,
            tool=name,
            args=args,
            idempotency_key=key,
            reason=decided.approval_reason or "approval required",
            digest=action_digest(
                tenant=tenant, route=route, tool=name, args=args, idempotency_key=key
            ),
            requested_at=now,
            expires_at=now + expires_s,
            charges=admitted.ticket.charges,
        )
        record.session_id = request.session_id
        record.phase = decided.phase
        record.preconditions = request.preconditions  # as args: encoded below, never changed
        record.proposal_reason = request.reason
        answer = pending_answer(record)
        # As every proposal's tail: the ledger, then the store.
        await entry_note(decided, answer, decision_us)
        # One store step: the approval is created and the key completes with the 202 (the
        # charges stay taken, held until a decision); one round trip on a standalone Redis.
        stored = StoredResponse(202, answer.body)
        try:
            await self._approvals.open_approval(
                self._row(record),
                admitted.ticket,
                response=stored,
                record=DecisionRecord(
                    proposal_id=proposal_id, tenant=tenant, route=route, response=stored
                ),
                ttl_s=self._ttl_s,
                now=now,
            )
        except StoreUnavailableError:
            await self._settle(decided, admitted, Settlement.TRANSIENT_FAILURE, answer)
            raise
        self._metrics.opened()
        return answer

    # -- reading ----------------------------------------------------------------------------------

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        row = await self._approvals.get_approval(approval_id)
        if row is None:
            return None
        return await self._expire_if_due(_records.decode(row.body))

    async def find(self, status: str | None) -> list[ApprovalRecord]:
        found = []
        for row in await self._approvals.list_approvals(None):
            record = await self._expire_if_due(_records.decode(row.body))
            if status is None or record.public_status == status:
                found.append(record)
        return found

    async def answer_for(self, stored: StoredResponse) -> StoredResponse:
        """A proposal's stored 202, or the final answer once its approval was decided."""
        record = await self._record_of(stored)
        if record is None:
            return stored
        if record.final is not None:
            return record.final
        answer = pending_answer(record)
        return StoredResponse(answer.status, answer.body)

    async def replay(self, stored: StoredResponse) -> Answer:
        """A retry of a pending proposal: the same 202 (current status), or the final answer."""
        record = await self._record_of(stored)
        if record is None or record.final is None:
            if record is None:
                return Answer(stored.status, stored.body, "application/json", {})
            return pending_answer(record, replay=True)
        return replayed(record.final.status, record.final.body)

    async def _record_of(self, stored: StoredResponse) -> ApprovalRecord | None:
        try:
            body = _pending_id.decode(stored.body)
        except msgspec.DecodeError:
            return None
        approval = body.get("approval")
        if not isinstance(approval, dict) or not isinstance(approval.get("id"), str):
            return None
        return await self.get(approval["id"])

    # -- deciding ---------------------------------------------------------------------------------

    async def decide(
        self,
        principal: Principal,
        approval_id: str,
        verdict: Literal["approve", "deny"],
        *,
        digest: str | None,
        comment: str | None,
    ) -> ApprovalRecord | Refusal:
        if principal.route is not None:
            return Refusal(
                Code.FORBIDDEN, "a route token never approves (no agent approves itself)"
            )
        record = await self.get(approval_id)
        if record is None or not may_decide(principal, record.tenant):
            return Refusal(Code.NOT_FOUND, f"no approval {approval_id!r} for this approver")
        if verdict == "approve" and digest != record.digest:
            return Refusal(
                Code.APPROVAL_CONFLICT,
                "the digest is not the one of this approval: it is bound to another action",
                "/digest",
            )
        wanted = "approved" if verdict == "approve" else "denied"
        while True:
            if record.public_status == wanted:
                break  # the same decision again: a no-op answering the same state
            if record.status != "pending":
                return Refusal(
                    Code.APPROVAL_CONFLICT,
                    f"the approval is {record.public_status} already; it cannot be {wanted}",
                )
            decided = msgspec.structs.replace(
                record,
                status=wanted,
                decided_at=self._clock(),
                decided_by=principal.service_account,
                comment=comment,
            )
            if wanted == "denied":
                reason = f"denied by {principal.service_account}: {comment}"
                final = refusal(
                    record,
                    Code.APPROVAL_DENIED,
                    reason,
                    "REPLAN: a person denied this action; tell the user and do not retry it",
                )
                decided.final = StoredResponse(final.status, final.body)
            if await self._approvals.swap_approval(record.id, "pending", self._row(decided)):
                await self._decided(decided)
                record = decided
                break
            found = await self.get(approval_id)  # someone else decided or expired it first
            if found is None:
                return Refusal(Code.NOT_FOUND, f"no approval {approval_id!r}")
            record = found
        if record.status == "approved":
            record = await self.execute_if_approved(record)
        return record

    async def _decided(self, record: ApprovalRecord) -> None:
        outcome = "approved" if record.status == "approved" else "denied"
        self._metrics.decided(
            outcome, (record.decided_at or record.requested_at) - record.requested_at
        )
        await ledger_note(
            self._ledger,
            record,
            decision="approval_approved" if outcome == "approved" else "approval_denied",
            by=record.decided_by or "",
            reason=record.comment,
            config_hash=self._config_hash,
            sensitive=self._sensitive(record.tool),
            code=None if outcome == "approved" else Code.APPROVAL_DENIED.value,
            category=None if outcome == "approved" else "AUTHZ",
        )
        if outcome == "denied":
            await self._give_back(record)
            self._tell(record)  # an approval is told once executed (with its outcome)

    # -- executing --------------------------------------------------------------------------------

    async def execute_if_approved(self, record: ApprovalRecord) -> ApprovalRecord:
        """Execute an approved action, in the one process that takes ``approved → executing``."""
        running = msgspec.structs.replace(record, status="executing")
        if not await self._approvals.swap_approval(record.id, "approved", self._row(running)):
            return await self.get(record.id) or record
        if self.executor is None:
            raise RuntimeError("Approvals.executor is not set")
        answer = await self.executor(decided_for(running, self._registry))
        done = msgspec.structs.replace(
            running, status="executed", final=StoredResponse(answer.status, answer.body)
        )
        await self._approvals.swap_approval(record.id, "executing", self._row(done))
        self._tell(done)
        return done

    # -- expiring ---------------------------------------------------------------------------------

    async def _expire_if_due(self, record: ApprovalRecord) -> ApprovalRecord:
        if record.status != "pending" or record.expires_at > self._clock():
            return record
        reason = f"nobody approved {record.tool} before {record.id} expired"
        final = refusal(
            record,
            Code.APPROVAL_EXPIRED,
            reason,
            "REPLAN: the approval expired; ask the user whether to propose it again",
        )
        expired = msgspec.structs.replace(
            record,
            status="expired",
            decided_at=self._clock(),
            decided_by="broker",
            final=StoredResponse(final.status, final.body),
        )
        if not await self._approvals.swap_approval(record.id, "pending", self._row(expired)):
            row = await self._approvals.get_approval(record.id)
            return _records.decode(row.body) if row is not None else record
        self._metrics.decided("expired", expired.expires_at - record.requested_at)
        await ledger_note(
            self._ledger,
            expired,
            decision="approval_expired",
            by="broker",
            reason=reason,
            config_hash=self._config_hash,
            sensitive=self._sensitive(record.tool),
            code=Code.APPROVAL_EXPIRED.value,
            category="AUTHZ",
        )
        await self._give_back(expired)
        self._tell(expired)
        return expired

    async def sweep(self) -> int:
        """Expire what is due, and set the pending gauge from the store (shared by processes).

        An approval left ``approved`` for longer than :data:`ORPHAN_AFTER_S` lost the process
        that approved it before it could execute: this process executes it instead (the
        ``approved → executing`` compare-and-set still lets exactly one do so)."""
        pending = 0
        for row in await self._approvals.list_approvals("pending"):
            record = await self._expire_if_due(_records.decode(row.body))
            pending += record.status == "pending"
        self._metrics.pending(pending)
        now = self._clock()
        for row in await self._approvals.list_approvals("approved"):
            record = _records.decode(row.body)
            if (record.decided_at or now) + ORPHAN_AFTER_S <= now:
                await self.execute_if_approved(record)
        return pending

    async def run_sweeper(self, interval_s: float) -> None:
        """Sweep every ``interval_s`` until cancelled; a failed sweep is retried on the next."""
        while True:
            try:
                await self.sweep()
            except StoreUnavailableError:
                _sweep_faults.warning(_SWEEP_SKIPPED)
            except Exception:  # the loop must outlive one bad row; the next sweep retries
                log.exception("approval sweep failed")
            else:
                _sweep_faults.recovered(_SWEEP_SKIPPED)
            await asyncio.sleep(interval_s)

    # -- state ------------------------------------------------------------------------------------

    async def _give_back(self, record: ApprovalRecord) -> None:
        """Refund the held charges; the proposal's answer becomes the final one."""
        final = record.final
        if final is None:
            return
        ticket = Ticket(tenant=record.tenant, claim=None, owner=None, charges=record.charges)
        decision = DecisionRecord(
            proposal_id=record.proposal_id, tenant=record.tenant, route=record.route, response=final
        )
        try:
            await self._store.settle(
                ticket,
                Settlement.DEFINITE_FAILURE,
                response=final,
                record=decision,
                ttl_s=self._ttl_s,
                now=self._clock(),
            )
        except StoreUnavailableError:
            log.error("could not give back the budgets held for %s: store unavailable", record.id)

    async def _settle(
        self, decided: Decided, admitted: Admitted, settlement: Settlement, answer: Answer
    ) -> None:
        record = DecisionRecord(
            proposal_id=decided.meta.proposal_id,
            tenant=decided.tenant,
            route=decided.route,
            response=StoredResponse(answer.status, answer.body),
        )
        await self._store.settle(
            admitted.ticket,
            settlement,
            response=record.response,
            record=record,
            ttl_s=self._ttl_s,
            now=self._clock(),
        )

    def _tell(self, record: ApprovalRecord) -> None:
        if self.webhook is not None:
            self.webhook.decided(record)

    def _row(self, record: ApprovalRecord) -> ApprovalRow:
        return ApprovalRow(
            id=record.id,
            status=record.status,
            tenant=record.tenant,
            created_at=record.requested_at,
            body=_encoder.encode(record),
        )

    def _sensitive(self, tool: str) -> frozenset[str]:
        found = self._registry.tools.get(tool)
        return found.sensitive if found is not None else frozenset()
