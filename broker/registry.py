"""Tools made runnable: each configured tool bound to its adapter, verifiers, limits and secrets.

Built once at startup from the checked config; everything that can fail (importing backends,
resolving operations and secrets, compiling schemas) fails here, with every problem listed,
never on the request path.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig, BudgetConfig, RateLimitConfig, ToolConfig
from broker.plugins import Adapter, Backend, PreconditionVerifier, PreviewingAdapter
from broker.taxonomy import ConfigError
from broker.tool_id import format_tool_id
from broker.validators.schema import ArgsValidator

__all__ = ["PreconditionRuntime", "Registry", "ToolRuntime", "build_registry", "load_backends"]


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
    credentials: Mapping[str, str]
    sensitive: frozenset[str]
    previewer: PreviewingAdapter | None
    """The adapter again when it can preview (checked once here, not per dry run)."""

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


@dataclass(frozen=True, slots=True)
class Registry:
    tools: Mapping[str, ToolRuntime]
    preconditions: frozenset[str]
    backends: Mapping[str, Backend]


def load_backends(config: BrokerConfig) -> tuple[dict[str, Backend], list[tuple[str, str]]]:
    """Import and build every ``[backends]`` entry; only backends the config names are loaded."""
    backends: dict[str, Backend] = {}
    problems: list[tuple[str, str]] = []
    for name, spec in config.backends.items():
        module_name, _, attr = spec.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
            backends[name] = factory(**spec.options)
        except Exception as exc:  # any failure of third-party code is a config problem here
            problems.append((f"backends.{name}.factory", f"{type(exc).__name__}: {exc}"))
    return backends, problems


def build_registry(
    config: BrokerConfig,
    *,
    secrets: Mapping[str, str],
    backends: Mapping[str, Backend] | None = None,
) -> Registry:
    """Bind every tool to its adapter, verifiers and secrets; raise ConfigError listing problems.

    Args:
        secrets: where ``env:NAME`` credentials are looked up (``os.environ`` in production).
        backends: prebuilt backends (tests pass instrumented ones); built from config otherwise.
    """
    problems: list[tuple[str, str]] = []
    if backends is None:
        backends, problems = load_backends(config)

    verifiers: dict[str, PreconditionRuntime] = {}
    for name, pre in config.preconditions.items():
        backend_name, _, verifier_name = pre.verifier.partition(".")
        backend = backends.get(backend_name)
        verifier = backend.verifiers.get(verifier_name) if backend else None
        if verifier is None:
            if backend is not None:
                problems.append(
                    (f"preconditions.{name}.verifier", f"backend has no verifier {verifier_name!r}")
                )
            continue
        verifiers[name] = PreconditionRuntime(name, verifier, pre.remediation)

    tools: dict[str, ToolRuntime] = {}
    for name, tool in config.tools.items():
        backend = backends.get(tool.adapter.backend)
        adapter = backend.adapters.get(tool.adapter.operation) if backend else None
        if adapter is None:
            if backend is not None:
                problems.append(
                    (
                        f"tools.{name}.adapter.operation",
                        f"backend {tool.adapter.backend!r} has no operation "
                        f"{tool.adapter.operation!r}",
                    )
                )
            continue
        credentials = _resolve_credentials(name, tool, secrets, problems)
        tools[name] = ToolRuntime(
            name=name,
            tool_id=format_tool_id(
                name, tool.input_schema, namespace=tool.adapter.backend, version=tool.version
            ),
            config=tool,
            args=ArgsValidator(tool.input_schema),
            adapter=adapter,
            preconditions=tuple(verifiers[p] for p in tool.preconditions if p in verifiers),
            budgets=tuple((b, config.budgets[b]) for b in tool.budgets),
            rate_limits=tuple((r, config.rate_limits[r]) for r in tool.rate_limits),
            credentials=credentials,
            previewer=adapter if isinstance(adapter, PreviewingAdapter) else None,
            sensitive=frozenset(
                k.lower() for k in (*tool.sensitive, *config.service.sensitive_fields)
            ),
        )
    if problems:
        raise ConfigError(problems)
    return Registry(tools=tools, preconditions=frozenset(config.preconditions), backends=backends)


def _resolve_credentials(
    tool_name: str, tool: ToolConfig, secrets: Mapping[str, str], problems: list[tuple[str, str]]
) -> Mapping[str, str]:
    resolved: dict[str, str] = {}
    for key, source in tool.credentials.items():
        kind, _, ref = source.partition(":")
        where = f"tools.{tool_name}.credentials.{key}"
        if kind == "env":
            if ref not in secrets:
                problems.append((where, f"environment variable {ref} is not set"))
                continue
            resolved[key] = secrets[ref]
        else:
            try:
                resolved[key] = Path(ref).read_text(encoding="utf-8").strip()
            except OSError as exc:
                problems.append((where, f"cannot read secret file: {exc.strerror}"))
    return resolved
