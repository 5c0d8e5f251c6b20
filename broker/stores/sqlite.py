"""The embedded default store: the memory store's decisions, made durable in one SQLite file.

Decisions are :class:`~broker.stores.memory.MemoryStore`'s own (this class inherits them, so the
two cannot drift); what each call changed is written to the file, and the call returns only once
that write is committed. A claim is therefore on disk before ``admit`` returns, and a process
killed mid-call comes back with the key in progress, then ``outcome_unknown`` for a
non-idempotent tool, exactly as with Redis. At start the file is read back into memory.

Group commit: the rows a call changed are queued, and one transaction per turn of the event loop
writes every queued row (``executemany``, the last write of a row wins) and commits; every call
of that turn then returns. Under load one commit serves many proposals; alone, a call waits one
turn of the loop. The commit runs on the loop's thread: with ``synchronous = NORMAL`` it is a
few write system calls, cheaper than a hand-over to a thread. If a commit fails, its callers get
StoreUnavailableError (503) and memory is reloaded from the file, so nothing is answered from
state the file does not hold.

One process owns the file (:func:`~broker.stores.sqlite_file.lock_exclusively`): the state in
memory is authoritative only while nobody else writes. Several processes need Redis.

Decision records (``GET /v1/proposals/{id}``, read rarely) live only in the file, so memory holds
just the idempotency records, counters, rate logs and registered tools. Expired rows are deleted
in bounded batches during commits, so the file stays bounded by the TTLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sqlite3
import time
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from broker.stores.base import (
    UNKNOWN_HOLD_S,
    Admission,
    AdmitResult,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    RegisteredTool,
    Replay,
    Settlement,
    StoredResponse,
    Ticket,
    ToolWrite,
)
from broker.stores.memory import MemoryStore, _Counter, _IdemRecord, _Log
from broker.stores.sqlite_file import Checkpointer, Synchronous, lock_exclusively, open_database
from broker.taxonomy import StoreUnavailableError

__all__ = ["SqliteStore"]

_SWEEP_EVERY = 16
"""Commits between two sweeps."""
_SWEEP_BATCH = 512
"""Rows each sweep deletes at most per table: a sweep walks an expiry index and stops there, so
its cost never grows with the file; at this size it outpaces any write rate one process has."""

_GC_MARGIN_S = 60.0
"""A claim outlives its lease by this before the sweep may take it (as Redis' TTL margin): a
late owner can still settle it when nobody saw the lease lapse; and a budget counter outlives
its window by this, so a late refund still finds it."""

_STATES = {"in_progress": "p", "completed": "c", "outcome_unknown": "u"}
_NAMES = {v: k for k, v in _STATES.items()}

_IdemKey = tuple[str, str, str]
_Row = tuple[object, ...]


def _claim_id(key: _IdemKey) -> bytes:
    """The row id of a claim: client strings of any length, one fixed-size index entry."""
    return hashlib.sha256(msgspec.msgpack.encode(key)).digest()


class _Batch:
    """The rows changed since the last commit (keyed, so the last write wins), and its waiters."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.idem: dict[bytes, _Row | None] = {}
        self.budget: dict[tuple[str, str, int], _Row | None] = {}
        self.rate: dict[tuple[str, str], _Row | None] = {}
        self.decision: dict[str, _Row] = {}
        self.tool: dict[str, _Row | None] = {}
        self.version: int | None = None
        self.waiters: list[asyncio.Future[None]] = []
        self.loop = loop

    def wait(self) -> asyncio.Future[None]:
        # One future per caller: a caller that gives up cancels its own, never the commit.
        waiter = self.loop.create_future()
        self.waiters.append(waiter)
        return waiter

    def done(self, error: BaseException | None = None) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)


