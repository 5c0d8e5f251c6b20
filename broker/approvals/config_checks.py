"""The config's approval parts checked with key paths: tools' ``approval`` and approver tokens."""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

from broker.approvals.condition import ConditionError, parse_condition

if TYPE_CHECKING:
    from broker.config.model import BrokerConfig, TokenConfig

__all__ = ["check_approval_config", "check_approver_token"]


def check_approval_config(config: BrokerConfig) -> list[tuple[str, str]]:
    """Each tool's ``approval`` table: a condition that parses, and something that asks."""
    problems: list[tuple[str, str]] = []
    for name, tool in config.tools.items():
        approval = tool.approval
        if approval is None:
            continue
        where = f"tools.{name}.approval"
        if approval.when is not None:
            if approval.required:
                problems.append((where, 'give "required = true" or "when", not both'))
            try:
                parse_condition(approval.when)
            except ConditionError as exc:
                problems.append((f"{where}.when", str(exc)))
        elif not approval.required:
            problems.append((where, 'set "required = true" or a "when" condition'))
        for i, route in enumerate(approval.routes):
            if route not in config.routes:
                problems.append((f"{where}.routes[{i}]", f"unknown route {route!r}"))
    return problems


def check_approver_token(
    config: BrokerConfig, token: TokenConfig, where: str, broken_tenants: Set[str]
) -> list[tuple[str, str]]:
    """An approver token names known tenants and nothing a route token has: an agent's token
    must never approve its own proposals."""
    problems: list[tuple[str, str]] = []
    if token.service_account or token.tenant or token.tools:
        problems.append(
            (
                f"{where}.approver_tenants",
                "an approver token carries no service account, tenant or tools (a route token "
                "never approves)",
            )
        )
    for i, tenant in enumerate(token.approver_tenants):
        if tenant not in config.tenants and tenant not in broken_tenants:
            problems.append((f"{where}.approver_tenants[{i}]", f"unknown tenant {tenant!r}"))
    return problems
