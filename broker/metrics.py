"""The broker's metrics, on a registry the app owns, labelled by the failure taxonomy: what each
answer, execution and charge counts in. The families themselves (names, help, labels, buckets)
are defined in :mod:`broker.metric_families`.

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
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from broker.metric_families import UNKNOWN, MetricFamilies

__all__ = ["CONTENT_TYPE", "UNKNOWN", "BrokerMetrics"]

_Metric = TypeVar("_Metric", bound=MetricWrapperBase)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class BrokerMetrics(MetricFamilies):
    """The broker's metrics: its families, and the series each kind of event counts in.

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
        self._tenant_label = tenant_label
        self._tools = frozenset(tools)
        self._is_known = is_known or self._tools.__contains__
        self._label_cache: dict[tuple[int, tuple[str, ...]], Any] = {}  # -> that metric's series
        # Every series one kind of answer (or execution) touches, found with one look-up: per
        # proposal, the label look-ups cost more than the increments. Keys hold label values
        # only (bounded, see broker.metric_families), never raw input.
        self._answers: dict[tuple[str | None, ...], tuple[Counter, Histogram, Counter | None]] = {}
        self._executions: dict[tuple[str | None, ...], tuple[Counter, Histogram]] = {}
        self._collectors: list[Collector] = []
        super().__init__(
            registry or CollectorRegistry(),
            tools=self._tools,
            budgets=budgets,
            tenant_label=tenant_label,
        )

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
