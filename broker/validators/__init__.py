"""The validator chain's steps, one module per check, each returning a verdict as data.

Order (see DESIGN.md): tool ▸ authz ▸ schema ▸ idempotency key ▸ preconditions ▸ admission
(idempotency claim, budgets, rate limits in one atomic store call). The pipeline runs them.
"""

from __future__ import annotations

import msgspec

from broker.model import FieldError
from broker.taxonomy import Code

__all__ = ["Rejection"]


class Rejection(msgspec.Struct, frozen=True, kw_only=True):
    """Why a step refused a proposal; ``reason`` and ``remediation`` are safe to show the agent."""

    code: Code
    reason: str
    remediation: str | None = None
    errors: tuple[FieldError, ...] = ()
    retry_after_s: float | None = None
