"""The demo's seed data, per tenant; a tenant never sees another tenant's records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Customer", "Order", "TenantData", "seed"]


@dataclass(slots=True)
class Customer:
    customer_id: str
    verified: bool
    open_invoice: str | None


@dataclass(slots=True)
class Order:
    order_id: str
    customer_id: str
    paid: bool
    purchased_at: datetime
    total: float
    currency: str


@dataclass(slots=True)
class TenantData:
    customers: dict[str, Customer] = field(default_factory=dict)
    orders: dict[str, Order] = field(default_factory=dict)


def seed(now: datetime) -> dict[str, TenantData]:
    """The demo data of docs/api.md, with purchase dates relative to ``now``."""
    acme = TenantData(
        customers={
            "C-10429": Customer("C-10429", verified=True, open_invoice="INV-2001"),
            "C-20001": Customer("C-20001", verified=False, open_invoice=None),
        },
        orders={
            "O-55291": Order("O-55291", "C-10429", True, now - timedelta(days=5), 120.00, "USD"),
            "O-60000": Order("O-60000", "C-10429", False, now - timedelta(days=3), 80.00, "USD"),
            "O-70000": Order("O-70000", "C-20001", True, now - timedelta(days=90), 45.00, "USD"),
            # Large enough orders that the daily budget, not the order, is what runs out.
            "O-55300": Order("O-55300", "C-10429", True, now - timedelta(days=3), 900.00, "USD"),
            "O-55400": Order("O-55400", "C-10429", True, now - timedelta(days=4), 900.00, "EUR"),
        },
    )
    globex = TenantData(
        customers={"C-30001": Customer("C-30001", verified=True, open_invoice="INV-9001")},
        orders={
            "O-80001": Order("O-80001", "C-30001", True, now - timedelta(days=2), 300.00, "EUR"),
            "O-80002": Order("O-80002", "C-30001", True, now - timedelta(days=1), 900.00, "EUR"),
        },
    )
    return {"acme": acme, "globex": globex}
