"""The read cache made durable in the SQLite store's file: memory answers, a table keeps.

Like the approvals (``sqlite_approvals``), the table has a connection of its own, written on a
worker thread outside the store's batching writer: a cache write is off the admission path
and never holds a claim's commit back. Hits are served from memory; at start the live rows are
read back, and expired rows are deleted in bounded batches as new ones are written.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from broker.stores.read_cache import CachedResult, MemoryReadCache
from broker.taxonomy import StoreUnavailableError

__all__ = ["SqliteReadCache"]

_TABLE = """
CREATE TABLE IF NOT EXISTS read_cache (
    tenant     TEXT NOT NULL,
    key        TEXT NOT NULL,
    stored_at  REAL NOT NULL,
    expires_at REAL NOT NULL,
    body       BLOB NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS read_cache_gc ON read_cache (expires_at);
"""
_TIMEOUT_S = 5.0
_SWEEP_EVERY = 256
"""Writes between two deletions of expired rows."""
_SWEEP_ROWS = 1000
"""The most expired rows one deletion removes, so no write waits on a long one."""


class SqliteReadCache(MemoryReadCache):
    """The read cache's side of :class:`~broker.stores.sqlite.SqliteStore`."""

    _cache_db: sqlite3.Connection | None = None
    _cache_path: Path
    _cache_writes = 0

    def _open_read_cache(self, path: Path, *, now: float) -> None:
        """Open the table (creating it) and load every entry still live at ``now``."""
        db = sqlite3.connect(
            path, timeout=_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            db.executescript(_TABLE)
            for tenant, key, stored_at, expires_at, body in db.execute(
                "SELECT tenant, key, stored_at, expires_at, body FROM read_cache"
                " WHERE expires_at > ?",
                (now,),
            ):
                self._remember(tenant, key, CachedResult(stored_at, body), expires_at)
        except BaseException:
            db.close()
            raise
        self._cache_db, self._cache_path = db, path

    def _close_read_cache(self) -> None:
        db, self._cache_db = self._cache_db, None
        if db is not None:
            db.close()

    async def cache_put(self, tenant: str, key: str, entry: CachedResult, *, ttl_s: float) -> None:
        await super().cache_put(tenant, key, entry, ttl_s=ttl_s)
        db = self._cache_db
        if db is None:
            raise StoreUnavailableError(f"the store at {self._cache_path} is closed")
        expires_at = entry.stored_at + ttl_s
        self._cache_writes += 1
        sweep = self._cache_writes % _SWEEP_EVERY == 0
        try:
            await asyncio.to_thread(_write, db, (tenant, key, entry, expires_at), sweep)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"sqlite {self._cache_path}: {exc}") from exc


def _write(db: sqlite3.Connection, row: tuple[str, str, CachedResult, float], sweep: bool) -> None:
    tenant, key, entry, expires_at = row
    db.execute(
        "INSERT OR REPLACE INTO read_cache VALUES (?, ?, ?, ?, ?)",
        (tenant, key, entry.stored_at, expires_at, entry.body),
    )
    if sweep:
        db.execute(
            "DELETE FROM read_cache WHERE (tenant, key) IN"
            " (SELECT tenant, key FROM read_cache WHERE expires_at <= ? LIMIT ?)",
            (entry.stored_at, _SWEEP_ROWS),
        )
