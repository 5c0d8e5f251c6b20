"""The process clock against an injected wall-clock jump of two hours, either way."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker.clock import SteadyClock, steady_clock_for
from broker.stores import Admission, ClaimRequest, Conflict, MemoryStore

HOURS_2 = 7200.0


class Clocks:
    """A wall clock and a monotonic clock that tests move apart."""

    def __init__(self) -> None:
        self.wall_s = 1_700_000_000.0
        self.mono_s = 100.0

    def wall(self) -> float:
        return self.wall_s

    def mono(self) -> float:
        return self.mono_s

    def elapse(self, seconds: float) -> None:
        self.wall_s += seconds
        self.mono_s += seconds


@pytest.mark.parametrize("jump_s", [HOURS_2, -HOURS_2])
def test_a_wall_clock_jump_moves_nothing(jump_s: float) -> None:
    clocks = Clocks()
    clock = SteadyClock(wall_clock=clocks.wall, monotonic=clocks.mono)
    start = clock()
    clocks.elapse(5)
    clocks.wall_s += jump_s  # NTP steps the clock, or an operator runs `date -s`
    clocks.elapse(5)
    assert clock() == pytest.approx(start + 10)


@pytest.mark.parametrize("jump_s", [HOURS_2, -HOURS_2])
async def test_a_lease_lasts_its_length_across_a_jump(jump_s: float) -> None:
    clocks = Clocks()
    clock = SteadyClock(wall_clock=clocks.wall, monotonic=clocks.mono)
    store = MemoryStore(clock=clock)
    claim = ClaimRequest(
        tenant="acme", route="billing", key="k-1", fingerprint="f", lease_s=30, idempotent=True
    )
    admitted = await store.admit(Admission(tenant="acme", claim=claim), now=clock(), dry_run=False)
    assert not isinstance(admitted, Conflict)
    clocks.wall_s += jump_s
    clocks.elapse(10)
    # 10 s into a 30 s lease, whatever the wall clock did: still in progress, never re-claimable
    seen = await store.lookup(claim, now=clock())
    assert seen == Conflict("in_progress", pytest.approx(20.0))
    clocks.elapse(21)
    assert await store.lookup(claim, now=clock()) is None  # and over when it is over


def test_after_a_restart_the_clock_never_starts_before_the_last_write(tmp_path: Path) -> None:
    store_file = tmp_path / "state.sqlite3"
    store_file.write_bytes(b"")
    written_at = time.time() + HOURS_2  # the clock went back two hours since this write
    os.utime(store_file, (written_at, written_at))
    clock = steady_clock_for([store_file, tmp_path / "absent-wal"])
    assert clock() >= written_at
    fresh = steady_clock_for([tmp_path / "nothing-here"])
    assert abs(fresh() - time.time()) < 1
