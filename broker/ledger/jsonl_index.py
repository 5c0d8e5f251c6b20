"""The JSONL sink's lookups (by seq, trace, session, proposal), kept in an SQLite file beside it.

The index is a cache of the ledger, never a source of truth: every row is derived from a line of
the file, every record found through it is read back from the file, and a missing, stale or
damaged index is rebuilt from the file. Keeping it on disk is what bounds the broker's memory
(an index in memory grew by about 360 bytes per record, without end) and lets a restart index
only what was appended since, not the whole file again. Rows are added in steps as the file
grows: those of lines this process wrote as it wrote them, the rest (other processes' lines, or
everything after a restart) parsed from the file.

Tampering with the index can only hide records from a lookup: ``ledger verify`` reads the file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from broker.ledger.jsonl_file import iter_line_batches
from broker.ledger.model import AuditRef, LedgerEntry
from broker.ledger.sealing import decode_seq
from broker.sqlite_inserts import insert_rows

__all__ = ["STEP", "LookupIndex", "Span"]

_log = logging.getLogger("broker.ledger")

Span = tuple[int, int, int]
"""(seq, start, stop): a record's line is the file's bytes ``[start, stop)``."""

Row = tuple[int, int, int, str, str | None, str, str]
"""(seq, start, stop, trace_id, session_id, proposal_id, hash): what the index keeps of a line."""
STEP = 1 << 18
"""Bytes of lines indexed per transaction: about a millisecond of work."""
_WRITTEN_KEPT = 1 << 16
"""Rows of written lines kept for ``catch_up`` at most (it normally takes them every step)."""
_BUSY_WAIT_MS = 50
"""How long to wait for another process's write lock on the index: it is held for one step
(about a millisecond), and the waiting is done by an event loop, so a little and never long."""

_SCHEMA = """
create table if not exists ledger_file (
    id integer primary key check (id = 0),
    device integer not null,
    inode integer not null,
    indexed_end integer not null,
    last_start integer,
    last_stop integer,
    last_hash text
);
create table if not exists lines (
    seq integer primary key,
    start integer not null,
    stop integer not null,
    trace_id text not null,
    session_id text,
    proposal_id text not null
);
create index if not exists lines_by_trace on lines (trace_id);
create index if not exists lines_by_session on lines (session_id) where session_id is not null;
create index if not exists lines_by_proposal on lines (proposal_id);
"""
# ledger_file.indexed_end: every complete line before this byte offset has its row. The last
# indexed line (its span and hash) is checked against the file on open, so an index left
# behind by a different or rewritten file is never trusted.


class LookupIndex:
    """Seq, trace, session and proposal lookups over one ledger file.

    Args:
        path: the SQLite file; ``None`` keeps the index in memory (read-only sinks, which must
            not write beside the ledger).
        identity: the ledger file's ``(st_dev, st_ino)``; an index made for another file is
            discarded.
    """

    def __init__(self, path: Path | None, identity: tuple[int, int]) -> None:
        self._identity = identity
        try:
            self._db = _connect(path)
        except sqlite3.DatabaseError as exc:
            if path is None:
                raise
            # Without fsyncs (see _connect), a power loss can leave the file damaged.
            _log.warning("the ledger index %s is unreadable (%s); rebuilding it", path, exc)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self._db = _connect(path)
        self._checked = False
        self._written: list[Row] = []
        self.indexed_end = 0
        """Byte offset just past the last line with a row, as of this process's last look."""

    def note_written(
        self, start: int, lines: list[bytes], sealed: list[tuple[LedgerEntry, AuditRef]]
    ) -> None:
        """Remember the rows of lines this process just wrote from ``start`` on, for the next
        ``catch_up`` to take as they are instead of reading and parsing the lines again (half
        its cost). Only a shortcut: if rows pile up (indexing fails), the file has them all."""
        if len(self._written) > _WRITTEN_KEPT:
            self._written.clear()
        for line, (entry, ref) in zip(lines, sealed, strict=True):
            stop = start + len(line) - 1
            self._written.append(
                (
                    ref.seq,
                    start,
                    stop,
                    entry.trace_id,
                    entry.session_id,
                    entry.proposal_id,
                    ref.hash,
                )
            )
            start = stop + 1

    def catch_up(self, fd: int, end: int, *, steps: int | None = None, wait: bool = True) -> None:
        """Add rows for the complete lines before ``end``, ``STEP`` bytes of them per
        transaction, in at most ``steps`` transactions (``None``: until caught up).

        Lines before ``end`` are complete and never change (the sink's tail says so), so no file
        lock is needed; the SQLite write lock keeps processes from indexing a line twice, and is
        held for one step at a time, so a process rebuilding a large index never keeps another
        waiting long: each waits at most ``_BUSY_WAIT_MS`` for it (not at all without ``wait``),
        then this raises ``sqlite3.OperationalError``.
        """
        if not wait:
            self._db.execute("pragma busy_timeout = 0")
        try:
            taken = 0
            while (self.indexed_end < end or not self._checked) and (
                steps is None or taken < steps
            ):
                self._step(fd, end)
                taken += 1
        finally:
            if not wait:
                self._db.execute(f"pragma busy_timeout = {_BUSY_WAIT_MS}")

    def _step(self, fd: int, end: int) -> None:
        db = self._db
        db.execute("begin immediate")
        try:
            begin = self._indexed_end_checked(fd, end)
            stop = min(end, begin + STEP)
            rows, indexed_end = _rows(fd, begin, stop, self._written)
            if indexed_end == begin < stop < end:  # one line longer than the step: take it whole
                rows, indexed_end = _rows(fd, begin, end, self._written)
            _insert(db, rows)
            db.execute("update ledger_file set indexed_end = ?", (indexed_end,))
            if rows:
                _, start, stop, *_, hash_ = rows[-1]
                db.execute(
                    "update ledger_file set last_start = ?, last_stop = ?, last_hash = ?",
                    (start, stop, hash_),
                )
            db.execute("commit")
        except BaseException:
            db.execute("rollback")
            raise
        self.indexed_end = indexed_end
        written, taken = self._written, 0
        while taken < len(written) and written[taken][1] < indexed_end:
            taken += 1
        del written[:taken]

    def _indexed_end_checked(self, fd: int, end: int) -> int:
        """Where indexing resumes: the stored end, once the index is known to be this file's."""
        state = self._db.execute(
            "select device, inode, indexed_end, last_start, last_stop, last_hash from ledger_file"
        ).fetchone()
        if state is not None and not self._fits(fd, state):
            _log.warning("the ledger index does not match the ledger file; rebuilding it")
            self._db.execute("delete from lines")
            self._db.execute("delete from ledger_file")
            state = None
        if state is None:
            self._db.execute(
                "insert into ledger_file (id, device, inode, indexed_end) values (0, ?, ?, 0)",
                self._identity,
            )
            indexed_end = 0
        else:
            indexed_end = int(state[2])
        self._checked = True
        return indexed_end

    def _fits(self, fd: int, state: tuple[Any, ...]) -> bool:
        device, inode, indexed_end, last_start, last_stop, last_hash = state
        # Another process may have indexed past what we have seen of the file, never past its
        # end: the file only grows (a torn tail is cut, but was never indexed).
        if (device, inode) != self._identity or indexed_end > os.fstat(fd).st_size:
            return False
        if self._checked or last_start is None:
            return True
        # First look in this process: the last indexed line must still be what it was.
        return bool(_hash_of(fd, last_start, last_stop) == last_hash)

    def span_of_seq(self, seq: int) -> tuple[int, int] | None:
        row = self._db.execute("select start, stop from lines where seq = ?", (seq,)).fetchone()
        return None if row is None else (row[0], row[1])

    def spans_of_trace(self, trace_id: str) -> list[Span]:
        return self._spans(
            "select seq, start, stop from lines where trace_id = ? order by seq", trace_id
        )

    def spans_of_session(self, session_id: str) -> list[Span]:
        return self._spans(
            "select seq, start, stop from lines where session_id = ? order by seq", session_id
        )

    def span_of_proposal(self, proposal_id: str) -> Span | None:
        latest = self._spans(
            "select seq, start, stop from lines where proposal_id = ? order by seq desc limit 1",
            proposal_id,
        )
        return latest[0] if latest else None

    def _spans(self, query: str, key: str) -> list[Span]:
        spans: list[Span] = self._db.execute(query, (key,)).fetchall()
        return spans

    def close(self) -> None:
        self._db.close()


