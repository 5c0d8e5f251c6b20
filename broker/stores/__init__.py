"""State the broker keeps between requests: admission state and the tool catalog, behind two
protocols that every sibling implementation satisfies together (``Store``)."""

from __future__ import annotations

from broker.stores.base import (
    Admission,
    AdmissionStore,
    AdmitResult,
    Admitted,
    BudgetCharge,
    ClaimCompleter,
    ClaimRequest,
    Conflict,
    DecisionRecord,
    Limited,
    OutcomeSource,
    RateHit,
    RecordedOutcome,
    RegisteredTool,
    Replay,
    Resolution,
    Settlement,
    Store,
    StoredResponse,
    StuckClaims,
    Ticket,
    ToolCatalogStore,
    ToolSnapshot,
    ToolWrite,
)
from broker.stores.memory import MemoryStore
from broker.stores.sqlite import SqliteStore

__all__ = [
    "Admission",
    "AdmissionStore",
    "AdmitResult",
    "Admitted",
    "BudgetCharge",
    "ClaimCompleter",
    "ClaimRequest",
    "Conflict",
    "DecisionRecord",
    "Limited",
    "MemoryStore",
    "OutcomeSource",
    "RateHit",
    "RecordedOutcome",
    "RegisteredTool",
    "Replay",
    "Resolution",
    "Settlement",
    "SqliteStore",
    "Store",
    "StoredResponse",
    "StuckClaims",
    "Ticket",
    "ToolCatalogStore",
    "ToolSnapshot",
    "ToolWrite",
]
