"""The approvals' metrics: pending count, decisions by outcome, time to decision."""

from __future__ import annotations

from broker.metrics import BrokerMetrics

__all__ = ["ApprovalMetrics"]


class ApprovalMetrics:
    """The broker's approval metrics (declared in ``broker.metrics``), as the service moves them.

    The pending gauge moves on every ``202 pending_approval``. In one process it is read from a
    count at each scrape (an integer added to, where the gauge's own ``inc`` takes a lock on
    every proposal that waits), the same value at every moment. Worker processes
    (``PROMETHEUS_MULTIPROC_DIR``) share their gauges through files that every scrape reads
    instead of asking the process, so there each change is written to the gauge as it happens.
    """

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._gauge = metrics.approvals_pending
        self._decisions = metrics.approval_decisions
        self._wait = metrics.approval_decision_seconds
        for outcome in ("approved", "denied", "expired"):
            self._decisions.labels(outcome)
        self._count = 0
        self._shared = metrics.across_processes
        if not self._shared:
            self._gauge.set_function(lambda: self._count)

    def opened(self) -> None:
        self._count += 1
        if self._shared:
            self._gauge.inc()

    def decided(self, outcome: str, waited_s: float) -> None:
        self._decisions.labels(outcome).inc()
        self._wait.labels(outcome).observe(max(waited_s, 0.0))
        self._count -= 1
        if self._shared:
            self._gauge.dec()

    def pending(self, count: int) -> None:
        """The count in the store (every process's approvals), from the sweeper."""
        self._count = count
        if self._shared:
            self._gauge.set(count)
