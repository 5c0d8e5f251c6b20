"""The only orchestrator: proposal → validator chain → execution → ledger → settlement → answer.

Why this order: cheap, stateless identity checks first, so an unauthorized caller can never
probe idempotency keys or spend budget; preconditions before the atomic admission, so budget is
only reserved for proposals the data plane accepts; and a rejected precondition still consults
the key, so a legitimate retry replays the original answer even if the world has changed since.
Every proposal, whatever its outcome, gets one ledger record before it is answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from broker.config import BrokerConfig, config_hash
from broker.execution import ExecutionReport, execute, preview
from broker.ids import new_ulid
from broker.implied_checks import CHECK_TOOL
from broker.ledger.errors import LedgerUnavailableError
from broker.ledger.model import LedgerEntry, RecordedError, ValidatorVerdict
from broker.metrics import BrokerMetrics
from broker.model import (
    AuditInfo,
    Decision,
    Execution,
    FieldError,
    Principal,
    Problem,
    ProposalRequest,
)
from broker.plugins import AdapterContext, VerifierContext
from broker.registry import Registry, ToolRuntime
from broker.responses import Answer, problem_fields, render, replayed
from broker.stores import (
    Admission,
    Admitted,
    Conflict,
    DecisionRecord,
    Limited,
    Replay,
    Settlement,
    Store,
    StoredResponse,
)
from broker.taxonomy import CODE_STATUS, Code, StoreUnavailableError
from broker.timestamps import utc_now
from broker.tracing import Tracing
from broker.validators import Rejection
from broker.validators.authz import check_tool
from broker.validators.idempotency import build_claim, resolve_key
from broker.validators.limits import MICROS, limits_for
from broker.validators.preconditions import check_listed, verify

if TYPE_CHECKING:
    from broker.ledger import LedgerRecord, LedgerSink

__all__ = ["Decided", "Pipeline"]

log = logging.getLogger("broker.pipeline")
answer_log = logging.getLogger("broker.proposals")

# W3C trace context: version ff and all-zero trace or parent ids are invalid and ignored.
_TRACEPARENT = re.compile(
    r"^(?!ff)[0-9a-f]{2}-(?!0{32})([0-9a-f]{32})-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$"
)
_TRACE_ID = re.compile(r"^[\x21-\x7e]{1,128}$")

_CONFLICTS = {
    "reused": (
        Code.IDEMPOTENCY_KEY_REUSED,
        "this idempotency key was used for a different tool or arguments",
        "REPLAN: use a new idempotency key for a different action",
    ),
    "in_progress": (
        Code.IDEMPOTENCY_IN_PROGRESS,
        "a proposal with this idempotency key is still running",
        "RETRY: wait for Retry-After seconds, then resend the same proposal",
    ),
    "outcome_unknown": (
        Code.OUTCOME_UNKNOWN,
        "an earlier attempt with this key may have reached the backend; its outcome is unknown",
        "ESCALATE: an operator must reconcile this action before it can be retried",
    ),
}

_REFUSALS = {
    Code.MALFORMED_REQUEST: "REPAIR: send one JSON proposal object as the API describes",
    Code.SCHEMA_INVALID: "REPAIR: fix the fields listed in errors and resend",
    Code.UNAUTHENTICATED: "ESCALATE: the runtime's broker credentials are missing or invalid",
    Code.TOKEN_EXPIRED: "RETRY: obtain a fresh token, then resend",
    Code.TENANT_MISMATCH: "ESCALATE: this token is not valid for that tenant",
    Code.FORBIDDEN: "REPLAN: propose with a route token, not an admin token",
    Code.PAYLOAD_TOO_LARGE: "REPAIR: proposals are small; send ids, not documents",
}

_STORE_DOWN = Rejection(
    code=Code.STORE_UNAVAILABLE,
    reason="the broker cannot reach its state; nothing was executed",
    remediation="RETRY: resend the same proposal after Retry-After seconds",
    retry_after_s=1.0,
)


class _Meta(msgspec.Struct, frozen=True):
    """What every answer to one proposal repeats (a struct: a named tuple's constructor is
    Python code, and a few are built per proposal)."""

    proposal_id: str
    trace_id: str
    tool: str | None
    dry_run: bool


class Decided(msgspec.Struct):
    """The validator chain's verdict on one proposal, before anything executes.

    Exactly one of ``rejection``, ``replay`` and ``admitted`` is set. A struct rather than a
    dataclass: one is built per proposal, and a struct's constructor is a third of the cost.
    """

    meta: _Meta
    principal: Principal
    request: ProposalRequest
    tool: ToolRuntime | None = None
    key: str | None = None
    rejection: Rejection | None = None
    replay: StoredResponse | None = None
    admitted: Admitted | None = None
    verdicts: list[ValidatorVerdict] = msgspec.field(default_factory=list)
    """``(validator, verdict, elapsed µs)`` in chain order, for the ledger."""
    started: float = 0.0
    """``time.perf_counter()`` when the chain started."""
    mark: float = 0.0
    """When the step being timed started."""

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


class Pipeline:
    """Mediates proposals for one config: validates, executes, records, settles, answers."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        registry: Registry,
        store: Store,
        ledger: LedgerSink | None = None,
        probe_ledger: bool = False,
        metrics: BrokerMetrics | None = None,
        tracing: Tracing | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        dry_run: bool = False,
    ) -> None:
        self._config = config
        self._registry = registry
        self._store = store
        self._ledger = ledger
        self._ledger_healthy = True
        self._probe_ledger = probe_ledger
        self._tracing = tracing or Tracing(None)
        self._metrics = metrics or BrokerMetrics(registry.tools, budgets=config.budgets)
        self._clock = clock
        self._sleep = sleep
        self._dry_run = dry_run or config.service.dry_run
        self._ttl_s = config.service.idempotency_ttl_s
        self._lease_margin_s = config.service.lease_margin_s
        self.config_hash = config_hash(config)

    # -- the chain ------------------------------------------------------------------------------

    async def decide(
        self,
        principal: Principal,
        request: ProposalRequest,
        *,
        header_key: str | None = None,
        traceparent: str | None = None,
    ) -> Decided:
        """Run the validator chain; the only state it takes is the atomic admission."""
        route = principal.route or ""
        tenant = principal.tenant or ""
        route_config = self._config.routes.get(route)
        dry_run = request.dry_run or self._dry_run or bool(route_config and route_config.dry_run)
        ulid = new_ulid()
        meta = _Meta(
            f"prp_{ulid}", _trace_id(request.trace_id, traceparent, ulid), request.tool, dry_run
        )
        started = time.perf_counter()
        decided = Decided(meta, principal, request, started=started, mark=started)

        # tool ▸ authz ▸ schema: stateless, so an unauthorized caller learns nothing of state.
        checked = check_tool(request.tool, principal, self._registry.tools)
        if isinstance(checked, Rejection):
            return decided.reject("tool_authz", checked)
        decided.tool = tool = checked
        decided.passed("tool_authz")

        errors = tool.args.errors(request.args)
        if errors:
            return decided.reject("schema", _schema_rejection(tool, errors))
        listed = check_listed(request.preconditions, self._registry.preconditions)
        if listed is not None:
            return decided.reject("schema", listed)
        decided.passed("schema")

        if route_config and route_config.require_implied_write_check:
            try:
                unchecked = await self._unchecked_message(request.session_id)
            except StoreUnavailableError:
                return decided.reject("policy", _STORE_DOWN)
            if unchecked is not None:
                return decided.reject("policy", unchecked)
            decided.passed("policy")

        key = resolve_key(request.idempotency_key, header_key, tool)
        if isinstance(key, Rejection):
            return decided.reject("idempotency", key)
        decided.key = key
        claim = None
        if key:
            claim = build_claim(
                key,
                tool,
                request.args,
                tenant=tenant,
                route=route,
                lease_margin_s=self._lease_margin_s,
            )
        decided.passed("idempotency_key")

        try:
            failed = await verify(
                tool,
                request.args,
                VerifierContext(tenant=tenant, route=route, tool=tool.name, trace_id=meta.trace_id),
            )
            now = self._clock()
            if failed is not None:
                # A retry of something that already happened replays, however the world moved.
                earlier = await self._store.lookup(claim, now=now) if claim else None
                if isinstance(earlier, Replay) and not dry_run:
                    decided.replay = earlier.response
                    decided.record("preconditions", "replay")
                    return decided
                if isinstance(earlier, Conflict):
                    failed = _conflict_rejection(earlier)
                return decided.reject("preconditions", failed)
            decided.passed("preconditions")

            # admission: the idempotency claim, budgets and rate limits, all or nothing
            charges, hits = limits_for(tool, request.args, tenant=tenant, route=route)
            admission = Admission(tenant=tenant, claim=claim, charges=charges, hits=hits)
            result = await self._store.admit(admission, now=now, dry_run=dry_run)
        except StoreUnavailableError:
            log.warning("store unavailable; failing closed for %s", meta.proposal_id)
            self._metrics.store_errors.labels("admit").inc()
            return decided.reject("admission", _STORE_DOWN)
        if isinstance(result, Replay):
            decided.replay = result.response
            decided.record("admission", "replay")
        elif isinstance(result, Conflict):
            decided.reject("admission", _conflict_rejection(result))
        elif isinstance(result, Limited):
            decided.reject("admission", _limit_rejection(result))
        else:
            decided.admitted = result
            decided.passed("admission")
        return decided

    # -- the whole proposal ---------------------------------------------------------------------

    async def propose(
        self,
        principal: Principal,
        request: ProposalRequest,
        *,
        header_key: str | None = None,
        traceparent: str | None = None,
    ) -> Answer:
        """Decide, execute if approved, record, settle, answer; one log line per proposal."""
        started = time.perf_counter()
        answer = await self._propose(principal, request, header_key, traceparent)
        # The ledger keeps every proposal; logs are for operators: refusals and failures at
        # INFO, the (many) plain approvals and replays only at DEBUG.
        level = logging.DEBUG if answer.status < 300 else logging.INFO
        if answer_log.isEnabledFor(level):
            _log_answer(principal, request.tool, answer, started, level)
        return answer

    async def _propose(
        self,
        principal: Principal,
        request: ProposalRequest,
        header_key: str | None,
        traceparent: str | None,
    ) -> Answer:
        decided = await self.decide(
            principal, request, header_key=header_key, traceparent=traceparent
        )
        decision_us = _elapsed_us(decided.started)
        meta = decided.meta
        metrics = self._metrics
        tenant = decided.principal.tenant
        if decided.replay is not None:
            answer = replayed(decided.replay.status, decided.replay.body)
            await self._record(decided, answer, decision_us, replay=True)
            metrics.answered(meta.tool, "replayed", None, None, decision_us / 1e6, tenant)
            return answer
        if decided.rejection is not None:
            rejection = decided.rejection
            category = CODE_STATUS[rejection.code][0].value
            metrics.answered(
                meta.tool, "rejected", category, rejection.code.value, decision_us / 1e6, tenant
            )
            problem = _problem(
                meta,
                "rejected",
                rejection.code,
                rejection.reason,
                rejection.remediation,
                errors=list(rejection.errors),
            )
            problem.audit = await self._record(decided, problem, decision_us)
            answer = render(problem, retry_after_s=rejection.retry_after_s)
            if rejection.code is not Code.STORE_UNAVAILABLE:
                await self._keep(answer, decided, problem.audit)
            return answer

        tool, admitted = decided.approved()
        decision_s = decision_us / 1e6
        if meta.dry_run:
            metrics.answered(meta.tool, "approved", None, None, decision_s, tenant)
            ctx = _adapter_context(decided, tool, traceparent=None)
            dry = _approved(meta, await preview(tool, request.args, ctx))
            dry.audit = await self._record(decided, dry, decision_us)
            answer = render(dry)
            await self._keep(answer, decided, dry.audit)
            return answer

        if tool.config.risk != "read" and not await self._ledger_writable():
            # Unrecorded world changes are worse than none: give the claim back, refuse.
            await self._settle(decided, Settlement.TRANSIENT_FAILURE, render(_approved(meta, None)))
            problem = _problem(
                meta, "rejected", _STORE_DOWN.code, _STORE_DOWN.reason, _STORE_DOWN.remediation
            )
            metrics.answered(
                meta.tool, "rejected", problem.category, problem.code, decision_s, tenant
            )
            return render(problem, retry_after_s=_STORE_DOWN.retry_after_s)

        ctx = _adapter_context(decided, tool, traceparent)
        if self._tracing.enabled:
            report = await self._traced_execution(tool, request.args, ctx)
        else:  # without a span to wrap it in, the caller's traceparent goes on as it came
            report = await execute(tool, request.args, ctx, sleep=self._sleep)
        execution = report.execution
        metrics.executed(
            tool.name, execution.status, report.elapsed_us / 1e6, execution.attempts, tenant
        )
        ticket = admitted.ticket
        if report.settlement is Settlement.SUCCEEDED and ticket.charges:
            for (charge, _), used in zip(ticket.charges, ticket.used, strict=False):
                remaining = (charge.limit - used) / MICROS
                metrics.budget_used(charge.name, charge.scope, charge.amount / MICROS, remaining)
        outcome = _outcome(meta, report)
        # A failed execution is an approved decision that carries the failure's category/code.
        metrics.answered(meta.tool, "approved", outcome.category, outcome.code, decision_s, tenant)
        outcome.audit = await self._record(decided, outcome, decision_us, report=report)
        answer = render(outcome)
        await self._settle(decided, report.settlement, answer)
        return answer

    async def _traced_execution(
        self, tool: ToolRuntime, args: dict[str, Any], ctx: AdapterContext
    ) -> ExecutionReport:
        """``execute`` inside an ``execute_tool`` span, whose traceparent goes downstream."""
        with self._tracing.execute_tool(tool.name, ctx.proposal_id, ctx.traceparent) as outbound:
            if outbound != ctx.traceparent:
                ctx = msgspec.structs.replace(ctx, traceparent=outbound)
            return await execute(tool, args, ctx, sleep=self._sleep)

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
        meta = _Meta(f"prp_{ulid}", _trace_id(None, traceparent, ulid), None, False)
        rejection = Rejection(
            code=code, reason=reason, remediation=_REFUSALS.get(code), errors=tuple(errors)
        )
        problem = _problem(
            meta, "rejected", code, reason, rejection.remediation, errors=list(errors)
        )
        if principal is None:
            return render(problem)
        decided = Decided(meta, principal, ProposalRequest(tool="", args={}), rejection=rejection)
        problem.audit = await self._record(decided, problem, 0)
        answer = render(problem)
        await self._keep(answer, decided, problem.audit)
        return answer

    async def decision(self, proposal_id: str) -> DecisionRecord | None:
        """The answer to a proposal: settled ones from the store, the rest from the ledger."""
        found = await self._store.load_decision(proposal_id)
        if found is not None or self._ledger is None:
            return found
        record = await self._ledger.by_proposal(proposal_id)
        return _from_ledger(record) if record is not None else None

    # -- state ----------------------------------------------------------------------------------

    async def _keep(self, answer: Answer, decided: Decided, audit: AuditInfo | None) -> None:
        """Remember a decision that took no state, for ``GET /v1/proposals/{id}``.

        A decision the ledger recorded is read back from there, so a rejection costs the store
        nothing (no write per refused proposal, however many arrive)."""
        if audit is not None:
            return
        try:
            await self._store.save_decision(_decision_record(answer, decided), ttl_s=self._ttl_s)
        except StoreUnavailableError:
            log.warning("could not keep decision %s: store unavailable", decided.meta.proposal_id)
            self._metrics.store_errors.labels("save_decision").inc()

    async def _settle(self, decided: Decided, settlement: Settlement, answer: Answer) -> None:
        if decided.admitted is None:
            raise RuntimeError("settling a proposal that was not admitted")
        record = _decision_record(answer, decided)
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

    # -- ledger ---------------------------------------------------------------------------------

    async def _unchecked_message(self, session_id: str | None) -> Rejection | None:
        """On routes that require it: was the message after the last execution checked?"""
        if not session_id:
            return Rejection(
                code=Code.POLICY_BLOCKED,
                reason="this route requires a session_id on every proposal",
                remediation="REPAIR: send the conversation's session_id with the proposal",
            )
        if self._ledger is None:
            return None
        last_execution = last_check = 0
        for record in await self._ledger.by_session(session_id):
            if record.tool == CHECK_TOOL:
                last_check = record.seq
            elif record.execution_status == "succeeded" and not record.replayed:
                last_execution = record.seq
        if last_execution > last_check:
            return Rejection(
                code=Code.POLICY_BLOCKED,
                reason="the message reporting the last action was not checked for implied writes",
                remediation="REPAIR: POST the message to /v1/implied-writes/check, then resend",
            )
        return None

    async def _ledger_writable(self) -> bool:
        """Whether a world-changing call may run: its record must be writable afterwards."""
        if self._ledger is None or (self._ledger_healthy and not self._probe_ledger):
            return True
        try:
            await self._ledger.ping()
        except LedgerUnavailableError:
            self._ledger_healthy = False
            self._metrics.ledger_unavailable.set(1)
            return False
        if not self._ledger_healthy:
            self._ledger_healthy = True
            self._metrics.ledger_unavailable.set(0)
        return True

    async def _record(
        self,
        decided: Decided,
        answer: Decision | Answer,
        decision_us: int,
        *,
        replay: bool = False,
        report: ExecutionReport | None = None,
    ) -> AuditInfo | None:
        """Append this proposal's ledger record; the reference goes into the answer."""
        if self._ledger is None:
            return None
        entry = _ledger_entry(decided, answer, decision_us, replay, report, self.config_hash)
        try:
            ref = await self._ledger.append(entry)
        except LedgerUnavailableError:
            # Never silently: the record goes to the error log whole, and world-changing tools
            # are refused until the ledger answers again.
            self._ledger_healthy = False
            self._metrics.ledger_errors.inc()
            self._metrics.ledger_unavailable.set(1)
            log.critical("ledger unavailable; unrecorded entry follows: %r", entry)
            return None
        return AuditInfo(ref.seq, ref.hash)


