"""Many rows to one ``INSERT`` statement, for the SQLite files the broker writes in batches.

Every statement SQLite runs costs its own start, reset and end, and the ``sqlite3`` module a
release and retaking of the GIL, whatever the statement writes; ``executemany`` pays that once per
row. A batch's rows therefore go in as ``INSERT ... VALUES (...), (...), ...``. The row counts are
cut into powers of two (at most :data:`MOST_ROWS`), so that a handful of statement texts serve
every batch from the connection's statement cache.

Used by the SQLite store's writer (:mod:`broker.stores.sqlite_writer`) and the ledger's lookup
index (:mod:`broker.ledger.jsonl_index`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from itertools import chain

__all__ = ["MOST_ROWS", "insert_rows"]

MOST_ROWS = 32
"""Rows one statement writes at most: past it the gain is gone, and 32 rows of the widest table
here stay far below SQLite's limit on a statement's parameters."""

_statements: dict[tuple[str, int, int], str] = {}


def insert_rows(db: sqlite3.Connection, head: str, rows: Sequence[Sequence[object]]) -> None:
    """Run ``head`` (``"INSERT [OR REPLACE] INTO t [(columns)] VALUES "``) for ``rows``, which
    all have the same width, many rows to a statement, in order."""
    if not rows:
        return
    width, start, left = len(rows[0]), 0, len(rows)
    while left:
        size = min(MOST_ROWS, 1 << (left.bit_length() - 1))
        sql = _statements.get((head, width, size))
        if sql is None:
            sql = head + ", ".join(["(" + ", ".join("?" * width) + ")"] * size)
            _statements[head, width, size] = sql
        db.execute(sql, list(chain.from_iterable(rows[start : start + size])))
        start, left = start + size, left - size
