"""Call a tool's adapter once, inside its deadline, retrying transport faults only where safe.

The deadline bounds the whole call, retries and backoff included. A retry is safe only when the
tool is idempotent or the adapter forwards the idempotency key so the backend can deduplicate.
How the call ended decides what happens to the idempotency key (see ``Settlement``): a definite
failure is stored and replayed, a transient one releases the key, and a call that may have
reached the backend of a non-idempotent tool leaves the key ``outcome_unknown``.

Just before the first attempt is sent (after the backend's guard let it through) the claim is
marked as dispatched in the store (:func:`dispatcher`): a process that dies before that mark
leaves a claim recovery may release, since its call never left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from broker.deadlines import deadline
from broker.execution.retrying import answer_retry_after, retry_transient
from broker.model import Execution, ExecutionError
from broker.plugins import AdapterContext
from broker.resilience.guard import BackendRefused
from broker.stores import AdmissionStore, Settlement, Ticket
from broker.taxonomy import CODE_STATUS, Code, ProviderError, StoreUnavailableError
from broker.timestamps import utc_now
from broker.tools.runtime import ToolRuntime

__all__ = ["Dispatch", "ExecutionReport", "NotSent", "dispatcher", "execute", "preview"]

log = logging.getLogger("broker.execution")

Sleep = Callable[[float], Awaitable[None]]
Dispatch = Callable[[], Awaitable[None]]
"""Marks the call as sent, durably, or raises :class:`NotSent`: awaited just before the first
attempt leaves, after every check."""

_MARK_RETRY_AFTER_S = 1.0


class NotSent(Exception):
    """The call was stopped before it was sent: its claim could not be marked as dispatched."""

    def __init__(self, code: Code, message: str, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.code, self.message, self.retry_after_s = code, message, retry_after_s


def dispatcher(
    store: AdmissionStore, ticket: Ticket, proposal_id: str, clock: Callable[[], float]
) -> Dispatch | None:
    """The dispatch mark of ``ticket``'s claim; ``None`` when it has no claim (nothing to mark).

    A store that cannot write the mark fails the call closed (503 ``store_unavailable``, never
    sent); a claim that is no longer ours (its lease lapsed and it was recovered or taken over
    meanwhile) is answered 409 ``idempotency_in_progress``, never sent either.
    """
    if ticket.claim is None:
        return None

    async def dispatch() -> None:
        try:
            ours = await store.dispatch(ticket, proposal_id=proposal_id, now=clock())
        except StoreUnavailableError as exc:
            message = "the broker's state store is unavailable; the call was not sent"
            raise NotSent(Code.STORE_UNAVAILABLE, message, _MARK_RETRY_AFTER_S) from exc
        if not ours:
            message = "the idempotency claim lapsed before the call was sent; it was not sent"
            raise NotSent(Code.IDEMPOTENCY_IN_PROGRESS, message, _MARK_RETRY_AFTER_S)

    return dispatch


class ExecutionReport(msgspec.Struct, frozen=True):
    """How one execution ended (immutable; a struct, since a frozen dataclass's ``__init__``
    costs a microsecond per proposal and a named tuple's a quarter of one)."""

    execution: Execution
    settlement: Settlement
    code: Code | None
    """``None`` on success; otherwise the failure code, which also sets the HTTP status."""
    elapsed_us: int
    attempt_outcomes: tuple[str, ...] = ()
    """How each call ended, in order: ``succeeded``, or the code it failed with (the ledger's)."""
    retry_after_s: float | None = None
    """The answer's ``Retry-After``: set when a transient failure released the key, or when the
    backend's guard refused the call (then it was never sent)."""
    detail: str | None = None
    """The backend's own words about a failure (``ProviderError.detail``): for the log and the
    ledger, never for the answer."""
    cache: str | None = None
    """Tools with ``read_cache``: ``hit``, ``miss`` or ``stored`` (``broker.execution.read_cache``)."""
    cached_age_s: float | None = None
    """A hit's age: seconds since its result was stored."""


def _retry_is_safe(tool: ToolRuntime, ctx: AdapterContext) -> bool:
    forwards_key = bool(getattr(tool.adapter, "forwards_idempotency_key", False))
    return tool.config.idempotent or (forwards_key and ctx.idempotency_key is not None)


async def execute(
    tool: ToolRuntime,
    args: dict[str, Any],
    ctx: AdapterContext,
    *,
    sleep: Sleep = asyncio.sleep,
    dispatch: Dispatch | None = None,
) -> ExecutionReport:
    """Invoke ``tool``'s adapter and describe how it ended; never raises for adapter faults.

    ``dispatch`` is awaited once, just before the first attempt is sent (see :func:`dispatcher`).
    """
    policy = tool.config.retry
    guard = tool.guard
    # The first attempt calls the adapter directly: nearly every call is the only one, and a
    # per-call closure counting attempts cost more than the fast adapters themselves.
    retries: _Retries | None = None  # only once a first attempt failed and may be retried
    result: dict[str, Any]
    started_at, started = utc_now(), time.perf_counter()
    marking = None if dispatch is None else _Marking(dispatch)
    try:
        async with deadline(tool.config.timeout_s):
            try:
                if guard is None:
                    if marking is not None:
                        await marking()
                    result = await tool.adapter.invoke(args, ctx)
                else:
                    guard.budget.called()
                    result = await guard.invoke(tool.adapter, args, ctx, before_send=marking)
            except ProviderError as exc:
                if not (exc.retryable and policy.attempts > 1 and _retry_is_safe(tool, ctx)):
                    raise
                if guard is not None and not guard.budget.try_retry():
                    raise  # the backend's retry budget is spent: no extra load on it now
                retries = _Retries(tool, args, ctx)
                retries.outcomes.append(_provider_code(exc).value)
                result = await retry_transient(
                    retries.next_attempt,
                    exc,
                    policy,
                    deadline=ctx.deadline,
                    sleep=sleep,
                    allow=guard.budget.try_retry if guard is not None else None,
                )
    except TimeoutError:
        attempts = _attempts(retries)
        # The call may have reached the backend: only an idempotent tool may simply run again,
        # or one whose deadline passed before it was marked dispatched (so never sent).
        unsent = marking is not None and not marking.marked
        settlement = (
            Settlement.TRANSIENT_FAILURE if tool.config.idempotent or unsent else Settlement.UNKNOWN
        )
        message = f"{tool.name} did not answer within {tool.config.timeout_s:g}s"
        return _failed(Code.TIMEOUT, message, settlement, attempts, started_at, started, retries)
    except NotSent as exc:
        # Stopped before the first attempt left: the key is given back, nothing was sent.
        failed = _failed(
            exc.code, exc.message, Settlement.TRANSIENT_FAILURE, 0, started_at, started
        )
        return msgspec.structs.replace(failed, retry_after_s=exc.retry_after_s)
    except BackendRefused as exc:
        # Refused before it was sent: the key is free again, and Retry-After says when.
        sent = 0 if retries is None else retries.attempts - 1
        failed = _failed(
            Code.PROVIDER_UNAVAILABLE,
            exc.message,
            Settlement.TRANSIENT_FAILURE,
            sent,
            started_at,
            started,
            retries,
        )
        return msgspec.structs.replace(failed, retry_after_s=exc.retry_after_s)
    except ProviderError as exc:
        attempts = _attempts(retries)
        if exc.detail:
            log.warning("%s (%s)", exc.message, exc.detail)
        if exc.retryable:
            # Transient and not overcome in time: the key is released (nothing stored), and the
            # caller is told when to try again.
            code = Code.PROVIDER_UNAVAILABLE if exc.unavailable else Code.PROVIDER_ERROR
            failed = _failed(
                code,
                exc.message,
                Settlement.TRANSIENT_FAILURE,
                attempts,
                started_at,
                started,
                retries,
            )
            if code is Code.PROVIDER_UNAVAILABLE:
                failed = msgspec.structs.replace(failed, retry_after_s=answer_retry_after(exc))
        else:
            failed = _failed(
                Code.PROVIDER_ERROR,
                exc.message,
                Settlement.DEFINITE_FAILURE,
                attempts,
                started_at,
                started,
                retries,
            )
        return msgspec.structs.replace(failed, detail=exc.detail) if exc.detail else failed
    except Exception:
        # A bug in the adapter: we cannot know whether it acted, so treat it like a timeout.
        log.exception("adapter for %s raised unexpectedly", tool.name)
        attempts = _attempts(retries)
        settlement = Settlement.TRANSIENT_FAILURE if tool.config.idempotent else Settlement.UNKNOWN
        return _failed(
            Code.PROVIDER_ERROR,
            f"{tool.name} failed",
            settlement,
            attempts,
            started_at,
            started,
            retries,
        )
    attempts = _attempts(retries)
    if not isinstance(result, dict):
        log.error("adapter for %s returned %s, not a JSON object", tool.name, type(result).__name__)
        return _failed(
            Code.PROVIDER_ERROR,
            f"{tool.name} returned an invalid result",
            Settlement.UNKNOWN if not tool.config.idempotent else Settlement.TRANSIENT_FAILURE,
            attempts,
            started_at,
            started,
            retries,
        )
    execution = Execution(
        status="succeeded",
        result=result,
        attempts=attempts,
        started_at=started_at,
        ended_at=utc_now(),
    )
    outcomes = ("succeeded",) if retries is None else _outcomes(retries, attempts, "succeeded")
    return ExecutionReport(execution, Settlement.SUCCEEDED, None, _elapsed_us(started), outcomes)


class _Marking:
    """The dispatch mark of one call, and whether it was written (a deadline that passes before
    it was leaves a call that was never sent)."""

    __slots__ = ("_dispatch", "marked")

    def __init__(self, dispatch: Dispatch) -> None:
        self._dispatch = dispatch
        self.marked = False

    async def __call__(self) -> None:
        await self._dispatch()
        self.marked = True


class _Retries:
    """The attempts after a first one that failed transiently: each numbered in its context,
    and how each that failed ended (the last one's end is the execution's)."""

    __slots__ = ("_args", "_ctx", "_tool", "attempts", "outcomes")

    def __init__(self, tool: ToolRuntime, args: dict[str, Any], ctx: AdapterContext) -> None:
        self._tool, self._args, self._ctx = tool, args, ctx
        self.attempts = 1  # the first, already made
        self.outcomes: list[str] = []

    async def next_attempt(self) -> dict[str, Any]:
        self.attempts += 1
        ctx = msgspec.structs.replace(self._ctx, attempt=self.attempts)
        guard = self._tool.guard
        try:
            if guard is None:
                return await self._tool.adapter.invoke(self._args, ctx)
            return await guard.invoke(self._tool.adapter, self._args, ctx)
        except ProviderError as exc:
            self.outcomes.append(_provider_code(exc).value)
            raise


def _provider_code(exc: ProviderError) -> Code:
    if not exc.retryable:
        return Code.PROVIDER_ERROR
    return Code.PROVIDER_UNAVAILABLE if exc.unavailable else Code.PROVIDER_ERROR


def _outcomes(retries: _Retries | None, attempts: int, last: str) -> tuple[str, ...]:
    """Every attempt's outcome: the failures recorded on the way, then how the last one ended
    (unless it failed with a recorded failure already, or none was in flight)."""
    if retries is None:
        return (last,)
    found = retries.outcomes
    if len(found) < attempts:
        return (*found, last)
    return tuple(found)


def _attempts(retries: _Retries | None) -> int:
    """How many calls were made: one, unless retries followed."""
    return 1 if retries is None else retries.attempts


async def preview(tool: ToolRuntime, args: dict[str, Any], ctx: AdapterContext) -> Execution:
    """A dry run's execution: the adapter's preview when it has one, nothing executed."""
    result: dict[str, Any] | None = None
    if tool.previewer is not None:
        try:
            async with deadline(tool.config.timeout_s):
                result = await tool.previewer.preview(args, ctx)
        except Exception:  # a preview is best effort; a dry run must never fail because of it
            log.warning("preview for %s failed", tool.name, exc_info=True)
    return Execution(status="dry_run", result=result or None)


def _failed(
    code: Code,
    message: str,
    settlement: Settlement,
    attempts: int,
    started_at: str,
    started: float,
    retries: _Retries | None = None,
) -> ExecutionReport:
    category, _ = CODE_STATUS[code]
    execution = Execution(
        status="failed",
        error=ExecutionError(category=category.value, code=code.value, message=message),
        attempts=attempts,
        started_at=started_at,
        ended_at=utc_now(),
    )
    return ExecutionReport(
        execution, settlement, code, _elapsed_us(started), _outcomes(retries, attempts, code.value)
    )


def _elapsed_us(started: float) -> int:
    return int((time.perf_counter() - started) * 1_000_000)