def _connect(path: Path | None) -> sqlite3.Connection:
    if path is not None:
        # Readable as the ledger is (0640), not as the umask would have it: SQLite creates its
        # -wal and -shm files with the same permissions as this one.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640))
    # One connection, used from the event loop's thread only (it may be opened elsewhere).
    db = sqlite3.connect(
        ":memory:" if path is None else path, isolation_level=None, check_same_thread=False
    )
    try:
        # A cache of the file, so no fsyncs: what a crash loses is indexed again, and a file
        # a power loss damaged is rebuilt.
        db.execute("pragma synchronous = off")
        if path is not None:
            db.execute("pragma journal_mode = wal")  # readers in other processes don't wait
        db.execute(f"pragma busy_timeout = {_BUSY_WAIT_MS}")
        db.executescript(_SCHEMA)
    except BaseException:
        db.close()
        raise
    return db


_PLAIN = "insert into lines values "
_NO_SESSION = "insert into lines (seq, start, stop, trace_id, proposal_id) values "


def _insert(db: sqlite3.Connection, rows: Sequence[Row]) -> None:
    """Add the rows of new lines, a later line's row replacing an earlier one's of the same seq.

    Plain inserts first, many to a statement (:mod:`broker.sqlite_inserts`): each costs SQLite
    markedly less than ``insert or replace``, and a seq already has a row only where the file
    repeats it (damaged or edited by hand). There, the rows inserted before the conflict stay in
    the transaction and are replaced, in file order, by the second pass. Rows without a session
    are inserted without that column: a ``None`` parameter costs the sqlite3 module two failed
    attribute lookups (adapting it), more than SQLite's own work on the row.
    """
    plain: list[tuple[object, ...]] = []
    no_session: list[tuple[object, ...]] = []
    for seq, start, stop, trace_id, session_id, proposal_id, _ in rows:
        if session_id is None:
            no_session.append((seq, start, stop, trace_id, proposal_id))
        else:
            plain.append((seq, start, stop, trace_id, session_id, proposal_id))
    try:
        insert_rows(db, _PLAIN, plain)
        insert_rows(db, _NO_SESSION, no_session)
    except sqlite3.IntegrityError:
        db.executemany(
            "insert or replace into lines values (?, ?, ?, ?, ?, ?)", [r[:6] for r in rows]
        )


