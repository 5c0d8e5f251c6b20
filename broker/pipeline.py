"""The only orchestrator: proposal → validator chain → execution → settlement → answer.

Why this order: cheap, stateless identity checks first, so an unauthorized caller can never
probe idempotency keys or spend budget; preconditions before the atomic admission, so budget is
only reserved for proposals the data plane accepts; and a rejected precondition still consults
the key, so a legitimate retry replays the original answer even if the world has changed since.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Literal, NamedTuple

from ulid import ULID

from broker.config import BrokerConfig, config_hash
from broker.execution import ExecutionReport, execute, preview
from broker.model import Decision, Execution, FieldError, Principal, Problem, ProposalRequest
from broker.plugins import AdapterContext, VerifierContext
from broker.registry import Registry
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
    Ticket,
)
from broker.taxonomy import CODE_STATUS, Code, StoreUnavailableError
from broker.validators import Rejection
from broker.validators.authz import check_tool
from broker.validators.idempotency import build_claim, resolve_key
from broker.validators.limits import charges_for, hits_for
from broker.validators.preconditions import check_listed, verify

__all__ = ["Pipeline"]

log = logging.getLogger("broker.pipeline")

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
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


class Pipeline:
    """Mediates proposals for one config: validates, executes, settles state, answers."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        registry: Registry,
        store: Store,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        dry_run: bool = False,
    ) -> None:
        self._config = config
        self._registry = registry
        self._store = store
        self._clock = clock
        self._sleep = sleep
        self._dry_run = dry_run or config.service.dry_run
        self._ttl_s = config.service.idempotency_ttl_s
        self.config_hash = config_hash(config)

    async def propose(
        self,
        principal: Principal,
        request: ProposalRequest,
        *,
        header_key: str | None = None,
        traceparent: str | None = None,
    ) -> Answer:
        proposal_id = f"prp_{ULID()}"
        trace_id = _trace_id(request.trace_id, traceparent)
        route = principal.route or ""
        tenant = principal.tenant or ""
        dry_run = (
            request.dry_run
            or self._dry_run
            or (route in self._config.routes and self._config.routes[route].dry_run)
        )
        base = _Meta(proposal_id, trace_id, request.tool, dry_run)

        def reject(rejection: Rejection) -> Answer:
            return self._rejected(base, rejection)

        # tool ▸ authz ▸ schema: stateless, so an unauthorized caller learns nothing of state.
        checked = check_tool(request.tool, principal, self._registry.tools)
        if isinstance(checked, Rejection):
            return await self._keep(reject(checked), proposal_id, tenant, route)
        tool = checked
        errors = tool.args.errors(request.args)
        if errors:
            return await self._keep(
                reject(
                    Rejection(
                        code=Code.SCHEMA_INVALID,
                        reason=f"{len(errors)} problem(s) with the arguments of {tool.name}",
                        remediation="REPAIR: fix the arguments listed in errors and resend",
                        errors=tuple(errors),
                    )
                ),
                proposal_id,
                tenant,
                route,
            )
        listed = check_listed(request.preconditions, self._registry.preconditions)
        if listed is not None:
            return await self._keep(reject(listed), proposal_id, tenant, route)
        key = resolve_key(request.idempotency_key, header_key, tool)
        if isinstance(key, Rejection):
            return await self._keep(reject(key), proposal_id, tenant, route)
        claim = build_claim(key, tool, request.args, tenant=tenant, route=route) if key else None

        try:
            # preconditions against the data plane
            failed = await verify(
                tool,
                request.args,
                VerifierContext(tenant=tenant, route=route, tool=tool.name, trace_id=trace_id),
            )
            now = self._clock()
            if failed is not None:
                earlier = await self._store.lookup(claim, now=now) if claim else None
                if isinstance(earlier, Replay) and not dry_run:
                    return replayed(earlier.response.status, earlier.response.body)
                if isinstance(earlier, Conflict):
                    failed = _conflict_rejection(earlier)
                return await self._keep(reject(failed), proposal_id, tenant, route)

            # admission: idempotency claim, budgets and rate limits, all or nothing
            admission = Admission(
                tenant=tenant,
                claim=claim,
                charges=charges_for(tool, request.args, tenant=tenant, route=route),
                hits=hits_for(tool, tenant=tenant, route=route),
            )
            admitted = await self._store.admit(admission, now=now, dry_run=dry_run)
        except StoreUnavailableError:
            log.warning("store unavailable; failing closed for %s", proposal_id)
            return self._rejected(
                base,
                Rejection(
                    code=Code.STORE_UNAVAILABLE,
                    reason="the broker cannot reach its state store; nothing was executed",
                    remediation="RETRY: resend the same proposal after Retry-After seconds",
                    retry_after_s=1.0,
                ),
            )
        if isinstance(admitted, Replay):
            return replayed(admitted.response.status, admitted.response.body)
        if isinstance(admitted, Conflict):
            return await self._keep(
                reject(_conflict_rejection(admitted)), proposal_id, tenant, route
            )
        if isinstance(admitted, Limited):
            return await self._keep(reject(_limit_rejection(admitted)), proposal_id, tenant, route)

        ctx = AdapterContext(
            tenant=tenant,
            route=route,
            tool=tool.name,
            proposal_id=proposal_id,
            trace_id=trace_id,
            idempotency_key=key,
            deadline=time.monotonic() + tool.config.timeout_s,
            credentials=tool.credentials,
        )
        if dry_run:
            execution = await preview(tool, request.args, ctx)
            answer = render(_approved(base, execution))
            return await self._keep(answer, proposal_id, tenant, route)

        report = await execute(tool, request.args, ctx, sleep=self._sleep)
        answer = self._executed(base, report)
        await self._settle(admitted, report.settlement, answer, proposal_id, tenant, route)
        return answer

    async def decision(self, proposal_id: str) -> DecisionRecord | None:
        return await self._store.load_decision(proposal_id)

    # -- answers --------------------------------------------------------------------------------

    def _rejected(self, base: _Meta, rejection: Rejection) -> Answer:
        problem = _problem(
            base,
            "rejected",
            rejection.code,
            rejection.reason,
            rejection.remediation,
            errors=list(rejection.errors),
        )
        return render(problem, retry_after_s=rejection.retry_after_s)

    def _executed(self, base: _Meta, report: ExecutionReport) -> Answer:
        execution = report.execution
        if report.code is None:
            return render(_approved(base, execution))
        message = execution.error.message if execution.error else report.code.value
        remediation = _failure_remediation(report.settlement)
        return render(
            _problem(base, "approved", report.code, message, remediation, execution=execution)
        )

    # -- state ----------------------------------------------------------------------------------

    async def _keep(self, answer: Answer, proposal_id: str, tenant: str, route: str) -> Answer:
        """Remember a decision that took no state, for ``GET /v1/proposals/{id}``."""
        record = DecisionRecord(
            proposal_id=proposal_id,
            tenant=tenant,
            route=route,
            response=StoredResponse(answer.status, answer.body),
        )
        try:
            await self._store.save_decision(record, ttl_s=self._ttl_s)
        except StoreUnavailableError:
            log.warning("could not keep decision %s: store unavailable", proposal_id)
        return answer

    async def _settle(
        self,
        admitted: Admitted,
        settlement: Settlement,
        answer: Answer,
        proposal_id: str,
        tenant: str,
        route: str,
    ) -> None:
        ticket: Ticket = admitted.ticket
        stored = StoredResponse(answer.status, answer.body)
        record = DecisionRecord(
            proposal_id=proposal_id, tenant=tenant, route=route, response=stored
        )
        try:
            ours = await self._store.settle(
                ticket,
                settlement,
                response=stored,
                record=record,
                ttl_s=self._ttl_s,
                now=self._clock(),
            )
        except StoreUnavailableError:
            # The call already happened; its key stays in progress and, once the lease lapses,
            # reads as outcome_unknown (or re-runs, for idempotent tools). Never a silent repeat.
            log.error("could not settle %s after execution: store unavailable", proposal_id)
            return
        if not ours:
            log.error("settling %s: the idempotency claim was taken over", proposal_id)


class _Meta(NamedTuple):
    """What every answer to one proposal repeats."""

    proposal_id: str
    trace_id: str
    tool: str
    dry_run: bool


def _approved(meta: _Meta, execution: Execution) -> Decision:
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


def _trace_id(body_trace_id: str | None, traceparent: str | None) -> str:
    if body_trace_id and _TRACE_ID.match(body_trace_id):
        return body_trace_id
    if traceparent:
        match = _TRACEPARENT.match(traceparent.strip())
        if match:
            return match.group(1)
    return f"trc_{ULID()}"


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
