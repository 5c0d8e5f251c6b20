"""Before a call is declared ``outcome_unknown``, ask its backend what happened (optional).

An adapter that can look a call up by its idempotency key implements
:class:`OutcomeReportingAdapter`: ``outcome_of(args, ctx)`` with the same ``ctx`` (hence
``ctx.idempotency_key``) as the call. Its answer replaces the unknown outcome:

- ``succeeded`` with the result (an object): the proposal is answered as succeeded, and its key
  replays that;
- ``failed``: a definite ``provider_error`` (the key replays it);
- ``not_executed``: a transient failure, so the key is released and a retry executes;
- ``unknown``, an error, or no answer within :data:`PROBE_TIMEOUT_S`: the outcome stays unknown
  (never guessed), for an operator to resolve (``POST /v1/resolutions``).
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from broker.deadlines import deadline
from broker.execution.executor import ExecutionReport
from broker.model import Execution, ExecutionError
from broker.plugins import AdapterContext
from broker.stores import Settlement
from broker.taxonomy import Code
from broker.timestamps import utc_now
from broker.tools.runtime import ToolRuntime

__all__ = ["PROBE_TIMEOUT_S", "AskedOutcome", "OutcomeReportingAdapter", "ask_backend"]

log = logging.getLogger("broker.execution")

PROBE_TIMEOUT_S = 5.0
"""The longest the broker waits for a backend's answer about a call (bounded by the tool's own
``timeout_s`` too); the agent is waiting."""


class AskedOutcome(msgspec.Struct, frozen=True):
    """What a backend says happened to the call with the context's idempotency key."""

    outcome: Literal["succeeded", "failed", "not_executed", "unknown"]
    result: dict[str, Any] | None = None
    """``succeeded`` only: the call's result."""


@runtime_checkable
class OutcomeReportingAdapter(Protocol):
    async def outcome_of(self, args: dict[str, Any], ctx: AdapterContext) -> AskedOutcome:
        """What happened to the call made with ``args`` and ``ctx`` (its idempotency key)."""
        ...


async def ask_backend(
    tool: ToolRuntime, args: dict[str, Any], ctx: AdapterContext, report: ExecutionReport
) -> ExecutionReport:
    """``report`` itself unless it is unknown and the backend can say better."""
    adapter = tool.adapter
    if report.settlement is not Settlement.UNKNOWN or not isinstance(
        adapter, OutcomeReportingAdapter
    ):
        return report
    try:
        async with deadline(min(tool.config.timeout_s, PROBE_TIMEOUT_S)):
            asked = await adapter.outcome_of(args, ctx)
    except Exception:  # a timeout, a fault or a bug: the outcome stays unknown
        log.warning("asking %s what happened to a call failed", tool.name, exc_info=True)
        return report
    execution = report.execution
    if not isinstance(asked, AskedOutcome):
        log.warning("%s.outcome_of answered %r, not an AskedOutcome", tool.name, type(asked))
        return report
    if asked.outcome == "succeeded" and isinstance(asked.result, dict):
        succeeded = Execution(
            status="succeeded",
            result=asked.result,
            attempts=execution.attempts,
            started_at=execution.started_at,
            ended_at=utc_now(),
        )
        return ExecutionReport(succeeded, Settlement.SUCCEEDED, None, report.elapsed_us)
    if asked.outcome == "failed":
        code = Code.PROVIDER_ERROR
        failed = msgspec.structs.replace(
            execution,
            error=ExecutionError(
                category="PROVIDER", code=code.value, message=f"{tool.name} failed"
            ),
        )
        return ExecutionReport(failed, Settlement.DEFINITE_FAILURE, code, report.elapsed_us)
    if asked.outcome == "not_executed":
        return msgspec.structs.replace(report, settlement=Settlement.TRANSIENT_FAILURE)
    return report
