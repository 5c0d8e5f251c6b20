"""Every metric in one place, on a registry the app owns, labelled by the failure taxonomy.

Label values are bounded: tools are registered names (anything else is ``_unknown``), decisions,
categories and codes come from closed enums, and tenants appear only when the config enables
them. With ``PROMETHEUS_MULTIPROC_DIR`` set (several worker processes), values live in shared
files and ``/metrics`` aggregates every process.

The article's metrics in PromQL::

    pass rate            sum(rate(broker_proposals_total{decision="approved"}[5m]))
                           / sum(rate(broker_proposals_total[5m]))
    execution success    sum by (tool) (rate(broker_executions_total{status="succeeded"}[5m]))
                           / sum by (tool) (rate(broker_executions_total[5m]))
    p95 decision         histogram_quantile(0.95, sum by (le) (rate(broker_decision_duration_seconds_bucket[5m])))
    p95 execution        histogram_quantile(0.95, sum by (le, tool) (rate(broker_execution_duration_seconds_bucket[5m])))
    idempotency hits     sum(rate(broker_idempotency_replays_total[5m])) / sum(rate(broker_proposals_total[5m]))
    implied writes       sum by (tool, status) (increase(broker_implied_write_violations_total[1h]))
    $ per success        sum by (tool) (increase(broker_execution_cost_usd_total[1d]))
                           / sum by (tool) (increase(broker_executions_total{status="succeeded"}[1d]))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE", "UNKNOWN", "BrokerMetrics"]

_Metric = TypeVar("_Metric", bound=MetricWrapperBase)

CONTENT_TYPE = CONTENT_TYPE_LATEST
UNKNOWN = "_unknown"

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


class BrokerMetrics:
    """The broker's metrics.

    Args:
        tools: the tools known at start, whose series are pre-initialised.
        budgets: budget names, pre-initialised so dashboards see zeros, not gaps.
        registry: the app's registry; a fresh one when omitted.
        is_known: whether a name is a tool the broker knows now (tools registered later
            included); the ``tool`` label takes only such names. Defaults to ``tools``.
    """

    def __init__(
        self,
        tools: Iterable[str],
        *,
        budgets: Iterable[str] = (),
        registry: CollectorRegistry | None = None,
        is_known: Callable[[str], bool] | None = None,
        tenant_label: bool = False,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        # Tenants come from the config only, so the label stays bounded; it is off unless the
        # config asks (``[service] metrics_tenant_label``), since it multiplies every series.
        self._tenant_label = tenant_label
        per_tenant = ["tenant"] if tenant_label else []
        self._tools = frozenset(tools)
        self._is_known = is_known or self._tools.__contains__
        self._label_cache: dict[tuple[int, tuple[str, ...]], Any] = {}  # -> that metric's series
        # Every series one kind of answer (or execution) touches, found with one look-up: per
        # proposal, the label look-ups cost more than the increments. Keys hold label values
        # only (bounded, see above), never raw input.
        self._answers: dict[tuple[str | None, ...], tuple[Counter, Histogram, Counter | None]] = {}
        self._executions: dict[tuple[str | None, ...], tuple[Counter, Histogram]] = {}
        self._collectors: list[Collector] = []
        r = self.registry
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
        for tool in self._tools:
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
        self._observability_metrics(r)

    def _observability_metrics(self, r: CollectorRegistry) -> None:
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
        for tool in self._tools:
            self.execution_cost.labels(tool)
        for outcome in ("succeeded", "failed", "not_executed"):
            self.resolutions.labels(outcome)
        for outcome in ("delivered", "retried", "failed"):  # the alert reads increase(failed)
            self.approval_webhook.labels(outcome)

    def spent(self, tool: str, cost_usd: float, attempts: int) -> None:
        """What one execution cost: ``cost_usd`` per adapter call (a retry is billed too)."""
        if cost_usd:
            self._series(self.execution_cost, (self.tool(tool),)).inc(cost_usd * attempts)

    def answered(
        self,
        tool: str | None,
        decision: str,
        category: str | None,
        code: str | None,
        decision_s: float,
        tenant: str | None = None,
    ) -> None:
        """Count one answered proposal (``decision`` is approved, rejected or replayed)."""
        label = self.tool(tool)
        key = (label, decision, category, code, tenant if self._tenant_label else None)
        series = self._answers.get(key)
        if series is None:
            series = self._answers[key] = self._answer_series(*key)
        counted, timed, also_counted = series
        counted.inc()
        timed.observe(decision_s)
        if also_counted is not None:
            also_counted.inc()

    def _answer_series(
        self,
        label: str,
        decision: str,
        category: str | None,
        code: str | None,
        tenant: str | None,
    ) -> tuple[Counter, Histogram, Counter | None]:
        """The series one kind of answer counts in: the proposal counter, the decision time,
        and the replay, conflict or limit counter it also counts in, if any."""
        values: tuple[str, ...] = (label, decision, category or "", code or "")
        if self._tenant_label:
            values += (tenant or "",)
        also: Counter | None = None
        if decision == "replayed":
            also = self._series(self.replays, (label,))
        elif category == "IDEMPOTENCY":
            also = self._series(self.conflicts, (label, code or ""))
        elif code in ("budget_exceeded", "rate_limited"):
            also = self._series(self.rate_limited, (label, code or ""))
        return (
            self._series(self.proposals, values),
            self._series(self.decision_seconds, (label,)),
            also,
        )

    def executed(
        self, tool: str, status: str, seconds: float, attempts: int, tenant: str | None = None
    ) -> None:
        label = self.tool(tool)
        key = (label, status, tenant if self._tenant_label else None)
        series = self._executions.get(key)
        if series is None:
            series = self._executions[key] = self._execution_series(*key)
        counted, timed = series
        counted.inc()
        timed.observe(seconds)
        if attempts > 1:  # the retries series appears with the first retry, not before
            self._series(self.retries, (label,)).inc(attempts - 1)

    def _execution_series(
        self, label: str, status: str, tenant: str | None
    ) -> tuple[Counter, Histogram]:
        values = (label, status, tenant or "") if self._tenant_label else (label, status)
        return self._series(self.executions, values), self._series(self.execution_seconds, (label,))

    def budget_used(self, budget: str, scope: str, amount: float, remaining: float) -> None:
        """A settled charge: what it consumed of ``budget`` and what is left in ``scope``."""
        self._series(self.budget_consumed, (budget,)).inc(amount)
        self._series(self.budget_remaining, (budget, scope)).set(remaining)

    def collect_from(self, collector: Collector) -> None:
        """Add a collector read at every scrape (per process, also beside worker aggregates)."""
        self.registry.register(collector)
        self._collectors.append(collector)

    @property
    def collectors(self) -> tuple[Collector, ...]:
        """The collectors added with :meth:`collect_from` (their families beside the metrics)."""
        return tuple(self._collectors)

    def watch_store_size(self, size_bytes: Callable[[], float]) -> None:
        """Read the store's size at every scrape (a stat of two files), never on the hot path."""
        self.store_bytes.set_function(size_bytes)

    def _series(self, metric: _Metric, values: tuple[str, ...]) -> _Metric:
        """``metric.labels(*values)``, remembered: the lookup (lock, label checks) costs more
        than the increment. Every label here is bounded, so the cache is too."""
        key = (id(metric), values)
        series = self._label_cache.get(key)
        if series is None:
            series = self._label_cache[key] = metric.labels(*values)
        return series

    def tool(self, name: str | None) -> str:
        """The ``tool`` label for a name: registered tools only, so labels stay bounded."""
        return name if name is not None and self._is_known(name) else UNKNOWN

    @property
    def across_processes(self) -> bool:
        """Whether worker processes share these metrics through files (``broker serve
        --workers``, ``PROMETHEUS_MULTIPROC_DIR``), so a scrape reads those, not this process."""
        return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

    def exposition(self) -> bytes:
        """The text format for ``/metrics``, aggregated over worker processes when needed."""
        if self.across_processes:
            aggregate = CollectorRegistry()
            multiprocess.MultiProcessCollector(aggregate)  # type: ignore[no-untyped-call]
            for collector in self._collectors:  # this worker's own (backend guards, load)
                aggregate.register(collector)
            return generate_latest(aggregate)
        return generate_latest(self.registry)
