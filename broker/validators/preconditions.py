"""Preconditions: names the model listed must exist; the tool's declared checks always run, and
a check that cannot be made is an outage (``provider_*``), not a failed precondition."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from broker.deadlines import deadline
from broker.execution.retrying import answer_retry_after, is_transient
from broker.model import FailedCheck, FieldError
from broker.plugins import VerifierContext
from broker.taxonomy import Code
from broker.tools.runtime import ToolRuntime
from broker.validators import Rejection

__all__ = ["check_listed", "verify"]

log = logging.getLogger("broker.preconditions")


def check_listed(listed: Sequence[str], known: frozenset[str]) -> Rejection | None:
    """A precondition the broker does not know is a malformed proposal, never silently passed."""
    if known.issuperset(listed):  # the usual case, decided in one C call
        return None
    errors = tuple(
        FieldError(f"/preconditions/{i}", f"unknown precondition {name!r}")
        for i, name in enumerate(listed)
        if name not in known
    )
    return Rejection(
        code=Code.UNKNOWN_PRECONDITION,
        reason=errors[0].message,
        remediation="REPLAN: list only preconditions the tool declares (GET /v1/tools)",
        errors=errors,
    )


async def verify(tool: ToolRuntime, args: dict[str, Any], ctx: VerifierContext) -> Rejection | None:
    """Run every declared precondition; a verifier that cannot answer fails closed.

    A verifier that answers "no" is the proposal's problem (``precondition_failed``). One that
    cannot answer (its backend refused the connection, failed, timed out or asked to be called
    later) is an outage, never blamed on the agent: ``provider_unavailable`` with ``Retry-After``
    (or ``provider_error`` for a definite fault such as a malformed answer or a crash).
    """
    preconditions = tool.preconditions
    if not preconditions:
        return None
    failures: list[tuple[str, str, str]] = []  # (precondition, reason, remediation)
    faults: list[tuple[str, BaseException]] = []
    checked = 0
    try:
        # One deadline for all of them (the tool's timeout), not one timer per verifier.
        async with deadline(tool.config.timeout_s):
            for pre in preconditions:
                try:
                    check = await pre.verifier(args, ctx)
                except Exception as exc:
                    log.warning("precondition verifier %s failed", pre.name, exc_info=True)
                    faults.append((pre.name, exc))
                    check = None
                checked += 1
                if check is not None and not check.ok:
                    reason = check.reason or f"Precondition {pre.name!r} failed"
                    failures.append((pre.name, reason, check.remediation or pre.remediation))
    except TimeoutError as exc:
        faults.extend((pre.name, exc) for pre in preconditions[checked:])
    if faults:
        return _could_not_check(faults)
    if not failures:
        return None
    # Several checks often fail for one cause ("order O-1 not found" from each check of the
    # order): each distinct reason once, in the order the checks ran.
    reasons = dict.fromkeys(reason for _, reason, _ in failures)
    return Rejection(
        code=Code.PRECONDITION_FAILED,
        reason="; ".join(reasons),
        remediation=failures[0][2],
        failed_check=FailedCheck("precondition", failures[0][0]),
    )


def _could_not_check(faults: list[tuple[str, BaseException]]) -> Rejection:
    """The data plane could not answer: transient faults ask for a retry later."""
    names = ", ".join(repr(name) for name, _ in faults)
    label = "precondition" if len(faults) == 1 else "preconditions"
    transient = [exc for _, exc in faults if is_transient(exc)]
    if transient:
        return Rejection(
            code=Code.PROVIDER_UNAVAILABLE,
            reason=f"{label} {names} could not be checked: its backend is unavailable",
            remediation="RETRY: resend the same proposal after Retry-After seconds",
            retry_after_s=max(answer_retry_after(exc) for exc in transient),
            failed_check=FailedCheck("precondition", faults[0][0]),
        )
    return Rejection(
        code=Code.PROVIDER_ERROR,
        reason=f"{label} {names} could not be checked: its backend failed",
        remediation="ESCALATE: the check itself is broken; a human must look at it",
        failed_check=FailedCheck("precondition", faults[0][0]),
    )
