"""The pipeline's answers that execute nothing: rejections, replays, holds for a person's
approval, refusals of requests the chain cannot even start on, the decision a rejection leaves
behind, and the decision read.

:class:`UnexecutedAnswers` is a base class of :class:`~broker.pipeline.orchestrator.Pipeline`
rather than an object it holds, so that answering a rejection or a replay is one method call of
the pipeline, as executing is (no hop through another object per proposal); ``Pipeline`` sets
the attributes it declares.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from broker.ids import new_ulid
from broker.model import AuditInfo, FieldError, Principal, ProposalRequest
from broker.pipeline.answers import decision_record, note_repairs, problem, refusal_remediation
from broker.pipeline.context import Decided, Meta, trace_id_for
from broker.responses import Answer, render, replayed
from broker.taxonomy import CODE_STATUS, Code, StoreUnavailableError
from broker.validators import STORE_UNAVAILABLE, Rejection

if TYPE_CHECKING:
    from broker.approvals.service import Approvals
    from broker.metrics import BrokerMetrics
    from broker.pipeline.recorder import LedgerRecorder
    from broker.stores import AdmissionStore, DecisionRecord, StoredResponse
    from broker.tracing import Tracing

__all__ = ["UnexecutedAnswers"]

log = logging.getLogger("broker.pipeline")


class UnexecutedAnswers:
    """The answers of :class:`~broker.pipeline.orchestrator.Pipeline` that execute nothing."""

    _store: AdmissionStore
    _tracing: Tracing
    _metrics: BrokerMetrics
    _ttl_s: int
    _recorder: LedgerRecorder
    approvals: Approvals

    async def refuse(
        self,
        principal: Principal | None,
        code: Code,
        reason: str,
        *,
        errors: Sequence[FieldError] = (),
        traceparent: str | None = None,
    ) -> Answer:
        """Answer a request the chain cannot even start on: no principal, or no proposal.

        It still gets ids and the full decision shape; an authenticated caller's malformed
        proposal is recorded in the ledger like any other rejection.
        """
        ulid = new_ulid()
        meta = Meta(f"prp_{ulid}", trace_id_for(None, traceparent, ulid), None, False)
        rejection = Rejection(
            code=code, reason=reason, remediation=refusal_remediation(code), errors=tuple(errors)
        )
        body = problem(meta, "rejected", code, reason, rejection.remediation, errors=list(errors))
        if principal is None:
            return self._traced_refusal(render(body), traceparent)
        decided = Decided(meta, principal, ProposalRequest(tool="", args={}), rejection=rejection)
        body.audit = await self._recorder.record(decided, body, 0)
        answer = render(body)
        await self._keep(answer, decided, body.audit)
        return self._traced_refusal(answer, traceparent)

    def _traced_refusal(self, answer: Answer, traceparent: str | None) -> Answer:
        """A refusal before any proposal is also a decision: it gets its span (a short one)."""
        if self._tracing.enabled:
            with self._tracing.proposal(None, "", traceparent) as span:
                span.answered(answer)
        return answer

    async def decision(self, proposal_id: str) -> DecisionRecord | None:
        """The answer to a proposal: settled ones from the store, the rest from the ledger."""
        found = await self._store.load_decision(proposal_id)
        if found is not None and found.response.status == 202:  # pending, or decided since
            response = await self.approvals.answer_for(found.response)
            return msgspec.structs.replace(found, response=response)
        if found is not None:
            return found
        return await self._recorder.decision(proposal_id)

    async def _replay(self, decided: Decided, earlier: StoredResponse, decision_us: int) -> Answer:
        if earlier.status == 202:  # a pending approval: the same 202, or its final answer
            answer = await self.approvals.replay(earlier)
            await self._recorder.record(decided, answer, decision_us, replay=True)
            return answer
        answer = replayed(earlier.status, earlier.body)
        await self._recorder.record(decided, answer, decision_us, replay=True)
        self._metrics.answered(
            decided.meta.tool, "replayed", None, None, decision_us / 1e6, decided.principal.tenant
        )
        return answer

    async def _hold(self, decided: Decided, decision_us: int) -> Answer:
        """202 pending_approval: admitted, held, recorded; nothing executes (broker.approvals)."""

        try:
            # The recorder's method itself, not a closure over it: one coroutine fewer to run.
            return await self.approvals.hold(decided, self._recorder.record, decision_us)
        except StoreUnavailableError:
            down = STORE_UNAVAILABLE
            refused = problem(decided.meta, "rejected", down.code, down.reason, down.remediation)
            return render(refused, retry_after_s=down.retry_after_s)

    async def _reject(self, decided: Decided, rejection: Rejection, decision_us: int) -> Answer:
        meta = decided.meta
        category = CODE_STATUS[rejection.code][0].value
        self._metrics.answered(
            meta.tool,
            "rejected",
            category,
            rejection.code.value,
            decision_us / 1e6,
            decided.principal.tenant,
        )
        body = problem(
            meta,
            "rejected",
            rejection.code,
            rejection.reason,
            rejection.remediation,
            errors=list(rejection.errors),
            failed_check=rejection.failed_check,
        )
        if decided.repairs:  # refused by a step after the schema's, its arguments repaired
            note_repairs(body, decided)
        body.audit = await self._recorder.record(decided, body, decision_us)
        answer = render(body, retry_after_s=rejection.retry_after_s)
        if rejection.code is not Code.STORE_UNAVAILABLE:
            await self._keep(answer, decided, body.audit)
        return answer

    async def _keep(self, answer: Answer, decided: Decided, audit: AuditInfo | None) -> None:
        """Remember a decision that took no state, for ``GET /v1/proposals/{id}``.

        A decision the ledger recorded is read back from there, so a rejection costs the store
        nothing (no write per refused proposal, however many arrive)."""
        if audit is not None:
            return
        try:
            await self._store.save_decision(decision_record(answer, decided), ttl_s=self._ttl_s)
        except StoreUnavailableError:
            log.warning("could not keep decision %s: store unavailable", decided.meta.proposal_id)
            self._metrics.store_errors.labels("save_decision").inc()
