"""A claim as the SQLite store's ``idem`` table holds it: its record (``memory_records``) to a row
and back, so that what the store writes and what it reads at start are one mapping; and the
decision record a settled claim's row stands for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.stores.base import BudgetCharge, DecisionRecord, StoredResponse
from broker.stores.memory_records import IdemKey, IdemRecord
from broker.stores.sqlite_writer import GC_MARGIN_S, Row

__all__ = ["Charges", "claim_row", "decision_of", "holds_decision", "read_claim"]

Charges = tuple[tuple[BudgetCharge, int], ...]

_STATES = {"in_progress": "p", "completed": "c", "outcome_unknown": "u"}
_NAMES = {v: k for k, v in _STATES.items()}

_NEVER = float("inf")
"""The ``gc_at`` of a row the sweep must never delete (SQLite stores IEEE infinity as REAL)."""


def claim_row(
    number: int, key: IdemKey, record: IdemRecord, *, charges: bytes | None, decided: bool
) -> Row:
    """The row of ``record``, numbered ``number``, in the table's column order."""
    if record.state == "outcome_unknown" or (
        record.state == "in_progress" and not record.idempotent
    ):
        # Kept until resolved: an abandoned claim of a non-idempotent tool must still say
        # outcome_unknown whenever it is next asked, and an unknown outcome never expires.
        gc_at = _NEVER
    elif record.state == "in_progress":
        gc_at = record.lease_until + GC_MARGIN_S
    else:
        gc_at = record.expires_at
    response = record.response
    # Flags as ints, not bools: the sqlite3 module binds exact ints directly but sends any
    # other type (bool included) through its adapter lookup, which fails expensively (a
    # formatted AttributeError per value) before binding it as the int it is anyway.
    return (
        number,
        *key,
        _STATES[record.state],
        record.fingerprint,
        1 if record.idempotent else 0,
        record.owner,
        record.lease_until,
        record.expires_at,
        gc_at,
        None if response is None else response.status,
        None if response is None else response.body,
        1 if record.dispatched else 0,
        record.proposal_id,
        charges,
        1 if decided else 0,
    )


def read_claim(
    row: tuple[Any, ...], charges: Callable[[bytes], Charges]
) -> tuple[int, IdemKey, IdemRecord, bool]:
    """A row of ``idem`` as ``SELECT *`` reads it (the table's own column order): its number,
    key, record, and whether its proposal's decision record is this row."""
    number, tenant, route, key, state, fp, idempotent, owner, lease, expires = row[:10]
    status, body, dispatched, proposal_id, packed, decided = row[11:]
    record = IdemRecord(
        state=_NAMES[state],  # type: ignore[arg-type]
        fingerprint=fp,
        idempotent=bool(idempotent),
        owner=owner,
        lease_until=lease,
        expires_at=expires,
        response=None if status is None else StoredResponse(status, body),
        dispatched=bool(dispatched),
        proposal_id=proposal_id,
        charges=() if packed is None else charges(packed),
    )
    return number, (tenant, route, key), record, bool(decided)


def holds_decision(key: IdemKey, settled: IdemRecord | None, record: DecisionRecord) -> bool:
    """Whether the claim's row, as just settled, says all ``record`` says: the claim was
    dispatched by this proposal, or settled by it without a call (a pending approval's 202),
    and completed with its response (a release deletes the row, an unknown outcome stores no
    response)."""
    return (
        settled is not None
        and settled.state == "completed"
        and settled.proposal_id == record.proposal_id
        and settled.response == record.response
        and key[0] == record.tenant
        and key[1] == record.route
    )


def decision_of(
    proposal_id: str, key: IdemKey, settled: IdemRecord | None, now: float
) -> DecisionRecord | None:
    """The decision record the claim's row holds for ``proposal_id``; ``None`` once the claim
    expired (the record would have expired with it) or was taken by another proposal."""
    if (
        settled is None
        or settled.proposal_id != proposal_id
        or settled.state != "completed"
        or settled.response is None
        or settled.expires_at <= now
    ):
        return None
    tenant, route, _ = key
    return DecisionRecord(
        proposal_id=proposal_id, tenant=tenant, route=route, response=settled.response
    )
