"""Exceptions, one per failure category of the broker's taxonomy.

Each carries the :class:`~broker_client.models.Decision` (for answers to proposals) or the
problem body the broker sent, so a caller can branch on ``code`` or show ``remediation``.
"""

from __future__ import annotations

from typing import Any

from broker_client.models import Decision

__all__ = [
    "AuthzError",
    "BrokerError",
    "IdempotencyError",
    "InternalError",
    "PolicyError",
    "PreconditionError",
    "ProviderError",
    "SchemaError",
    "ToolTimeoutError",
    "TransportError",
    "UnavailableError",
    "error_for",
]


class BrokerError(Exception):
    """The broker refused, or the action failed. ``status`` is the HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        category: str | None = None,
        remediation: str | None = None,
        decision: Decision | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.category = category
        self.remediation = remediation
        self.decision = decision
        self.body = body


class SchemaError(BrokerError):
    """``SCHEMA``: the proposal or its args are malformed; ``decision.errors`` has the pointers."""


class AuthzError(BrokerError):
    """``AUTHZ``: the token may not do this."""


class PreconditionError(BrokerError):
    """``PRECONDITION``: a data-plane check, a budget or a rate limit refused."""


class PolicyError(BrokerError):
    """``POLICY``: a policy rule or the implied-write policy refused."""


class IdempotencyError(BrokerError):
    """``IDEMPOTENCY``: a key missing, reused, in progress, or its outcome unknown."""


class ProviderError(BrokerError):
    """``PROVIDER``: the backend failed or is unavailable."""


class ToolTimeoutError(BrokerError):
    """``TIMEOUT``: the backend did not answer within the tool's deadline."""


class UnavailableError(BrokerError):
    """``UNAVAILABLE``: the broker cannot reach its own state; nothing was executed."""


class InternalError(BrokerError):
    """``INTERNAL``: an unexpected fault in the broker."""


class TransportError(BrokerError):
    """The broker could not be reached, after the client's retries."""


_BY_CATEGORY: dict[str, type[BrokerError]] = {
    "SCHEMA": SchemaError,
    "AUTHZ": AuthzError,
    "PRECONDITION": PreconditionError,
    "POLICY": PolicyError,
    "IDEMPOTENCY": IdempotencyError,
    "PROVIDER": ProviderError,
    "TIMEOUT": ToolTimeoutError,
    "UNAVAILABLE": UnavailableError,
    "INTERNAL": InternalError,
}


def error_for(category: str | None) -> type[BrokerError]:
    """The exception class for a taxonomy category (``BrokerError`` for one this client lacks)."""
    return _BY_CATEGORY.get(category or "", BrokerError)
