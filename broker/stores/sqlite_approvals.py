"""Approvals made durable in the SQLite store's file: the memory store decides, a table keeps.

A new approval is written by the store's batching writer, in the commit that settles its
proposal's key (:meth:`SqliteApprovals.open_approval`): one commit on the pending path, and the
key never completes without its approval. Decisions are few (people take them): they are
written through a connection of their own, on a worker thread, outside the writer. The table
is created beside the store's schema when missing, and read back whole at startup.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import msgspec

from broker.stores.approvals import ApprovalRow, MemoryApprovals
from broker.stores.base import Settlement
from broker.taxonomy import StoreUnavailableError

if TYPE_CHECKING:
    from broker.stores.base import DecisionRecord, StoredResponse, Ticket
    from broker.stores.sqlite_writer import Batch

__all__ = ["SqliteApprovals"]

# The columns are ApprovalRow's fields in their order: a row is written as its astuple.
_TABLE = """
CREATE TABLE IF NOT EXISTS approval (
    id         TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    created_at REAL NOT NULL,
    body       BLOB NOT NULL
)
"""
_TIMEOUT_S = 5.0


class _Settling(Protocol):
    """What :meth:`SqliteApprovals.open_approval` uses of the store it is part of."""

    def _batch(self) -> Batch: ...

    async def settle(
        self,
        ticket: Ticket,
        settlement: Settlement,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool: ...


class SqliteApprovals(MemoryApprovals):
    """The approvals' side of :class:`~broker.stores.sqlite.SqliteStore`."""

    _approvals_db: sqlite3.Connection | None = None
    _approvals_path: Path

    def _open_approvals(self, path: Path) -> None:
        """Open the table (creating it) and load every approval into memory."""
        db = sqlite3.connect(
            path, timeout=_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            db.execute(_TABLE)
            for approval_id, status, tenant, created_at, body in db.execute(
                "SELECT id, status, tenant, created_at, body FROM approval"
            ):
                self._approvals[approval_id] = ApprovalRow(
                    id=approval_id, status=status, tenant=tenant, created_at=created_at, body=body
                )
        except BaseException:
            db.close()
            raise
        self._approvals_db, self._approvals_path = db, path

    def _close_approvals(self) -> None:
        db, self._approvals_db = self._approvals_db, None
        if db is not None:
            db.close()

    async def put_approval(self, row: ApprovalRow) -> None:
        await super().put_approval(row)
        await self._keep(row, previous=None)

    async def open_approval(
        self,
        row: ApprovalRow,
        ticket: Ticket,
        *,
        response: StoredResponse,
        record: DecisionRecord,
        ttl_s: int,
        now: float,
    ) -> bool:
        """The approval queued in the writer's batch, then the settlement, which queues its
        rows in the same batch (nothing awaits in between): one transaction writes both."""
        store: _Settling = self  # type: ignore[assignment]  # (typing.cast is a call)
        batch = store._batch()  # StoreUnavailableError once the store is closed
        self._approvals[row.id] = row  # as put_approval, without a coroutine of its own
        batch.approval[row.id] = msgspec.structs.astuple(row)  # its fields are the columns
        try:
            return await store.settle(
                ticket, Settlement.SUCCEEDED, response=response, record=record, ttl_s=ttl_s, now=now
            )
        except StoreUnavailableError:
            # Memory decided first; undo it so that memory never says more than the file.
            self._approvals.pop(row.id, None)
            raise

    async def swap_approval(self, approval_id: str, expected: str, row: ApprovalRow) -> bool:
        previous = self._approvals.get(approval_id)
        if not await super().swap_approval(approval_id, expected, row):
            return False
        await self._keep(row, previous=previous)
        return True

    async def _keep(self, row: ApprovalRow, *, previous: ApprovalRow | None) -> None:
        db = self._approvals_db
        if db is None:
            raise StoreUnavailableError(f"the store at {self._approvals_path} is closed")
        values = msgspec.structs.astuple(row)
        try:
            await asyncio.to_thread(
                db.execute, "INSERT OR REPLACE INTO approval VALUES (?, ?, ?, ?, ?)", values
            )
        except sqlite3.Error as exc:
            # Memory decided first; undo it so that memory never says more than the file.
            if previous is None:
                self._approvals.pop(row.id, None)
            else:
                self._approvals[row.id] = previous
            raise StoreUnavailableError(f"sqlite {self._approvals_path}: {exc}") from exc
