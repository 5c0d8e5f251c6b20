"""Approval state: rows the approval service writes, and the one atomic step it needs.

The store does not interpret a row's ``body`` (the service's record, JSON); it keeps the
``status`` beside it so that :meth:`ApprovalStore.swap_approval` can be a compare-and-set: every
transition (pending → approved, approved → executing, pending → expired, ...) is taken by exactly
one caller, however many processes race for it. That is what makes an approved action execute
once, and held budgets come back once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import msgspec

if TYPE_CHECKING:
    from broker.stores.base import DecisionRecord, StoredResponse, Ticket

__all__ = ["ApprovalRow", "ApprovalStore", "MemoryApprovals"]


class ApprovalRow(msgspec.Struct, frozen=True, kw_only=True):
    """One approval as the store keeps it."""

    id: str
    status: str
    tenant: str
    created_at: float
    body: bytes
    """The approval service's record (``broker.approvals.model.ApprovalRecord``, JSON)."""


class ApprovalStore(Protocol):
    """What ``broker.approvals`` needs from the store; each call atomic."""

    async def put_approval(self, row: ApprovalRow) -> None:
        """Create a new approval (ids are fresh ULIDs: never an existing one)."""
        ...

    async def get_approval(self, approval_id: str) -> ApprovalRow | None: ...

    async def list_approvals(self, status: str | None) -> list[ApprovalRow]:
        """Every approval (with that status), oldest first."""
        ...

    async def swap_approval(self, approval_id: str, expected: str, row: ApprovalRow) -> bool:
        """Replace the approval with ``row`` only if its status is still ``expected``."""
        ...

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
        """Create the approval and settle its proposal's admission as succeeded (the key keeps
        the ``202``, the charges stay taken), the approval first: a store that cannot do both
        in one step never completes a key whose approval it failed to write. What ``settle``
        answers."""
        ...


class MemoryApprovals:
    """Approvals in process memory: atomic because no method awaits mid-step."""

    def __init__(self) -> None:
        super().__init__()  # the stores combine it with other sides (the read cache)
        self._approvals: dict[str, ApprovalRow] = {}

    async def put_approval(self, row: ApprovalRow) -> None:
        self._approvals[row.id] = row

    async def get_approval(self, approval_id: str) -> ApprovalRow | None:
        return self._approvals.get(approval_id)

    async def list_approvals(self, status: str | None) -> list[ApprovalRow]:
        rows = [r for r in self._approvals.values() if status is None or r.status == status]
        return sorted(rows, key=lambda r: (r.created_at, r.id))

    async def swap_approval(self, approval_id: str, expected: str, row: ApprovalRow) -> bool:
        current = self._approvals.get(approval_id)
        if current is None or current.status != expected:
            return False
        self._approvals[approval_id] = row
        return True
