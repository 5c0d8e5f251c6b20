"""Where the chain asks for the policy step of a route: none when nothing could apply there."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.policy.rules import CompiledPolicy, compile_policy
from broker.policy.step import PolicyStep

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.ledger import LedgerSink
    from broker.metrics import BrokerMetrics
    from broker.stores import AdmissionStore

__all__ = ["compiled_policy", "policy_step_for"]

_compiled: dict[int, tuple[object, CompiledPolicy]] = {}


def compiled_policy(config: BrokerConfig) -> CompiledPolicy:
    """The config's rules compiled once (kept per config object: routes share them)."""
    entry = _compiled.get(id(config))
    if entry is not None and entry[0] is config:
        return entry[1]
    if len(_compiled) > 16:  # tests build many apps; a process has one config
        _compiled.clear()
    policy = compile_policy(config.policy.rules)
    _compiled[id(config)] = (config, policy)
    return policy


def policy_step_for(
    config: BrokerConfig,
    route: str,
    *,
    store: AdmissionStore,
    ledger: LedgerSink | None,
    metrics: BrokerMetrics,
    clock: Callable[[], float],
) -> tuple[PolicyStep, ...]:
    """The route's policy step, or none: a route without rules or a session requirement
    pays nothing (``""``: callers without a route, to whom only route-less rules apply)."""
    settings = config.routes.get(route)
    require = settings.require_session_id if settings is not None else False
    policy = compiled_policy(config)
    applies = any(not rule.routes or route in rule.routes for rule in policy.rules)
    if not require and not applies:
        return ()
    step = PolicyStep(
        policy, require_session=require, store=store, ledger=ledger, metrics=metrics, clock=clock
    )
    return (step,)
