"""The failure taxonomy: bounded categories and codes, their HTTP statuses, and the error tree.

Categories and codes are data: they appear verbatim on the wire, in the ledger and as metric
labels, so they stay closed enums. Exceptions are for faults and are translated at each boundary.

    BrokerError
    ├── ConfigError          startup: .problems lists every (key path, message)
    ├── AuthError            no principal could be derived from the request
    ├── StoreUnavailableError  state could not be read or written (fail closed → 503)
    └── AdapterError         the only family adapters raise
        └── ProviderError    .retryable (transport fault, 5xx) or definite (4xx-like)
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CODE_STATUS",
    "IMPLIED_WRITE_VIOLATION",
    "LEDGER_ONLY",
    "POLICY",
    "AdapterError",
    "AuthError",
    "BrokerError",
    "Category",
    "Code",
    "ConfigError",
    "ProviderError",
    "StoreUnavailableError",
    "is_transient",
]


class Category(StrEnum):
    SCHEMA = "SCHEMA"
    AUTHZ = "AUTHZ"
    PRECONDITION = "PRECONDITION"
    IDEMPOTENCY = "IDEMPOTENCY"
    PROVIDER = "PROVIDER"
    TIMEOUT = "TIMEOUT"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


class Code(StrEnum):
    # SCHEMA
    MALFORMED_REQUEST = "malformed_request"
    SCHEMA_INVALID = "schema_invalid"
    UNKNOWN_TOOL = "unknown_tool"
    UNKNOWN_PRECONDITION = "unknown_precondition"
    # AUTHZ
    UNAUTHENTICATED = "unauthenticated"
    TOKEN_EXPIRED = "token_expired"
    TOOL_NOT_ALLOWED = "tool_not_allowed"
    TENANT_MISMATCH = "tenant_mismatch"
    FORBIDDEN = "forbidden"
    # PRECONDITION
    PRECONDITION_FAILED = "precondition_failed"
    BUDGET_EXCEEDED = "budget_exceeded"
    RATE_LIMITED = "rate_limited"
    POLICY_BLOCKED = "policy_blocked"
    # IDEMPOTENCY
    IDEMPOTENCY_KEY_MISSING = "idempotency_key_missing"
    IDEMPOTENCY_KEY_INVALID = "idempotency_key_invalid"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"
    OUTCOME_UNKNOWN = "outcome_unknown"
    # PROVIDER / TIMEOUT
    PROVIDER_ERROR = "provider_error"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    TIMEOUT = "timeout"
    # the broker itself
    STORE_UNAVAILABLE = "store_unavailable"
    SERVICE_UNAVAILABLE = "service_unavailable"
    NOT_FOUND = "not_found"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    INTERNAL_ERROR = "internal_error"


CODE_STATUS: dict[Code, tuple[Category, int]] = {
    Code.MALFORMED_REQUEST: (Category.SCHEMA, 400),
    Code.SCHEMA_INVALID: (Category.SCHEMA, 422),
    Code.UNKNOWN_TOOL: (Category.SCHEMA, 422),
    Code.UNKNOWN_PRECONDITION: (Category.SCHEMA, 422),
    Code.UNAUTHENTICATED: (Category.AUTHZ, 401),
    Code.TOKEN_EXPIRED: (Category.AUTHZ, 401),
    Code.TOOL_NOT_ALLOWED: (Category.AUTHZ, 403),
    Code.TENANT_MISMATCH: (Category.AUTHZ, 403),
    Code.FORBIDDEN: (Category.AUTHZ, 403),
    Code.PRECONDITION_FAILED: (Category.PRECONDITION, 409),
    Code.BUDGET_EXCEEDED: (Category.PRECONDITION, 429),
    Code.RATE_LIMITED: (Category.PRECONDITION, 429),
    Code.POLICY_BLOCKED: (Category.PRECONDITION, 409),
    Code.IDEMPOTENCY_KEY_MISSING: (Category.IDEMPOTENCY, 400),
    Code.IDEMPOTENCY_KEY_INVALID: (Category.IDEMPOTENCY, 400),
    Code.IDEMPOTENCY_KEY_REUSED: (Category.IDEMPOTENCY, 422),
    Code.IDEMPOTENCY_IN_PROGRESS: (Category.IDEMPOTENCY, 409),
    Code.OUTCOME_UNKNOWN: (Category.IDEMPOTENCY, 409),
    Code.PROVIDER_ERROR: (Category.PROVIDER, 502),
    Code.PROVIDER_UNAVAILABLE: (Category.PROVIDER, 503),
    Code.TIMEOUT: (Category.TIMEOUT, 504),
    Code.STORE_UNAVAILABLE: (Category.UNAVAILABLE, 503),
    Code.SERVICE_UNAVAILABLE: (Category.UNAVAILABLE, 503),
    Code.NOT_FOUND: (Category.SCHEMA, 404),
    Code.PAYLOAD_TOO_LARGE: (Category.SCHEMA, 413),
    Code.UNSUPPORTED_MEDIA_TYPE: (Category.SCHEMA, 415),
    Code.INTERNAL_ERROR: (Category.INTERNAL, 500),
}
"""Every code's category and HTTP status, in one table so the wire and the docs cannot drift."""

