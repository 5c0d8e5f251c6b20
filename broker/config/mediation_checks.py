"""Cross-checks of ``[routes.X.mediation]``: every rule against the route's tools and each other.

A rule that names no tool of the route, two rules that give two tools one visible name, a rule on
a hidden tool, or an injected property that collides with a real one (or with ``reason``,
``dry_run`` or ``idempotency_key``, which the broker injects itself) are config errors with key
paths.
"""

from __future__ import annotations

from typing import Any

from broker.config.conversion import quote_key
from broker.config.mediation_rules import (
    AugmentRule,
    HideRule,
    MediationConfig,
    OfferDryRunRule,
    RenameRule,
    ReplaceRule,
)
from broker.config.model import REGISTERED_NAME, BrokerConfig
from broker.config.tool_checks import check_tool_schema

__all__ = ["DRY_RUN_ARGUMENT", "REASON_ARGUMENT", "check_mediation"]

REASON_ARGUMENT = "reason"
DRY_RUN_ARGUMENT = "dry_run"
_BROKER_ARGUMENTS = (REASON_ARGUMENT, DRY_RUN_ARGUMENT, "idempotency_key")


def check_mediation(config: BrokerConfig) -> list[tuple[str, str]]:
    """Every ``(key path, problem)`` of every route's mediation section."""
    problems: list[tuple[str, str]] = []
    for route_name, route in config.routes.items():
        if route.mediation is not None:
            where = f"routes.{quote_key(route_name)}.mediation"
            problems.extend(_check_route(config, route.tools, route.mediation, where))
    return problems


def _check_route(
    config: BrokerConfig, route_tools: list[str], mediation: MediationConfig, where: str
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    add = problems.append
    known = set(route_tools) | set(config.registered_tools)
    hidden = {r.tool for r in mediation.rules if isinstance(r, HideRule)}
    renamed: dict[str, str] = {}
    ids: set[str] = set()
    for i, rule in enumerate(mediation.rules):
        at = f"{where}.rules[{i}]"
        if rule.id is not None:
            if rule.id in ids:
                add((f"{at}.id", f"duplicate rule id {rule.id!r}"))
            ids.add(rule.id)
        if rule.tool not in known:
            add((f"{at}.tool", f"{rule.tool!r} is not a tool of this route"))
            continue
        if rule.tool in hidden and not isinstance(rule, HideRule):
            add((f"{at}.tool", f"{rule.tool!r} is hidden on this route: no other rule applies"))
        if isinstance(rule, RenameRule | ReplaceRule):
            if rule.name == rule.tool:
                add((f"{at}.name", "the tool already has this name: the rule changes nothing"))
            elif REGISTERED_NAME.match(rule.name):
                # A later registration could take the name: namespaced names are theirs.
                add((f"{at}.name", "a namespaced name (<namespace>.<name>) is a registration's"))
            if rule.tool in renamed:
                add((f"{at}.tool", f"{rule.tool!r} is renamed or replaced twice"))
            renamed[rule.tool] = rule.name
        if isinstance(rule, AugmentRule):
            problems.extend(_check_augment(config, rule, at))
            if any(isinstance(r, ReplaceRule) and r.tool == rule.tool for r in mediation.rules):
                add((f"{at}.tool", f"{rule.tool!r} is replaced: declare it in the replacement"))
        if isinstance(rule, ReplaceRule):
            problems.extend(_check_replace(config, rule, at))
        if isinstance(rule, OfferDryRunRule):
            configured = config.tools.get(rule.tool)
            schema = configured.input_schema if configured is not None else {}
            if DRY_RUN_ARGUMENT in schema.get("properties", {}):
                add((f"{at}.tool", f"{rule.tool!r} already takes a {DRY_RUN_ARGUMENT!r} argument"))

    # After mediation no two visible tools share a name (the dedupe rule: none is allowed).
    visible: dict[str, str] = {}
    for tool in sorted(known - hidden):
        if tool in config.registered_tools and tool not in renamed:
            continue  # an unrenamed registered tool keeps its unique namespaced name
        visible.setdefault(renamed.get(tool, tool), tool)
    for i, rule in enumerate(mediation.rules):
        if isinstance(rule, RenameRule | ReplaceRule) and rule.tool in known:
            owner = visible.get(rule.name)
            if owner is not None and owner != rule.tool:
                add((f"{where}.rules[{i}].name", f"{rule.name!r} is already the name of {owner!r}"))
    return problems


def _check_augment(config: BrokerConfig, rule: AugmentRule, at: str) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not rule.description_append and not rule.properties:
        problems.append((at, 'an augment rule needs "description_append" or "properties"'))
    tool = config.tools.get(rule.tool)
    real: dict[str, Any] = tool.input_schema.get("properties", {}) if tool else {}
    for name in rule.properties:
        if name in real or name in _BROKER_ARGUMENTS:
            problems.append(
                (f"{at}.properties.{quote_key(name)}", f"{name!r} is already an argument")
            )
    for path, message in check_tool_schema({"type": "object", "properties": rule.properties}):
        problems.append((f"{at}.{path.replace('/', '.')}", message))
    return problems


def _check_replace(config: BrokerConfig, rule: ReplaceRule, at: str) -> list[tuple[str, str]]:
    problems = [
        (f"{at}.input_schema" + (f".{p.replace('/', '.')}" if p else ""), message)
        for p, message in check_tool_schema(rule.input_schema)
    ]
    offered = rule.input_schema.get("properties", {})
    for name in _BROKER_ARGUMENTS:
        if name in offered:
            problems.append((f"{at}.input_schema.properties.{name}", f"{name!r} is the broker's"))
    for target, source in rule.arguments.items():
        if source not in offered:
            where = f"{at}.arguments.{quote_key(target)}"
            problems.append((where, f"{source!r} is not a property of the replacement's schema"))
    tool = config.tools.get(rule.tool)
    if tool is not None:
        real = tool.input_schema.get("properties", {})
        for target in rule.arguments:
            if target not in real:
                where = f"{at}.arguments.{quote_key(target)}"
                problems.append((where, f"{rule.tool!r} takes no argument {target!r}"))
        for needed in tool.input_schema.get("required", []):
            if needed not in rule.arguments:
                problems.append(
                    (f"{at}.arguments", f"the required argument {needed!r} is not mapped")
                )
    return problems
