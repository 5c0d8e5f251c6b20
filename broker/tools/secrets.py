"""Secrets a tool's config names (``env:VAR`` or ``file:/path``) read at start or at
registration: each failure a problem naming where it was asked for, never the value."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from broker.config import RegisteredToolConfig, ToolConfig

__all__ = [
    "Credentials",
    "resolve_credentials",
    "resolve_secret",
    "resolve_tenant_credentials",
]

Credentials = Mapping[str, str]


def resolve_secret(
    where: str, source: str, secrets: Mapping[str, str], problems: list[tuple[str, str]]
) -> str | None:
    """Read one ``env:VAR`` or ``file:/path`` secret; a problem (never the value) when it fails."""
    kind, _, ref = source.partition(":")
    if kind == "env":
        value = secrets.get(ref)
        if value is None:
            problems.append((where, f"environment variable {ref} is not set"))
        return value
    if kind == "file":
        try:
            return Path(ref).read_text(encoding="utf-8").strip()
        except OSError as exc:
            problems.append((where, f"cannot read secret file: {exc.strerror}"))
            return None
    problems.append((where, 'use "env:VARIABLE" or "file:/path"'))
    return None


def resolve_credentials(
    where: str,
    sources: Mapping[str, str],
    secrets: Mapping[str, str],
    problems: list[tuple[str, str]],
) -> dict[str, str]:
    resolved: dict[str, str] = {}
    for key, source in sources.items():
        value = resolve_secret(f"{where}.{key}", source, secrets, problems)
        if value is not None:
            resolved[key] = value
    return resolved


def resolve_tenant_credentials(
    where: str,
    holder: ToolConfig | RegisteredToolConfig,
    secrets: Mapping[str, str],
    problems: list[tuple[str, str]],
) -> Mapping[str, Credentials]:
    return {
        tenant: MappingProxyType(
            resolve_credentials(f"{where}.tenant_credentials.{tenant}", sources, secrets, problems)
        )
        for tenant, sources in holder.tenant_credentials.items()
    }
