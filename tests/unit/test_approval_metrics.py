"""The pending approvals gauge: what a scrape reads at every moment, opened, decided or swept."""

from __future__ import annotations

from pytest import MonkeyPatch

from broker.approvals.metrics import ApprovalMetrics
from broker.metrics import BrokerMetrics


def _pending(metrics: BrokerMetrics) -> float | None:
    return metrics.registry.get_sample_value("broker_approvals_pending")


def test_the_gauge_follows_every_approval_opened_and_decided(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics = BrokerMetrics(["issue_credit"])
    approvals = ApprovalMetrics(metrics)
    assert _pending(metrics) == 0.0
    approvals.opened()
    approvals.opened()
    assert _pending(metrics) == 2.0
    approvals.decided("approved", 3.0)
    assert _pending(metrics) == 1.0
    approvals.pending(5)  # the sweeper's count of every process's approvals
    assert _pending(metrics) == 5.0
    approvals.opened()
    approvals.decided("expired", 60.0)
    approvals.decided("denied", 1.0)
    assert _pending(metrics) == 4.0
    assert b"broker_approvals_pending 4.0" in metrics.exposition()
