"""Resolving an ``outcome_unknown`` key: an operator or the tool's backend says what happened.

A call whose outcome is unknown (a timeout after the request left, a process that died mid-call)
keeps its idempotency key ``outcome_unknown`` until someone who knows resolves it (the store never
lets it expire into a re-run). The resolver names the key the way the agent used it (tenant,
route, key) with the tool and args the agent sent: the store matches them against the key's
fingerprint, so a backend token can only resolve calls of its own tools, and a typo cannot
resolve another call.

- ``succeeded`` with the ``result``: the key completes and replays that result;
- ``failed`` with an ``error``: the key completes and replays a ``provider_error`` failure (the
  agent gets the code and a fixed message; the error's text goes to the ledger);
- ``not_executed``: the key is released, so the agent's retry executes.

Each resolution is one ledger record (``decision = "resolved"``, the resolver as its
``service_account``) written after the store changed; the ledger is probed first, so a
resolution is refused (503) rather than made unrecorded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from broker.ids import new_ulid
from broker.ledger.errors import LedgerUnavailableError
from broker.model import Execution, ExecutionError, FieldError, Principal
from broker.pipeline.answers import approved, problem
from broker.pipeline.context import Meta
from broker.pipeline.ledger_entry import key_hash
from broker.responses import render
from broker.stores import AdmissionStore, ClaimRequest, Resolution, StoredResponse
from broker.taxonomy import Code
from broker.validators.idempotency import fingerprint

if TYPE_CHECKING:
    from prometheus_client import Counter

    from broker.ledger import LedgerSink

__all__ = [
    "Refused",
    "ResolutionAnswer",
    "ResolutionRequest",
    "Resolved",
    "Resolver",
    "check_resolution",
]

log = logging.getLogger("broker.resolution")

_Key = Annotated[str, msgspec.Meta(min_length=1, max_length=255, pattern=r"^[\x21-\x7e]+$")]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class ReportedError(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the backend says went wrong (kept in the ledger, not shown to the agent)."""

    message: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    code: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = "backend_failed"


class ResolutionRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``POST /v1/resolutions``: which key, and what happened to its call."""

    tenant: _Name
    route: _Name
    idempotency_key: _Key
    tool: _Name
    args: dict[str, Any]
    """Exactly as the agent proposed them (the key's fingerprint covers tool and args)."""
    outcome: Literal["succeeded", "failed", "not_executed"]
    result: dict[str, Any] | None = None
    """``succeeded`` only: the result the key replays."""
    error: ReportedError | None = None
    """``failed`` only."""


class ResolutionAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to a resolution: what was resolved, by whom, and where it is recorded."""

    resolution_id: str
    tenant: str
    route: str
    tool: str
    outcome: str
    resolved_by: str
    audit: dict[str, Any] | None


class Resolved(msgspec.Struct, frozen=True):
    answer: ResolutionAnswer


class Refused(msgspec.Struct, frozen=True):
    code: Code
    detail: str
    errors: list[FieldError] = []


def check_resolution(request: ResolutionRequest) -> list[FieldError]:
    """What the outcome requires and forbids: a result for ``succeeded``, an error for
    ``failed``, neither for ``not_executed``."""
    errors = []
    wants_result, wants_error = request.outcome == "succeeded", request.outcome == "failed"
    if wants_result and request.result is None:
        errors.append(FieldError("/result", "required when outcome is succeeded"))
    if not wants_result and request.result is not None:
        errors.append(FieldError("/result", f"not allowed when outcome is {request.outcome}"))
    if wants_error and request.error is None:
        errors.append(FieldError("/error", "required when outcome is failed"))
    if not wants_error and request.error is not None:
        errors.append(FieldError("/error", f"not allowed when outcome is {request.outcome}"))
    return errors


def may_resolve(principal: Principal, tool: str) -> bool:
    """Admins resolve any key; a backend token the keys of its own namespace's tools."""
    if principal.admin:
        return True
    return principal.namespace is not None and tool.startswith(principal.namespace + ".")


_REFUSED_VERDICTS = {
    "absent": (
        Code.NOT_FOUND,
        "no such idempotency key (tenant, route and key as the agent used them)",
    ),
    "reused": (
        Code.IDEMPOTENCY_KEY_REUSED,
        "the key was claimed for another tool or other args; name them exactly as proposed",
    ),
    "in_progress": (
        Code.IDEMPOTENCY_IN_PROGRESS,
        "the key's call is still running; resolve it once its outcome is unknown",
    ),
    "settled": (
        Code.PRECONDITION_FAILED,
        "the key's outcome is already known (it replays its answer); only an outcome_unknown "
        "key can be resolved",
    ),
}


class Resolver:
    """Resolves keys of unknown outcome in the store and records each resolution."""

    def __init__(
        self,
        *,
        store: AdmissionStore,
        ledger: LedgerSink | None,
        config_hash: str,
        ttl_s: int,
        sensitive: Callable[[str], frozenset[str]],
        counter: Counter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._ledger = ledger
        self._config_hash = config_hash
        self._ttl_s = ttl_s
        self._sensitive = sensitive
        self._counter = counter
        self._clock = clock

    async def resolve(self, principal: Principal, request: ResolutionRequest) -> Resolved | Refused:
        started = time.perf_counter()
        if not may_resolve(principal, request.tool):
            return Refused(
                Code.FORBIDDEN,
                "only an admin token, or the backend token of the tool's namespace, resolves "
                "its keys",
            )
        errors = check_resolution(request)
        if errors:
            return Refused(Code.SCHEMA_INVALID, "the resolution is not valid", errors)
        if self._ledger is not None:
            try:
                await self._ledger.ping()
            except LedgerUnavailableError:
                # A resolution nobody could trace later is worse than a later one.
                return Refused(Code.STORE_UNAVAILABLE, "the ledger cannot be written")
        ulid = new_ulid()
        meta = Meta(f"prp_{ulid}", f"trc_{ulid}", request.tool, False)
        resolution = Resolution(request.outcome)
        claim = ClaimRequest(
            tenant=request.tenant,
            route=request.route,
            key=request.idempotency_key,
            fingerprint=fingerprint(request.tool, request.args),
            lease_s=0.0,
            idempotent=False,
        )
        verdict = await self._store.resolve(
            claim,
            resolution,
            response=_replayed_answer(meta, request),
            ttl_s=self._ttl_s,
            now=self._clock(),
        )
        if verdict != "resolved":
            code, detail = _REFUSED_VERDICTS[verdict]
            return Refused(code, detail)
        audit = await self._record(principal, request, meta, started)
        if self._counter is not None:
            self._counter.labels(request.outcome).inc()
        log.warning(
            "outcome_unknown resolved as %s by %s: tenant=%s route=%s tool=%s",
            request.outcome,
            principal.service_account,
            request.tenant,
            request.route,
            request.tool,
        )
        return Resolved(
            ResolutionAnswer(
                resolution_id=meta.proposal_id,
                tenant=request.tenant,
                route=request.route,
                tool=request.tool,
                outcome=request.outcome,
                resolved_by=principal.service_account,
                audit=audit,
            )
        )

    async def _record(
        self, principal: Principal, request: ResolutionRequest, meta: Meta, started: float
    ) -> dict[str, Any] | None:
        if self._ledger is None:
            return None
        from broker.ledger import LedgerEntry, utc_now

        entry = LedgerEntry(
            time=utc_now(),
            trace_id=meta.trace_id,
            proposal_id=meta.proposal_id,
            route=request.route,
            tenant=request.tenant,
            service_account=principal.service_account,
            tool=request.tool,
            config_hash=self._config_hash,
            args=request.args,
            result=request.result
            if request.error is None
            else {"error": msgspec.to_builtins(request.error)},
            sensitive_keys=self._sensitive(request.tool),
            decision="resolved",
            reason=f"outcome_unknown resolved as {request.outcome} by {principal.service_account}",
            execution_status=None if request.outcome == "not_executed" else request.outcome,
            decision_us=int((time.perf_counter() - started) * 1_000_000),
            idempotency_key_hash=key_hash(request.idempotency_key),
        )
        try:
            ref = await self._ledger.append(entry)
        except LedgerUnavailableError:
            log.critical("ledger unavailable; unrecorded resolution follows: %r", entry)
            return None
        return {"seq": ref.seq, "hash": ref.hash}


def _replayed_answer(meta: Meta, request: ResolutionRequest) -> StoredResponse | None:
    """What the key answers from now on, shaped as the call's own answer would have been."""
    if request.outcome == "not_executed":
        return None
    if request.outcome == "succeeded":
        answer = render(approved(meta, Execution(status="succeeded", result=request.result)))
    else:
        code = Code.PROVIDER_ERROR
        reason = "the backend failed this action (its outcome was resolved after the fact)"
        failed = Execution(
            status="failed",
            error=ExecutionError(category="PROVIDER", code=code.value, message=reason),
        )
        answer = render(
            problem(
                meta,
                "approved",
                code,
                reason,
                "REPLAN: the backend refused this action; tell the user and do not claim success",
                execution=failed,
            )
        )
    return StoredResponse(answer.status, answer.body)
