"""The checks behind the validator chain's steps, one module per check, each returning data.

Order (see the README): tool ▸ authz ▸ schema ▸ policy ▸ idempotency key ▸ preconditions ▸
admission (idempotency claim, budgets, rate limits in one atomic store call). The checks know
nothing of the chain: ``broker.pipeline.steps`` binds each to a proposal, and
``broker.pipeline.chain`` puts the steps in that order.
"""

from __future__ import annotations

import msgspec

from broker.model import FailedCheck, FieldError
from broker.taxonomy import Code

__all__ = ["STORE_UNAVAILABLE", "Rejection"]


class Rejection(msgspec.Struct, frozen=True, kw_only=True):
    """Why a step refused a proposal; ``reason`` and ``remediation`` are safe to show the agent."""

    code: Code
    reason: str
    remediation: str | None = None
    errors: tuple[FieldError, ...] = ()
    retry_after_s: float | None = None
    failed_check: FailedCheck | None = None
    """What refused, when it has a config name; ``None``: the code's kind, unnamed."""


STORE_UNAVAILABLE = Rejection(
    code=Code.STORE_UNAVAILABLE,
    reason="the broker cannot reach its state; nothing was executed",
    remediation="RETRY: resend the same proposal after Retry-After seconds",
    retry_after_s=1.0,
    failed_check=FailedCheck("idempotency", None),
)
"""Any step that cannot reach the broker's state fails closed with this."""
