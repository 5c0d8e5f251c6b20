"""The embedded store's database file: locked to one process, opened with its durability,
checked, never silently lost.

The file carries its schema version in ``PRAGMA user_version``. Opening it:

* a missing or empty file gets the current schema (version :data:`SCHEMA_VERSION`);
* the current version is checked with ``PRAGMA quick_check`` and used;
* anything else (a newer version, a file with tables but no version, a damaged or foreign file)
  raises :class:`~broker.taxonomy.ConfigError` naming the file. Nothing is ever recreated over
  an existing file: a key lost to a silent reset could execute twice. Version 1 (claims keyed by
  a hash of the client's key) never left development and is refused. Older versions are
  migrated, each step in one transaction (:data:`_MIGRATIONS`): version 2's claims gain the
  dispatch mark, set, since a claim written before the mark existed may have been sent;
  version 3's gain the mark saying a claim's row is also its proposal's decision record,
  unset, since version 3 wrote every decision record to its own table.

Durability is ``PRAGMA synchronous`` in WAL mode: ``normal`` syncs the log only at checkpoints,
so a commit survives a crash of the process (the log is in the OS's page cache) but the last
ones may be lost to a power cut; ``full`` fsyncs the log at every commit.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Literal

from broker.taxonomy import ConfigError

__all__ = [
    "SCHEMA_VERSION",
    "WAL_RESTART_FRAMES",
    "Checkpointer",
    "Synchronous",
    "lock_exclusively",
    "open_database",
]

Synchronous = Literal["normal", "full"]

log = logging.getLogger("broker.stores.sqlite")

SCHEMA_VERSION = 4

BUSY_TIMEOUT_S = 5.0
"""How long a statement waits for a lock held by another connection (an operator's ``sqlite3``
shell, a backup) before the store reports itself unavailable (503)."""

WAL_RESTART_FRAMES = 4096
"""Frames (pages) in the log at which the writer catches up with the Checkpointer."""

_WAL_LIMIT_BYTES = 64 * 1024 * 1024
"""The log is truncated back to this after a checkpoint, so a burst does not leave it large."""

# Times are the caller's clock in seconds (REAL: an IEEE double, so instants are stored exactly).
# ``gc_at`` is when the sweep may delete a row whatever state it is in (see SqliteStore._sweep);
# infinite for a claim kept until resolved (an unknown outcome, or one of a non-idempotent tool
# in flight), which its index leaves out: most claims are in flight once, and their index entry
# is then written once, when they settle, not added at admission and moved at settlement.
# Pages freed by the sweep are reused by later rows: the file keeps the size of its busiest day.
_SCHEMA = """
CREATE TABLE idem (
    id          INTEGER PRIMARY KEY, -- numbered by the store; one row per (tenant, route, key)
    tenant      TEXT NOT NULL,
    route       TEXT NOT NULL,
    key         TEXT NOT NULL,
    state       TEXT NOT NULL,      -- 'p' in_progress, 'c' completed, 'u' outcome_unknown
    fingerprint TEXT NOT NULL,
    idempotent  INTEGER NOT NULL,
    owner       TEXT,               -- the lease holder (in_progress only)
    lease_until REAL NOT NULL,
    expires_at  REAL NOT NULL,
    gc_at       REAL NOT NULL,
    status      INTEGER,            -- the stored response (completed only)
    body        BLOB,
    dispatched  INTEGER NOT NULL DEFAULT 1, -- 0 until marked, just before the adapter call
    proposal_id TEXT,               -- the proposal that dispatched it (or settled it uncalled)
    charges     BLOB,               -- msgpack budget charges and windows (undispatched: refunded)
    decided     INTEGER NOT NULL DEFAULT 0 -- 1: the decision record of proposal_id is this row
);
CREATE INDEX idem_gc ON idem (gc_at) WHERE gc_at < 9e999; -- not claims kept until resolved
CREATE TABLE budget (
    name TEXT NOT NULL, scope TEXT NOT NULL, win INTEGER NOT NULL,
    used INTEGER NOT NULL,
    expires_at REAL NOT NULL,       -- the end of the window
    PRIMARY KEY (name, scope, win)
) WITHOUT ROWID;
CREATE INDEX budget_gc ON budget (expires_at);
CREATE TABLE rate_log (
    name TEXT NOT NULL, scope TEXT NOT NULL,
    stamps BLOB NOT NULL,           -- the sliding log: native doubles, oldest first
    gc_at REAL NOT NULL,            -- the newest stamp has left its window by then
    PRIMARY KEY (name, scope)
) WITHOUT ROWID;
CREATE INDEX rate_log_gc ON rate_log (gc_at);
CREATE TABLE decision (
    proposal_id TEXT PRIMARY KEY,
    record      BLOB NOT NULL,      -- msgpack DecisionRecord
    expires_at  REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX decision_gc ON decision (expires_at);
CREATE TABLE tool (
    name TEXT PRIMARY KEY,
    spec BLOB NOT NULL,
    secret TEXT NOT NULL,
    updated_at REAL NOT NULL,
    updated_by TEXT NOT NULL
);
CREATE TABLE catalog (one INTEGER PRIMARY KEY CHECK (one = 1), version INTEGER NOT NULL);
INSERT INTO catalog VALUES (1, 0);
"""


def _as_is(value: None) -> None:
    return value


# The sqlite3 module binds exact ints, floats, str and bytearray directly; any other value (None
# and bytes included, which SQLite takes as they are) is first looked up among the registered
# adapters, and when none is registered the module asks its protocol type for ``__adapt__``:
# an attribute miss that formats an AttributeError message and throws it away, for every such
# value of every row written. Registered, both are found at once and bound exactly as before
# (NULL, BLOB). Process-wide, like every sqlite3 adapter, and identity for whoever else binds.
sqlite3.register_adapter(type(None), _as_is)
# bytes.__bytes__(b) is b itself, without a Python call and without the argument parsing that
# bytes(b) goes through first (several times the cost, for each blob of each row).
sqlite3.register_adapter(bytes, bytes.__bytes__)


def _refuse(path: Path, why: str) -> ConfigError:
    return ConfigError([("service.store_path", f"{path}: {why}")])


def lock_exclusively(path: Path) -> int:
    """Take ``<path>.lock`` for this process, or raise ConfigError naming who holds it.

    The store keeps its state in memory and only writes it to the file, so a second process
    writing the same file would decide on stale state. The lock is ``flock``: the kernel drops
    it when the holder dies, however it dies, so a restart after a crash is never refused.
    """
    lock_path = Path(f"{path}.lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _refuse(path, f"cannot create {lock_path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise _refuse(
            path,
            f"in use by another broker process (pid {holder}); the embedded store serves one "
            "process: stop that one, give this one another data directory, or share state "
            "through Redis (redis_url)",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def open_database(path: Path, *, synchronous: Synchronous) -> sqlite3.Connection:
    """Open (creating if absent) the store's database, or raise ConfigError naming the file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Tool signing secrets live here: the file is private, and SQLite gives its log and
        # shared-memory files the database's own mode.
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    except OSError as exc:
        raise _refuse(path, f"cannot create: {exc.strerror}") from exc
    try:
        # Autocommit (isolation_level None): every write is an explicit BEGIN IMMEDIATE .. COMMIT.
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise _refuse(path, f"cannot open: {exc}") from exc
    try:
        _prepare(db, path, synchronous)
    except BaseException:
        db.close()
        raise
    return db


def _prepare(db: sqlite3.Connection, path: Path, synchronous: Synchronous) -> None:
    try:
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        db.execute(f"PRAGMA journal_size_limit = {_WAL_LIMIT_BYTES}")
        # Checkpoints (copying the log into the file, with an fsync of each even under NORMAL)
        # are the Checkpointer's, beside the writer. But a checkpoint beside a writer that never
        # pauses never catches up with it, and the log starts over only once it has: under
        # sustained load it grew with every commit. So the writer checkpoints too, once the log
        # holds _WAL_RESTART_FRAMES frames: only what the Checkpointer has not copied yet, with
        # no other writer to chase, and its next commit starts the log over. (This connection
        # is the writer thread's, so the event loop never waits for it.)
        db.execute(f"PRAGMA wal_autocheckpoint = {WAL_RESTART_FRAMES}")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise _refuse(
            path, f"not a readable SQLite database ({exc}); move it aside to start afresh"
        ) from exc
    if mode != "wal":
        raise _refuse(path, f"cannot use WAL mode (journal_mode is {mode}): is it on NFS?")
    if version == 0 and tables == 0:
        _create(db, path)
        return
    while version in _MIGRATIONS:
        version = _migrate(db, path, version)
    if version > SCHEMA_VERSION:
        raise _refuse(
            path,
            f"written by a newer broker (schema {version}, this one knows {SCHEMA_VERSION}); "
            "run that version, or move the file aside to start afresh",
        )
    if version != SCHEMA_VERSION:
        raise _refuse(
            path,
            f"not this broker's state (schema version {version}, {tables} objects); "
            "move it aside to start afresh",
        )
    try:
        problems = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        problems = [str(exc)]
    if problems != ["ok"]:
        raise _refuse(
            path,
            "damaged database (quick_check: "
            + "; ".join(problems)
            + "); keys and budgets in it cannot be trusted. Restore it, or move it aside",
        )


def _create(db: sqlite3.Connection, path: Path) -> None:
    try:
        db.execute("BEGIN IMMEDIATE")
        # Another process may have created it between our check and the lock.
        if db.execute("PRAGMA user_version").fetchone()[0] == 0:
            for statement in _statements(_SCHEMA):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise _refuse(path, f"cannot create the schema: {exc}") from exc


_MIGRATIONS: dict[int, tuple[str, tuple[str, ...]]] = {
    # Columns are appended, as the schema above lists them, so rows read back the same from
    # a migrated file as from a new one.
    2: (
        "claims gain a dispatch mark",
        (
            # Existing claims count as dispatched (the default): whether they were sent is
            # unknown.
            "ALTER TABLE idem ADD COLUMN dispatched INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE idem ADD COLUMN proposal_id TEXT",
            "ALTER TABLE idem ADD COLUMN charges BLOB",
        ),
    ),
    3: (
        "a settled claim's row can be its decision record",
        (
            # Every decision record of a version 3 file is in the decision table: none is a
            # claim's.
            "ALTER TABLE idem ADD COLUMN decided INTEGER NOT NULL DEFAULT 0",
            "DROP INDEX idem_gc",
            "CREATE INDEX idem_gc ON idem (gc_at) WHERE gc_at < 9e999",
        ),
    ),
}
"""Version to its next: what the step gives, and its statements."""


def _migrate(db: sqlite3.Connection, path: Path, version: int) -> int:
    """One step of :data:`_MIGRATIONS`, in one transaction; the version reached."""
    what, statements = _MIGRATIONS[version]
    try:
        db.execute("BEGIN IMMEDIATE")
        if db.execute("PRAGMA user_version").fetchone()[0] == version:
            for statement in statements:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version + 1}")
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise _refuse(path, f"cannot migrate schema {version} to {version + 1}: {exc}") from exc
    log.warning("migrated %s from schema %d to %d (%s)", path, version, version + 1, what)
    return version + 1


def _statements(script: str) -> list[str]:
    """``executescript`` commits first; the schema must go in the one transaction we hold."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


class Checkpointer:
    """Copies the write-ahead log into the database from a thread of its own, every
    ``interval_s``, on a connection of its own (WAL lets it run beside the writer; the sqlite3
    module releases the GIL while it works), so the event loop never waits for those fsyncs."""

    def __init__(self, path: Path, *, synchronous: Synchronous, interval_s: float = 0.5) -> None:
        self._path = path
        self._synchronous = synchronous
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            while not self._stop.wait(self._interval_s):
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    # The log keeps growing until a checkpoint succeeds; nothing is lost.
                    log.warning("checkpoint of %s failed: %s", self._path, exc)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            log.warning("checkpoint of %s failed: %s", self._path, exc)
        finally:
            db.close()

    def stop(self) -> None:
        """The last checkpoint (the log truncated), then the thread ends."""
        self._stop.set()
        self._thread.join(timeout=10)