def _rows(fd: int, begin: int, stop: int, known: Sequence[Row]) -> tuple[list[Row], int]:
    """Rows for the complete lines in ``[begin, stop)``, and the offset just past the last of
    them: ``known`` rows (in file order) as they are, the lines between them (which other
    processes wrote) read from the file."""
    rows: list[Row] = []
    offset = begin
    for row in known:
        start = row[1]
        if start < offset:
            continue  # indexed already
        if start >= stop:
            break
        if start > offset:  # lines other processes wrote between ours
            offset = _read_rows(fd, offset, start, rows)
            if offset != start:  # pragma: no cover - ours start where a line ends, or the
                break  # file is damaged: read the rest rather than trust our rows
        rows.append(row)
        offset = row[2] + 1
    if offset < stop:
        offset = _read_rows(fd, offset, stop, rows)
    return rows, offset


def _read_rows(fd: int, begin: int, stop: int, rows: list[Row]) -> int:
    """Add rows for the complete lines in ``[begin, stop)`` read from the file; the offset just
    past the last of them. A line that does not parse gets no row (``ledger verify`` reports
    it)."""
    offset = begin
    for lines in iter_line_batches(fd, begin, stop):
        for line in lines:
            start, offset = offset, offset + len(line) + 1
            try:
                view = decode_seq(line)
            except msgspec.DecodeError:
                _log.warning("ledger line at byte %d is malformed; run `ledger verify`", start)
                continue
            rows.append(
                (
                    view.seq,
                    start,
                    offset - 1,
                    view.trace_id,
                    view.session_id,
                    view.proposal_id,
                    view.hash,
                )
            )
    return offset


def _hash_of(fd: int, start: int, stop: int) -> str | None:
    """The hash of the record in the file's bytes ``[start, stop)``; ``None`` if none parses."""
    try:
        return decode_seq(os.pread(fd, stop - start, start)).hash
    except msgspec.DecodeError:
        return None
