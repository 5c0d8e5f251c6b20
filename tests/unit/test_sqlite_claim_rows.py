"""How the SQLite store writes a claim's row as it changes: inserted once, then updated in place,
and never lost when it left the file before its last write."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from broker.stores import Admission, Replay, Settlement, SqliteStore
from tests.unit.test_sqlite_store import OK, T0, admitted, claim, record


async def test_a_claim_row_is_inserted_once_then_updated_in_place(tmp_path: Path) -> None:
    """Replacing the row would delete it and its index entry and insert both again."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    written: list[str] = []
    store._db.set_trace_callback(written.append)  # the writer's connection
    outside = sqlite3.connect(path)
    query = "SELECT id, state, dispatched, proposal_id, status FROM idem WHERE key = 'k'"
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)
        await store.save_decision(record("prp_0"), ttl_s=600)  # the admission's commit
        assert outside.execute(query).fetchall() == [(1, "p", 0, None, None)]
        assert await store.dispatch(got.ticket, proposal_id="prp_k", now=T0)
        assert outside.execute(query).fetchall() == [(1, "p", 1, "prp_k", None)]
        await store.settle(
            got.ticket, Settlement.SUCCEEDED, response=OK, record=record("prp_k"), ttl_s=600, now=T0
        )
        assert outside.execute(query).fetchall() == [(1, "c", 1, "prp_k", 200)]
    finally:
        outside.close()
        await store.close()
    claims = [sql.split(" idem ")[0] for sql in written if " idem " in sql]
    assert claims == ["INSERT OR REPLACE INTO", "UPDATE", "UPDATE"]


async def test_a_claim_settled_after_its_row_left_the_file_is_written_whole(
    tmp_path: Path,
) -> None:
    """The sweep may take a claim's row a minute after its lease lapsed while its owner, never
    overtaken, still settles it: the settled claim is in the file all the same."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)
        assert await store.dispatch(got.ticket, proposal_id="prp_k", now=T0)
        with sqlite3.connect(path) as outside:  # as the file's sweep would
            outside.execute("DELETE FROM idem WHERE key = 'k'")
        await store.settle(
            got.ticket, Settlement.SUCCEEDED, response=OK, record=record("prp_k"), ttl_s=600, now=T0
        )
    finally:
        await store.close()

    again = SqliteStore(path, clock=lambda: T0 + 1)
    try:
        assert await again.lookup(claim("k"), now=T0 + 1) == Replay(OK)
    finally:
        await again.close()