class _Summary(msgspec.Struct):
    """The fields of an answer that its log line repeats (decoded back: about a microsecond)."""

    proposal_id: str
    trace_id: str
    decision: str
    category: str | None = None
    code: str | None = None
    replayed: bool = False
    dry_run: bool = False


_summary = msgspec.json.Decoder(_Summary)


def _log_answer(
    principal: Principal, tool: str, answer: Answer, started: float, level: int
) -> None:
    summary = _summary.decode(answer.body)
    answer_log.log(
        level,
        "proposal %s",
        summary.decision,
        extra={
            "trace_id": summary.trace_id,
            "proposal_id": summary.proposal_id,
            "route": principal.route,
            "tenant": principal.tenant,
            "tool": tool,
            "decision": summary.decision,
            "category": summary.category,
            "code": summary.code,
            "status": answer.status,
            "replayed": summary.replayed or None,
            "dry_run": summary.dry_run or None,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    )


def _ledger_entry(
    decided: Decided,
    answer: Decision | Answer,
    decision_us: int,
    replay: bool,
    report: ExecutionReport | None,
    contract_hash: str,
) -> LedgerEntry:
    meta, principal, tool = decided.meta, decided.principal, decided.tool
    execution = answer.execution if isinstance(answer, Decision) else None
    category = code = reason = None
    decision = "approved"
    if decided.rejection is not None:
        decision = "rejected"
        category = CODE_STATUS[decided.rejection.code][0].value
        code, reason = decided.rejection.code.value, decided.rejection.reason
    elif report is not None and report.code is not None:
        category, code = CODE_STATUS[report.code][0].value, report.code.value
        reason = execution.error.message if execution and execution.error else None
    errors: tuple[RecordedError, ...] = ()
    if isinstance(answer, Decision) and answer.errors:
        errors = tuple(RecordedError(e.message, e.path) for e in answer.errors)
    return LedgerEntry(
        time=utc_now(),
        trace_id=meta.trace_id,
        session_id=decided.request.session_id,
        proposal_id=meta.proposal_id,
        route=principal.route or "",
        tenant=principal.tenant or "",
        service_account=principal.service_account,
        tool=meta.tool or "",
        tool_id=tool.tool_id if tool else None,
        config_hash=contract_hash,
        args=decided.request.args,
        result=execution.result if execution else None,
        sensitive_keys=tool.sensitive if tool else frozenset(),
        decision=decision,
        category=category,
        code=code,
        reason=reason,
        remediation=answer.remediation if isinstance(answer, Decision) else None,
        errors=errors,
        validators=tuple(decided.verdicts),
        execution_status=execution.status if execution else None,
        attempts=execution.attempts if execution else 0,
        dry_run=meta.dry_run,
        replayed=replay,
        decision_us=decision_us,
        execution_us=report.elapsed_us if report else None,
        idempotency_key_hash=(
            "sha256:" + hashlib.sha256(decided.key.encode()).hexdigest() if decided.key else None
        ),
    )


def _from_ledger(record: LedgerRecord) -> DecisionRecord | None:
    """Rebuild a proposal's answer from its ledger record (results as the ledger keeps them:
    redacted)."""
    if record.tool == CHECK_TOOL or record.decision not in ("approved", "rejected"):
        return None
    decision: Literal["approved", "rejected"] = (
        "approved" if record.decision == "approved" else "rejected"
    )
    meta = _Meta(record.proposal_id, record.trace_id, record.tool or None, record.dry_run)
    execution = None
    if record.execution_status in ("succeeded", "failed", "dry_run"):
        execution = Execution(
            status=record.execution_status,  # type: ignore[arg-type]
            result=record.result_redacted if isinstance(record.result_redacted, dict) else None,
            attempts=record.attempts,
        )
    body: Decision
    if record.code:
        try:
            code = Code(record.code)
        except ValueError:
            return None
        errors = [FieldError(e.path, e.message) for e in record.errors]
        reason = record.reason or code.value
        body = _problem(
            meta, decision, code, reason, record.remediation, errors=errors, execution=execution
        )
    else:
        body = _approved(meta, execution)
    body.audit = AuditInfo(record.seq, record.hash)
    answer = render(body)
    return DecisionRecord(
        proposal_id=record.proposal_id,
        tenant=record.tenant,
        route=record.route,
        response=StoredResponse(answer.status, answer.body),
    )


def _adapter_context(
    decided: Decided, tool: ToolRuntime, traceparent: str | None
) -> AdapterContext:
    return AdapterContext(
        tenant=decided.principal.tenant or "",
        route=decided.principal.route or "",
        tool=tool.name,
        proposal_id=decided.meta.proposal_id,
        trace_id=decided.meta.trace_id,
        idempotency_key=decided.key,
        deadline=time.monotonic() + tool.config.timeout_s,
        credentials=tool.credentials,
        traceparent=traceparent,
    )


def _decision_record(answer: Answer, decided: Decided) -> DecisionRecord:
    return DecisionRecord(
        proposal_id=decided.meta.proposal_id,
        tenant=decided.principal.tenant or "",
        route=decided.principal.route or "",
        response=StoredResponse(answer.status, answer.body),
    )


def _outcome(meta: _Meta, report: ExecutionReport) -> Decision:
    execution = report.execution
    if report.code is None:
        return _approved(meta, execution)
    message = execution.error.message if execution.error else report.code.value
    return _problem(
        meta,
        "approved",
        report.code,
        message,
        _failure_remediation(report.settlement),
        execution=execution,
    )


def _approved(meta: _Meta, execution: Execution | None) -> Decision:
    return Decision(
        proposal_id=meta.proposal_id,
        trace_id=meta.trace_id,
        tool=meta.tool,
        dry_run=meta.dry_run,
        decision="approved",
        execution=execution,
    )


def _problem(
    meta: _Meta,
    decision: Literal["approved", "rejected"],
    code: Code,
    reason: str,
    remediation: str | None,
    *,
    errors: list[FieldError] | None = None,
    execution: Execution | None = None,
) -> Problem:
    category, _ = CODE_STATUS[code]
    type_uri, title, status = problem_fields(code)
    return Problem(
        proposal_id=meta.proposal_id,
        trace_id=meta.trace_id,
        tool=meta.tool,
        dry_run=meta.dry_run,
        decision=decision,
        category=category.value,
        code=code.value,
        reason=reason,
        remediation=remediation,
        errors=errors or [],
        execution=execution,
        type=type_uri,
        title=title,
        status=status,
        detail=reason,
    )


def _schema_rejection(tool: ToolRuntime, errors: list[FieldError]) -> Rejection:
    return Rejection(
        code=Code.SCHEMA_INVALID,
        reason=f"{len(errors)} problem(s) with the arguments of {tool.name}",
        remediation="REPAIR: fix the arguments listed in errors and resend",
        errors=tuple(errors),
    )


def _trace_id(body_trace_id: str | None, traceparent: str | None, ulid: str) -> str:
    if body_trace_id and _TRACE_ID.fullmatch(body_trace_id):
        return body_trace_id
    if traceparent:
        match = _TRACEPARENT.fullmatch(traceparent.strip())
        if match:
            return match.group(1)
    return f"trc_{ulid}"  # the proposal's own id: one trace, one proposal


def _conflict_rejection(conflict: Conflict) -> Rejection:
    code, reason, remediation = _CONFLICTS[conflict.kind]
    return Rejection(
        code=code, reason=reason, remediation=remediation, retry_after_s=conflict.retry_after_s
    )


def _limit_rejection(limited: Limited) -> Rejection:
    if limited.kind == "budget":
        return Rejection(
            code=Code.BUDGET_EXCEEDED,
            reason=f"budget {limited.name!r} would be exceeded",
            remediation="ESCALATE: the limit is reached; ask a human or retry after the window",
            retry_after_s=limited.retry_after_s,
        )
    return Rejection(
        code=Code.RATE_LIMITED,
        reason=f"rate limit {limited.name!r} reached",
        remediation="RETRY: wait for Retry-After seconds",
        retry_after_s=limited.retry_after_s,
    )


def _failure_remediation(settlement: Settlement) -> str:
    if settlement is Settlement.TRANSIENT_FAILURE:
        return "RETRY: the backend failed transiently; resend the same proposal later"
    if settlement is Settlement.UNKNOWN:
        return "ESCALATE: the action may or may not have happened; do not claim either"
    return "REPLAN: the backend refused this action; tell the user and do not claim success"


def _elapsed_us(started: float) -> int:
    return int((time.perf_counter() - started) * 1_000_000)
