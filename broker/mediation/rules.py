"""A route's mediation section compiled once: per tool, what its rules change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from broker.config.mediation_rules import (
    AugmentRule,
    HideRule,
    MediationConfig,
    OfferDryRunRule,
    RenameRule,
    ReplaceRule,
    RequireReasonRule,
)

__all__ = ["ToolRules", "compile_route"]

ReasonMode = Literal["reject", "fill_blank"]


@dataclass(slots=True)
class ToolRules:
    """What a route's rules do to one tool; ``applied`` names the rules, in config order."""

    hidden: bool = False
    visible_name: str | None = None
    description_append: list[str] = field(default_factory=list)
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: ReasonMode | None = None
    dry_run_flag: bool = False
    """An ``offer_dry_run`` rule: the declaration takes an optional boolean ``dry_run``."""
    replacement: ReplaceRule | None = None
    """The trusted declaration shown in the tool's place (``visible_name`` is its name)."""
    applied: list[str] = field(default_factory=list)


def compile_route(mediation: MediationConfig | None) -> Mapping[str, ToolRules]:
    """Each tool's rules on the route (tools without rules are absent)."""
    if mediation is None:
        return MappingProxyType({})
    by_tool: dict[str, ToolRules] = {}
    for i, rule in enumerate(mediation.rules):
        rules = by_tool.setdefault(rule.tool, ToolRules())
        rules.applied.append(rule.id or f"rules[{i}]")
        if isinstance(rule, HideRule):
            rules.hidden = True
        elif isinstance(rule, RenameRule):
            rules.visible_name = rule.name
        elif isinstance(rule, ReplaceRule):
            rules.visible_name = rule.name
            rules.replacement = rule
        elif isinstance(rule, AugmentRule):
            if rule.description_append:
                rules.description_append.append(rule.description_append)
            rules.properties.update(rule.properties)
        elif isinstance(rule, RequireReasonRule):
            rules.reason = mediation.reason_on_missing
        elif isinstance(rule, OfferDryRunRule):
            rules.dry_run_flag = True
    return MappingProxyType(by_tool)
