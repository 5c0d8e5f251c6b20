"""The SQLite store's memory as its file's rows, each way: the rows a batch's calls changed, built
from memory as the batch starts to commit, and memory rebuilt from the rows at start (and after
a failed commit).

The base of :class:`~broker.stores.sqlite.SqliteStore`, which decides as the memory store does
and says what each call changed; how a record is spelled as a row is ``sqlite_rows``'s.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from array import array
from collections.abc import Callable

import msgspec

from broker.stores.base import DecisionRecord, RegisteredTool
from broker.stores.memory import MemoryStore
from broker.stores.memory_records import BudgetCounter, IdemKey, RateLog
from broker.stores.sqlite_rows import Charges, claim_row, read_claim
from broker.stores.sqlite_writer import GC_MARGIN_S, Batch

__all__ = ["SqliteMirror"]


class SqliteMirror(MemoryStore):
    """The memory store's state, with what ties it to the file's rows."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock=clock)
        # Each claim's row in the file, numbered in order of creation. A key's row is found by
        # this number, never by the key itself: the file then keeps no index of client keys,
        # whose random order made every commit rewrite as many scattered index pages as it
        # wrote claims, and a claim is settled in the page it was created in, near the tail.
        self._rows: dict[IdemKey, int] = {}
        self._next_row = 1
        # Proposals whose decision record is their claim's row (``decided``): the claim's key.
        self._decided: dict[str, IdemKey] = {}
        self._charges = msgspec.msgpack.Decoder(Charges)
        self._encoder = msgspec.msgpack.Encoder()

    # -- what a call changed, as rows ---------------------------------------------------------------

    def _build_rows(self, batch: Batch) -> None:
        """The rows of the claims, budget counters and rate logs the batch's calls changed, as
        memory holds them now (the writer calls this on the loop as the batch starts to
        commit)."""
        for key in batch.claims:
            self._claim_row(batch, key)
        for counter in batch.counters:
            self._budget_row(batch, counter)
        for log, window_s in batch.rate_logs.items():
            self._rate_row(batch, log, window_s)

    def _claim_row(self, batch: Batch, key: IdemKey) -> None:
        record = self._idem.get(key)
        if record is None:
            gone = self._rows.pop(key, None)
            if gone is not None:
                batch.idem[gone] = None
            return
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self._next_row
            self._next_row += 1
        batch.idem[row] = claim_row(
            row,
            key,
            record,
            charges=self._encoder.encode(record.charges) if record.charges else None,
            decided=self._decided.get(record.proposal_id or "") == key,
        )

    def _budget_row(self, batch: Batch, key: tuple[str, str, int]) -> None:
        counter = self._budgets.get(key)
        batch.budget[key] = None if counter is None else (*key, counter.used, counter.expires_at)

    def _rate_row(self, batch: Batch, key: tuple[str, str], window_s: float) -> None:
        log = self._rates.get(key)
        if log is None or not log.stamps:
            batch.rate[key] = None
            return
        stamps = array("d", log.stamps).tobytes()
        batch.rate[key] = (*key, stamps, log.stamps[-1] + window_s)

    def _keep_decision(self, batch: Batch, record: DecisionRecord, expires_at: float) -> None:
        row = (record.proposal_id, self._encoder.encode(record), expires_at)
        batch.decision[record.proposal_id] = row

    # -- reading the file back ----------------------------------------------------------------------

    def _load(self, db: sqlite3.Connection) -> None:
        """Memory from the file: every live claim, counter, rate log and registered tool."""
        now = self._clock()
        (last,) = db.execute("SELECT max(id) FROM idem").fetchone()
        self._next_row = (last or 0) + 1
        for row in db.execute("SELECT * FROM idem WHERE gc_at > ?", (now,)):
            number, key, record, decided = read_claim(row, self._charges.decode)
            self._rows[key] = number
            self._idem[key] = record
            if decided and record.state == "completed":
                self._decided[record.proposal_id or ""] = key
            if record.state == "in_progress":  # never settled: the completer's to look at
                self._claimed[key] = None
            if record.state == "outcome_unknown" or (
                record.state == "in_progress"
                and record.dispatched
                and not record.idempotent
                and record.lease_until <= now
            ):
                # An abandoned claim (its process died mid-call) is unknown from the start.
                self._unknown.add(key)
        for name, scope, win, used, expires in db.execute(
            "SELECT * FROM budget WHERE expires_at > ?", (now - GC_MARGIN_S,)
        ):
            self._budgets[(name, scope, win)] = BudgetCounter(used, expires)
        for name, scope, stamps, _ in db.execute("SELECT * FROM rate_log WHERE gc_at > ?", (now,)):
            self._rates[(name, scope)] = RateLog(array("d", stamps).tolist())
        for name, spec, secret, updated_at, updated_by in db.execute("SELECT * FROM tool"):
            self._tools[name] = RegisteredTool(
                name=name,
                spec=spec,
                signing_secret=secret,
                updated_at=updated_at,
                updated_by=updated_by,
            )
        (self._tools_version,) = db.execute("SELECT version FROM catalog").fetchone()

    def _reload_from(self, db: sqlite3.Connection | None) -> None:
        """Memory as the file holds it, after a failed commit (nothing at all once closed)."""
        self._idem.clear()
        self._unknown.clear()
        self._claimed.clear()
        self._rows.clear()
        self._decided.clear()
        self._budgets.clear()
        self._rates.clear()
        self._tools.clear()
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._load(db)
