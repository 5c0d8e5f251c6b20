"""The validator chain, composed once per route from the config: which steps, in what order.

The order is the README's, and it is the only place the order is written down::

    mediation ▸ tool ▸ authz ▸ dry runs (routes that limit them) ▸ schema (+ argument repair) ▸ policy rules (broker.policy, where any apply) ▸ policy
    (routes that require it) ▸ idempotency key ▸ preconditions
    ▸ admission (claim + budgets + rate limits, one atomic step) ▸ approval (where a tool asks)

Stateless checks come first, so an unauthorized caller can never probe keys or spend budget;
preconditions before admission, so budget is only reserved for proposals the data plane accepts.
A new check (mediation, a policy with session state, an approval gate after admission) is a
:class:`Step` placed here; the pipeline that runs the chain does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.approvals.gate import ApprovalStep
from broker.mediation.step import MediationStep
from broker.mediation.view import Mediator
from broker.pipeline.dry_run_scope import DryRunScopeStep
from broker.pipeline.steps import (
    AdmissionStep,
    IdempotencyKeyStep,
    ImpliedWritePolicyStep,
    PreconditionsStep,
    SchemaStep,
    ToolAuthzStep,
)
from broker.policy.chain_hook import policy_step_for
from broker.stores import AdmissionStore, Replay
from broker.validators import Rejection

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.config.model import DryRunScope
    from broker.ledger import LedgerSink
    from broker.metrics import BrokerMetrics
    from broker.pipeline.context import Decided
    from broker.tools.runtime import Registry

__all__ = ["Chain", "Chains", "Step", "Verdict", "build_chains"]

Verdict = Rejection | Replay
"""How a step ends the chain: refuse the proposal, or answer it with an earlier response."""


class Step(Protocol):
    """One link of the chain: one job, built once, no state of its own between proposals."""

    @property
    def name(self) -> str:
        """What the ledger's ``validators`` list calls this step."""
        ...

    async def check(self, decided: Decided) -> Verdict | None:
        """``None`` passes the proposal to the next step; a verdict ends the chain."""
        ...


@dataclass(frozen=True, slots=True)
class Chain:
    """The steps one route's proposals go through, and whether they only ever dry-run."""

    steps: tuple[Step, ...]
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Chains:
    """Every configured route's chain, and the plain one for callers without a route."""

    by_route: Mapping[str, Chain]
    default: Chain

    def for_route(self, route: str) -> Chain:
        return self.by_route.get(route, self.default)


def build_chains(
    config: BrokerConfig,
    *,
    registry: Registry,
    store: AdmissionStore,
    ledger: LedgerSink | None,
    metrics: BrokerMetrics,
    clock: Callable[[], float],
    dry_run: bool,
    mediator: Mediator | None = None,
) -> Chains:
    """Compose each route's chain from the config; ``dry_run`` holds for the whole process."""
    mediation = MediationStep(mediator or Mediator(config, registry), registry)
    tool_authz = ToolAuthzStep(registry)
    plain_schema = SchemaStep(registry)
    repairing_schema = SchemaStep(registry, repairs=metrics.argument_repairs)
    policy = ImpliedWritePolicyStep(ledger)
    key = IdempotencyKeyStep(lease_margin_s=config.service.lease_margin_s)
    preconditions = PreconditionsStep(store, clock=clock, metrics=metrics)
    admission = AdmissionStep(store, clock=clock, metrics=metrics)
    approval = ApprovalStep(config)

    def chain(
        *,
        implied_write_policy: bool,
        route_dry_run: bool,
        route_name: str = "",
        approval_gate: bool = False,
        argument_repair: bool = False,
        dry_runs: DryRunScope | None = None,
    ) -> Chain:
        steps: tuple[Step, ...] = (
            mediation,
            tool_authz,
            *((DryRunScopeStep(dry_runs),) if dry_runs is not None else ()),
            repairing_schema if argument_repair else plain_schema,
            *policy_step_for(
                config, route_name, store=store, ledger=ledger, metrics=metrics, clock=clock
            ),
            *((policy,) if implied_write_policy else ()),
            key,
            preconditions,
            admission,
            *((approval,) if approval_gate else ()),
        )
        return Chain(steps, dry_run=dry_run or route_dry_run)

    return Chains(
        by_route={
            name: chain(
                implied_write_policy=route.require_implied_write_check,
                route_dry_run=route.dry_run,
                route_name=name,
                approval_gate=approval.on_route(name),
                argument_repair=route.argument_repair,
                dry_runs=route.dry_runs,
            )
            for name, route in config.routes.items()
        },
        default=chain(implied_write_policy=False, route_dry_run=False),
    )
