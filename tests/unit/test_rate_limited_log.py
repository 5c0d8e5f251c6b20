"""Repeated fault logs (a store down, polled every second) say so once per interval."""

from __future__ import annotations

import logging

import pytest

from broker.logs import RateLimitedLog


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_repeating_fault_is_logged_once_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    limited = RateLimitedLog(logging.getLogger("test.faults"), every_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.faults"):
        for second in range(130):  # a poll every second for a little over two minutes
            clock.now = float(second)
            limited.warning("cannot follow registered tools: %s", f"timeout #{second}")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "cannot follow registered tools: timeout #0",
        "cannot follow registered tools: timeout #60 (59 more like it held back)",
        "cannot follow registered tools: timeout #120 (59 more like it held back)",
    ]


def test_other_messages_and_a_recovered_fault_are_news(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    limited = RateLimitedLog(logging.getLogger("test.faults"), every_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.faults"):
        assert limited.warning("store down")
        assert limited.error("ledger down")  # another message: not held back
        assert not limited.warning("store down")
        limited.recovered("store down")
        assert limited.warning("store down")  # down again after a recovery: said at once
    assert len(caplog.records) == 3
