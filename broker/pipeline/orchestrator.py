"""The only orchestrator: proposal → validator chain → execution → ledger → settlement → answer.

The chain (``broker.pipeline.chain``) decides; this module runs it and carries the outcome
through the tail every approved proposal shares: execute ▸ ledger ▸ settle. Every proposal,
whatever its outcome, gets one ledger record before it is answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from broker.approvals.execution import recheck
from broker.approvals.metrics import ApprovalMetrics
from broker.approvals.service import Approvals
from broker.config import BrokerConfig, config_hash
from broker.execution import ExecutionReport, execute, preview
from broker.execution.executor import Dispatch, dispatcher
from broker.execution.outcome_probe import ask_backend
from broker.execution.read_cache import ReadCache
from broker.faults import crash_point
from broker.ids import new_ulid
from broker.mediation.view import Mediator
from broker.metrics import BrokerMetrics
from broker.model import Principal, ProposalRequest
from broker.phases import Phase, proposal_phase
from broker.pipeline.agent_redaction import redact_answer
from broker.pipeline.answers import (
    answer_log,
    approved,
    decision_record,
    log_answer,
    note_repairs,
    outcome,
    problem,
)
from broker.pipeline.chain import build_chains
from broker.pipeline.context import Decided, Meta, adapter_context, trace_id_for
from broker.pipeline.recorder import LedgerRecorder
from broker.pipeline.unexecuted import UnexecutedAnswers
from broker.plugins import AdapterContext
from broker.responses import Answer, render
from broker.stores import AdmissionStore, Replay, Settlement
from broker.stores.expiring import ExpiringValues
from broker.taxonomy import StoreUnavailableError
from broker.tools.runtime import Registry, ToolRuntime
from broker.tracing import Tracing
from broker.validators import STORE_UNAVAILABLE
from broker.validators.limits import MICROS

if TYPE_CHECKING:
    from broker.ledger import LedgerSink

__all__ = ["Pipeline"]

log = logging.getLogger("broker.pipeline")


class Pipeline(UnexecutedAnswers):
    """Mediates proposals for one config: validates, executes, records, settles, answers.

    The answers that execute nothing (rejections, replays, holds for approval, refusals, the
    decision read) come from its base, :class:`~broker.pipeline.unexecuted.UnexecutedAnswers`.
    """

    def __init__(
        self,
        *,
        config: BrokerConfig,
        registry: Registry,
        store: AdmissionStore,
        ledger: LedgerSink | None = None,
        probe_ledger: bool = False,
        metrics: BrokerMetrics | None = None,
        tracing: Tracing | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        dry_run: bool = False,
    ) -> None:
        self._store = store
        self._tracing = tracing or Tracing(None)
        self._metrics = metrics or BrokerMetrics(registry.tools, budgets=config.budgets)
        self._clock = clock
        self._sleep = sleep
        self._ttl_s = config.service.idempotency_ttl_s
        self.mediator = Mediator(config, registry)
        """Each route's catalog rules: the chain and every catalog the app serves share it."""
        self._chains = build_chains(
            config,
            registry=registry,
            store=store,
            ledger=ledger,
            metrics=self._metrics,
            clock=clock,
            dry_run=dry_run or config.service.dry_run,
            mediator=self.mediator,
        )
        # Every store keeps expiring values too, the read cache's (broker.stores.expiring).
        cache_store: ExpiringValues = store  # type: ignore[assignment]
        self._read_cache = ReadCache(cache_store, metrics=self._metrics, clock=clock)
        self.config_hash = config_hash(config)
        self._recorder = LedgerRecorder(
            ledger, probe=probe_ledger, metrics=self._metrics, config_hash=self.config_hash
        )
        self.approvals = Approvals(
            config=config,
            registry=registry,
            store=store,
            ledger=ledger,
            metrics=ApprovalMetrics(self._metrics),
            config_hash=self.config_hash,
            clock=clock,
        )
        self.approvals.executor = self.run_approved

    # -- the chain ------------------------------------------------------------------------------

    async def decide(
        self,
        principal: Principal,
        request: ProposalRequest,
        *,
        header_key: str | None = None,
        traceparent: str | None = None,
        via: str | None = None,
        phase: Phase | None = None,
    ) -> Decided:
        """Run the caller's route's chain, step by step, until one ends it or all pass.

        The only state the chain takes is the atomic admission, its last step. ``via`` names
        the catalog mode whose ``tool_execute`` made the proposal (``broker.gateway``);
        ``phase`` is the call's lifecycle phase where the front door derived one (else from
        ``dry_run``).
        """
        route = principal.route or ""
        chain = self._chains.for_route(route)
        ulid = new_ulid()
        trace_id = trace_id_for(request.trace_id, traceparent, ulid)
        meta = Meta(f"prp_{ulid}", trace_id, request.tool, request.dry_run or chain.dry_run)
        started = time.perf_counter()
        decided = Decided(
            meta,
            principal,
            request,
            tenant=principal.tenant or "",
            route=route,
            header_key=header_key,
            started=started,
            mark=started,
            via=via,
            phase=phase or proposal_phase(request.dry_run),
        )
        for step in chain.steps:
            verdict = await step.check(decided)
            if verdict is None:
                decided.passed(step.name)
            elif isinstance(verdict, Replay):
                return decided.replayed(step.name, verdict.response)
            else:
                return decided.reject(step.name, verdict)
        return decided

    # -- the whole proposal ---------------------------------------------------------------------

    async def propose(
        self,
        principal: Principal,
        request: ProposalRequest,
        *,
        header_key: str | None = None,
        traceparent: str | None = None,
        via: str | None = None,
        phase: Phase | None = None,
    ) -> Answer:
        """Decide, execute if approved, record, settle, answer; one log line per proposal."""
        started = time.perf_counter()
        if self._tracing.enabled:
            answer = await self._traced_proposal(
                principal, request, header_key, traceparent, via, phase
            )
        else:
            answer = await self._propose(principal, request, header_key, traceparent, via, phase)
        # The ledger keeps every proposal; logs are for operators: refusals and failures at
        # INFO, the (many) plain approvals and replays only at DEBUG.
        level = logging.DEBUG if answer.status < 300 else logging.INFO
        if answer_log.isEnabledFor(level):
            log_answer(principal, request.tool, answer, started, level)
        return answer

    async def _traced_proposal(
        self,
        principal: Principal,
        request: ProposalRequest,
        header_key: str | None,
        traceparent: str | None,
        via: str | None,
        phase: Phase | None,
    ) -> Answer:
        """``_propose`` inside the proposal's ``execute_tool`` span (see ``broker.tracing``)."""
        label = self._metrics.tool(request.tool)
        with self._tracing.proposal(request.tool, label, traceparent) as span:
            answer = await self._propose(principal, request, header_key, traceparent, via, phase)
            span.answered(answer)
            return answer

    async def _propose(
        self,
        principal: Principal,
        request: ProposalRequest,
        header_key: str | None,
        traceparent: str | None,
        via: str | None = None,
        phase: Phase | None = None,
    ) -> Answer:
        decided = await self.decide(
            principal,
            request,
            header_key=header_key,
            traceparent=traceparent,
            via=via,
            phase=phase,
        )
        decision_us = _elapsed_us(decided.started)
        if decided.replay is not None:
            return await self._replay(decided, decided.replay, decision_us)
        if decided.rejection is not None:
            return await self._reject(decided, decided.rejection, decision_us)
        if decided.meta.dry_run:
            return await self._dry_run(decided, decision_us)
        if decided.approval_reason is not None:
            return await self._hold(decided, decision_us)
        return await self._execute(decided, decision_us, traceparent)

    async def run_approved(self, decided: Decided) -> Answer:
        """An approved proposal, in whichever process took its execution: re-check, then the
        tail every approved proposal runs (execute ▸ ledger ▸ settle)."""
        failed = await recheck(decided)
        if failed is None:
            decided.passed("preconditions")
            return await self._execute(decided, 0, None)
        decided.reject("preconditions", failed)
        answer = await self._reject(decided, failed, 0)
        await self._settle(decided, Settlement.DEFINITE_FAILURE, answer)
        return answer

    async def _dry_run(self, decided: Decided, decision_us: int) -> Answer:
        """An admitted dry run: the adapter's preview, recorded; nothing runs, nothing is spent."""
        tool, _ = decided.approved()
        meta = decided.meta
        self._metrics.answered(
            meta.tool, "approved", None, None, decision_us / 1e6, decided.principal.tenant
        )
        ctx = adapter_context(decided, tool, traceparent=None)
        body = approved(meta, await preview(tool, decided.request.args, ctx))
        if decided.repairs:
            note_repairs(body, decided)
        redact_answer(decided, tool, body)
        body.audit = await self._recorder.record(decided, body, decision_us)
        answer = render(body)
        await self._keep(answer, decided, body.audit)
        return answer

    async def _execute(self, decided: Decided, decision_us: int, traceparent: str | None) -> Answer:
        """execute ▸ ledger ▸ settle: the tail every approved proposal runs exactly once."""
        tool, admitted = decided.approved()
        crash_point("after_admission")
        meta, metrics, tenant = decided.meta, self._metrics, decided.principal.tenant
        decision_s = decision_us / 1e6
        if tool.config.risk != "read" and not await self._recorder.writable():
            # Unrecorded world changes are worse than none: give the claim back, refuse.
            await self._settle(decided, Settlement.TRANSIENT_FAILURE, render(approved(meta, None)))
            down = STORE_UNAVAILABLE
            refused = problem(meta, "rejected", down.code, down.reason, down.remediation)
            metrics.answered(
                meta.tool, "rejected", refused.category, refused.code, decision_s, tenant
            )
            return render(refused, retry_after_s=down.retry_after_s)

        args = decided.request.args
        ctx = adapter_context(decided, tool, traceparent)
        # The claim is marked dispatched just before the call leaves: a crash before it ends
        # released (the call never left), a crash after it as the ledger says (broker.stores).
        # A read-cache hit sends nothing, so it marks nothing.
        mark = dispatcher(self._store, admitted.ticket, meta.proposal_id, self._clock)
        if tool.config.read_cache is None:
            report = await self._call(tool, args, ctx, mark)
        else:
            report = await self._read_cache.execute(
                tool, args, decided.tenant, lambda: self._call(tool, args, ctx, mark)
            )
        crash_point("after_result")
        execution = report.execution
        if report.cache != "hit":  # a hit called nothing: no execution to count, nothing spent
            metrics.executed(
                tool.name, execution.status, report.elapsed_us / 1e6, execution.attempts, tenant
            )
            metrics.spent(tool.name, tool.config.cost_usd, execution.attempts)
        ticket = admitted.ticket
        if report.settlement is Settlement.SUCCEEDED and ticket.charges:
            for (charge, _), used in zip(ticket.charges, ticket.used, strict=False):
                remaining = (charge.limit - used) / MICROS
                metrics.budget_used(charge.name, charge.scope, charge.amount / MICROS, remaining)
        body = outcome(meta, report)
        if decided.repairs:
            note_repairs(body, decided)
        redact_answer(decided, tool, body)
        # A failed execution is an approved decision that carries the failure's category/code.
        metrics.answered(meta.tool, "approved", body.category, body.code, decision_s, tenant)
        body.audit = await self._recorder.record(decided, body, decision_us, report=report)
        crash_point("after_record")
        answer = render(body, retry_after_s=report.retry_after_s)
        if report.cached_age_s is not None:  # RFC 9111's Age: how long ago it was fetched
            answer.headers["Age"] = str(int(report.cached_age_s))
        await self._settle(decided, report.settlement, answer)
        crash_point("after_settle")
        return answer

    async def _call(
        self, tool: ToolRuntime, args: dict[str, Any], ctx: AdapterContext, mark: Dispatch | None
    ) -> ExecutionReport:
        """The adapter call itself, asking the backend when its outcome is unknown."""
        if self._tracing.enabled:
            report = await self._traced_execution(tool, args, ctx, mark)
        else:  # without a span to wrap it in, the caller's traceparent goes on as it came
            report = await execute(tool, args, ctx, sleep=self._sleep, dispatch=mark)
        if report.settlement is Settlement.UNKNOWN:  # the backend may know (outcome_probe)
            report = await ask_backend(tool, args, ctx, report)
        return report

    async def _traced_execution(
        self, tool: ToolRuntime, args: dict[str, Any], ctx: AdapterContext, mark: Dispatch | None
    ) -> ExecutionReport:
        """``execute`` with the proposal span's traceparent sent downstream."""
        outbound = self._tracing.current_traceparent(ctx.traceparent)
        if outbound != ctx.traceparent:
            ctx = msgspec.structs.replace(ctx, traceparent=outbound)
        return await execute(tool, args, ctx, sleep=self._sleep, dispatch=mark)

    # -- state ----------------------------------------------------------------------------------

    async def _settle(self, decided: Decided, settlement: Settlement, answer: Answer) -> None:
        if decided.admitted is None:
            raise RuntimeError("settling a proposal that was not admitted")
        record = decision_record(answer, decided)
        try:
            ours = await self._store.settle(
                decided.admitted.ticket,
                settlement,
                response=record.response,
                record=record,
                ttl_s=self._ttl_s,
                now=self._clock(),
            )
        except StoreUnavailableError:
            # The call already happened; its key stays in progress and, once the lease lapses,
            # reads as outcome_unknown (or re-runs, for idempotent tools). Never a silent repeat.
            log.error("could not settle %s: store unavailable", decided.meta.proposal_id)
            self._metrics.store_errors.labels("settle").inc()
            return
        if not ours:
            log.error("settling %s: the idempotency claim was taken over", decided.meta.proposal_id)


def _elapsed_us(started: float) -> int:
    return int((time.perf_counter() - started) * 1_000_000)
