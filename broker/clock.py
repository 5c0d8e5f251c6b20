"""The broker's clock: wall-clock seconds that a jump of the machine's clock cannot move.

Leases, key expiries, budget windows and rate-limit windows are instants in seconds since the
epoch, compared across calls (and, through the store, across processes). Reading ``time.time()``
for each would let an NTP step or an operator's ``date -s`` of two hours expire every live lease
at once (forwards: a claim still running looks abandoned, and an idempotent tool runs twice) or
extend them by two hours (backwards), and move budget and rate windows with it.

* :class:`SteadyClock`, the process's clock: the wall clock read once, at start, then advanced
  by the monotonic clock only. It never jumps while the process runs.
* On restart the embedded SQLite store's persisted instants meet a new reading of the wall
  clock; if that went backwards meanwhile, leases would last longer by as much. So the clock
  starts no earlier than the store file's last write (its mtime: a wall time the file keeps):
  :func:`steady_clock_for` floors it there.
* Processes sharing Redis use Redis's time instead (``broker.stores.redis_clock``): one clock for
  all of them, whatever each machine's says.

A test seam, read once at import: ``BROKER_TEST_WALL_OFFSET_S`` adds that many seconds to every
wall-clock reading of this process (:func:`wall`), as if its clock were that far off.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["WALL_OFFSET_ENV", "SteadyClock", "steady_clock_for", "wall"]

WALL_OFFSET_ENV = "BROKER_TEST_WALL_OFFSET_S"
_OFFSET_S = float(os.environ.get(WALL_OFFSET_ENV) or 0.0)


def _offset_wall() -> float:
    return time.time() + _OFFSET_S


wall: Callable[[], float] = _offset_wall if _OFFSET_S else time.time
"""The machine's wall clock (seconds since the epoch), offset under the test seam."""


class SteadyClock:
    """Wall-clock seconds, read once and then advanced by ``time.monotonic`` only.

    Args:
        floor: the earliest instant to start at (a persisted time the clock must not precede).
        wall_clock: the wall clock read at start.
        monotonic: the clock that advances it.
    """

    __slots__ = ("_monotonic", "_offset")

    def __init__(
        self,
        *,
        floor: float = 0.0,
        wall_clock: Callable[[], float] = wall,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._monotonic = monotonic
        self._offset = max(wall_clock(), floor) - monotonic()

    def __call__(self) -> float:
        return self._monotonic() + self._offset


def steady_clock_for(persisted: Iterable[Path]) -> SteadyClock:
    """The process's clock, starting no earlier than the last write to any ``persisted`` file."""
    floor = 0.0
    for path in persisted:
        with contextlib.suppress(OSError):  # absent: a first start
            floor = max(floor, path.stat().st_mtime)
    return SteadyClock(floor=floor)
