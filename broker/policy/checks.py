"""The rules checked whole at start: every problem with its key path, reported together.

Refused: duplicate ids, unknown tools, routes and tenants, rules that can never match (a route
that does not carry the named tools, a tenant the routes do not serve, a risk none of the named
tools has, an empty membership), unsafe regexes (the schemas' own check), and session or
catalog settings that cannot work together.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from broker.policy.config import PolicyRuleConfig
from broker.policy.states import check_machine
from broker.regex_safety import unsafe_pattern_reason

if TYPE_CHECKING:
    from broker.config.model import BrokerConfig

__all__ = ["check_policy"]

Problems = list[tuple[str, str]]


def check_policy(config: BrokerConfig) -> Problems:
    problems: Problems = []
    seen: set[str] = set()
    for i, rule in enumerate(config.policy.rules):
        where = f"policy.rules[{i}]"
        if rule.id in seen:
            problems.append((f"{where}.id", f"duplicate rule id {rule.id!r}"))
        seen.add(rule.id)
        problems.extend(_check_rule(config, rule, where))
    return problems


def _known_tool(config: BrokerConfig, name: str) -> bool:
    return name in config.tools or name in config.registered_tools


def _check_rule(config: BrokerConfig, rule: PolicyRuleConfig, where: str) -> Problems:
    problems: Problems = []
    add = problems.append
    exact = [t for t in rule.tools if not any(c in t for c in "*?[")]
    for j, name in enumerate(rule.tools):
        if name in exact:
            if not _known_tool(config, name):
                add((f"{where}.tools[{j}]", f"unknown tool {name!r}"))
        elif not any(fnmatch.fnmatchcase(t, name) for t in config.tools) and "." not in name:
            add(
                (
                    f"{where}.tools[{j}]",
                    f"the glob {name!r} matches no tool: the rule never applies",
                )
            )
    for j, route in enumerate(rule.routes):
        if route not in config.routes:
            add((f"{where}.routes[{j}]", f"unknown route {route!r}"))
        elif (
            exact
            and all(t in config.tools for t in exact)  # registered tools are granted at runtime
            and not any(t in config.routes[route].tools for t in exact)
        ):
            add((f"{where}.routes[{j}]", f"route {route!r} carries none of the rule's tools"))
    if rule.phases and set(rule.phases) <= {"planning"} and rule.action == "require_approval":
        add((f"{where}.phases", "planning calls are dry runs, never held for approval"))
    for j, tenant in enumerate(rule.tenants):
        if tenant not in config.tenants:
            add((f"{where}.tenants[{j}]", f"unknown tenant {tenant!r}"))
        elif rule.routes and not any(
            tenant in config.routes[r].tenants for r in rule.routes if r in config.routes
        ):
            add((f"{where}.tenants[{j}]", f"none of the rule's routes serves tenant {tenant!r}"))
    known = [config.tools[t] for t in exact if t in config.tools]
    if (
        rule.risks
        and known
        and len(known) == len(exact)
        and not any(tool.risk in rule.risks for tool in known)
    ):
        add((f"{where}.risks", "none of the rule's tools has these risks: it never applies"))
    if rule.namespaces and exact and not any(t.partition(".")[0] in rule.namespaces for t in exact):
        add((f"{where}.namespaces", "none of the rule's tools is in these namespaces"))
    for j, pred in enumerate(rule.args):
        at = f"{where}.args[{j}].value"
        if pred.op in ("lt", "le", "gt", "ge"):
            if not isinstance(pred.value, int | float) or isinstance(pred.value, bool):
                add((at, f"{pred.op!r} compares numbers: give a number"))
        elif pred.op in ("in", "not_in"):
            if not isinstance(pred.value, list):
                add((at, f"{pred.op!r} needs a list of values"))
            elif pred.op == "in" and not pred.value:
                add((at, "an empty list never matches"))
        elif pred.op == "matches":
            if not isinstance(pred.value, str):
                add((at, "'matches' needs a regular expression (a string)"))
            else:
                reason = unsafe_pattern_reason(pred.value)
                if reason:
                    add((at, f"unsafe regex: {reason}"))
    session_conditions = [c for c in (rule.loop, rule.after, rule.states) if c is not None]
    if len(session_conditions) > 1:
        add((where, 'give one session condition per rule: "loop", "after" or "states"'))
    if session_conditions and rule.action != "block":
        add((f"{where}.action", 'a session rule ("loop", "after", "states") blocks: use "block"'))
    if rule.states is not None:
        tool_names = {*config.tools, *config.registered_tools}
        problems.extend(check_machine(rule.states, f"{where}.states", tool_names))
    if rule.after is not None and not _known_tool(config, rule.after.tool):
        add((f"{where}.after.tool", f"unknown tool {rule.after.tool!r}"))
    if rule.action == "hide" and rule.args:
        add((f"{where}.args", "a catalog has no arguments: a hide rule cannot test them"))
    if rule.mode == "shadow" and rule.canary_percent is not None:
        add((f"{where}.canary_percent", "a shadow rule is never enforced: drop one of the two"))
    if rule.canary_percent == 0:
        add((f"{where}.canary_percent", '0 % never enforces: use mode = "shadow"'))
    return problems