POLICY = "POLICY"
IMPLIED_WRITE_VIOLATION = "implied_write_violation"
LEDGER_ONLY: dict[str, str] = {IMPLIED_WRITE_VIOLATION: POLICY}
"""Codes only ledger records carry (no HTTP answer does), with their category: the implied-write
check answers 200 and records a message with unbacked claims as a rejection of this kind."""


class BrokerError(Exception):
    """Root of every exception the broker raises on purpose."""


class ConfigError(BrokerError, ValueError):
    """A configuration (or registration) has problems; all of them are listed.

    Args:
        problems: ``(key path, message)`` pairs, e.g. ``("tools.issue_credit.risk", "...")``.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {path}: {message}" for path, message in problems)
        super().__init__(f"{len(problems)} configuration problem(s):\n{lines}")


class AuthError(BrokerError):
    """No principal: the bearer token is missing, unknown or expired."""

    def __init__(self, code: Code, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(detail)


class StoreUnavailableError(BrokerError):
    """The store (or ledger) could not confirm a read or write; the broker fails closed."""


class AdapterError(BrokerError):
    """Raised by adapters, and only by adapters, when a call did not produce a result."""


class ProviderError(AdapterError):
    """The backend behind an adapter failed.

    Args:
        message: safe to show the agent; raw provider errors belong in logs.
        retryable: a transport fault or 5xx that may succeed if repeated; ``False`` for a
            definite failure (4xx-like), which is stored and replayed under its key.
        unavailable: the backend said it is unavailable (maps to ``provider_unavailable``).
        status: the backend's HTTP status, when it answered one (circuit breakers read it).
        retry_after_s: how long the backend asked callers to wait (its ``Retry-After``), if it
            said; the executor waits at least that long before retrying, within the deadline.
        detail: the backend's own words (its error text, an upstream's exception), already
            redacted of credentials: logged and recorded in the ledger, never shown the agent.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        unavailable: bool = False,
        status: int | None = None,
        retry_after_s: float | None = None,
        detail: str | None = None,
    ) -> None:
        self.message = message
        self.retryable = retryable
        self.unavailable = unavailable
        self.status = status
        self.retry_after_s = retry_after_s
        self.detail = detail
        super().__init__(message)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed call may succeed if repeated: a timeout, or a retryable ``ProviderError``
    (transport faults, 5xx, 408, 429). Everything else is definite. The one classification that
    retries, circuit breakers and precondition checks share."""
    return isinstance(exc, TimeoutError) or (isinstance(exc, ProviderError) and exc.retryable)
