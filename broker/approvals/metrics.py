"""The approvals' metrics: pending count, decisions by outcome, time to decision."""

from __future__ import annotations

from broker.metrics import BrokerMetrics

__all__ = ["ApprovalMetrics"]


class ApprovalMetrics:
    """The broker's approval metrics (declared in ``broker.metrics``), as the service moves them."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._pending = metrics.approvals_pending
        self._decisions = metrics.approval_decisions
        self._wait = metrics.approval_decision_seconds
        for outcome in ("approved", "denied", "expired"):
            self._decisions.labels(outcome)

    def opened(self) -> None:
        self._pending.inc()

    def decided(self, outcome: str, waited_s: float) -> None:
        self._decisions.labels(outcome).inc()
        self._wait.labels(outcome).observe(max(waited_s, 0.0))
        self._pending.dec()

    def pending(self, count: int) -> None:
        self._pending.set(count)
