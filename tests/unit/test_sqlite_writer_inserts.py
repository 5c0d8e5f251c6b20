"""How the SQLite writer inserts a batch's rows: many to a statement (each statement SQLite runs
has a cost of its own whatever it writes), counts cut into powers of two, every row written."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.stores import SqliteStore
from tests.unit.test_sqlite_store import T0, record


async def test_a_batch_of_rows_is_inserted_by_a_few_statements_each_of_many_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # the writer's connection
    try:
        # Called in one turn: one batch of 37 rows, written as 32 + 4 + 1.
        await asyncio.gather(
            *(store.save_decision(record(f"prp_{i}"), ttl_s=600) for i in range(37))
        )
    finally:
        await store.close()
    inserts = [sql for sql in statements if sql.startswith("INSERT OR REPLACE INTO decision")]
    assert [sql.count("(") for sql in inserts] == [32, 4, 1]

    again = SqliteStore(path, clock=lambda: T0 + 1)
    try:
        for i in range(37):
            assert await again.load_decision(f"prp_{i}") == record(f"prp_{i}")
    finally:
        await again.close()
