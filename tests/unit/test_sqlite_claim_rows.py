"""How the SQLite store writes a claim's row as it changes: never lost when it left the file
before its last write, the new claim's fingerprint when its key is claimed again, and, once
settled by a proposal, that proposal's decision record too (kept once, not twice)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from msgspec.msgpack import encode

from broker.stores import (
    Admission,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Replay,
    Settlement,
    SqliteStore,
    StoredResponse,
    Ticket,
)
from broker.stores.sqlite_file import SCHEMA_VERSION
from broker.stores.sqlite_writer import _SWEEP_EVERY, Batch
from broker.taxonomy import StoreUnavailableError
from tests.unit.test_sqlite_store import OK, T0, admitted, claim, record


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


async def settled_after_dispatch(
    store: SqliteStore, key: str, proposal_id: str, now: float
) -> None:
    got = await admitted(store, Admission(tenant="acme", claim=claim(key)), now)
    assert await store.dispatch(got.ticket, proposal_id=proposal_id, now=now)
    await store.settle(
        got.ticket,
        Settlement.SUCCEEDED,
        response=OK,
        record=record(proposal_id),
        ttl_s=600,
        now=now,
    )


async def test_the_decision_of_a_settled_claim_is_its_row_not_a_second_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    try:
        await settled_after_dispatch(store, "k", "prp_k", T0)
        assert await store.load_decision("prp_k") == record("prp_k")
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM decision").fetchone() == (0,)
        assert db.execute("SELECT decided FROM idem WHERE key = 'k'").fetchone() == (1,)

    again = SqliteStore(path, clock=lambda: T0 + 599)
    try:
        assert await again.load_decision("prp_k") == record("prp_k")
        assert await again.lookup(claim("k"), now=T0 + 599) == Replay(OK)
    finally:
        await again.close()


async def test_a_claims_decision_expires_with_it_and_not_with_the_next_claim_of_its_key(
    tmp_path: Path,
) -> None:
    now = [T0]
    store = SqliteStore(tmp_path / "state.sqlite3", clock=lambda: now[0])
    try:
        await settled_after_dispatch(store, "k", "prp_1", T0)
        now[0] = T0 + 600  # both expire: the claim and, with it, its proposal's record
        assert await store.load_decision("prp_1") is None
        await settled_after_dispatch(store, "k", "prp_2", T0 + 600)
        assert await store.load_decision("prp_1") is None
        assert await store.load_decision("prp_2") == record("prp_2")
    finally:
        await store.close()


async def test_decisions_the_claim_does_not_hold_keep_their_own_rows(tmp_path: Path) -> None:
    """Released (the row is deleted), or settled with another answer than the one stored for
    the key: the record is written apart, as before. One settled without a call (a pending
    approval's 202) is its claim's row."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    released = StoredResponse(503, b'{"retry":true}')
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("gone")), T0)
        assert await store.dispatch(got.ticket, proposal_id="prp_gone", now=T0)
        await store.settle(
            got.ticket,
            Settlement.TRANSIENT_FAILURE,
            response=released,
            record=DecisionRecord(
                proposal_id="prp_gone", tenant="acme", route="billing_help", response=released
            ),
            ttl_s=600,
            now=T0,
        )
        held = await admitted(store, Admission(tenant="acme", claim=claim("held")), T0)
        await store.settle(
            held.ticket,
            Settlement.SUCCEEDED,
            response=OK,
            record=record("prp_held"),
            ttl_s=600,
            now=T0,
        )
    finally:
        await store.close()

    again = SqliteStore(path, clock=lambda: T0 + 1)
    try:
        assert (await again.load_decision("prp_gone")) == DecisionRecord(
            proposal_id="prp_gone", tenant="acme", route="billing_help", response=released
        )
        assert await again.load_decision("prp_held") == record("prp_held")
    finally:
        await again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM decision").fetchone() == (1,)


