"""Tools made runnable: each tool bound to its adapter, verifiers, limits and secrets.

Config tools are built once at startup from the checked config; everything that can fail
(importing backends, resolving operations and secrets, compiling schemas) fails there, with every
problem listed, never on the request path. Tools registered through the API are built by
``broker.tools.sync`` from the store and swapped into the :class:`Registry` whole, so a request
always sees one consistent catalog and the hot path never touches the store.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Any

from broker.config import (
    BackendConfig,
    BrokerConfig,
    BudgetConfig,
    HttpAdapterConfig,
    McpAdapterConfig,
    PreconditionConfig,
    RateLimitConfig,
    ToolConfig,
)
from broker.model import Principal
from broker.outbound import Outbound
from broker.plugins import (
    ENTRY_POINT_GROUP,
    Adapter,
    Backend,
    PreconditionVerifier,
    PreviewingAdapter,
)
from broker.resilience.guard import BackendGuard
from broker.taxonomy import ConfigError
from broker.tool_id import format_tool_id
from broker.tools.secrets import (
    Credentials,
    resolve_credentials,
    resolve_secret,
    resolve_tenant_credentials,
)
from broker.validators.schema import ArgsValidator

__all__ = [
    "PreconditionRuntime",
    "Registry",
    "ToolRuntime",
    "build_registry",
    "load_backends",
]


@dataclass(frozen=True, slots=True)
class PreconditionRuntime:
    name: str
    verifier: PreconditionVerifier
    remediation: str


@dataclass(frozen=True, slots=True)
class ToolRuntime:
    """One tool, ready to validate and execute."""

    name: str
    tool_id: str
    config: ToolConfig
    args: ArgsValidator
    adapter: Adapter
    preconditions: tuple[PreconditionRuntime, ...]
    budgets: tuple[tuple[str, BudgetConfig], ...]
    rate_limits: tuple[tuple[str, RateLimitConfig], ...]
    credentials: Credentials = field(repr=False)
    """This tool's own secrets (for a tenant-bound copy: with that tenant's on top)."""
    sensitive: frozenset[str]
    redact_result: frozenset[str]
    """``config.redact_result``, case-folded: taken out of every result the agent receives."""
    previewer: PreviewingAdapter | None
    """The adapter again when it can preview (checked once here, not per dry run)."""
    routes: frozenset[str] = frozenset()
    """Routes a registration granted this tool to (config tools are granted by ``routes``)."""
    registered: bool = False
    tenant_credentials: Mapping[str, Credentials] = field(default_factory=dict, repr=False)
    _tenant_bound: dict[str, ToolRuntime] = field(default_factory=dict, repr=False, compare=False)
    guard: BackendGuard | None = field(default=None, repr=False, compare=False)
    """Its backend's breaker, bulkhead and retry budget (shared with the backend's other tools)."""

    def describe(self) -> dict[str, Any]:
        """The public view served by ``GET /v1/tools``: never adapters or credentials."""
        return {
            "name": self.name,
            "tool_id": self.tool_id,
            "description": self.config.description,
            "input_schema": self.config.input_schema,
            "risk": self.config.risk,
            "preconditions": list(self.config.preconditions),
            "idempotent": self.config.idempotent,
        }

    def for_tenant(self, tenant: str) -> ToolRuntime:
        """This tool with the credentials of calls on ``tenant``'s behalf (built once per tenant)."""
        own = self.tenant_credentials.get(tenant)
        if own is None:
            return self
        bound = self._tenant_bound.get(tenant)
        if bound is None:
            bound = dataclasses.replace(
                self,
                credentials=MappingProxyType({**self.credentials, **own}),
                tenant_credentials={},
                _tenant_bound={},
            )
            self._tenant_bound[tenant] = bound
        return bound

    def granted_to(self, principal: Principal) -> bool:
        """Whether the caller's route may call this tool (config grant or registration grant)."""
        if principal.route is None:
            return False
        if self.name in principal.tools:
            return True
        return not principal.narrowed and principal.route in self.routes


