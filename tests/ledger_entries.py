"""One ledger entry factory for the ledger's unit tests."""

from __future__ import annotations

from typing import Any

from broker.ledger import LedgerEntry


def make_entry(n: int, **overrides: Any) -> LedgerEntry:
    """Entry ``n`` of a small, valid history; ``overrides`` replace any field."""
    fields: dict[str, Any] = {
        "time": "2026-11-22T10:00:00.000Z",
        "trace_id": f"trace-{n % 2}",
        "proposal_id": f"prp_{n}",
        "route": "billing_help",
        "tenant": "acme",
        "service_account": "sa",
        "tool": "lookup_order",
        "config_hash": "sha256:" + "c" * 64,
        "args": {"order_id": f"O-{n}"},
        "decision": "approved",
        "decision_us": 10,
    }
    fields.update(overrides)
    return LedgerEntry(**fields)