async def test_an_approved_execution_s_final_answer_takes_over_from_the_claim_s_202(
    tmp_path: Path,
) -> None:
    """A pending approval's claim row answers for its proposal (the 202) until the approved
    call settles without a claim: its final answer is the proposal's record then, and after a
    restart too (the claim no longer says it holds it)."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    pending = StoredResponse(202, b'{"status":"pending_approval"}')
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("wait")), T0)
        opened = msgspec.structs.replace(record("prp_wait"), response=pending)
        assert await store.settle(
            got.ticket, Settlement.SUCCEEDED, response=pending, record=opened, ttl_s=600, now=T0
        )
        assert await store.load_decision("prp_wait") == opened
        executed = Ticket(tenant="acme", claim=None, owner=None, charges=())
        await store.settle(
            executed,
            Settlement.SUCCEEDED,
            response=OK,
            record=record("prp_wait"),
            ttl_s=600,
            now=T0,
        )
        assert await store.load_decision("prp_wait") == record("prp_wait")
    finally:
        await store.close()
    again = SqliteStore(path, clock=lambda: T0 + 1)
    try:
        assert await again.load_decision("prp_wait") == record("prp_wait")
        assert await again.lookup(claim("wait"), now=T0 + 1) == Replay(pending)
    finally:
        await again.close()


async def test_a_schema_3_file_is_migrated_and_keeps_its_decision_records(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    await settled_after_dispatch(store, "k", "prp_k", T0)
    await store.close()
    with sqlite3.connect(path) as db:  # the file as the previous version wrote it
        db.execute(
            "INSERT INTO decision VALUES ('prp_k', ?, ?)", (encode(record("prp_k")), T0 + 600)
        )
        db.execute("ALTER TABLE idem DROP COLUMN decided")
        db.execute("DROP INDEX idem_gc")
        db.execute("CREATE INDEX idem_gc ON idem (gc_at)")
        db.execute("PRAGMA user_version = 3")

    again = SqliteStore(path, clock=lambda: T0 + 1)
    try:
        assert await again.load_decision("prp_k") == record("prp_k")
        assert await again.lookup(claim("k"), now=T0 + 1) == Replay(OK)
    finally:
        await again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT decided FROM idem").fetchall() == [(0,)]
        (index,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'idem_gc'").fetchone()
        assert index.endswith("WHERE gc_at < 9e999")


async def test_a_row_that_cannot_be_built_fails_its_batch_as_a_failed_commit_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are built as the batch starts to commit: an error there answers its callers (503)
    and memory is read from the file again, never a caller left waiting."""
    store = SqliteStore(tmp_path / "state.sqlite3", clock=lambda: T0)
    try:
        got = await admitted(store, Admission(tenant="acme", claim=claim("k")), T0)

        def unbuildable(batch: Batch, key: tuple[str, str, str]) -> None:
            raise ValueError("cannot encode")

        with monkeypatch.context() as patched:
            patched.setattr(store, "_claim_row", unbuildable)
            with pytest.raises(StoreUnavailableError, match="cannot encode"):
                await store.dispatch(got.ticket, proposal_id="prp_k", now=T0)
        assert await store.lookup(claim("k"), now=T0) is None  # never in the file: forgotten
        await settled_after_dispatch(store, "k", "prp_k2", T0)  # and the store goes on
        assert await store.lookup(claim("k"), now=T0) == Replay(OK)
    finally:
        await store.close()


async def test_every_sweep_statement_walks_an_expiry_index(tmp_path: Path) -> None:
    """The claims' index leaves out those never swept (most claims while in flight, whose entry
    is then written once, at settlement); such a partial index serves only a query that repeats
    its condition: otherwise each sweep would scan the whole table."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    swept: list[str] = []
    store._db.set_trace_callback(swept.append)  # the writer's connection
    try:
        for i in range(_SWEEP_EVERY):  # one commit each: one sweep
            await store.save_decision(record(f"prp_{i}"), ttl_s=600)
    finally:
        await store.close()
    deletes = [sql for sql in swept if sql.startswith("DELETE") and " LIMIT " in sql]
    assert len(deletes) == 4
    with sqlite3.connect(path) as db:
        (index,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'idem_gc'").fetchone()
        assert index.endswith("WHERE gc_at < 9e999")
        for sql in deletes:
            plan = " / ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "SCAN" not in plan, (sql, plan)


async def test_a_key_claimed_again_after_it_expired_is_written_with_its_new_claim(
    tmp_path: Path,
) -> None:
    """The key keeps its row number, so the row is updated, not inserted: every column of the
    new claim must be written, its fingerprint and idempotency too."""
    path = tmp_path / "state.sqlite3"
    store = SqliteStore(path, clock=lambda: T0)
    first = ClaimRequest(
        tenant="acme",
        route="billing_help",
        key="k",
        fingerprint="fp",
        lease_s=5.0,
        idempotent=False,
    )
    again = msgspec.structs.replace(first, fingerprint="fp2", idempotent=True)
    try:
        got = await admitted(store, Admission(tenant="acme", claim=first), T0)
        await store.settle(
            got.ticket, Settlement.SUCCEEDED, response=OK, record=record("prp_1"), ttl_s=1, now=T0
        )
        got = await admitted(store, Admission(tenant="acme", claim=again), T0 + 2)
        assert await store.dispatch(got.ticket, proposal_id="prp_2", now=T0 + 2)
    finally:
        await store.close()

    reopened = SqliteStore(path, clock=lambda: T0 + 3)
    try:
        # Still in flight (not "reused": the file holds the second claim's fingerprint), and
        # once its lease lapsed released, not unknown: it is idempotent.
        assert await reopened.lookup(again, now=T0 + 3) == Conflict("in_progress", 4.0)
        assert await reopened.lookup(again, now=T0 + 8) is None
    finally:
        await reopened.close()
