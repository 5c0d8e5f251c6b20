"""The seams backends plug into: adapters that execute tools and verifiers that check preconditions.

Each is a one-method protocol. An adapter receives validated args and a context scoped to exactly
one call: one tenant, one route, one idempotency key, one deadline, and only its own tool's
credentials. It never sees the config, other tools' secrets or the broker's store.

This module is also everything the adapter kinds in ``adapters/`` take from the broker: the
outbound URL policy they must honour (:class:`Allowlist`), the error that reports a backend's
failure (:class:`ProviderError`, with a backend's ``Retry-After`` read by
:func:`parse_retry_after`), the naming rules of registered tools, and the choice of HTTP
client. An adapter that imports anything else of the broker's reaches past the seam.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from broker.allowlist import Allowlist, RefusedURL, Resolved
from broker.config.model import REGISTERED_NAME
from broker.faults import crash_point
from broker.retry_after import parse_retry_after
from broker.taxonomy import ProviderError
from broker.tool_id import infer_namespace

__all__ = [
    "CLIENT_ENV",
    "ENTRY_POINT_GROUP",
    "REGISTERED_NAME",
    "Adapter",
    "AdapterContext",
    "Allowlist",
    "Backend",
    "Check",
    "HttpClientKind",
    "PreconditionVerifier",
    "PreviewingAdapter",
    "ProviderError",
    "RefusedURL",
    "Resolved",
    "VerifierContext",
    "crash_point",
    "infer_namespace",
    "parse_retry_after",
]


ENTRY_POINT_GROUP = "action_broker.adapters"
"""Where ``[backends.X] entry_point = "name"`` looks for Python backend factories."""

CLIENT_ENV = "BROKER_HTTP_CLIENT"
"""Which HTTP client the process's ``http`` tools and verifiers use: ``httpx`` (the default) or
the opt-in hand-built ``http1`` (``adapters.http_pool``)."""
HttpClientKind = Literal["httpx", "http1"]


class AdapterContext(msgspec.Struct, frozen=True, kw_only=True):
    tenant: str
    route: str
    tool: str
    proposal_id: str
    trace_id: str
    idempotency_key: str | None
    deadline: float
    """``time.monotonic()`` value after which the call is abandoned."""
    credentials: Mapping[str, str]
    """Only this tool's own secrets, for this tenant."""
    attempt: int = 1
    traceparent: str | None = None
    """The W3C ``traceparent`` to send downstream (the execute_tool span's, when tracing)."""

    def __repr__(self) -> str:  # keep secrets out of logs and tracebacks
        return (
            f"AdapterContext(tenant={self.tenant!r}, route={self.route!r}, tool={self.tool!r}, "
            f"proposal_id={self.proposal_id!r}, credentials=<{len(self.credentials)} hidden>)"
        )


class VerifierContext(msgspec.Struct, frozen=True, kw_only=True):
    tenant: str
    route: str
    tool: str
    trace_id: str


class Check(msgspec.Struct, frozen=True):
    """A verifier's answer: ``ok``, or a user-safe reason (and optionally a sharper remediation)."""

    ok: bool
    reason: str | None = None
    remediation: str | None = None


class Adapter(Protocol):
    async def invoke(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        """Execute the tool once; raise :class:`~broker.taxonomy.ProviderError` on failure."""
        ...


@runtime_checkable
class PreviewingAdapter(Protocol):
    async def preview(self, args: dict[str, Any], ctx: AdapterContext) -> dict[str, Any]:
        """What ``invoke`` would do, without doing it (used by dry runs)."""
        ...


class PreconditionVerifier(Protocol):
    async def __call__(self, args: dict[str, Any], ctx: VerifierContext) -> Check: ...


class Backend(Protocol):
    """A Python backend built from ``[backends.NAME]``: named operations and verifiers."""

    @property
    def adapters(self) -> Mapping[str, Adapter]: ...

    @property
    def verifiers(self) -> Mapping[str, PreconditionVerifier]: ...
