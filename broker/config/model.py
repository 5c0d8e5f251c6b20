"""The config's typed model: msgspec structs decoded from TOML, unknown keys rejected.

Each struct documents its fields (the README's config reference is checked against them); the
tool side (tools, adapters, backends) is in ``tool_model``, and the checks that relate one
section to another live in ``cross_checks``.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from broker.config.fields import (
    HttpUrl,
    Namespace,
    PositiveFloat,
    PositiveInt,
    Scope,
    Section,
)
from broker.config.mediation_rules import MediationConfig
from broker.config.tool_model import BackendConfig, RegisteredToolConfig, ToolConfig
from broker.policy.config import PolicyConfig

__all__ = [
    "REGISTERED_NAME",
    "ApprovalSettings",
    "BrokerConfig",
    "BudgetConfig",
    "DryRunScope",
    "PreconditionConfig",
    "RateLimitConfig",
    "RouteConfig",
    "ServiceAccountConfig",
    "ServiceSettings",
    "TenantConfig",
    "TokenConfig",
    "WebhookConfig",
    "config_hash",
]


class ServiceSettings(Section):
    """Process-wide settings: ``[service]``."""

    dry_run: bool = False
    """Run every proposal as a dry run (also ``broker serve --dry-run``)."""
    idempotency_ttl_s: PositiveInt = 86_400
    """How long an idempotency key and its stored response live."""
    max_body_bytes: PositiveInt = 1_048_576
    """Request bodies larger than this are refused with 413."""
    max_header_bytes: PositiveInt = 16_384
    """A request line and headers larger than this are refused with 431 (broker.http_limits)."""
    max_header_count: PositiveInt = 100
    """More request headers than this are refused with 431."""
    header_timeout_s: PositiveFloat = 10.0
    """A request whose headers have not all arrived after this long is answered 408 and closed."""
    token_signing_key_env: str = "BROKER_TOKEN_SIGNING_KEY"
    """Environment variable holding the HMAC key for minted (short-lived) tokens."""
    token_issuer: str = "action-broker"
    """``iss`` and ``aud`` of minted tokens."""
    lease_margin_s: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    """An idempotency claim is held for the tool's timeout plus this margin before it is
    presumed abandoned (then re-claimable if the tool is idempotent, else outcome_unknown)."""
    store: Literal["sqlite", "memory", "redis"] | None = None
    """Which store keeps keys, budgets and registrations: Redis when a URL is given, else the
    embedded SQLite file. ``memory`` forgets everything on restart (tests only)."""
    store_path: str | None = None
    """The SQLite store's file (default: ``state.sqlite3`` beside ``ledger_path``)."""
    store_synchronous: Literal["normal", "full"] = "normal"
    """SQLite durability: ``normal`` survives a crash of the process, ``full`` a power cut."""
    redis_url: str | None = None
    """Shared state in Redis (``REDIS_URL`` overrides); the embedded SQLite store when unset."""
    key_prefix: str = "broker"
    """Prefix of every Redis key this broker writes."""
    ledger: Literal["file", "redis"] = "file"
    """Where the ledger lives: a JSONL file (``ledger_path``) or Redis (needs ``redis_url``)."""
    ledger_path: str = "var/ledger.jsonl"
    """Where the file ledger appends its hash-chained records."""
    ledger_fsync: Literal["always", "batch", "never"] = "always"
    """When the file ledger fsyncs: every append, about once a second, or never (the OS decides)."""
    ledger_key_path: str = "var/ledger-signing-key.pem"
    """Ed25519 key that signs ledger checkpoints (created on first start, mode 0600)."""
    metrics_tenant_label: bool = False
    """Add a ``tenant`` label to the proposal and execution counters (bounded: config tenants)."""
    tracing: bool = False
    """OpenTelemetry spans (``execute_tool {tool}``) through the global tracer provider; install
    the ``tracing`` extra and configure exporters the usual OpenTelemetry way."""
    checkpoint_interval_s: PositiveFloat = 60.0
    """How often the ledger head is signed, records or not (heartbeats reveal a cut-off tail)."""
    checkpoint_copies: list[str] = []
    """Where every checkpoint is also written, apart from the ledger (see
    broker/ledger/checkpoint_copies.py): a directory, or ``redis://host:6379/0#key``."""
    sensitive_fields: list[str] = msgspec.field(
        default_factory=lambda: ["password", "secret", "token", "api_key", "card_number"]
    )
    """Argument and result keys redacted in the ledger for every tool."""
    http_allowlist: list[str] = []
    """URLs ``http`` and ``mcp`` adapters and HTTP verifiers may call (see broker/allowlist.py):
    ``"http://127.0.0.1:*"``, ``"https://*.billing.internal/api"``. Empty: none."""
    http_max_response_bytes: PositiveInt = 1_048_576
    """An HTTP backend's answer larger than this is refused (read as a stream, then cut)."""
    registry_poll_s: PositiveFloat = 1.0
    """How often each process checks the store for registration changes: the bound on how long
    a tool registered through another process stays invisible here (pub/sub is usually faster)."""
    proposal_fast_path: bool = False
    """Answer ``POST /v1/proposals`` before Litestar's routing (``broker.api.fast_path``): about
    half again the throughput, but middleware, hooks and guards added to the app never see it."""
    mcp_session_idle_s: PositiveFloat = 1800.0
    """An MCP session at ``/mcp`` with no request for this long is closed (the client opens a
    new one)."""
    ui_session_ttl_s: PositiveFloat = 3600.0
    """How long a sign-in to the approver inbox (``/ui/approvals``) lasts; then sign in again."""
    ui_session_key_env: str = "BROKER_UI_SESSION_KEY"
    """Environment variable holding the key that signs inbox session cookies (at least 32
    bytes; every process behind one address needs the same). Unset: derived from the token
    signing key; neither set: the inbox answers 503 and the JSON API is unaffected."""
    max_tool_calls: PositiveInt = 128
    """The most tool calls one ``POST /v1/tool-calls`` request may carry (more: 422, nothing runs)."""
    # Backends under stress (broker/resilience/, broker/shedding.py).
    circuit_breaker: bool = True
    """Stop calling a backend (origin of an http or mcp adapter, or a Python backend) after
    ``breaker_failures`` transient failures in a row, for ``breaker_open_s``; then one probe."""
    breaker_failures: PositiveInt = 5
    """Consecutive transient failures (5xx, 408, 429, timeouts, connection errors) that open it."""
    breaker_open_s: PositiveFloat = 30.0
    """How long an open breaker refuses calls before one probe call decides."""
    retry_budget_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.2
    """Retries to one backend stay under this share of its calls over ``retry_budget_window_s``."""
    retry_budget_window_s: PositiveFloat = 10.0
    """The sliding window over which a backend's calls and retries are counted."""
    retry_budget_min_retries: Annotated[int, msgspec.Meta(ge=0)] = 10
    """Retries always allowed per window on top of the share (so a quiet backend can retry)."""
    max_in_flight_proposals: Annotated[int, msgspec.Meta(ge=0)] = 1000
    """More proposals than this in flight in one process are shed (503); 0: no bound."""
    max_event_loop_lag_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """Shed new proposals while the event loop runs this late (measured every 100 ms); 0: off."""
    shutdown_grace_s: PositiveFloat = 30.0
    """On SIGTERM, how long proposals in flight may take to finish before the process stops."""
    completer_interval_s: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    """How often each process resolves claims stuck past their lease (``broker.completer``):
    released for idempotent tools, ``outcome_unknown`` otherwise. 0 turns the completer off."""
    allow_volatile_redis: bool = False
    """Start on a Redis that may lose idempotency records (no persistence, an evicting
    ``maxmemory-policy``, or ``CONFIG`` refused); otherwise ``broker serve`` refuses to start."""


