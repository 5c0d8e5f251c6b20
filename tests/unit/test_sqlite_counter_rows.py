"""How the SQLite store writes budget counters and rate logs: as claims are, once per batch, as
memory holds them when the batch starts to commit (the calls of a batch mostly charge the same
few counters and stamp the same few logs)."""

from __future__ import annotations

import sqlite3
from array import array
from pathlib import Path

from broker.stores import Admission, RateHit, SqliteStore
from tests.unit.test_sqlite_store import CHARGE, T0, admitted, claim

HIT = RateHit(name="calls", scope="tenant:acme", limit=10, window_s=60.0)


async def test_a_batch_writes_each_counter_and_log_once_with_its_last_value(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    try:
        # Claimed admissions queue their rows without waiting: all three ride in one batch.
        for i in range(3):
            admission = Admission(
                tenant="acme", claim=claim(f"k{i}"), charges=(CHARGE,), hits=(HIT,)
            )
            await admitted(store, admission, T0 + i)
        batch = store._writer.batch()
        # Marked, not built: three calls changed one counter and one log.
        assert list(batch.counters) == [("credits", "tenant:acme", int(T0 // CHARGE.window_s))]
        assert list(batch.rate_logs) == [("calls", "tenant:acme")]
        assert batch.budget == {} and batch.rate == {}
        await batch.wait()
    finally:
        await store.close()

    with sqlite3.connect(path) as db:
        assert db.execute("SELECT used FROM budget").fetchall() == [(90,)]
        ((stamps, gc_at),) = db.execute("SELECT stamps, gc_at FROM rate_log").fetchall()
    assert array("d", stamps).tolist() == [T0, T0 + 1, T0 + 2]
    assert gc_at == T0 + 2 + HIT.window_s
