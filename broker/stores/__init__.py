"""State the broker keeps between requests, behind one protocol with sibling implementations."""

from __future__ import annotations

from broker.stores.base import (
    Admission,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    RateHit,
    Replay,
    Settlement,
    Store,
    StoredResponse,
    Ticket,
)
from broker.stores.memory import MemoryStore

__all__ = [
    "Admission",
    "AdmitResult",
    "Admitted",
    "BudgetCharge",
    "ClaimRequest",
    "Conflict",
    "DecisionRecord",
    "Limited",
    "MemoryStore",
    "RateHit",
    "Replay",
    "Settlement",
    "Store",
    "StoredResponse",
    "Ticket",
]
