"""The broker's metric families: their names, help, labels and buckets, and the series
pre-initialised so that dashboards and ``increase()`` see zeros, not gaps.

What ``/metrics`` exposes is defined here, in the order it is exposed. How the broker counts
into it (a cached set of series per kind of answer) is in :mod:`broker.metrics`, whose
:class:`~broker.metrics.BrokerMetrics` has :class:`MetricFamilies` as its base.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["UNKNOWN", "MetricFamilies"]

UNKNOWN = "_unknown"
"""The ``tool`` label of any name that is not a tool the broker knows."""

# Decisions take tens of microseconds to a few milliseconds (more with Redis); executions
# take milliseconds to many seconds (remote backends, retries).
DECISION_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
EXECUTION_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class MetricFamilies:
    """Every family the broker exposes, on ``registry``.

    Args:
        registry: the app's registry.
        tools: the tools known at start, whose series are pre-initialised.
        budgets: budget names, pre-initialised too.
        tenant_label: whether the decision and execution counters carry a ``tenant`` label.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        tools: frozenset[str],
        budgets: Iterable[str],
        tenant_label: bool,
    ) -> None:
        self.registry = registry
        # Tenants come from the config only, so the label stays bounded; it is off unless the
        # config asks (``[service] metrics_tenant_label``), since it multiplies every series.
        per_tenant = ["tenant"] if tenant_label else []
        r = registry
        self.proposals = Counter(
            "broker_proposals_total",
            "Proposals answered, by tool, decision and failure category/code.",
            ["tool", "decision", "category", "code", *per_tenant],
            registry=r,
        )
        self.executions = Counter(
            "broker_executions_total",
            "Adapter executions by tool and final status (succeeded, failed).",
            ["tool", "status", *per_tenant],
            registry=r,
        )
        self.decision_seconds = Histogram(
            "broker_decision_duration_seconds",
            "Time from proposal to decision (the validator chain).",
            ["tool"],
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.execution_seconds = Histogram(
            "broker_execution_duration_seconds",
            "Adapter call time, retries included.",
            ["tool"],
            buckets=EXECUTION_BUCKETS,
            registry=r,
        )
        self.replays = Counter(
            "broker_idempotency_replays_total",
            "Proposals answered from a stored response (the adapter was not called).",
            ["tool"],
            registry=r,
        )
        # Rule ids come from the config only, so the label stays bounded (issue 24).
        self.policy_decisions = Counter(
            "broker_policy_decisions_total",
            "Policy rules that matched a proposal, by rule, outcome (block, allow, pass) and mode"
            " (enforce, shadow, canary).",
            ["rule", "outcome", "mode"],
            registry=r,
        )
        self.conflicts = Counter(
            "broker_idempotency_conflicts_total",
            "Idempotency keys refused: reused, in progress or outcome unknown.",
            ["tool", "code"],
            registry=r,
        )
        self.budget_consumed = Counter(
            "broker_budget_consumed_total",
            "Units taken from each budget by executed proposals (sum budgets: the argument).",
            ["budget"],
            registry=r,
        )
        self.budget_remaining = Gauge(
            "broker_budget_remaining",
            "Units left in each budget's current window, per scope (as of the last charge).",
            ["budget", "scope"],
            registry=r,
            multiprocess_mode="livemostrecent",
        )
        self.rate_limited = Counter(
            "broker_rate_limit_rejections_total",
            "Proposals refused by a rate limit or an exhausted budget.",
            ["tool", "code"],
            registry=r,
        )
        self.retries = Counter(
            "broker_retries_total",
            "Adapter calls repeated after a transient fault.",
            ["tool"],
            registry=r,
        )
        self.store_errors = Counter(
            "broker_store_errors_total",
            "Store operations that failed (the broker failed closed).",
            ["operation"],
            registry=r,
        )
        self.gateway_calls = Counter(
            "broker_gateway_calls_total",
            "Meta-tool calls on gateway and proxy routes (broker.gateway), by meta-tool and "
            "outcome (ok, error); tool_execute's proposals are counted as proposals too.",
            ["meta_tool", "outcome"],
            registry=r,
        )
        self.ledger_errors = Counter(
            "broker_ledger_errors_total",
            "Ledger appends that failed (world-changing tools are refused until it recovers).",
            registry=r,
        )
        self.ledger_unavailable = Gauge(
            "broker_ledger_unavailable",
            "1 while the ledger cannot be written, else 0.",
            registry=r,
            multiprocess_mode="max",
        )
        self.outcome_unknown_keys = Gauge(
            "broker_outcome_unknown_keys",
            "Idempotency keys whose call's outcome is unknown, awaiting resolution "
            "(POST /v1/resolutions); read from the store at every scrape. Alert while > 0.",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.stuck_claims_completed = Counter(
            "broker_stuck_claims_completed_total",
            "Idempotency claims found past their lease and completed by the completer "
            "(broker.completer): released (never dispatched, or an idempotent tool), settled "
            "(from its ledger record) or outcome_unknown (it may have run).",
            ["outcome"],
            registry=r,
        )
        self.store_bytes = Gauge(
            "broker_store_bytes",
            "Size on disk of the embedded SQLite store (database and write-ahead log); "
            "0 for other stores.",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.implied_write_checks = Counter(
            "broker_implied_write_checks_total",
            "Messages checked for implied writes.",
            registry=r,
        )
        self.implied_write_violations = Counter(
            "broker_implied_write_violations_total",
            "Claims in prose that no succeeded execution backs, by tool and verdict.",
            ["tool", "status"],
            registry=r,
        )
        # Pre-initialised series: dashboards and increase() see zeros, not gaps.
        for tool in tools:
            if not tenant_label:
                self.executions.labels(tool, "succeeded")
                self.executions.labels(tool, "failed")
            self.replays.labels(tool)
            for status in ("unsupported", "contradicted", "unknown_identifier"):
                self.implied_write_violations.labels(tool, status)
        for status in ("unsupported", "contradicted", "unknown_identifier"):
            self.implied_write_violations.labels(UNKNOWN, status)
        for operation in ("admit", "settle", "save_decision"):
            self.store_errors.labels(operation)
        for budget in budgets:
            self.budget_consumed.labels(budget)
        self.ledger_unavailable.set(0)
        self._observability_metrics(r, tools)

    def _observability_metrics(self, r: CollectorRegistry, tools: frozenset[str]) -> None:
        """What the alerts of deploy/prometheus/alerts.yml and the cost view need beyond the
        decision counters (defined apart so additions stay at the end)."""
        self.execution_cost = Counter(
            "broker_execution_cost_usd",
            "US dollars spent on executions: the tool's configured cost_usd per adapter call "
            "(retries included), whatever the outcome.",
            ["tool"],
            registry=r,
        )
        self.ledger_unsigned_records = Gauge(
            "broker_ledger_unsigned_records",
            "Ledger records after the latest signed checkpoint, as the checkpointer last saw "
            "(0 after each checkpoint; grows while checkpoints fail).",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.approvals_pending = Gauge(
            "broker_approvals_pending",
            "Proposals waiting for a human approval.",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.approval_decisions = Counter(
            "broker_approval_decisions",
            "Approvals decided, by outcome (approved, denied, expired).",
            ["outcome"],
            registry=r,
        )
        self.approval_decision_seconds = Histogram(
            "broker_approval_decision_seconds",
            "Time from a proposal's 202 to its approval's decision (or expiry).",
            ["outcome"],
            buckets=(1, 10, 60, 300, 900, 3600, 14400, 86400),
            registry=r,
        )
        self.resolutions = Counter(
            "broker_resolutions",
            "outcome_unknown keys resolved through POST /v1/resolutions, by the outcome the "
            "resolver reported (succeeded, failed, not_executed).",
            ["outcome"],
            registry=r,
        )
        self.read_cache = Counter(
            "broker_read_cache",
            "Read-cache look-ups of tools with read_cache, by outcome: hit, miss, store (a "
            "result kept) and error (the store failed; the call went to the backend).",
            ["tool", "outcome"],
            registry=r,
        )
        self.argument_repairs = Counter(
            "broker_argument_repairs",
            "Arguments repaired on routes with argument_repair, by route and kind of repair.",
            ["route", "kind"],
            registry=r,
        )
        self.approval_webhook = Counter(
            "broker_approval_webhook",
            "Approval webhook deliveries by outcome: delivered, retried (one per attempt that "
            "failed and was tried again), failed (given up; logged whole at ERROR).",
            ["outcome"],
            registry=r,
        )
        for tool in tools:
            self.execution_cost.labels(tool)
        for outcome in ("succeeded", "failed", "not_executed"):
            self.resolutions.labels(outcome)
        for outcome in ("delivered", "retried", "failed"):  # the alert reads increase(failed)
            self.approval_webhook.labels(outcome)
