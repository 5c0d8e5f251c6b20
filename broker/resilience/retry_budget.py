"""A retry budget per backend: retries stay under a share of its calls over a sliding window.

Per-call retry limits multiply load exactly when a backend is struggling (three attempts per
call triple it); a budget caps the extra load at ``ratio`` of the calls, whatever each call's
policy says. ``min_retries`` per window are always allowed on top, so a backend that is called
rarely can still have a failed call retried. The window is ``buckets`` slices of
``time.monotonic``, so counting is O(1) per call and a wall-clock jump changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["RetryBudget"]


class RetryBudget:
    __slots__ = (
        "_calls",
        "_clock",
        "_current",
        "_retries",
        "_slice_s",
        "denied",
        "min_retries",
        "ratio",
    )

    def __init__(
        self,
        *,
        ratio: float,
        window_s: float,
        min_retries: int,
        buckets: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ratio = ratio
        self.min_retries = min_retries
        self.denied = 0
        """Retries refused by the budget (a counter, for metrics)."""
        self._clock = clock
        self._slice_s = window_s / buckets
        self._calls = [0] * buckets
        self._retries = [0] * buckets
        self._current = int(clock() / self._slice_s)

    def called(self) -> None:
        """One first attempt to the backend (a retry is not a call)."""
        self._calls[self._advance()] += 1

    def try_retry(self) -> bool:
        """Take one retry from the budget; ``False`` (and counted) when it is spent."""
        slot = self._advance()
        allowed = self.min_retries + self.ratio * sum(self._calls)
        if sum(self._retries) + 1 > allowed:
            self.denied += 1
            return False
        self._retries[slot] += 1
        return True

    def _advance(self) -> int:
        """The current slice's index, emptying the slices the window has moved past."""
        now = int(self._clock() / self._slice_s)
        size = len(self._calls)
        if now != self._current:
            for step in range(min(now - self._current, size)):
                stale = (self._current + 1 + step) % size
                self._calls[stale] = self._retries[stale] = 0
            self._current = now
        return now % size
