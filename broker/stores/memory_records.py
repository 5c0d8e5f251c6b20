"""The records the memory store keeps, which the SQLite store (a memory store made durable)
also writes and reads: one per idempotency key, budget window and rate limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import msgspec

from broker.stores.base import BudgetCharge, StoredResponse, StuckClaims

__all__ = ["NO_CLAIM", "BudgetCounter", "Completion", "IdemKey", "IdemRecord", "RateLog", "counted"]

IdemKey = tuple[str, str, str]
Completion = Literal["released", "unknown", "settled"]


class IdemRecord(msgspec.Struct):
    """One idempotency key's state (a struct: one is built per claimed key, and a struct's
    constructor costs a fraction of a dataclass's)."""

    state: Literal["in_progress", "completed", "outcome_unknown"]
    fingerprint: str
    idempotent: bool
    owner: str | None
    lease_until: float
    expires_at: float
    response: StoredResponse | None = None
    dispatched: bool = True
    """Marked before the adapter was called (``dispatch``); a new claim starts unmarked. A
    record read back without the mark (written before there was one) may have been sent."""
    proposal_id: str | None = None
    """The proposal that dispatched the claim (its ledger record says how the call ended), or
    that settled it without a call (a pending approval's 202, a read-cache hit)."""
    charges: tuple[tuple[BudgetCharge, int], ...] = ()
    """The claim's budget charges, each with its window: refunded if it was never dispatched."""


NO_CLAIM = IdemRecord("in_progress", "", False, None, 0.0, 0.0)
"""What ``_dispatch`` answers for a ticket without a claim: nothing to mark, and sent it may be."""


def counted(completed: list[tuple[IdemKey, Completion]]) -> StuckClaims:
    outcomes = [outcome for _, outcome in completed]
    return StuckClaims(
        released=outcomes.count("released"),
        unknown=outcomes.count("unknown"),
        settled=outcomes.count("settled"),
    )


@dataclass(slots=True)
class BudgetCounter:
    """Units of one budget used in one window."""

    used: int
    expires_at: float


@dataclass(slots=True)
class RateLog:
    """When each counted call of one rate limit happened, oldest first."""

    stamps: list[float] = field(default_factory=list)
