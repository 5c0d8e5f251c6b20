"""The request bodies every benchmark sends, built once from the demo's tools.

``TICKET`` is the approval path (create_support_ticket, both preconditions), formatted with two
integers into its idempotency key (``TICKET % (round, n)``) because the load generator builds
one per request and ``bytes %`` is the cheapest way to do that.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "HEADERS",
    "LOOKUP",
    "TICKET",
    "TICKET_TOOL_CALL",
    "credit",
    "post_scope",
    "ticket",
    "ticket_bytes",
]

HEADERS = {"Authorization": "Bearer demo-billing-token"}
"""The demo's billing_help token (acme): every tool below is allowed to it."""


def ticket(key: str, *, priority: str = "high") -> dict[str, Any]:
    """create_support_ticket for a verified customer with an open invoice (approved); a
    ``priority`` outside the schema's enum is a schema rejection."""
    return {
        "tool": "create_support_ticket",
        "args": {"customer_id": "C-10429", "subject": "Billing discrepancy", "priority": priority},
        "preconditions": ["customer_verified", "open_invoice_present"],
        "idempotency_key": key,
    }


def credit(key: str, amount: float) -> dict[str, Any]:
    """issue_credit on a paid order within its return window (charged to the daily budget); the
    order (900 USD) is larger than the budget (500 USD a day), so the budget is what runs out."""
    return {
        "tool": "issue_credit",
        "args": {"order_id": "O-55300", "amount": amount, "currency": "USD"},
        "preconditions": ["order_paid", "within_return_window"],
        "idempotency_key": key,
    }


def _compact(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def ticket_bytes(key: str) -> bytes:
    """:func:`ticket` as a compact JSON body."""
    return _compact(ticket(key))


TICKET = _compact(ticket("bench-%d-%d"))

LOOKUP = _compact({"tool": "lookup_order", "args": {"order_id": "O-55291"}})
"""A read-only tool without a key: the broker's path with no admission to make."""


def _openai_call(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    """``body``'s tool call as an OpenAI Chat Completions turn for ``POST /v1/tool-calls``."""
    arguments = json.dumps(body["args"], separators=(",", ":"))
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": body["tool"], "arguments": arguments},
    }
    return {"format": "openai", "calls": [call]}


TICKET_TOOL_CALL = _compact(_openai_call(ticket(""), "bench-%d-%d"))
""":data:`TICKET` as one OpenAI tool call (its call id, hence its key, formatted the same way)."""


def post_scope(
    path: str, body: bytes, extra: tuple[tuple[bytes, bytes], ...] = ()
) -> dict[str, Any]:
    """The ASGI scope of a POST of ``body`` to ``path`` with the demo's billing token, for the
    benches that drive an app in process (``extra``: more headers)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", HEADERS["Authorization"].encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *extra,
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
