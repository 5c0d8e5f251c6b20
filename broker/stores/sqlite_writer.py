"""Group commit for the SQLite store: the rows calls changed, written by one thread, batch after batch.

Calls queue the rows they changed in the filling :class:`Batch` and wait for it. The writer
thread commits one batch at a time (one transaction, a few many-row statements per table, the
last write of a row winning); whatever queued meanwhile is the next batch, committed once the
thread is free and the event loop stopped bringing it callers (``broker.quiet_turns``). Alone, a
call waits one commit; under load one commit serves every call that arrived during the previous
one. A batch commits only once some call waits for it: rows queued by a call that goes on
without waiting (an admission's claim, which its dispatch mark or its settlement waits for
later) ride with the commit that call, or another, asks for next, not in a commit of their own; a
call may also ask for the commit without waiting for it (a settlement the ledger can stand in
for until then).
The thread holds no GIL while SQLite writes and syncs, so the event loop goes on serving, and
with ``synchronous = FULL`` it never waits for an fsync itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from broker.quiet_turns import QuietTurns
from broker.sqlite_inserts import insert_rows
from broker.taxonomy import StoreUnavailableError

__all__ = ["GC_MARGIN_S", "Batch", "Writer"]

log = logging.getLogger("broker.stores.sqlite")

GC_MARGIN_S = 60.0
"""A claim outlives its lease by this before the sweep may take it (as Redis' TTL margin): a
late owner can still settle it when nobody saw the lease lapse; and a budget counter outlives
its window by this, so a late refund still finds it."""

_SWEEP_EVERY = 16
"""Commits between two sweeps."""
_SWEEP_BATCH = 512
"""Rows each sweep deletes at most per table: a sweep walks an expiry index and stops there, so
its cost never grows with the file; at this size it outpaces any write rate one process has."""

Row = tuple[object, ...]


class Batch:
    """The rows changed since the last commit (keyed, so the last write wins), and its waiters."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ask_commit: Callable[[], None]) -> None:
        self.claims: dict[tuple[str, str, str], None] = {}
        """The claims changed (an ordered set): their rows are built as memory holds them when
        the batch starts to commit (``prepare``), once each however often they changed."""
        self.counters: dict[tuple[str, str, int], None] = {}
        """The budget counters changed, built into :attr:`budget` rows as the claims are: a
        batch's calls mostly charge the same few counters, so one row each, not one per call."""
        self.rate_logs: dict[tuple[str, str], float] = {}
        """The rate logs changed, with their window (for the row's ``gc_at``), built into
        :attr:`rate` rows as the claims are."""
        self.idem: dict[int, Row | None] = {}
        """Claims' rows by number (``id``, their first column), or None: deleted."""
        self.budget: dict[tuple[str, str, int], Row | None] = {}
        self.rate: dict[tuple[str, str], Row | None] = {}
        self.decision: dict[str, Row] = {}
        self.tool: dict[str, Row | None] = {}
        self.approval: dict[str, Row] = {}
        self.version: int | None = None
        self._loop = loop
        self._ask_commit = ask_commit
        self._waiters: list[asyncio.Future[None]] = []
        self._asked = False

    @property
    def callers(self) -> int:
        """How many calls want this batch committed (one for those that asked without waiting)."""
        return len(self._waiters) + self._asked

    def ask(self) -> None:
        """Have this batch committed soon, without waiting for it (see ``SqliteStore.settle``)."""
        if not self.callers:
            self._loop.call_soon(self._ask_commit)
        self._asked = True

    def wait(self) -> asyncio.Future[None]:
        # One future per caller: a caller that gives up cancels its own, never the commit.
        waiter = self._loop.create_future()
        if not self._waiters and not self._asked:  # the first caller to want it asks for it
            self._loop.call_soon(self._ask_commit)
        self._waiters.append(waiter)
        return waiter

    def done(self, error: BaseException | None = None) -> None:
        for waiter in self._waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


class Writer:
    """Commits batches on ``db`` from a thread of its own (``db`` is used by that thread only).

    Args:
        on_failure: called on the loop after a failed commit, once every waiter of the failed
            batch and of the batch behind it has its error: the store forgets what it holds in
            memory and reads the file again.
        prepare: called on the loop with a batch about to commit, to build its rows from what
            calls queued (:attr:`Batch.claims`, :attr:`Batch.counters`,
            :attr:`Batch.rate_logs`); its error fails the batch as a commit's would.
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        path: Path,
        *,
        clock: Callable[[], float],
        on_failure: Callable[[], None],
        prepare: Callable[[Batch], None] | None = None,
    ) -> None:
        self._db = db
        self._path = path
        self._clock = clock
        self._prepare = prepare
        self._on_failure = on_failure
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="sqlite-commit")
        self._filling: Batch | None = None
        self._committing: Batch | None = None
        self._commits = 0

    def batch(self) -> Batch:
        """The batch a call adds its rows to; its commit starts once a call waits for it, the
        commit before it is done, and a turn of the loop passed that brought it no new caller
        (every call of this turn joins it, and those of the turns right after while they keep
        coming)."""
        if self._filling is None:
            self._filling = Batch(asyncio.get_running_loop(), self._start)
        return self._filling

    def holds_decision(self, proposal_id: str) -> Batch | None:
        """The batch, not yet committed, that writes this decision record, if any."""
        for batch in (self._filling, self._committing):
            if batch is not None and proposal_id in batch.decision:
                return batch
        return None

    async def caught_up(self) -> None:
        """Wait until what is queued so far is committed; StoreUnavailableError if it failed.

        For answers that take nothing but read what earlier calls decided (a replay): they may
        not leave before the state they read is in the file.
        """
        for batch in (self._committing, self._filling):
            if batch is not None:
                await batch.wait()

    async def flush(self) -> None:
        """Wait until everything queued so far is committed (or has failed)."""
        for batch in (self._committing, self._filling):
            if batch is not None:
                with contextlib.suppress(StoreUnavailableError):  # its callers were told
                    await batch.wait()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    # -- on the loop -------------------------------------------------------------------------------

    def _start(self, turns: QuietTurns | None = None) -> None:
        """Commit the filling batch once turns of the loop stopped bringing it callers; until
        then look again next turn."""
        if self._committing is not None or self._filling is None or not self._filling.callers:
            return  # its first waiter calls again (Batch.wait), as a finished commit does
        turns = turns or QuietTurns()
        if not turns.settled(self._filling.callers):
            asyncio.get_running_loop().call_soon(self._start, turns)
            return
        batch, self._filling = self._filling, None
        if self._prepare is not None:
            try:
                self._prepare(batch)
            except Exception as exc:  # its callers get it, as a failed commit's
                self._failed(batch, exc)
                return
        self._committing = batch
        done = self._pool.submit(self._commit, batch)
        loop = asyncio.get_running_loop()
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(self._finished, batch, f))

    def _finished(self, batch: Batch, done: Future[None]) -> None:
        self._committing = None
        error = done.exception()
        if error is None:
            batch.done()
            self._start()
            return
        self._failed(batch, error)

    def _failed(self, batch: Batch, error: BaseException) -> None:
        failure = StoreUnavailableError(f"sqlite {self._path}: {error}")
        # Its waiters get the error; a settlement that asked without waiting has nobody to tell
        # (its proposal's ledger record stands for it, and recovery reads it from there).
        log.error("commit to %s failed, reading the file again: %s", self._path, error)
        behind, self._filling = self._filling, None
        # The batch behind was decided on state the file does not hold: it fails too.
        for each in (batch, behind):
            if each is not None:
                each.done(failure)
        self._on_failure()

    # -- on the writer thread ------------------------------------------------------------------------

    def _commit(self, batch: Batch) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            _write(db, batch)
            self._commits += 1
            if self._commits % _SWEEP_EVERY == 0:
                _sweep(db, self._clock())
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


def _write(db: sqlite3.Connection, batch: Batch) -> None:
    def apply(table: str, where: str, rows: Mapping[Any, Row | None], *, one_column: bool) -> None:
        # Rows are written as they are kept (no copy per row: this thread's Python holds the
        # GIL the event loop wants); a key of one column is its own parameter tuple once
        # deleted. Tables a batch did not touch cost nothing: a statement has a price even with
        # no rows.
        if not rows:
            return
        gone = [(key,) if one_column else key for key, row in rows.items() if row is None]
        kept = [row for row in rows.values() if row is not None]
        if gone:
            db.executemany(f"DELETE FROM {table} WHERE {where}", gone)  # noqa: S608
        if kept:
            insert_rows(db, f"INSERT OR REPLACE INTO {table} VALUES ", kept)  # noqa: S608

    apply("idem", "id = ?", batch.idem, one_column=True)
    apply("budget", "name = ? AND scope = ? AND win = ?", batch.budget, one_column=False)
    apply("rate_log", "name = ? AND scope = ?", batch.rate, one_column=False)
    apply("decision", "proposal_id = ?", batch.decision, one_column=True)
    apply("tool", "name = ?", batch.tool, one_column=True)
    apply("approval", "id = ?", batch.approval, one_column=True)
    if batch.version is not None:
        db.execute("UPDATE catalog SET version = ?", (batch.version,))


def _sweep(db: sqlite3.Connection, now: float) -> None:
    """Delete a bounded batch of expired rows from each table: each statement walks an expiry
    index from its start and stops after the batch."""
    for table, key, column, cutoff in (
        # The claims' index leaves out those never swept (gc_at infinite); a query uses such a
        # partial index only when its own WHERE repeats the index's.
        ("idem", "id", "gc_at < 9e999 AND gc_at", now),
        ("rate_log", "name, scope", "gc_at", now),
        ("decision", "proposal_id", "expires_at", now),
        ("budget", "name, scope, win", "expires_at", now - GC_MARGIN_S),
    ):
        db.execute(
            f"DELETE FROM {table} WHERE ({key}) IN"  # noqa: S608 (names from this tuple)
            f" (SELECT {key} FROM {table} WHERE {column} <= ? LIMIT ?)",
            (cutoff, _SWEEP_BATCH),
        )
