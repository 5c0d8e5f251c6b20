"""What one route's model is offered, per catalog version: visible tools, names, receipts.

Built lazily per ``(catalog version, route)`` and kept until a registration changes the catalog,
so every catalog format and every proposal reuse one computation (schema hashes included).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import rfc8785

from broker.config import BrokerConfig
from broker.config.mediation_checks import DRY_RUN_ARGUMENT, REASON_ARGUMENT
from broker.config.tool_model import McpAdapterConfig
from broker.ledger.model import MediationReceipt
from broker.mediation.rules import ReasonMode, ToolRules, compile_route
from broker.model import Principal
from broker.policy.catalog import PolicyCatalog
from broker.tools.runtime import Registry, ToolRuntime
from broker.validators.schema import ArgsValidator

__all__ = ["Mediated", "Mediator", "Replacement", "RouteView", "declaration_hash"]

_NO_RULES = ToolRules()
_REASON_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 2000,
    "description": "Why you are calling this tool, in one sentence (kept in the audit trail).",
}
_DRY_RUN_SCHEMA = {
    "type": "boolean",
    "description": "true: only preview what this call would do; nothing is changed or spent.",
}


def declaration_hash(name: str, description: str, schema: dict[str, Any]) -> str:
    """SHA-256 of the declaration's RFC 8785 form: key order never changes it, meaning does."""
    declared: dict[str, Any] = {"name": name, "description": description, "input_schema": schema}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(declared)).hexdigest()


@dataclass(frozen=True, slots=True)
class Mediated:
    """One tool as a route's model sees it, and how to take its calls back."""

    tool: ToolRuntime
    """The real tool."""
    visible: ToolRuntime
    """The tool as declared to the route (visible name, description and schema)."""
    reason: ReasonMode | None
    injected: frozenset[str]
    """Argument names the rules added (stripped before the tool's schema validates)."""
    receipt: MediationReceipt
    replacement: Replacement | None = None
    dry_run_flag: bool = False
    """The declaration offers ``dry_run``: taken out of the arguments, it makes a dry run."""


@dataclass(frozen=True, slots=True)
class Replacement:
    """A ``replace`` rule at call time: the visible arguments' schema, and the mapping of the
    tool's arguments from them."""

    args: ArgsValidator
    arguments: Mapping[str, str]

    def mapped(self, visible: dict[str, Any]) -> dict[str, Any]:
        """The tool's own arguments, taken from the (valid) visible ones."""
        return {
            target: visible[source]
            for target, source in self.arguments.items()
            if source in visible
        }


@dataclass(slots=True)
class RouteView:
    """A route's tools after its rules, for one catalog version."""

    rules: Mapping[str, ToolRules]
    default_reason: ReasonMode | None
    """The route's ``required_reason`` mode, for every tool without a rule of its own."""
    tools: Mapping[str, ToolRuntime]
    hidden: frozenset[str]
    to_real: dict[str, str]
    """Visible name -> tool name, for renamed tools only."""
    renamed_away: frozenset[str]
    _entries: dict[str, Mediated | None]

    def resolve(self, called: str) -> str | None:
        """The tool a call by ``called`` means, or ``None`` when that name is not callable here
        (a hidden tool, or the old name of a renamed one)."""
        real = self.to_real.get(called)
        if real is not None:
            return real
        if called in self.hidden or called in self.renamed_away:
            return None
        return called

    def entry(self, name: str) -> Mediated | None:
        """The mediated form of tool ``name`` (``None`` if there is no such tool)."""
        try:
            return self._entries[name]
        except KeyError:
            tool = self.tools.get(name)
            rules = self.rules.get(name, _NO_RULES)
            if self.default_reason is not None and rules.reason is None:
                applied = [*rules.applied, "required_reason"]
                rules = dataclasses.replace(rules, reason=self.default_reason, applied=applied)
            found = None if tool is None else _mediate(tool, rules)
            self._entries[name] = found
            return found

    def apply(self, tools: list[ToolRuntime]) -> list[ToolRuntime]:
        """``tools`` as the route's model sees them: hidden ones dropped, the rest as declared."""
        shown = []
        for tool in tools:
            if tool.name in self.hidden:
                continue
            mediated = self.entry(tool.name)
            shown.append(tool if mediated is None else mediated.visible)
        return sorted(shown, key=lambda t: t.name)


