"""Expiring values (``broker.stores.expiring``) made durable in the SQLite store's file: memory
answers, a table keeps.

Like the approvals (``sqlite_approvals``), the table has a connection of its own, written on a
worker thread outside the store's batching writer: these writes are off the admission path and
never hold a claim's commit back. Reads are served from memory; at start the live rows are read
back, and expired rows are deleted in bounded batches as new ones are written.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from broker.stores.expiring import MemoryExpiring, check_size
from broker.taxonomy import StoreUnavailableError

__all__ = ["SqliteExpiring"]

_TABLE = """
CREATE TABLE IF NOT EXISTS expiring (
    tenant     TEXT NOT NULL,
    key        TEXT NOT NULL,
    expires_at REAL NOT NULL,
    value      BLOB NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS expiring_gc ON expiring (expires_at);
"""
_TIMEOUT_S = 5.0
_SWEEP_EVERY = 256
"""Writes between two deletions of expired rows."""
_SWEEP_ROWS = 1000
"""The most expired rows one deletion removes, so no write waits on a long one."""


class SqliteExpiring(MemoryExpiring):
    """The expiring values' side of :class:`~broker.stores.sqlite.SqliteStore`."""

    _expiring_db: sqlite3.Connection | None = None
    _expiring_path: Path
    _expiring_writes = 0

    def _open_expiring(self, path: Path) -> None:
        """Open the table (creating it) and load every value still live now, oldest first (so
        memory's bounds forget the same ones they would have)."""
        db = sqlite3.connect(
            path, timeout=_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        now = self._clock()
        try:
            db.executescript(_TABLE)
            for tenant, key, expires_at, value in db.execute(
                "SELECT tenant, key, expires_at, value FROM expiring"
                " WHERE expires_at > ? ORDER BY expires_at",
                (now,),
            ):
                self._remember(tenant, key, value, expires_at, now=now)
        except BaseException:
            db.close()
            raise
        self._expiring_db, self._expiring_path = db, path

    def _close_expiring(self) -> None:
        db, self._expiring_db = self._expiring_db, None
        if db is not None:
            db.close()

    async def put_expiring(self, tenant: str, key: str, value: bytes, *, ttl_s: float) -> None:
        check_size(value)
        db = self._expiring_db
        if db is None:
            raise StoreUnavailableError(f"the store at {self._expiring_path} is closed")
        now = self._clock()
        row = (tenant, key, now + ttl_s, value)
        if ttl_s <= 0:
            self._forget((tenant, key))
        else:
            self._remember(tenant, key, value, now + ttl_s, now=now)
        self._expiring_writes += 1
        sweep = self._expiring_writes % _SWEEP_EVERY == 0
        try:
            await asyncio.to_thread(_write, db, row, now, sweep)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self._expiring_path}: {exc}") from exc


def _write(
    db: sqlite3.Connection, row: tuple[str, str, float, bytes], now: float, sweep: bool
) -> None:
    tenant, key, expires_at, _ = row
    if expires_at <= now:  # a TTL of zero or less: forgotten, as in memory
        db.execute("DELETE FROM expiring WHERE tenant = ? AND key = ?", (tenant, key))
    else:
        db.execute("INSERT OR REPLACE INTO expiring VALUES (?, ?, ?, ?)", row)
    if sweep:
        db.execute(
            "DELETE FROM expiring WHERE (tenant, key) IN"
            " (SELECT tenant, key FROM expiring WHERE expires_at <= ? LIMIT ?)",
            (now, _SWEEP_ROWS),
        )
