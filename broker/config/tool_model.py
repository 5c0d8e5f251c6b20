"""The config's tool side: ``[tools.NAME]`` with its adapter, retries, claims, approval and read
cache; ``[backends.NAME]``; and ``[registered_tools.NAME]``, the operator's side of a tool a
backend registers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from broker.config.fields import Credentials, HttpUrl, PositiveFloat, PositiveInt, Section

__all__ = [
    "AdapterConfig",
    "ApprovalConfig",
    "BackendConfig",
    "ClaimsConfig",
    "HttpAdapterConfig",
    "McpAdapterConfig",
    "PythonAdapterConfig",
    "ReadCacheConfig",
    "RegisteredToolConfig",
    "RetryConfig",
    "ToolConfig",
]


class RetryConfig(Section):
    """Retries for transport faults, only where a retry is safe."""

    attempts: Annotated[int, msgspec.Meta(ge=1, le=10)] = 3
    initial_backoff_s: Annotated[float, msgspec.Meta(ge=0)] = 0.05
    max_backoff_s: Annotated[float, msgspec.Meta(ge=0)] = 1.0


class PythonAdapterConfig(Section, tag="python", tag_field="kind"):
    """An operation served by a backend object built in-process from ``[backends]``."""

    backend: str
    operation: str
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 32
    """The most calls in flight to this tool's backend at once (the lowest of its tools wins)."""


class HttpAdapterConfig(Section, tag="http", tag_field="kind"):
    """A backend reached over HTTP: signed ``POST``s to ``url`` (see docs/api.md)."""

    url: HttpUrl
    signing_secret: str | None = None
    """``"env:VAR"`` or ``"file:/path"`` in config; registered tools get a generated one."""
    credential_headers: dict[str, str] = {}
    """Request header -> name of one of the tool's credentials, e.g. ``{"X-Api-Key" = "api_key"}``."""
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 32
    """The most calls in flight to this tool's backend at once (the lowest of its tools wins)."""


class McpAdapterConfig(Section, tag="mcp", tag_field="kind"):
    """A tool of an upstream MCP server (streamable HTTP), called with ``tools/call``."""

    url: HttpUrl
    tool: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    """The tool's name on the upstream server."""
    max_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 32
    """The most calls in flight to this tool's backend at once (the lowest of its tools wins)."""
    credential_headers: dict[str, str] = {}
    """Request header -> name of one of the tool's credentials, sent on the tenant's session."""


AdapterConfig = PythonAdapterConfig | HttpAdapterConfig | McpAdapterConfig


class ClaimsConfig(Section):
    """Words by which prose claims this tool ran (for the implied-write detector)."""

    verbs: list[str] = []
    nouns: list[str] = []


class ApprovalConfig(Section):
    """A person must approve this tool's calls: always, or when ``when`` holds for the args."""

    required: bool = False
    """Every call waits for approval."""
    when: str | None = None
    """One comparison of a top-level argument with a literal, e.g. ``"amount > 100"`` (see
    broker/approvals/condition.py); calls for which it holds wait for approval."""
    expires_s: PositiveInt = 3600
    """How long an approval stays pending before the broker expires it (budgets given back)."""
    routes: list[str] = []
    """Only proposals on these routes wait for approval; empty: every route's."""


class ReadCacheConfig(Section):
    """Answer repeated calls of a ``read`` tool from the store for ``ttl_s`` seconds, per tenant,
    tool and canonical arguments (shared by every process on Redis)."""

    ttl_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)]
    """How long a result is served from the cache (at most a day)."""
    max_entry_bytes: Annotated[int, msgspec.Meta(ge=1, le=1_048_576)] = 65_536
    """Results larger than this (as JSON) are not cached."""


class ToolConfig(Section):
    description: str
    risk: Literal["read", "write", "irreversible"]
    input_schema: dict[str, Any]
    adapter: AdapterConfig
    idempotent: bool = False
    """True when executing twice has the effect of executing once (safe to retry)."""
    preconditions: list[str] = []
    budgets: list[str] = []
    rate_limits: list[str] = []
    timeout_s: PositiveFloat = 5.0
    retry: RetryConfig = msgspec.field(default_factory=RetryConfig)
    credentials: Credentials = {}
    """Secrets handed only to this tool's adapter: ``name = "env:VAR"`` or ``"file:/path"``."""
    tenant_credentials: dict[str, Credentials] = {}
    """Per-tenant secrets, over ``credentials`` for calls on that tenant's behalf only."""
    sensitive: list[str] = []
    """Argument/result keys redacted in the ledger (beside ``service.sensitive_fields``)."""
    redact_result: list[str] = []
    """Result keys (at any depth, case-insensitive) taken out of what the agent receives; the
    ledger records the result as the agent received it, and the names taken out."""
    claims: ClaimsConfig | None = None
    version: str = "1"
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """What one adapter call costs, in US dollars: counted in ``broker_execution_cost_usd_total``."""
    approval: ApprovalConfig | None = None
    """Human approval before a call executes (``202 pending_approval``; see docs/api.md)."""
    read_cache: ReadCacheConfig | None = None
    """Serve repeated calls from the store's cache (``risk = "read"`` tools only)."""


class BackendConfig(Section):
    """A Python backend: ``factory`` (``module:callable``) or the ``entry_point`` of that name in
    the ``action_broker.adapters`` group is called with ``options``. Only named ones load."""

    factory: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")] | None = None
    entry_point: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,128}$")] | None = None
    options: dict[str, Any] = {}


class RegisteredToolConfig(Section):
    """The operator's side of a tool that a backend registers through the API: its secrets."""

    credentials: Credentials = {}
    """As ``tools.X.credentials``: bound to the registered tool of that name only."""
    tenant_credentials: dict[str, Credentials] = {}
    """As ``tools.X.tenant_credentials``."""
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """As ``tools.X.cost_usd``: the operator prices a registered tool, not its backend."""
