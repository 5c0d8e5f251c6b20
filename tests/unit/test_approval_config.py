"""The approval condition language (one comparison, nothing else) and the config's approval parts:
every problem reported with its key path, at load."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import rfc8785

from broker.approvals.condition import ConditionError, parse_condition
from broker.approvals.model import action_digest
from broker.auth import hash_token
from broker.config import parse_config
from tests.fakes import demo_raw
from tests.unit.test_config import problems_of


@pytest.mark.parametrize(
    ("source", "args", "holds"),
    [
        ("amount > 100", {"amount": 150}, True),
        ("amount > 100", {"amount": 100}, False),
        ("amount >= 100", {"amount": 100}, True),
        ("amount < 0.5", {"amount": 0.25}, True),
        ('currency == "EUR"', {"currency": "USD"}, False),
        ('currency != "EUR"', {"currency": "USD"}, True),
        ("express == true", {"express": True}, True),
        ("note == null", {"note": None}, True),
        ("amount > 100", {}, True),  # missing: a person decides
        ("amount > 100", {"amount": "150"}, True),  # incomparable: a person decides
        ("amount > 100", {"amount": True}, True),  # a bool is not a number here
    ],
)
def test_a_condition_compares_one_argument_and_fails_closed(
    source: str, args: dict[str, Any], holds: bool
) -> None:
    assert parse_condition(source).holds(args) is holds


@pytest.mark.parametrize(
    "source",
    [
        "amount > 100 and amount < 200",
        "__import__('os').system('x') > 1",
        "amount.__class__ > 1",
        "amount > [1]",
        "amount > {}",
        "amount > true",
        "amount ~ 1",
        "> 100",
        "amount > 'single quotes'",
        "",
    ],
)
def test_anything_but_one_comparison_with_a_literal_is_refused(source: str) -> None:
    with pytest.raises(ConditionError):
        parse_condition(source)


def test_approval_problems_are_located() -> None:
    raw = demo_raw()
    credit = raw["tools"]["issue_credit"]
    credit["approval"] = {"when": "amount >> 100", "routes": ["nowhere"]}
    raw["tools"]["create_support_ticket"]["approval"] = {}
    raw["tools"]["lookup_order"]["approval"] = {"required": True, "when": "x > 1"}
    raw["tokens"].append(
        {
            "name": "bad-approver",
            "sha256": hash_token("bad-approver"),
            "approver_tenants": ["acme", "initech"],
            "service_account": "route-billing-help@bots",
        }
    )
    raw["tokens"].append(
        {
            "name": "admin-approver",
            "sha256": hash_token("admin-approver"),
            "admin": True,
            "approver_tenants": ["acme"],
        }
    )
    problems = problems_of(raw)
    bad, admin = len(raw["tokens"]) - 2, len(raw["tokens"]) - 1
    assert "not a literal" in problems["tools.issue_credit.approval.when"]
    assert "unknown route" in problems["tools.issue_credit.approval.routes[0]"]
    assert "required" in problems["tools.create_support_ticket.approval"]
    assert "not both" in problems["tools.lookup_order.approval"]
    assert "never approves" in problems[f"tokens[{bad}].approver_tenants"]
    assert "initech" in problems[f"tokens[{bad}].approver_tenants[1]"]
    assert "every tenant" in problems[f"tokens[{admin}].approver_tenants"]


def test_the_demo_approver_and_guarded_route_load() -> None:
    config = parse_config(demo_raw())
    (approver,) = [t for t in config.tokens if t.approver_tenants]
    assert approver.approver_tenants == ["acme"]
    approval = config.tools["issue_credit"].approval
    assert approval is not None
    assert approval.routes == ["guarded_billing"]


@pytest.mark.parametrize(
    "args",
    [
        {"order_id": "O-1", "amount": 150, "currency": "USD"},
        {"amount": 100.5, "note": "café ☕", "nested": {"b": [1, 2.0, None], "a": True}},
        {"big": 1e21, "tiny": 5e-324, "neg": -0.0},
    ],
)
def test_the_digest_is_sha256_of_the_rfc8785_form_of_the_action(args: dict[str, Any]) -> None:
    action = {
        "tenant": "acme",
        "route": "guarded_billing",
        "tool": "issue_credit",
        "args": args,
        "idempotency_key": "k-1",
    }
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(action)).hexdigest()
    assert action_digest(**action) == expected  # type: ignore[arg-type]