class SqliteStore(MemoryStore):
    """SQLite implementation of :class:`~broker.stores.Store` (one process per file).

    Args:
        path: the database file (created with the current schema when absent).
        synchronous: ``"normal"`` survives a crash of the process, ``"full"`` a power cut too
            (an fsync per commit).
        clock: wall-clock seconds, as for the memory store.

    Raises:
        ConfigError: another process holds the file, or it is damaged, foreign, or written by a
            newer broker.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "normal",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(clock=clock)
        self.path = Path(path)
        self.synchronous = synchronous
        self._lock = lock_exclusively(self.path)
        try:
            self._db: sqlite3.Connection | None = open_database(self.path, synchronous=synchronous)
            self._load(self._db)
        except BaseException:
            os.close(self._lock)
            raise
        self._checkpointer = Checkpointer(self.path, synchronous=synchronous)
        self._batch: _Batch | None = None
        self._commits = 0
        self._encoder = msgspec.msgpack.Encoder()
        self._records = msgspec.msgpack.Decoder(DecisionRecord)

    def size_bytes(self) -> int:
        """The database and its write-ahead log on disk (the size gauge)."""
        total = 0
        for name in (self.path, Path(f"{self.path}-wal")):
            with contextlib.suppress(OSError):  # a log not created yet counts nothing
                total += name.stat().st_size
        return total

    # -- Store protocol: the memory store decides, the file keeps ---------------------------------

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        result = await super().admit(admission, now=now, dry_run=dry_run)
        batch = self._pending()
        if admission.claim is not None:
            claim = admission.claim
            self._keep_claim(batch, (claim.tenant, claim.route, claim.key))
        if not dry_run:
            for charge in admission.charges:
                self._keep_budget(batch, (charge.name, charge.scope, int(now // charge.window_s)))
            for hit in admission.hits:
                self._keep_rate(batch, (hit.name, hit.scope), hit.window_s)
        await self._durable(batch)
        return result

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        result = await super().lookup(claim, now=now)
        batch = self._pending()
        self._keep_claim(batch, (claim.tenant, claim.route, claim.key))
        await self._durable(batch)
        return result

    async def settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        settled = await super().settle(
            ticket, settlement, response=response, record=record, ttl_s=ttl_s, now=now
        )
        self._decisions.pop(record.proposal_id, None)  # kept in the file only
        batch = self._pending()
        self._keep_decision(batch, record, now + ttl_s)
        for charge, window in ticket.charges:
            self._keep_budget(batch, (charge.name, charge.scope, window))
        if ticket.claim is not None:
            claim = ticket.claim
            self._keep_claim(batch, (claim.tenant, claim.route, claim.key))
        await self._durable(batch)
        return settled

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        batch = self._pending()
        self._keep_decision(batch, record, self._clock() + ttl_s)
        await self._durable(batch)

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None:
        now = self._clock()
        queued = self._batch.decision.get(proposal_id) if self._batch else None
        if queued is not None:
            # Asked before its commit: answer once it is durable, as every other call does.
            await self._durable(self._batch)
        row = self._query(
            "SELECT record FROM decision WHERE proposal_id = ? AND expires_at > ?",
            (proposal_id, now),
        ).fetchone()
        if row is None:
            return None
        try:
            return self._records.decode(row[0])
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError(f"unreadable decision record in {self.path}") from exc

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        written = await super().put_tool(tool, keep_secret=keep_secret)
        batch = self._pending()
        kept = self._tools[tool.name]
        batch.tool[tool.name] = (
            kept.name,
            kept.spec,
            kept.signing_secret,
            kept.updated_at,
            kept.updated_by,
        )
        batch.version = self._tools_version
        await self._durable(batch)
        return written

    async def delete_tool(self, name: str) -> int | None:
        version = await super().delete_tool(name)
        if version is None:
            return None
        batch = self._pending()
        batch.tool[name] = None
        batch.version = version
        await self._durable(batch)
        return version

    async def ping(self) -> None:
        self._query("SELECT 1", ())

    async def close(self) -> None:
        if self._batch is not None:
            self._commit()
        db, self._db = self._db, None
        if db is not None:
            db.close()
            self._checkpointer.stop()
            os.close(self._lock)

    # -- what a call changed, as rows ---------------------------------------------------------------

    def _keep_claim(self, batch: _Batch, key: _IdemKey) -> None:
        record = self._idem.get(key)
        if record is None:
            batch.idem[_claim_id(key)] = None
            return
        if record.state == "in_progress":
            # An abandoned claim of a non-idempotent tool must still say outcome_unknown then.
            hold = 0.0 if record.idempotent else UNKNOWN_HOLD_S
            gc_at = record.lease_until + _GC_MARGIN_S + hold
        else:
            gc_at = record.expires_at
        response = record.response
        batch.idem[_claim_id(key)] = (
            *key,
            _STATES[record.state],
            record.fingerprint,
            record.idempotent,
            record.owner,
            record.lease_until,
            record.expires_at,
            gc_at,
            None if response is None else response.status,
            None if response is None else response.body,
        )

    def _keep_budget(self, batch: _Batch, key: tuple[str, str, int]) -> None:
        counter = self._budgets.get(key)
        batch.budget[key] = None if counter is None else (*key, counter.used, counter.expires_at)

    def _keep_rate(self, batch: _Batch, key: tuple[str, str], window_s: float) -> None:
        log = self._rates.get(key)
        if log is None or not log.stamps:
            batch.rate[key] = None
            return
        stamps = array("d", log.stamps).tobytes()
        batch.rate[key] = (*key, stamps, log.stamps[-1] + window_s)

    def _keep_decision(self, batch: _Batch, record: DecisionRecord, expires_at: float) -> None:
        row = (record.proposal_id, self._encoder.encode(record), expires_at)
        batch.decision[record.proposal_id] = row

    # -- commits ----------------------------------------------------------------------------------

    def _pending(self) -> _Batch:
        """The batch of this turn of the loop, its commit scheduled for the next turn."""
        if self._db is None:
            raise StoreUnavailableError(f"the store at {self.path} is closed")
        if self._batch is None:
            loop = asyncio.get_running_loop()
            self._batch = _Batch(loop)
            loop.call_soon(self._commit)
        return self._batch

    @staticmethod
    async def _durable(batch: _Batch | None) -> None:
        if batch is not None:
            await batch.wait()

    def _commit(self) -> None:
        batch, self._batch = self._batch, None
        if batch is None:
            return
        db = self._db
        try:
            if db is None:
                raise sqlite3.ProgrammingError("closed")
            db.execute("BEGIN IMMEDIATE")
            try:
                self._write(db, batch)
                self._commits += 1
                if self._commits % _SWEEP_EVERY == 0:
                    self._sweep_file(db, self._clock())
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            batch.done(StoreUnavailableError(f"sqlite {self.path}: {exc}"))
            self._reload()  # forget what the file does not hold
            return
        batch.done()

    @staticmethod
    def _write(db: sqlite3.Connection, batch: _Batch) -> None:
        def upsert(table: str, marks: int, rows: Iterable[_Row | None]) -> None:
            db.executemany(
                f"INSERT OR REPLACE INTO {table} VALUES ({', '.join('?' * marks)})",  # noqa: S608
                (row for row in rows if row is not None),
            )

        db.executemany(
            "DELETE FROM idem WHERE id = ?", ((k,) for k, v in batch.idem.items() if v is None)
        )
        upsert("idem", 13, ((k, *v) if v else None for k, v in batch.idem.items()))
        db.executemany(
            "DELETE FROM budget WHERE name = ? AND scope = ? AND win = ?",
            (k for k, v in batch.budget.items() if v is None),
        )
        upsert("budget", 5, batch.budget.values())
        db.executemany(
            "DELETE FROM rate_log WHERE name = ? AND scope = ?",
            (k for k, v in batch.rate.items() if v is None),
        )
        upsert("rate_log", 4, batch.rate.values())
        upsert("decision", 3, batch.decision.values())
        db.executemany(
            "DELETE FROM tool WHERE name = ?", ((k,) for k, v in batch.tool.items() if v is None)
        )
        upsert("tool", 5, batch.tool.values())
        if batch.version is not None:
            db.execute("UPDATE catalog SET version = ?", (batch.version,))

    @staticmethod
    def _sweep_file(db: sqlite3.Connection, now: float) -> None:
        """Delete a bounded batch of expired rows from each table: each statement walks an
        expiry index from its start and stops after the batch."""
        for table, column, cutoff in (
            ("idem", "gc_at", now),
            ("rate_log", "gc_at", now),
            ("decision", "expires_at", now),
            ("budget", "expires_at", now - _GC_MARGIN_S),
        ):
            db.execute(
                f"DELETE FROM {table} WHERE rowid IN"  # noqa: S608 (names from this tuple)
                f" (SELECT rowid FROM {table} WHERE {column} <= ? LIMIT ?)",
                (cutoff, _SWEEP_BATCH),
            )

    def _query(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        if self._db is None:
            raise StoreUnavailableError(f"the store at {self.path} is closed")
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self.path}: {exc}") from exc

    # -- reading the file back ----------------------------------------------------------------------

    def _load(self, db: sqlite3.Connection) -> None:
        """Memory from the file: every live claim, counter, rate log and registered tool."""
        now = self._clock()
        for row in db.execute("SELECT * FROM idem WHERE gc_at > ?", (now,)):
            _, tenant, route, key, state, fp, idempotent, owner, lease, expires, _, status, body = (
                row
            )
            self._idem[(tenant, route, key)] = _IdemRecord(
                state=_NAMES[state],  # type: ignore[arg-type]
                fingerprint=fp,
                idempotent=bool(idempotent),
                owner=owner,
                lease_until=lease,
                expires_at=expires,
                response=None if status is None else StoredResponse(status, body),
            )
        for name, scope, win, used, expires in db.execute(
            "SELECT * FROM budget WHERE expires_at > ?", (now - _GC_MARGIN_S,)
        ):
            self._budgets[(name, scope, win)] = _Counter(used, expires)
        for name, scope, stamps, _ in db.execute("SELECT * FROM rate_log WHERE gc_at > ?", (now,)):
            self._rates[(name, scope)] = _Log(array("d", stamps).tolist())
        for name, spec, secret, updated_at, updated_by in db.execute("SELECT * FROM tool"):
            self._tools[name] = RegisteredTool(
                name=name,
                spec=spec,
                signing_secret=secret,
                updated_at=updated_at,
                updated_by=updated_by,
            )
        (self._tools_version,) = db.execute("SELECT version FROM catalog").fetchone()

    def _reload(self) -> None:
        self._idem.clear()
        self._budgets.clear()
        self._rates.clear()
        self._tools.clear()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._load(self._db)
