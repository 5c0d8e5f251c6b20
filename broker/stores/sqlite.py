"""The embedded default store: one SQLite file (WAL), so a restart forgets nothing.

Semantics are those of :class:`~broker.stores.memory.MemoryStore` (and of the Redis scripts),
made durable: every method is one transaction (``BEGIN IMMEDIATE`` .. ``COMMIT``), and a claim
is committed before ``admit`` returns, so a process killed mid-call leaves its key in progress,
then ``outcome_unknown`` for a non-idempotent tool, exactly as Redis would.

Statements run on the event loop's thread, never awaiting mid-transaction. Each call is a few
indexed statements and one commit (tens of microseconds with ``synchronous = NORMAL``), less
than handing it to a thread and back would cost; and a caller cancelled mid-call can never
leave a transaction half-seen. Several processes on one host may share the file: SQLite's lock
serialises their transactions, and a process waits for another's lock at most
:data:`~broker.stores.sqlite_file.BUSY_TIMEOUT_S` before it fails closed (503).

Expired rows are deleted in bounded batches every :data:`_SWEEP_EVERY` writes, so the file
stays bounded by the TTLs without a pause that grows with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import msgspec

from broker.ids import new_lease_owner
from broker.stores.base import (
    UNKNOWN_HOLD_S,
    Admission,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    RegisteredTool,
    Replay,
    Settlement,
    StoredResponse,
    Ticket,
    ToolSnapshot,
    ToolWrite,
)
from broker.stores.sqlite_file import Synchronous, open_database
from broker.taxonomy import StoreUnavailableError

__all__ = ["SqliteStore"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

_SWEEP_EVERY = 64
_SWEEP_BATCH = 256
"""Each sweep deletes at most this many rows per table: four times what 64 admissions can add
to the busiest one, so the sweep keeps up, and no sweep ever scans more than it deletes."""

_GC_MARGIN_S = 60.0
"""A claim outlives its lease by this before the sweep may take it (as Redis' TTL margin): a
late owner can still settle it when nobody saw the lease lapse."""

_TOOL_POLL_S = 0.1
"""How often a waiting catalog follower reads the version row: another process's registration
is seen within this (SQLite has no notifications across processes)."""

_REFUNDED = frozenset({Settlement.DEFINITE_FAILURE, Settlement.TRANSIENT_FAILURE})

_IdemRow = tuple[str, str, int, str | None, float, float, int | None, bytes | None]


def _claim_id(claim: ClaimRequest) -> bytes:
    return hashlib.sha256(msgspec.msgpack.encode((claim.tenant, claim.route, claim.key))).digest()


class SqliteStore:
    """SQLite implementation of :class:`~broker.stores.Store`.

    Args:
        path: the database file (created with the current schema when absent).
        synchronous: ``"normal"`` survives a crash of the process, ``"full"`` a power cut too
            (one fsync per commit).
        clock: wall-clock seconds for decision records (the protocol passes ``now`` elsewhere).

    Raises:
        ConfigError: the file is damaged, foreign, or written by a newer broker.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "normal",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        self._clock = clock
        self._db: sqlite3.Connection | None = open_database(self.path, synchronous=synchronous)
        self._writes = 0
        self._records = msgspec.msgpack.Decoder(DecisionRecord)
        self._encoder = msgspec.msgpack.Encoder()

    def size_bytes(self) -> int:
        """The database and its write-ahead log on disk (for the size gauge)."""
        total = 0
        for name in (self.path, Path(f"{self.path}-wal")):
            with contextlib.suppress(OSError):  # a log not created yet counts nothing
                total += name.stat().st_size
        return total

    # -- Store protocol -------------------------------------------------------------------------

    async def admit(self, admission: Admission, *, now: float, dry_run: bool) -> AdmitResult:
        return self._write(self._admit, admission, now, dry_run)

    async def lookup(self, claim: ClaimRequest, *, now: float) -> Replay | Conflict | None:
        return self._write(self._lookup, claim, now)

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
        return self._write(self._settle, ticket, settlement, response, record, ttl_s, now)

    async def save_decision(self, record: DecisionRecord, *, ttl_s: int) -> None:
        self._write(self._save_decision, record, self._clock() + ttl_s)

    async def load_decision(self, proposal_id: str) -> DecisionRecord | None:
        row = self._read(
            "SELECT record FROM decision WHERE proposal_id = ? AND expires_at > ?",
            (proposal_id, self._clock()),
        )
        if row is None:
            return None
        try:
            return self._records.decode(row[0])
        except msgspec.DecodeError as exc:
            raise StoreUnavailableError(f"unreadable decision record in {self.path}") from exc

    async def put_tool(self, tool: RegisteredTool, *, keep_secret: bool) -> ToolWrite:
        return self._write(self._put_tool, tool, keep_secret)

    async def get_tool(self, name: str) -> RegisteredTool | None:
        row = self._read(
            "SELECT name, spec, secret, updated_at, updated_by FROM tool WHERE name = ?", (name,)
        )
        return None if row is None else _tool(row)

    async def delete_tool(self, name: str) -> int | None:
        return self._write(self._delete_tool, name)

    async def list_tools(self) -> ToolSnapshot:
        # One read transaction, so the tools and the version belong together.
        return self._write(self._list_tools)

    async def tools_version(self) -> int:
        row = self._read("SELECT version FROM catalog", ())
        return int(row[0]) if row else 0

    async def wait_tools_changed(self, timeout_s: float) -> None:
        # Another process's registration lands in the file without a word to this one: watch
        # the version row, a cheap indexed read, a few times a second.
        start = await self.tools_version()
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(_TOOL_POLL_S, left))
            if await self.tools_version() != start:
                return

    async def ping(self) -> None:
        self._read("SELECT 1", ())

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # -- transactions -----------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreUnavailableError(f"the store at {self.path} is closed")
        return self._db

    def _write(self, step: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``step`` in one write transaction; commit it, or roll it back and fail closed."""
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = step(*args, **kwargs)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self.path}: {exc}") from exc
        return result

    def _read(self, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            return self._conn().execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self.path}: {exc}") from exc

    # -- steps (each runs inside _write's transaction) -----------------------------------------

    def _admit(self, admission: Admission, now: float, dry_run: bool) -> AdmitResult:
        db = self._conn()
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            self._sweep(db, now)
        claim = admission.claim
        claim_id = b""
        if claim is not None:
            claim_id = _claim_id(claim)
            row = self._live(db, claim_id, now)
            verdict = _verdict(row, claim, now, replay=not dry_run)
            if verdict is not None:
                return verdict

        windows: list[tuple[BudgetCharge, int]] = []
        for charge in admission.charges:
            window = int(now // charge.window_s)
            found = db.execute(
                "SELECT used, expires_at FROM budget WHERE name = ? AND scope = ? AND win = ?",
                (charge.name, charge.scope, window),
            ).fetchone()
            used = found[0] if found and found[1] > now else 0
            if used + charge.amount > charge.limit:
                return Limited("budget", charge.name, (window + 1) * charge.window_s - now)
            windows.append((charge, window))
        for hit in admission.hits:
            # The limit-th newest entry still in the window, if there are that many: the one
            # that has to leave before another call fits.
            oldest = db.execute(
                "SELECT at FROM rate_hit WHERE name = ? AND scope = ? AND at > ?"
                " ORDER BY at DESC LIMIT 1 OFFSET ?",
                (hit.name, hit.scope, now - hit.window_s, hit.limit - 1),
            ).fetchone()
            if oldest is not None:
                return Limited("rate", hit.name, max(oldest[0] + hit.window_s - now, 0.001))

        if dry_run:
            return Admitted(Ticket(tenant=admission.tenant, claim=None, owner=None, charges=()))

        # Everything passed: take it all.
        used_after: list[int] = []
        for charge, window in windows:
            end = float((window + 1) * charge.window_s)
            (used,) = db.execute(
                "INSERT INTO budget VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (name, scope, win) DO UPDATE SET"
                " used = CASE WHEN expires_at > ? THEN used + excluded.used"
                " ELSE excluded.used END, expires_at = excluded.expires_at"
                " RETURNING used",
                (charge.name, charge.scope, window, charge.amount, end, now),
            ).fetchone()
            used_after.append(int(used))
        for hit in admission.hits:
            db.execute(
                "DELETE FROM rate_hit WHERE name = ? AND scope = ? AND at <= ?",
                (hit.name, hit.scope, now - hit.window_s),
            )
            db.execute(
                "INSERT INTO rate_hit VALUES (?, ?, ?, ?)",
                (hit.name, hit.scope, now, now + hit.window_s),
            )
        owner = None
        if claim is not None:
            owner = new_lease_owner()
            lease_until = now + claim.lease_s
            gc_at = lease_until + _GC_MARGIN_S + (0 if claim.idempotent else UNKNOWN_HOLD_S)
            db.execute(
                "INSERT OR REPLACE INTO idem VALUES (?, 'p', ?, ?, ?, ?, ?, ?, NULL, NULL)",
                (
                    claim_id,
                    claim.fingerprint,
                    claim.idempotent,
                    owner,
                    lease_until,
                    now + max(claim.lease_s, 1.0),
                    gc_at,
                ),
            )
        return Admitted(
            Ticket(
                tenant=admission.tenant,
                claim=claim,
                owner=owner,
                charges=tuple(windows),
                used=tuple(used_after),
            )
        )

    def _lookup(self, claim: ClaimRequest, now: float) -> Replay | Conflict | None:
        return _verdict(self._live(self._conn(), _claim_id(claim), now), claim, now, replay=True)

    def _settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        db = self._conn()
        self._save_decision(record, now + ttl_s)
        # The charges belong to the ticket: a failed call gives them back even when its lease
        # lapsed meanwhile (the new owner took charges of its own).
        if settlement in _REFUNDED:
            for charge, window in ticket.charges:
                db.execute(
                    "UPDATE budget SET used = max(used - ?, 0)"
                    " WHERE name = ? AND scope = ? AND win = ?",
                    (charge.amount, charge.name, charge.scope, window),
                )
        claim = ticket.claim
        if claim is None:
            return True
        claim_id = _claim_id(claim)
        row = db.execute("SELECT state, owner FROM idem WHERE id = ?", (claim_id,)).fetchone()
        if row is None or row[0] != "p" or row[1] != ticket.owner:
            return False  # the lease expired and someone else owns the key now
        expires_at = now + ttl_s
        if settlement is Settlement.TRANSIENT_FAILURE:
            db.execute("DELETE FROM idem WHERE id = ?", (claim_id,))
        elif settlement is Settlement.UNKNOWN:
            db.execute(
                "UPDATE idem SET state = 'u', owner = NULL, expires_at = ?, gc_at = ? WHERE id = ?",
                (expires_at, expires_at, claim_id),
            )
        else:
            db.execute(
                "UPDATE idem SET state = 'c', owner = NULL, expires_at = ?, gc_at = ?,"
                " status = ?, body = ? WHERE id = ?",
                (expires_at, expires_at, response.status, response.body, claim_id),
            )
        return True

    def _save_decision(self, record: DecisionRecord, expires_at: float) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO decision VALUES (?, ?, ?)",
            (record.proposal_id, self._encoder.encode(record), expires_at),
        )

    def _put_tool(self, tool: RegisteredTool, keep_secret: bool) -> ToolWrite:
        db = self._conn()
        row = db.execute("SELECT secret FROM tool WHERE name = ?", (tool.name,)).fetchone()
        kept = keep_secret and row is not None
        secret = row[0] if kept else tool.signing_secret
        db.execute(
            "INSERT OR REPLACE INTO tool VALUES (?, ?, ?, ?, ?)",
            (tool.name, tool.spec, secret, tool.updated_at, tool.updated_by),
        )
        return ToolWrite(version=self._bump(db), created=row is None, secret_kept=kept)

    def _delete_tool(self, name: str) -> int | None:
        db = self._conn()
        if db.execute("DELETE FROM tool WHERE name = ?", (name,)).rowcount == 0:
            return None
        return self._bump(db)

    def _list_tools(self) -> ToolSnapshot:
        db = self._conn()
        (version,) = db.execute("SELECT version FROM catalog").fetchone()
        rows = db.execute("SELECT name, spec, secret, updated_at, updated_by FROM tool")
        return ToolSnapshot(int(version), tuple(_tool(row) for row in rows))

    @staticmethod
    def _bump(db: sqlite3.Connection) -> int:
        (version,) = db.execute(
            "UPDATE catalog SET version = version + 1 RETURNING version"
        ).fetchone()
        return int(version)

    @staticmethod
    def _live(db: sqlite3.Connection, claim_id: bytes, now: float) -> _IdemRow | None:
        """The key's record after expiry is applied (mirrors MemoryStore._live_record)."""
        row: _IdemRow | None = db.execute(
            "SELECT state, fingerprint, idempotent, owner, lease_until, expires_at, status, body"
            " FROM idem WHERE id = ?",
            (claim_id,),
        ).fetchone()
        if row is None:
            return None
        state, _, idempotent, _, lease_until, expires_at, _, _ = row
        if state != "p" and expires_at <= now:
            db.execute("DELETE FROM idem WHERE id = ?", (claim_id,))
            return None
        if state == "p" and lease_until <= now:
            if idempotent:
                db.execute(
                    "DELETE FROM idem WHERE id = ?", (claim_id,)
                )  # running it again is harmless
                return None
            # Abandoned mid-call: it may have reached the backend. Never run it blindly again.
            expires_at = max(expires_at, now + UNKNOWN_HOLD_S)
            db.execute(
                "UPDATE idem SET state = 'u', owner = NULL, expires_at = ?, gc_at = ? WHERE id = ?",
                (expires_at, expires_at, claim_id),
            )
            return ("u", row[1], idempotent, None, lease_until, expires_at, None, None)
        return row

    def _sweep(self, db: sqlite3.Connection, now: float) -> None:
        """Delete a bounded batch of expired rows from each table (inside the caller's
        transaction): each statement walks an expiry index and stops at the batch size."""
        for table, column, cutoff in (
            ("idem", "gc_at", now),
            ("rate_hit", "gc_at", now),
            ("decision", "expires_at", now),
            # A counter outlives its window a little, so a late refund still finds it.
            ("budget", "expires_at", now - _GC_MARGIN_S),
        ):
            db.execute(
                f"DELETE FROM {table} WHERE rowid IN"  # noqa: S608 (names from this tuple)
                f" (SELECT rowid FROM {table} WHERE {column} <= ? LIMIT ?)",
                (cutoff, _SWEEP_BATCH),
            )
        db.execute(f"PRAGMA incremental_vacuum({_SWEEP_BATCH})")


def _verdict(
    row: _IdemRow | None, claim: ClaimRequest, now: float, *, replay: bool
) -> Replay | Conflict | None:
    """Mirrors MemoryStore._verdict."""
    if row is None:
        return None
    state, fingerprint, _, _, lease_until, _, status, body = row
    if fingerprint != claim.fingerprint:
        return Conflict("reused")
    if state == "p":
        return Conflict("in_progress", max(lease_until - now, 0.001))
    if state == "u":
        return Conflict("outcome_unknown")
    if not replay:
        return None  # a dry run never replays, and never satisfies a later real run
    if status is None or body is None:  # a completed record always carries its response
        return Conflict("outcome_unknown")
    return Replay(StoredResponse(status, body))


def _tool(row: tuple[str, bytes, str, float, str]) -> RegisteredTool:
    name, spec, secret, updated_at, updated_by = row
    return RegisteredTool(
        name=name, spec=spec, signing_secret=secret, updated_at=updated_at, updated_by=updated_by
    )
