"""``broker policy simulate``: a ledger's recorded proposals replayed against candidate rules.

Walks the records in order, keeping the session state the rules would have kept (succeeded calls
for ``after``; calls admitted under the candidate for ``loop``), and reports each proposal the
candidate decides differently from the recorded run, per rule: newly blocked, or no longer
blocked. Proposals refused before the policy step (unknown tool, authz, schema) never reached it
and are skipped. Arguments are the ledger's redacted ones: a predicate on a sensitive field sees
the redaction, not the value.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from broker.ledger.model import LedgerRecord
from broker.phases import proposal_phase
from broker.policy.rules import CompiledPolicy, arg_value
from broker.policy.states import current_state
from broker.validators.idempotency import fingerprint

__all__ = ["Difference", "Simulation", "simulate"]

# Refused before the policy step ran: nothing to compare.
_BEFORE_POLICY = frozenset(
    {"unknown_tool", "tool_not_allowed", "schema_invalid", "unknown_precondition"}
)
_REQUIRE_SESSION = "require_session_id"


@dataclass(frozen=True, slots=True)
class Difference:
    seq: int
    proposal_id: str
    tool: str
    session_id: str | None
    recorded: str | None
    """The rule that refused it in the recorded run (``None``: the policy let it through)."""
    candidate: str | None
    """The rule that would refuse it now (``None``: it would pass)."""


@dataclass
class Simulation:
    replayed: int = 0
    differences: list[Difference] = field(default_factory=list)

    def by_rule(self) -> dict[str, tuple[list[Difference], list[Difference]]]:
        """Per rule: (proposals it would now block, proposals it no longer blocks)."""
        rules: dict[str, tuple[list[Difference], list[Difference]]] = {}
        for diff in self.differences:
            if diff.candidate is not None:
                rules.setdefault(diff.candidate, ([], []))[0].append(diff)
            if diff.recorded is not None:
                rules.setdefault(diff.recorded, ([], []))[1].append(diff)
        return rules


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def _recorded_rule(record: LedgerRecord) -> str | None:
    check = record.failed_check
    if record.code != "policy_blocked" or check is None or check.kind != "policy":
        return None
    if check.name == "require_implied_write_check":  # a later step: the rules had passed
        return None
    return check.name


class _Sessions:
    """What the rules would have known at each point of the replay."""

    def __init__(self) -> None:
        self.succeeded: dict[str, list[tuple[str, Any, float]]] = defaultdict(list)
        self.loops: dict[tuple[str, str, str], deque[float]] = defaultdict(deque)


def simulate(
    records: Iterable[LedgerRecord],
    policy: CompiledPolicy,
    *,
    sessions_required: frozenset[str],
    risks: Mapping[str, str],
) -> Simulation:
    """Replay ``records`` (in ledger order) against ``policy``; ``risks`` maps tool to risk."""
    result = Simulation()
    state = _Sessions()
    for record in records:
        if record.tool not in risks or record.decision not in ("approved", "rejected"):
            continue  # implied-write checks, tools the candidate does not know
        if record.code in _BEFORE_POLICY:
            continue
        result.replayed += 1
        now = _epoch(record.time)
        recorded = _recorded_rule(record)
        args = record.args_redacted if isinstance(record.args_redacted, dict) else {}
        candidate = _decide(record, args, now, policy, state, sessions_required, risks)
        if candidate != recorded:
            result.differences.append(
                Difference(
                    record.seq,
                    record.proposal_id,
                    record.tool,
                    record.session_id,
                    recorded,
                    candidate,
                )
            )
        _remember(record, args, now, state)
    return result


def _decide(
    record: LedgerRecord,
    args: dict[str, Any],
    now: float,
    policy: CompiledPolicy,
    state: _Sessions,
    sessions_required: frozenset[str],
    risks: Mapping[str, str],
) -> str | None:
    session = record.session_id
    if record.route in sessions_required and not session:
        return _REQUIRE_SESSION
    admitted_loops: list[tuple[str, str, str]] = []
    for rule in policy.for_tool(record.tool, risks[record.tool]):
        if not rule.matches_context(record.route, record.tenant):
            continue
        if not rule.matches_phase(record.phase or proposal_phase(record.dry_run)):
            continue  # records older than phases carry none: derived as their door did
        if rule.predicates and not rule.matches_args(args):
            continue
        if not rule.enforced_for(session):
            continue  # shadow: never decides
        if rule.action == "allow":
            break
        if not rule.session_bound:
            return rule.id
        if not session:
            return rule.id
        if rule.states is not None:
            seen_tools = [tool for tool, _, _ in state.succeeded[session]]
            if record.tool not in rule.states.allowed[current_state(rule.states, seen_tools)]:
                return rule.id
            continue
        if rule.after is not None:
            after = rule.after
            wanted = arg_value(args, after.same_arg) if after.same_arg else None
            if not any(
                tool == after.tool
                and (after.window_s is None or now - when <= after.window_s)
                and (after.same_arg is None or arg_value(seen, after.same_arg) == wanted)
                for tool, seen, when in state.succeeded[session]
            ):
                return rule.id
            continue
        if rule.loop is not None:
            key = (rule.id, session, fingerprint(record.tool, args))
            times = state.loops[key]
            while times and now - times[0] >= rule.loop.window_s:
                times.popleft()
            if len(times) >= rule.loop.max_calls:
                return rule.id
            admitted_loops.append(key)
    # Admitted under the candidate: its loop hits count, if the recorded run reached execution
    # or was refused only by the policy (admission would then have taken it).
    if record.execution_status is not None or _recorded_rule(record) is not None:
        for key in admitted_loops:
            state.loops[key].append(now)
    return None


def _remember(record: LedgerRecord, args: dict[str, Any], now: float, state: _Sessions) -> None:
    if (
        record.session_id
        and record.execution_status == "succeeded"
        and not record.dry_run
        and not record.replayed
    ):
        state.succeeded[record.session_id].append((record.tool, args, now))
