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
    RegisteredTool,
    Replay,
    Settlement,
    Store,
    StoredResponse,
    Ticket,
    ToolSnapshot,
    ToolWrite,
)
from broker.stores.memory import MemoryStore
from broker.stores.sqlite import SqliteStore

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
    "RegisteredTool",
    "Replay",
    "Settlement",
    "SqliteStore",
    "Store",
    "StoredResponse",
    "Ticket",
    "ToolSnapshot",
    "ToolWrite",
]