class TenantConfig(Section):
    description: str = ""


class DryRunScope(Section):
    """``[routes.X.dry_runs]``: the tools a caller may dry-run on the route, as one list: ``only``
    these, or all ``except`` these. A dry run of another tool is refused (``policy_blocked``)."""

    only: list[str] | None = None
    except_: list[str] | None = msgspec.field(default=None, name="except")

    def allows(self, tool: str) -> bool:
        if self.only is not None:
            return tool in self.only
        return self.except_ is None or tool not in self.except_


class RouteConfig(Section):
    """A named agent surface with its own tools and the tenants it serves."""

    tools: list[str]
    tenants: list[str]
    description: str = ""
    dry_run: bool = False
    """Run every proposal on this route as a dry run."""
    dry_runs: DryRunScope | None = None
    """Which tools a caller may ask to dry-run (``dry_run`` in the body, or the argument an
    ``offer_dry_run`` rule injects); ``None``: every tool."""
    require_implied_write_check: bool = False
    """Proposals must name a ``session_id``, and one is refused (``policy_blocked``) while the
    session's last executed action has no implied-write check of the message after it."""
    require_session_id: bool = False
    """Proposals without a ``session_id`` are refused (``policy_blocked``): session rules of
    ``[[policy.rules]]`` need one."""
    mediation: MediationConfig | None = None
    """What this route's model is offered: catalog rules and a required reason (issue 22)."""
    catalog: Literal["tools", "gateway", "proxy"] = "tools"
    """How the route's catalogs declare its tools (``broker.gateway``): ``tools`` lists them
    with their schemas; ``gateway`` lists meta-tools instead (browse, hydrate, execute, view);
    ``proxy`` lists one schema-free card per tool beside the meta-tools that call them."""
    argument_repair: bool = False
    """Arguments that fail the schema are repaired where that cannot change their meaning (a
    numeric string for a number, one value for an array, an enum member's case) and validated
    again; each repair is recorded in the ledger (broker/validators/repair.py)."""


class ServiceAccountConfig(Section):
    route: str
    description: str = ""


