"""The ``[policy]`` section's typed model: rules decoded from TOML, unknown keys rejected.

Rules are evaluated in the order written (see ``broker.policy.rules`` for who wins).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from broker.phases import Phase

__all__ = [
    "ArgPredicate",
    "LoopGuard",
    "PolicyConfig",
    "PolicyRuleConfig",
    "SequenceGuard",
    "StateMachine",
    "StateMove",
]

RuleId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")]
Operator = Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "matches"]


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Keyword-only fields, unknown keys are errors (as every config struct)."""


class ArgPredicate(_Section):
    """One test on an argument: ``{arg = "amount", op = "gt", value = 100}``."""

    arg: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    """A top-level argument name, or a JSON pointer (``/address/country``)."""
    op: Operator
    value: Any
    """A number for ``lt``..``ge``, a list for ``in``/``not_in``, a regex for ``matches``."""


class LoopGuard(_Section):
    """Block the same tool with the same canonical args more than ``max_calls`` times in a
    session within ``window_s`` (counted atomically with admission, across processes)."""

    max_calls: Annotated[int, msgspec.Meta(ge=1, le=100_000)]
    window_s: Annotated[float, msgspec.Meta(gt=0, le=86_400 * 30)]


class SequenceGuard(_Section):
    """Block unless ``tool`` succeeded earlier in the session (with ``same_arg`` equal)."""

    tool: str
    same_arg: str | None = None
    """An argument both calls carry that must be equal (``order_id``)."""
    window_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Only a success this recent counts (default: any time in the session)."""


class StateMove(_Section):
    """A succeeded call of ``tool`` in state ``from`` moves the session to state ``to``."""

    from_: str = msgspec.field(name="from")
    tool: str
    to: str


class StateMachine(_Section):
    """Named states of a session, the tools each allows, and the successful calls between them.

    A session starts in ``initial``; its state is the fold of its succeeded calls (the ledger's
    records) over ``moves``. Every state reachable from ``initial`` must reach a ``final`` one."""

    initial: str
    allowed: dict[str, list[str]]
    """State -> the tools a proposal may call in it."""
    final: Annotated[list[str], msgspec.Meta(min_length=1)]
    """The states a session may end in (at least one)."""
    moves: list[StateMove] = []


class PolicyRuleConfig(_Section):
    """A rule: what it matches (every given condition must hold) and what it does."""

    id: RuleId
    action: Literal["allow", "block", "hide", "require_approval"]
    tools: list[str] = []
    """Tool names or globs (``billing.*``); empty: any tool."""
    namespaces: list[str] = []
    """Registered tools' namespaces (the part before the first dot)."""
    risks: list[Literal["read", "write", "irreversible"]] = []
    routes: list[str] = []
    tenants: list[str] = []
    phases: list[Phase] = []
    """The calls' lifecycle phases (``broker.phases``: how each front door derives them)."""
    args: list[ArgPredicate] = []
    loop: LoopGuard | None = None
    """A session rule: blocks only past the threshold (``action = "block"``)."""
    after: SequenceGuard | None = None
    """A session rule: blocks only without the earlier success (``action = "block"``)."""
    states: StateMachine | None = None
    """A session rule: blocks a tool its session's current state does not allow."""
    remediation: str = ""
    """What the model should do instead, returned with every refusal by this rule."""
    mode: Literal["enforce", "shadow"] = "enforce"
    """``shadow``: evaluated, recorded in the ledger and counted, never enforced."""
    canary_percent: Annotated[float, msgspec.Meta(ge=0, le=100)] | None = None
    """Enforce on this share of sessions only (stable per session); shadow on the rest."""
    description: str = ""


class PolicyConfig(_Section):
    """``[policy]``: ``[[policy.rules]]`` in evaluation order."""

    rules: list[PolicyRuleConfig] = []
