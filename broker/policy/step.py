"""The policy step of the chain: the route's ``session_id`` requirement, then the rules.

Session state: a loop threshold is a sliding-log rate hit folded into the proposal's own
admission (one atomic store call, no extra round trip, exact across processes on one Redis); a
sequence (``after``) is witnessed by the ledger's records of the session, as the implied-write
check is. Shadow and canary-out loop rules are counted apart, so they never refuse.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from broker.approvals.gate import require_approval
from broker.model import FailedCheck, FieldError
from broker.policy.config import LoopGuard, SequenceGuard
from broker.policy.rules import CompiledPolicy, CompiledRule, arg_value
from broker.policy.states import current_state
from broker.stores import Admission, AdmissionStore, Limited, RateHit
from broker.taxonomy import Code, StoreUnavailableError
from broker.validators import STORE_UNAVAILABLE, Rejection
from broker.validators.idempotency import fingerprint

if TYPE_CHECKING:
    from broker.ledger import LedgerSink
    from broker.ledger.model import LedgerRecord
    from broker.metrics import BrokerMetrics
    from broker.pipeline.context import Decided

__all__ = ["REQUIRE_SESSION_ID", "PolicyStep", "loop_hit_name"]

REQUIRE_SESSION_ID = FailedCheck("policy", "require_session_id")
"""What refuses a proposal without ``session_id`` on a route that requires one."""

_NO_SESSION = Rejection(
    code=Code.POLICY_BLOCKED,
    reason="this route requires a session_id on every proposal",
    remediation="REPAIR: send the conversation's session_id with the proposal",
    errors=(FieldError("/session_id", "required on this route"),),
    failed_check=REQUIRE_SESSION_ID,
)


def loop_hit_name(rule_id: str) -> str:
    """The rate hit a loop rule adds to admission (config limit names never hold a colon)."""
    return f"policy:{rule_id}"


class PolicyStep:
    """Rules of ``[[policy.rules]]`` (see ``broker.policy.rules`` for the order of evaluation)."""

    __slots__ = ("_clock", "_ledger", "_metrics", "_policy", "_require_session", "_store")
    name = "policy_rules"

    def __init__(
        self,
        policy: CompiledPolicy,
        *,
        require_session: bool,
        store: AdmissionStore,
        ledger: LedgerSink | None,
        metrics: BrokerMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._policy = policy
        self._require_session = require_session
        self._store = store
        self._ledger = ledger
        self._metrics = metrics
        self._clock = clock

    async def check(self, decided: Decided) -> Rejection | None:
        session_id = decided.request.session_id
        if self._require_session and not session_id:
            return _NO_SESSION
        tool = decided.tool
        if tool is None:
            raise RuntimeError("PolicyStep needs the tool: it must come after tool_authz")
        args = decided.request.args
        session: list[LedgerRecord] | None = None
        for rule in self._policy.for_tool(tool.name, tool.config.risk):
            if not rule.matches_context(decided.route, decided.tenant):
                continue
            if not rule.matches_phase(decided.phase):
                continue
            if rule.predicates and not rule.matches_args(args):
                continue
            enforced = rule.enforced_for(session_id)
            if rule.action == "allow":
                self._count(decided, rule, "allow", enforced)
                if enforced:
                    return None
                continue
            if rule.action == "require_approval" and not rule.session_bound:
                # Held for a person (broker.approvals); a later rule may still block it.
                self._count(decided, rule, "approval", enforced)
                if enforced:
                    require_approval(decided, f"policy rule {rule.id!r} needs a person's approval")
                continue
            if not rule.session_bound:
                self._count(decided, rule, "block", enforced)
                if enforced:
                    return _refusal(rule, f"refused by policy rule {rule.id!r}")
                continue
            if not session_id:  # a session rule cannot be kept without one: fail closed
                self._count(decided, rule, "block", enforced)
                if enforced:
                    return msgspec_replace(_NO_SESSION, failed_check=_check(rule))
                continue
            if rule.loop is not None:  # counted by admission, or apart when not enforced
                await self._loop(decided, rule, rule.loop, session_id, enforced)
                continue
            try:  # states and sequences: the session's records in the ledger are the witness
                if session is None:
                    session = await self._session(session_id)
            except StoreUnavailableError:
                return msgspec_replace(STORE_UNAVAILABLE, failed_check=_check(rule))
            reason = _session_refusal(rule, tool.name, session, args, self._clock())
            self._count(decided, rule, "pass" if reason is None else "block", enforced)
            if reason is not None and enforced:
                return _refusal(rule, reason)
        return None

    async def _session(self, session_id: str) -> list[LedgerRecord]:
        if self._ledger is None:
            return []
        return await self._ledger.by_session(session_id)

    async def _loop(
        self,
        decided: Decided,
        rule: CompiledRule,
        loop: LoopGuard,
        session_id: str,
        enforced: bool,
    ) -> None:
        tool = decided.tool.name if decided.tool is not None else decided.request.tool
        hit = RateHit(
            name=loop_hit_name(rule.id),
            # Hashed: a session id is the caller's text, of any length; the key stays short.
            scope=f"session={_digest(session_id)}|call={fingerprint(tool, decided.request.args)}",
            limit=loop.max_calls,
            window_s=loop.window_s,
        )
        if enforced:
            # Counted by admission itself: all or nothing with the claim and the budgets.
            decided.policy_hits = (*decided.policy_hits, hit)
            refusals = dict(decided.policy_refusals or {})
            refusals[hit.name] = lambda limited: self._loop_refusal(decided, rule, limited)
            decided.policy_refusals = refusals
            return
        # Shadow: counted on its own (never refuses), so the proposal's admission is untouched.
        try:
            result = await self._store.admit(
                Admission(tenant=decided.tenant, claim=None, hits=(hit,)),
                now=self._clock(),
                dry_run=False,
            )
        except StoreUnavailableError:
            return  # a shadow rule never changes an answer
        self._count(decided, rule, "block" if isinstance(result, Limited) else "pass", False)

    def _loop_refusal(self, decided: Decided, rule: CompiledRule, limited: Limited) -> Rejection:
        self._count(decided, rule, "block", True)
        refusal = _refusal(rule, f"the same call was made too often in this session ({rule.id})")
        return msgspec_replace(refusal, retry_after_s=limited.retry_after_s)

    def _count(self, decided: Decided, rule: CompiledRule, outcome: str, enforced: bool) -> None:
        mode = rule.mode_for(enforced)
        self._metrics.policy_decisions.labels(rule.id, outcome, mode).inc()
        if mode == "shadow" or outcome == "block":
            # In the ledger's validators list: what a shadow rule would have done, and which rule
            # refused (its verdict also names the step).
            decided.record(f"policy:{rule.id}", f"{mode}:{outcome}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _check(rule: CompiledRule) -> FailedCheck:
    return FailedCheck("policy", rule.id)


def _refusal(rule: CompiledRule, reason: str) -> Rejection:
    return Rejection(
        code=Code.POLICY_BLOCKED,
        reason=reason,
        remediation=rule.remediation or f"ESCALATE: policy rule {rule.id} refuses this call",
        failed_check=_check(rule),
    )


def _session_refusal(
    rule: CompiledRule,
    tool: str,
    session: list[LedgerRecord],
    args: dict[str, Any],
    now: float,
) -> str | None:
    """Why the session's state refuses this call under ``rule``; ``None``: it allows it."""
    if rule.states is not None:
        state = current_state(rule.states, _succeeded_tools(session))
        allowed = rule.states.allowed[state]
        if tool not in allowed:
            return f"{tool} is not allowed in state {state!r} (allowed: {', '.join(allowed) or 'none'})"
    if rule.after is not None and not _witnessed(rule.after, session, args, now):
        return f"{tool} needs a succeeded {rule.after.tool} first"
    return None


def _witnessed(
    after: SequenceGuard, session: list[LedgerRecord], args: dict[str, Any], now: float
) -> bool:
    """Did the rule's earlier tool succeed in the session (same argument, recent enough)?"""
    wanted = arg_value(args, after.same_arg) if after.same_arg else None
    for record in reversed(session):
        if record.tool != after.tool or record.execution_status != "succeeded":
            continue
        if record.dry_run or record.replayed:  # a replay did not run in this session
            continue
        if after.window_s is not None and _age(record.time, now) > after.window_s:
            return False  # older ones are older still
        if after.same_arg is None:
            return True
        recorded = record.args_redacted
        if isinstance(recorded, dict) and arg_value(recorded, after.same_arg) == wanted:
            return True
    return False


def _succeeded_tools(session: list[LedgerRecord]) -> list[str]:
    """The session's succeeded calls, in order: what moves a state machine."""
    return [
        record.tool
        for record in session
        if record.execution_status == "succeeded" and not record.dry_run and not record.replayed
    ]


def _age(stamp: str, now: float) -> float:
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return now - when.timestamp()


def msgspec_replace(rejection: Rejection, **changes: Any) -> Rejection:
    return msgspec.structs.replace(rejection, **changes)
