"""A budget kept per value of an argument (``per_arg``), on every store (memory, SQLite, Redis).

The charges come from :func:`broker.validators.limits.limits_for` on the demo's ``issue_credit``
(``credits_per_day``: 500 a day per tenant, ``per_arg = "currency"``), so what is checked is the
whole path from a proposal's arguments to the store's counters.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig
from broker.stores import Admission, Admitted, Limited, Store
from broker.tools.runtime import ToolRuntime, build_registry
from broker.validators.limits import limits_for

T0 = 1_700_006_400.0 + 43_200  # midday UTC, far from the daily window's edge


@pytest.fixture
def issue_credit(demo_config: BrokerConfig) -> ToolRuntime:
    registry = build_registry(demo_config, secrets={}, backends={"demo": DemoBackend()})
    return registry.tools["issue_credit"]


async def spend(store: Store, tool: ToolRuntime, amount: float, currency: str) -> Any:
    args = {"order_id": "O-55300", "amount": amount, "currency": currency}
    charges, _ = limits_for(tool, args, tenant="acme", route="billing_help")
    admission = Admission(tenant="acme", claim=None, charges=charges, hits=())
    return await store.admit(admission, now=T0, dry_run=False)


async def test_each_currency_has_its_own_counter(store: Store, issue_credit: ToolRuntime) -> None:
    assert isinstance(await spend(store, issue_credit, 500, "USD"), Admitted)
    assert isinstance(await spend(store, issue_credit, 500, "EUR"), Admitted)
    usd_over = await spend(store, issue_credit, 0.01, "USD")
    assert isinstance(usd_over, Limited) and usd_over.name == "credits_per_day"
    assert isinstance(await spend(store, issue_credit, 0.01, "EUR"), Limited)


async def test_values_cannot_pass_for_one_another(store: Store, issue_credit: ToolRuntime) -> None:
    """Values are encoded, so no value, however spelt, lands on another value's counter."""
    assert isinstance(await spend(store, issue_credit, 500, "USD"), Admitted)
    for lookalike in ('USD"', "USD|currency=USD", "USD\x1f", "usd"):
        assert isinstance(await spend(store, issue_credit, 500, lookalike), Admitted), lookalike
