"""What ``/v1/tools`` answers about a tool: a registered one as registered (never its signing
secret), a config one read-only, and the answer to a registration."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from broker.tools.registration import Registration, registration_tool_id

__all__ = ["ConfigToolView", "RegisteredToolView", "RegistrationAnswer"]


class RegisteredToolView(msgspec.Struct, kw_only=True):
    """A registered tool as ``GET /v1/tools/{name}`` shows it: the registration, never its secret."""

    name: str
    description: str
    input_schema: dict[str, Any]
    risk: Literal["read", "write", "irreversible"]
    idempotent: bool
    preconditions: list[str]
    routes: list[str]
    adapter: dict[str, Any]
    claims: dict[str, Any] | None
    version: str | None
    verifiers: dict[str, dict[str, Any]]
    retry: dict[str, Any]
    sensitive: list[str]
    redact_result: list[str]
    budgets: list[str]
    rate_limits: list[str]
    read_cache: dict[str, Any] | None
    tool_id: str
    source: Literal["registered"] = "registered"
    status: Literal["active", "inactive"]
    """``inactive``: stored, but this process cannot run it (see ``problems``)."""
    problems: list[str]
    updated_at: str
    updated_by: str

    @classmethod
    def of(
        cls,
        registration: Registration,
        *,
        problems: list[str],
        updated_at: str,
        updated_by: str,
    ) -> RegisteredToolView:
        fields: dict[str, Any] = msgspec.to_builtins(registration)
        return cls(
            **fields,
            tool_id=registration_tool_id(registration),
            status="inactive" if problems else "active",
            problems=problems,
            updated_at=updated_at,
            updated_by=updated_by,
        )


class ConfigToolView(msgspec.Struct, kw_only=True):
    """A tool defined in the config, as ``GET /v1/tools/{name}`` shows it to an admin."""

    name: str
    tool_id: str
    description: str
    input_schema: dict[str, Any]
    risk: Literal["read", "write", "irreversible"]
    preconditions: list[str]
    idempotent: bool
    source: Literal["config"] = "config"


class RegistrationAnswer(msgspec.Struct, kw_only=True):
    """The answer to ``POST /v1/tools``: 201 for a new tool, 200 for a replacement."""

    name: str
    tool_id: str
    created: bool
    signing_secret: str | None
    """Set when this write set the tool's secret (a new tool, or ``?rotate_secret=true``): the
    only time it is ever shown. ``null`` when a replacement kept the earlier secret."""
    tool: RegisteredToolView