class TokenConfig(Section):
    """A static bearer token, stored only as the SHA-256 hex digest of its value."""

    name: str
    sha256: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
    service_account: str | None = None
    tenant: str | None = None
    tools: list[str] | None = None
    """Narrow the route's tools for this token; never widens them."""
    expires_at: datetime | None = None
    admin: bool = False
    backend_namespace: Namespace | None = None
    """A backend token: it may register, read and remove tools named ``<namespace>.*`` only."""
    backend_routes: list[str] = []
    """Routes a backend token may grant its tools to (``routes`` of a registration)."""
    approver_tenants: list[str] = []
    """An approver token (no service account): it decides pending approvals of these tenants
    (``/v1/approvals``); an admin token decides every tenant's."""


class PreconditionConfig(Section):
    """A named check against the data plane, answered by a backend's verifier."""

    remediation: str
    """One line telling the agent what to do next, e.g. ``ASK_FOR_MORE: ...``."""
    verifier: str | None = None
    """``<backend>.<verifier name>`` of a Python backend, or else ``url``."""
    url: HttpUrl | None = None
    """An HTTP verifier: POSTed ``{precondition, args, tenant, route, tool, trace_id}``, signed
    like an http adapter call, answering ``{"ok": bool, "reason"?, "remediation"?}``."""
    signing_secret: str | None = None
    """For ``url``: the HMAC key of its signatures, ``"env:VAR"`` or ``"file:/path"``."""
    description: str = ""


class BudgetConfig(Section):
    """A sum over an argument, or a count of calls, per scope per fixed (UTC-aligned) window."""

    kind: Literal["sum", "count"]
    limit: Annotated[float, msgspec.Meta(gt=0)]
    window_s: PositiveInt
    field: str | None = None
    """For ``sum``: the top-level numeric argument that is added up."""
    per: tuple[Scope, ...] = ("tenant",)
    per_arg: str | None = None
    """A separate counter per value of this top-level argument (e.g. ``"currency"``), so sums
    in different currencies are never added together."""
    namespaces: list[Namespace] = []
    """Backend namespaces whose registrations (``POST /v1/tools``) may name this budget."""


class RateLimitConfig(Section):
    """At most ``limit`` calls in any ``window_s`` seconds (a sliding log, exact)."""

    limit: PositiveInt
    window_s: PositiveFloat
    per: tuple[Scope, ...] = ("tenant", "route")
    namespaces: list[Namespace] = []
    """Backend namespaces whose registrations (``POST /v1/tools``) may name this rate limit."""


class WebhookConfig(Section):
    """``[approvals.webhook]``: a signed POST (Standard Webhooks) once an approval is decided."""

    url: HttpUrl
    """Where decisions are sent; it must pass ``service.http_allowlist`` like any backend."""
    signing_secret: str
    """``env:VAR`` or ``file:/path``; a ``whsec_`` secret is base64 after its prefix (the
    Standard Webhooks form), any other is used as its bytes."""
    tenants: list[str] = []
    """Only these tenants' approvals are sent; empty: every tenant's."""
    timeout_s: PositiveFloat = 5.0
    """Each attempt's deadline (connect, send, answer)."""
    attempts: Annotated[int, msgspec.Meta(ge=1, le=20)] = 5
    """Attempts before a delivery counts as failed (408, 429, 5xx and transport faults retry)."""
    initial_backoff_s: Annotated[float, msgspec.Meta(ge=0)] = 0.5
    max_backoff_s: Annotated[float, msgspec.Meta(ge=0)] = 30.0


class ApprovalSettings(Section):
    """``[approvals]``: settings of human approval beyond each tool's ``approval`` table."""

    webhook: WebhookConfig | None = None


class BrokerConfig(Section):
    tenants: dict[str, TenantConfig]
    routes: dict[str, RouteConfig]
    service_accounts: dict[str, ServiceAccountConfig]
    tools: dict[str, ToolConfig]
    service: ServiceSettings = msgspec.field(default_factory=ServiceSettings)
    tokens: list[TokenConfig] = []
    backends: dict[str, BackendConfig] = {}
    preconditions: dict[str, PreconditionConfig] = {}
    budgets: dict[str, BudgetConfig] = {}
    rate_limits: dict[str, RateLimitConfig] = {}
    registered_tools: dict[str, RegisteredToolConfig] = {}
    policy: PolicyConfig = msgspec.field(default_factory=PolicyConfig)
    """``[[policy.rules]]``: rules beyond the fixed chain (broker/policy/)."""
    approvals: ApprovalSettings = msgspec.field(default_factory=ApprovalSettings)
    """``[approvals]``: the decision webhook (broker/approvals/webhook.py)."""


REGISTERED_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}\.[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
"""Tools registered through the API carry their namespace: ``<namespace>.<name>``."""


def config_hash(config: BrokerConfig) -> str:
    """The contract hash stamped on every ledger record: SHA-256 of the canonical config."""
    encoded = msgspec.json.encode(msgspec.to_builtins(config), order="sorted")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()