class Mediator:
    """Every route's rules, compiled once; each route's view rebuilt per catalog version."""

    def __init__(self, config: BrokerConfig, registry: Registry) -> None:
        self._registry = registry
        self._rules = {
            name: compile_route(route.mediation) for name, route in config.routes.items()
        }
        self._reason: dict[str, ReasonMode] = {
            name: route.mediation.reason_on_missing
            for name, route in config.routes.items()
            if route.mediation is not None and route.mediation.required_reason
        }
        self._unknown_dropped = frozenset(
            name
            for name, route in config.routes.items()
            if route.mediation is not None and route.mediation.unknown_tools == "drop"
        )
        self._version = -1
        self._views: dict[str, RouteView] = {}
        self._policy = PolicyCatalog(config, registry)
        """``[[policy.rules]]`` that hide: applied before the route's own rules."""

    @property
    def renames(self) -> frozenset[str]:
        """Every visible name a rule gives (the native name table must resolve them)."""
        return frozenset(
            r.visible_name
            for rules in self._rules.values()
            for r in rules.values()
            if r.visible_name
        )

    @property
    def registry(self) -> Registry:
        return self._registry

    def drops_unknown_tools(self, route: str) -> bool:
        """Whether the route drops the tools an agent declares that the broker does not have."""
        return route in self._unknown_dropped

    def visible_to(
        self, principal: Principal, *, hidden: frozenset[str] = frozenset()
    ) -> list[ToolRuntime]:
        """The tools a catalog lists for ``principal``: its route's, without those policy rules
        hide (and ``hidden``), after the route's rules (an admin or a backend token sees tools
        as registered). Every catalog asks here: each format, and MCP ``tools/list``."""
        tools = self._registry.visible_to(principal)
        if principal.route is None or principal.admin or principal.namespace is not None:
            return tools
        hidden = hidden | self._policy.hidden_tools(principal.route, principal.tenant)
        if hidden:
            tools = [tool for tool in tools if tool.name not in hidden]
        return self.view(principal.route).apply(tools)

    def view(self, route: str) -> RouteView:
        registry = self._registry
        if registry.version != self._version:  # a registration changed the catalog
            self._views = {}
            self._version = registry.version
        found = self._views.get(route)
        if found is None:
            rules = self._rules.get(route, {})
            found = RouteView(
                rules=rules,
                default_reason=self._reason.get(route),
                tools=registry.tools,
                hidden=frozenset(n for n, r in rules.items() if r.hidden),
                to_real={r.visible_name: n for n, r in rules.items() if r.visible_name},
                renamed_away=frozenset(n for n, r in rules.items() if r.visible_name),
                _entries={},
            )
            self._views[route] = found
        return found


def _declared_by(tool: ToolRuntime) -> str:
    """Who wrote the declaration: the operator's file, a backend's registration, or an upstream
    MCP server's ``tools/list`` (a registered tool that an MCP adapter runs: its declaration is
    the server's, relayed by the registration)."""
    if not tool.registered:
        return "config"
    return "mcp" if isinstance(tool.config.adapter, McpAdapterConfig) else "backend"


def _mediate(tool: ToolRuntime, rules: ToolRules) -> Mediated:
    config = tool.config
    schema = config.input_schema
    description = config.description
    replacement = None
    if rules.replacement is not None:
        schema, description = rules.replacement.input_schema, rules.replacement.description
        replacement = Replacement(ArgsValidator(schema), rules.replacement.arguments)
    injected = frozenset(rules.properties)
    # A registered tool's schema is only known once registered: one that takes a dry_run of its
    # own keeps it (its argument, passed through), and the rule does not apply to it.
    dry_run_flag = rules.dry_run_flag and DRY_RUN_ARGUMENT not in schema.get("properties", {})
    if rules.properties or rules.reason is not None or dry_run_flag:
        properties = {**schema.get("properties", {}), **rules.properties}
        required = list(schema.get("required", []))
        if rules.reason is not None:
            properties[REASON_ARGUMENT] = _REASON_SCHEMA
            if rules.reason == "reject":
                required.append(REASON_ARGUMENT)
        if dry_run_flag:
            properties[DRY_RUN_ARGUMENT] = _DRY_RUN_SCHEMA
        schema = {**schema, "properties": properties}
        if required:
            schema["required"] = required
    if rules.description_append:
        description = " ".join([description, *rules.description_append]).strip()
    name = rules.visible_name or tool.name
    original = declaration_hash(tool.name, config.description, config.input_schema)
    visible_hash = declaration_hash(name, description, schema)
    visible = tool
    if visible_hash != original:
        visible = dataclasses.replace(
            tool,
            name=name,
            config=msgspec.structs.replace(config, description=description, input_schema=schema),
        )
    if rules.hidden:
        state = "hidden"
    elif replacement is not None:
        state = "replaced"
    elif rules.visible_name:
        state = "renamed"
    elif visible_hash != original:
        state = "wrapped"
    else:
        state = "allowed"
    receipt = MediationReceipt(
        declared_by=_declared_by(tool),
        executed_by=str(config.adapter.__struct_config__.tag),
        fidelity=(
            "emulated"
            if replacement is not None
            else "pass_through"
            if visible_hash == original
            else "normalized"
        ),
        original_hash=original,
        policy_state=state,
        # A rule that changes nothing leaves no receipt.
        rules=tuple(rules.applied) if visible_hash != original or rules.hidden else (),
        visible_hash=visible_hash,
        visible_name=rules.visible_name,
    )
    return Mediated(tool, visible, rules.reason, injected, receipt, replacement, dry_run_flag)
