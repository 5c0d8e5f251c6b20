"""A recorded call's settlement on the SQLite store: answered before its commit, never lost.

Once a claim is marked dispatched (in the file before the call left) and a ledger can tell how
the call ended, the answer does not wait for the settlement's commit: the commit is asked for
and follows within a few turns of the loop. A process that dies in between leaves the claim in
progress in the file, and the first look at it once its lease lapsed settles it from the
ledger record. Without a ledger to read, or for a claim never dispatched, settling still waits.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

from broker.stores import Admission, Replay, Settlement, SqliteStore, StoredResponse
from tests.contract.test_store_recovery import Recorded, outcome
from tests.unit.test_sqlite_claim_rows import settled_after_dispatch
from tests.unit.test_sqlite_store import OK, T0, admitted, claim, record

RECORDED = StoredResponse(200, b'{"recorded":true}')
"""The answer as the ledger would rebuild it: told apart from the settled ``OK``."""

LEDGER = Recorded({"prp_k": outcome(Settlement.SUCCEEDED, RECORDED)})


def state_in_file(path: Path, key: str) -> str:
    with sqlite3.connect(path) as outside:
        (state,) = outside.execute("SELECT state FROM idem WHERE key = ?", (key,)).fetchone()
    return str(state)


async def test_the_settlement_of_a_recorded_call_is_committed_without_a_waiter(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    store.recover_from(LEDGER)
    try:
        await settled_after_dispatch(store, "k", "prp_k", T0)
        assert state_in_file(path, "k") == "p"  # answered first: no turn of the loop has passed
        for _ in range(200):  # nobody else calls: the settlement asked for its own commit
            if state_in_file(path, "k") == "c":
                break
            await asyncio.sleep(0.01)
        assert state_in_file(path, "k") == "c"
    finally:
        await store.close()


async def test_a_settlement_lost_with_its_process_is_recovered_from_the_ledger(
    tmp_path: Path,
) -> None:
    path, crashed = tmp_path / "state.sqlite3", tmp_path / "crashed"
    store = SqliteStore(path, clock=lambda: T0)
    store.recover_from(LEDGER)
    try:
        await settled_after_dispatch(store, "k", "prp_k", T0)
        # The files as a process killed right now leaves them: the commit has not started.
        crashed.mkdir()
        for part in (path, Path(f"{path}-wal")):
            shutil.copy(part, crashed / part.name)
    finally:
        await store.close()

    after = SqliteStore(crashed / path.name, clock=lambda: T0 + 10)
    after.recover_from(LEDGER)
    try:
        assert state_in_file(crashed / path.name, "k") == "p"
        # Past the lease (5 s), the retry is answered what the ledger recorded, not run again.
        replay = await after.admit(
            Admission(tenant="acme", claim=claim("k")), now=T0 + 10, dry_run=False
        )
        assert replay == Replay(RECORDED)
    finally:
        await after.close()


async def test_without_a_ledger_the_settlement_waits_for_its_commit(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    try:
        await settled_after_dispatch(store, "k", "prp_k", T0)
        assert state_in_file(path, "k") == "c"
    finally:
        await store.close()


async def test_a_claim_never_dispatched_waits_for_its_settlement(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    store.recover_from(LEDGER)
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)
        await store.settle(  # as a pending approval's 202, or a read-cache hit
            got.ticket, Settlement.SUCCEEDED, response=OK, record=record("prp_k"), ttl_s=600, now=T0
        )
        assert state_in_file(path, "k") == "c"
    finally:
        await store.close()
