"""``failed_check``: which kind of check refused an answer, for programs (``reason`` is for people).

Every code maps to a kind; a step that knows the config name of what refused (the precondition,
budget, rate limit or rule) names it on its :class:`~broker.validators.Rejection`, and anything
without a name keeps ``None``.
"""

from __future__ import annotations

from typing import Literal

from broker.model import FailedCheck
from broker.taxonomy import CODE_STATUS, Category, Code

__all__ = ["CHECK_KINDS", "CheckKind", "check_of", "default_check"]

CheckKind = Literal[
    "schema",
    "authz",
    "idempotency",
    "precondition",
    "budget",
    "rate_limit",
    "policy",
    "approval",
    "provider",
    "timeout",
]
CHECK_KINDS: tuple[CheckKind, ...] = (
    "schema",
    "authz",
    "idempotency",
    "precondition",
    "budget",
    "rate_limit",
    "policy",
    "approval",
    "provider",
    "timeout",
)

# Codes whose kind is narrower than their category's (budgets, rate limits and policy all answer
# in PRECONDITION), and the broker's own state: a fault of the admission it could not make.
_BY_CODE: dict[Code, CheckKind] = {
    Code.BUDGET_EXCEEDED: "budget",
    Code.RATE_LIMITED: "rate_limit",
    Code.POLICY_BLOCKED: "policy",
    Code.STORE_UNAVAILABLE: "idempotency",
}
_BY_CATEGORY: dict[Category, CheckKind] = {
    Category.SCHEMA: "schema",
    Category.AUTHZ: "authz",
    Category.PRECONDITION: "precondition",
    Category.IDEMPOTENCY: "idempotency",
    Category.PROVIDER: "provider",
    Category.TIMEOUT: "timeout",
}
_DEFAULTS: dict[Code, FailedCheck] = {
    code: FailedCheck(_BY_CODE.get(code) or _BY_CATEGORY.get(category, "provider"), None)
    for code, (category, _) in CODE_STATUS.items()
}


def default_check(code: Code) -> FailedCheck:
    """The check behind ``code`` when nothing names what refused (one shared instance per code)."""
    found = _DEFAULTS.get(code)
    if found is None:  # a code added after this table was built
        category = CODE_STATUS[code][0]
        return FailedCheck(_BY_CODE.get(code) or _BY_CATEGORY.get(category, "provider"), None)
    return found


def check_of(code: Code, name: str | None) -> FailedCheck:
    """The check behind ``code``, naming what refused."""
    return FailedCheck(default_check(code).kind, name)
