"""The idempotency key: required for tools that change the world, well-formed, fingerprinted."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import msgspec

from broker.model import FieldError
from broker.stores import ClaimRequest, Conflict
from broker.taxonomy import Code
from broker.tools.runtime import ToolRuntime
from broker.validators import Rejection

__all__ = ["build_claim", "conflict_rejection", "fingerprint", "resolve_key"]

_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
_encoder = msgspec.json.Encoder(order="sorted")

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


def fingerprint(tool: str, args: dict[str, Any]) -> str:
    """Canonical hash of what the key promises: same tool and equal args, in any key order."""
    return hashlib.sha256(_encoder.encode((tool, args))).hexdigest()


def resolve_key(
    body_key: str | None, header_key: str | None, tool: ToolRuntime
) -> str | Rejection | None:
    """The proposal's key from body and/or header, or why it is unacceptable."""
    if body_key is not None and header_key is not None and body_key != header_key:
        return Rejection(
            code=Code.IDEMPOTENCY_KEY_INVALID,
            reason="the Idempotency-Key header and the idempotency_key field differ",
            errors=(FieldError("/idempotency_key", "differs from the Idempotency-Key header"),),
        )
    key = body_key if body_key is not None else header_key
    if key is None:
        if tool.config.risk == "read":
            return None
        return Rejection(
            code=Code.IDEMPOTENCY_KEY_MISSING,
            reason=f"{tool.name} changes the world and needs an idempotency_key",
            remediation="RETRY: resend with a stable idempotency_key for this action",
            errors=(FieldError("/idempotency_key", "required for tools whose risk is not read"),),
        )
    if not _KEY.fullmatch(key):
        return Rejection(
            code=Code.IDEMPOTENCY_KEY_INVALID,
            reason="idempotency keys are 1-255 printable ASCII characters",
            errors=(FieldError("/idempotency_key", "must be 1-255 printable ASCII characters"),),
        )
    return key


def build_claim(
    key: str,
    tool: ToolRuntime,
    args: dict[str, Any],
    *,
    tenant: str,
    route: str,
    lease_margin_s: float,
) -> ClaimRequest:
    return ClaimRequest(
        tenant=tenant,
        route=route,
        key=key,
        fingerprint=fingerprint(tool.name, args),
        # The lease outlives the whole call (its timeout bounds retries too) with a margin.
        lease_s=tool.config.timeout_s + lease_margin_s,
        idempotent=tool.config.idempotent,
    )


def conflict_rejection(conflict: Conflict) -> Rejection:
    """Why the store would not let this key run: reused, still running, or of unknown outcome."""
    code, reason, remediation = _CONFLICTS[conflict.kind]
    return Rejection(
        code=code, reason=reason, remediation=remediation, retry_after_s=conflict.retry_after_s
    )
