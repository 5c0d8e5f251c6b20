"""Preconditions: names the model listed must exist; the tool's declared checks always run."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from broker.deadlines import deadline
from broker.model import FailedCheck, FieldError
from broker.plugins import Check, VerifierContext
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
    """Run every declared precondition; a verifier that crashes or hangs fails closed."""
    preconditions = tool.preconditions
    if not preconditions:
        return None
    failures: list[tuple[str, str, str]] = []  # (precondition, reason, remediation)
    checked = 0
    try:
        # One deadline for all of them (the tool's timeout), not one timer per verifier.
        async with deadline(tool.config.timeout_s):
            for pre in preconditions:
                try:
                    check = await pre.verifier(args, ctx)
                except Exception:
                    log.exception("precondition verifier %s failed", pre.name)
                    check = Check(False, f"precondition {pre.name!r} could not be checked")
                checked += 1
                if not check.ok:
                    reason = check.reason or f"Precondition {pre.name!r} failed"
                    failures.append((pre.name, reason, check.remediation or pre.remediation))
    except TimeoutError:
        for pre in preconditions[checked:]:
            reason = f"precondition {pre.name!r} was not checked in time"
            failures.append((pre.name, reason, pre.remediation))
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
