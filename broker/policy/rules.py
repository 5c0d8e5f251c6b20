"""The rules compiled once at start: indexed by tool, tested per proposal without scanning.

Order of evaluation and who wins (docs/api.md "Policy"):

- Rules are considered in the order they are written. A rule *matches* when every condition it
  gives holds (tools, namespaces, risks, routes, tenants, argument predicates).
- The first enforced rule that *decides* ends evaluation: ``allow`` admits (later rules do not
  apply, so an allow written first carves an exception out of a broader block); ``block`` and
  ``hide`` refuse. A session rule (``loop``, ``after``) decides only when its session condition
  fails; while it holds, evaluation goes on.
- A ``shadow`` rule (and a canary rule outside its share of sessions) is evaluated where it
  stands and recorded, but never decides.
- With no deciding rule the proposal goes on through the chain as before.
"""

from __future__ import annotations

import fnmatch
import hashlib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.policy.config import (
    ArgPredicate,
    LoopGuard,
    PolicyRuleConfig,
    SequenceGuard,
    StateMachine,
)

__all__ = ["CompiledPolicy", "CompiledRule", "arg_value", "compile_policy", "in_canary"]

_MISSING = object()
_COMPARE: Mapping[str, Callable[[Any, Any], bool]] = {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
_CACHE_MAX = 4096


def arg_value(args: Mapping[str, Any], arg: str) -> Any:
    """A top-level argument, or the value at a JSON pointer; ``_MISSING`` when absent."""
    if not arg.startswith("/"):
        return args.get(arg, _MISSING)
    value: Any = args
    for token in arg[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, Mapping):
            value = value.get(token, _MISSING)
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _predicate(pred: ArgPredicate) -> Callable[[Mapping[str, Any]], bool]:
    """One argument test; an absent argument never satisfies it (not even ``ne``)."""
    arg, expected = pred.arg, pred.value
    if pred.op in _COMPARE:
        compare = _COMPARE[pred.op]

        def test(args: Mapping[str, Any]) -> bool:
            value = arg_value(args, arg)
            return _number(value) and compare(value, expected)

    elif pred.op == "matches":
        pattern = re.compile(expected)

        def test(args: Mapping[str, Any]) -> bool:
            value = arg_value(args, arg)
            return isinstance(value, str) and pattern.search(value) is not None

    elif pred.op in ("in", "not_in"):
        members = list(expected)
        inside = pred.op == "in"

        def test(args: Mapping[str, Any]) -> bool:
            value = arg_value(args, arg)
            return value is not _MISSING and (value in members) is inside

    else:  # eq / ne
        equal = pred.op == "eq"

        def test(args: Mapping[str, Any]) -> bool:
            value = arg_value(args, arg)
            return value is not _MISSING and (value == expected) is equal

    return test


def in_canary(rule_id: str, session_id: str | None, percent: float) -> bool:
    """Stable per session: the same session is always in (or out of) a rule's canary."""
    if session_id is None:
        return False
    digest = hashlib.sha256(f"{rule_id}\x00{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 10_000 < percent * 100


@dataclass(frozen=True, slots=True)
class CompiledRule:
    position: int
    id: str
    action: str
    names: frozenset[str]
    globs: tuple[str, ...]
    namespaces: frozenset[str]
    risks: frozenset[str]
    routes: frozenset[str]
    tenants: frozenset[str]
    phases: frozenset[str]
    predicates: tuple[Callable[[Mapping[str, Any]], bool], ...]
    loop: LoopGuard | None
    after: SequenceGuard | None
    states: StateMachine | None
    remediation: str
    shadow: bool
    canary_percent: float | None

    def matches_tool(self, name: str, risk: str) -> bool:
        """The tool conditions (what the index narrows on)."""
        if (
            (self.names or self.globs)
            and name not in self.names
            and not any(fnmatch.fnmatchcase(name, glob) for glob in self.globs)
        ):
            return False
        if self.namespaces and name.partition(".")[0] not in self.namespaces:
            return False
        return not self.risks or risk in self.risks

    @property
    def session_bound(self) -> bool:
        """A session rule: it decides only from the session's state."""
        return self.loop is not None or self.after is not None or self.states is not None

    def matches_context(self, route: str, tenant: str) -> bool:
        return (not self.routes or route in self.routes) and (
            not self.tenants or tenant in self.tenants
        )

    def matches_phase(self, phase: str) -> bool:
        return not self.phases or phase in self.phases

    def matches_args(self, args: Mapping[str, Any]) -> bool:
        return all(test(args) for test in self.predicates)

    def enforced_for(self, session_id: str | None) -> bool:
        """Does this rule decide for this session, or only get recorded (shadow)?"""
        if self.shadow:
            return False
        if self.canary_percent is None:
            return True
        return in_canary(self.id, session_id, self.canary_percent)

    def mode_for(self, enforced: bool) -> str:
        """The ``mode`` label of ``broker_policy_decisions_total``."""
        if self.canary_percent is not None and not self.shadow:
            return "canary" if enforced else "shadow"
        return "shadow" if self.shadow else "enforce"


def _compile(position: int, rule: PolicyRuleConfig) -> CompiledRule:
    globs = tuple(t for t in rule.tools if _is_glob(t))
    return CompiledRule(
        position=position,
        id=rule.id,
        action=rule.action,
        names=frozenset(t for t in rule.tools if not _is_glob(t)),
        globs=globs,
        namespaces=frozenset(rule.namespaces),
        risks=frozenset(rule.risks),
        routes=frozenset(rule.routes),
        tenants=frozenset(rule.tenants),
        phases=frozenset(rule.phases),
        predicates=tuple(_predicate(p) for p in rule.args),
        loop=rule.loop,
        after=rule.after,
        states=rule.states,
        remediation=rule.remediation,
        shadow=rule.mode == "shadow",
        canary_percent=rule.canary_percent,
    )


def _is_glob(name: str) -> bool:
    return any(c in name for c in "*?[")


class CompiledPolicy:
    """Every rule, indexed: rules naming tools exactly sit under those names; the rest (globs,
    namespaces, no tool condition) are tried once per tool name and the answer is cached, so a
    proposal only ever looks at the rules that can concern its tool."""

    __slots__ = ("_by_name", "_cache", "_open", "rules")

    def __init__(self, rules: tuple[CompiledRule, ...]) -> None:
        self.rules = rules
        by_name: dict[str, list[CompiledRule]] = {}
        open_rules: list[CompiledRule] = []
        for rule in rules:
            if rule.names and not rule.globs:
                for name in rule.names:
                    by_name.setdefault(name, []).append(rule)
            else:
                open_rules.append(rule)
        self._by_name = {k: tuple(v) for k, v in by_name.items()}
        self._open = tuple(open_rules)
        self._cache: dict[tuple[str, str], tuple[CompiledRule, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def for_tool(self, name: str, risk: str) -> tuple[CompiledRule, ...]:
        """The rules whose tool conditions hold for this tool, in evaluation order."""
        key = (name, risk)
        found = self._cache.get(key)
        if found is None:
            candidates = (*self._by_name.get(name, ()), *self._open)
            found = tuple(
                sorted(
                    (r for r in candidates if r.matches_tool(name, risk)),
                    key=lambda r: r.position,
                )
            )
            if len(self._cache) >= _CACHE_MAX:  # registered tools come and go: stay bounded
                self._cache.clear()
            self._cache[key] = found
        return found

    def hidden(self, name: str, risk: str, route: str, tenant: str) -> bool:
        """Is this tool hidden from ``route``'s catalog for ``tenant``? The first enforced
        ``allow``/``hide`` without argument predicates decides (as for calls)."""
        for rule in self.for_tool(name, risk):
            if (  # a catalog lists tools for no call in particular: no args, no phase
                rule.predicates
                or rule.phases
                or rule.loop
                or rule.after
                or not rule.matches_context(route, tenant)
            ):
                continue
            if rule.shadow or rule.canary_percent is not None:
                continue  # a catalog has no session: only fully enforced rules hide
            if rule.action == "allow":
                return False
            if rule.action == "hide":
                return True
        return False


def compile_policy(rules: list[PolicyRuleConfig]) -> CompiledPolicy:
    return CompiledPolicy(tuple(_compile(i, rule) for i, rule in enumerate(rules)))