class Registry:
    """Every tool the broker can run: config tools, fixed at start, and registered tools.

    Registered tools are replaced as a whole by :meth:`install`; readers take ``tools`` once per
    request and see either the old catalog or the new one, never a mix.
    """

    def __init__(
        self,
        *,
        tools: Mapping[str, ToolRuntime],
        preconditions: Mapping[str, PreconditionRuntime],
        backends: Mapping[str, Backend],
        outbound: Outbound | None = None,
    ) -> None:
        self.config_tools: Mapping[str, ToolRuntime] = MappingProxyType(dict(tools))
        self.config_preconditions: Mapping[str, PreconditionRuntime] = MappingProxyType(
            dict(preconditions)
        )
        self.backends = backends
        self.outbound = outbound or Outbound.disabled()
        self.version = 0
        self._tools: Mapping[str, ToolRuntime] = self.config_tools
        self._by_id = _names_by_id(self._tools)
        self._registered: Mapping[str, ToolRuntime] = MappingProxyType({})
        self._known = frozenset(preconditions)
        self._listeners: list[Callable[[], None]] = []
        self.catch_up: Callable[[], Awaitable[None]] | None = None
        """Set by the catalog (``broker.tools.sync``): compare the store's catalog version once
        and reload if it moved. Asked only before an answer of ``unknown_tool``, so a tool
        registered through another process is callable at once."""

    @property
    def tools(self) -> Mapping[str, ToolRuntime]:
        """Every tool by name, config and registered."""
        return self._tools

    @property
    def names_by_id(self) -> Mapping[str, str]:
        """Every tool's name by its stable id (proposals by ``tool_id``: a gateway route's
        ``tool_execute`` names every tool that way, in catalogs of thousands)."""
        return self._by_id

    @property
    def registered(self) -> Mapping[str, ToolRuntime]:
        return self._registered

    @property
    def preconditions(self) -> frozenset[str]:
        """Every precondition name a proposal may list."""
        return self._known

    def install(self, version: int, registered: Mapping[str, ToolRuntime]) -> None:
        """Swap in the registered tools of catalog ``version`` (config names always win)."""
        kept = {n: t for n, t in registered.items() if n not in self.config_tools}
        merged = {**kept, **self.config_tools}
        known = set(self.config_preconditions)
        known.update(p.name for tool in kept.values() for p in tool.preconditions)
        self._registered = MappingProxyType(kept)
        self._known = frozenset(known)
        self._tools = MappingProxyType(merged)
        self._by_id = _names_by_id(self._tools)
        self.version = version
        for listener in self._listeners:
            listener()

    def on_install(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each :meth:`install` (front doors that push catalog changes)."""
        self._listeners.append(listener)

    def visible_to(self, principal: Principal) -> list[ToolRuntime]:
        """The tools ``GET /v1/tools`` lists: an admin sees all, a backend its namespace."""
        tools = self._tools
        if principal.admin:
            chosen = list(tools.values())
        elif principal.namespace is not None:
            prefix = principal.namespace + "."
            chosen = [t for t in self._registered.values() if t.name.startswith(prefix)]
        else:
            chosen = [t for t in tools.values() if t.granted_to(principal)]
        return sorted(chosen, key=lambda t: t.name)


def load_backends(config: BrokerConfig) -> tuple[dict[str, Backend], list[tuple[str, str]]]:
    """Import and build every ``[backends]`` entry; only backends the config names are loaded."""
    backends: dict[str, Backend] = {}
    problems: list[tuple[str, str]] = []
    for name, spec in config.backends.items():
        where = f"backends.{name}." + ("factory" if spec.factory else "entry_point")
        try:
            factory = _backend_factory(spec)
            backends[name] = factory(**spec.options)
        except Exception as exc:  # any failure of third-party code is a config problem here
            problems.append((where, f"{type(exc).__name__}: {exc}"))
    return backends, problems


def _backend_factory(spec: BackendConfig) -> Any:
    if spec.factory:
        module_name, _, attr = spec.factory.partition(":")
        return getattr(importlib.import_module(module_name), attr)
    found = metadata.entry_points(group=ENTRY_POINT_GROUP, name=spec.entry_point or "")
    if not found:
        raise LookupError(
            f"no entry point {spec.entry_point!r} in group {ENTRY_POINT_GROUP!r} is installed"
        )
    return next(iter(found)).load()


def build_registry(
    config: BrokerConfig,
    *,
    secrets: Mapping[str, str],
    backends: Mapping[str, Backend] | None = None,
    outbound: Outbound | None = None,
) -> Registry:
    """Bind every tool to its adapter, verifiers and secrets; raise ConfigError listing problems.

    Args:
        secrets: where ``env:NAME`` credentials are looked up (``os.environ`` in production).
        backends: prebuilt backends (tests pass instrumented ones); built from config otherwise.
        outbound: the process's HTTP and MCP clients (built from config when omitted).
    """
    problems: list[tuple[str, str]] = []
    if backends is None:
        backends, problems = load_backends(config)
    outbound = outbound or Outbound.from_config(config)

    verifiers: dict[str, PreconditionRuntime] = {}
    for name, pre in config.preconditions.items():
        verifier = _verifier(name, pre, backends, secrets, outbound, problems)
        if verifier is not None:
            verifiers[name] = PreconditionRuntime(name, verifier, pre.remediation)

    tools: dict[str, ToolRuntime] = {}
    for name, tool in config.tools.items():
        where = f"tools.{name}"
        credentials = resolve_credentials(
            f"{where}.credentials", tool.credentials, secrets, problems
        )
        tenant_credentials = resolve_tenant_credentials(where, tool, secrets, problems)
        adapter = _adapter(name, tool, backends, secrets, outbound, problems)
        if adapter is None:
            continue
        namespace = tool.adapter.backend if hasattr(tool.adapter, "backend") else "http"
        tools[name] = ToolRuntime(
            name=name,
            tool_id=format_tool_id(
                name, tool.input_schema, namespace=namespace, version=tool.version
            ),
            config=tool,
            args=ArgsValidator(tool.input_schema),
            adapter=adapter,
            preconditions=tuple(verifiers[p] for p in tool.preconditions if p in verifiers),
            budgets=tuple((b, config.budgets[b]) for b in tool.budgets),
            rate_limits=tuple((r, config.rate_limits[r]) for r in tool.rate_limits),
            credentials=MappingProxyType(credentials),
            tenant_credentials=tenant_credentials,
            previewer=adapter if isinstance(adapter, PreviewingAdapter) else None,
            sensitive=frozenset(
                k.lower() for k in (*tool.sensitive, *config.service.sensitive_fields)
            ),
            redact_result=frozenset(k.casefold() for k in tool.redact_result),
            guard=outbound.guards.for_adapter(tool.adapter),
        )
    for name, registered in config.registered_tools.items():
        # Checked now so a missing secret fails the start, not the first call.
        where = f"registered_tools.{name}"
        resolve_credentials(f"{where}.credentials", registered.credentials, secrets, problems)
        resolve_tenant_credentials(where, registered, secrets, problems)
    if problems:
        raise ConfigError(problems)
    return Registry(tools=tools, preconditions=verifiers, backends=backends, outbound=outbound)


def _verifier(
    name: str,
    pre: PreconditionConfig,
    backends: Mapping[str, Backend],
    secrets: Mapping[str, str],
    outbound: Outbound,
    problems: list[tuple[str, str]],
) -> PreconditionVerifier | None:
    where = f"preconditions.{name}"
    if pre.url is not None:
        secret = resolve_secret(
            f"{where}.signing_secret", pre.signing_secret or "", secrets, problems
        )
        if secret is None:
            return None
        return outbound.http_verifier(precondition=name, url=pre.url, secret=secret)
    backend_name, _, verifier_name = (pre.verifier or "").partition(".")
    backend = backends.get(backend_name)
    verifier = backend.verifiers.get(verifier_name) if backend else None
    if verifier is None and backend is not None:
        problems.append((f"{where}.verifier", f"backend has no verifier {verifier_name!r}"))
    return verifier


def _adapter(
    name: str,
    tool: ToolConfig,
    backends: Mapping[str, Backend],
    secrets: Mapping[str, str],
    outbound: Outbound,
    problems: list[tuple[str, str]],
) -> Adapter | None:
    spec = tool.adapter
    where = f"tools.{name}.adapter"
    if isinstance(spec, HttpAdapterConfig):
        secret = resolve_secret(
            f"{where}.signing_secret", spec.signing_secret or "", secrets, problems
        )
        if secret is None:
            return None
        return outbound.http_adapter(
            tool=name, url=spec.url, secret=secret, credential_headers=spec.credential_headers
        )
    if isinstance(spec, McpAdapterConfig):
        try:
            return outbound.mcp_adapter(
                tool=name,
                url=spec.url,
                upstream_tool=spec.tool,
                credential_headers=spec.credential_headers,
            )
        except ImportError:
            problems.append(
                (
                    f"{where}.kind",
                    "the mcp extra is not installed (pip install 'action-broker[mcp]')",
                )
            )
            return None
    backend = backends.get(spec.backend)
    adapter = backend.adapters.get(spec.operation) if backend else None
    if adapter is None and backend is not None:
        problems.append(
            (
                f"{where}.operation",
                f"backend {spec.backend!r} has no operation {spec.operation!r}",
            )
        )
    return adapter


def _names_by_id(tools: Mapping[str, ToolRuntime]) -> Mapping[str, str]:
    return MappingProxyType({tool.tool_id: name for name, tool in tools.items()})
