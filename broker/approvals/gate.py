"""The chain's approval step: after admission, mark a proposal that must wait for a person.

It takes no state and refuses nothing: the pipeline answers a marked proposal ``202
pending_approval`` (``broker.approvals.service``) with its budgets and rate slots held. A dry
run is never marked: its preview changes nothing, so nobody needs to approve it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.approvals.condition import Condition, parse_condition

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.pipeline.context import Decided

__all__ = ["ApprovalStep", "require_approval"]


def require_approval(decided: Decided, reason: str, *, expires_s: float | None = None) -> None:
    """Turn this proposal into a pending approval (for the tool's rule, or a policy rule).

    Call it from a chain step before or after admission; the pipeline then answers 202 and
    holds what admission took. ``expires_s`` defaults to the tool's ``approval.expires_s``.
    """
    decided.approval_reason = reason
    if expires_s is not None:
        decided.approval_expires_s = expires_s


class ApprovalStep:
    """Tools with ``approval = { required = true }`` or a ``when`` that holds for the args."""

    __slots__ = ("_routes", "_rules")
    name = "approval"

    def __init__(self, config: BrokerConfig) -> None:
        # Per tool: its condition (None: always), the reason it gives, its routes (empty: all).
        self._rules: dict[str, tuple[Condition | None, str, frozenset[str]]] = {}
        self._routes: dict[str, frozenset[str]] = {}
        for name, tool in config.tools.items():
            approval = tool.approval
            if approval is None:
                continue
            routes = self._routes[name] = frozenset(approval.routes)
            if approval.when is not None:
                self._rules[name] = (
                    parse_condition(approval.when),
                    f"{name} needs approval when {approval.when}",
                    routes,
                )
            elif approval.required:
                self._rules[name] = (None, f"{name} always needs approval", routes)

    def on_route(self, route: str) -> bool:
        """Whether a tool asks for approval on ``route`` (else its chain leaves the step out,
        and its ledger records list the steps they always did)."""
        return any(not routes or route in routes for routes in self._routes.values())

    async def check(self, decided: Decided) -> None:
        if decided.meta.dry_run or decided.approval_reason is not None:
            return None
        rule = self._rules.get(decided.meta.tool or "")
        if rule is None:
            return None
        condition, reason, routes = rule
        if routes and decided.route not in routes:
            return None
        if condition is None or condition.holds(decided.request.args):
            require_approval(decided, reason)
        return None
