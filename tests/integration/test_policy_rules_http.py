"""Each rule kind and action of ``[[policy.rules]]`` over real HTTP: argument predicates, globs,
risks, tenants, who wins on conflict, ``hide`` in the catalog, shadow and canary."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.policy.rules import in_canary
from tests.conftest import BILLING, GLOBEX
from tests.fakes import demo_raw
from tests.front_doors.test_mcp_server import mcp_session
from tests.integration.policy_helpers import (
    PROPOSALS,
    Started,
    credit,
    ledger_records,
    lookup,
    policy_brokers,
    refused_by,
)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Started]]:
    yield from policy_brokers(tmp_path)


def with_rules(*rules: dict[str, Any]) -> dict[str, Any]:
    raw = demo_raw()
    raw["policy"] = {"rules": list(rules)}
    return raw


def ticket(session: str | None = None, key: str = "t1") -> dict[str, Any]:
    body: dict[str, Any] = {
        "tool": "create_support_ticket",
        "args": {"customer_id": "C-10429", "subject": "Billing", "priority": "high"},
        "preconditions": ["customer_verified", "open_invoice_present"],
        "idempotency_key": key,
    }
    if session:
        body["session_id"] = session
    return body


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


BIG_CREDITS = {
    "id": "ops.big_credits",
    "action": "block",
    "tools": ["issue_credit"],
    "routes": ["billing_help"],
    "args": [{"arg": "amount", "op": "gt", "value": 100}],
    "remediation": "ESCALATE: credits above 100 need a human",
}


async def test_an_argument_comparison_blocks_only_what_it_matches(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    url, demo, _ = start(with_rules(BIG_CREDITS))
    big = await http.post(url + PROPOSALS, json=credit(None, "k1", amount=150), headers=BILLING)
    body = refused_by(big, "ops.big_credits")
    assert body["remediation"] == "ESCALATE: credits above 100 need a human"
    small = await http.post(url + PROPOSALS, json=credit(None, "k2", amount=100), headers=BILLING)
    assert small.status_code == 200, small.text
    assert [c["amount"] for c in demo.credits] == [100]


async def test_membership_and_regex_predicates_and_json_pointers(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    rules = (
        {
            "id": "ops.no_old_orders",
            "action": "block",
            "tools": ["lookup_order"],
            "args": [{"arg": "/order_id", "op": "matches", "value": "^O-7"}],
        },
        {
            "id": "ops.no_eur",
            "action": "block",
            "tools": ["issue_credit"],
            "args": [{"arg": "currency", "op": "in", "value": ["EUR"]}],
        },
    )
    url, _, _ = start(with_rules(*rules))
    refused_by(
        await http.post(url + PROPOSALS, json=lookup(None, "O-70000"), headers=BILLING),
        "ops.no_old_orders",
    )
    assert (await http.post(url + PROPOSALS, json=lookup(None), headers=BILLING)).status_code == 200
    eur = credit(None, "k1", order="O-80001")
    eur["args"]["currency"] = "EUR"
    refused_by(await http.post(url + PROPOSALS, json=eur, headers=GLOBEX), "ops.no_eur")


async def test_globs_and_risks_select_tools(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    rule = {
        "id": "ops.no_writes",
        "action": "block",
        "tools": ["*_ticket", "issue_*"],
        "risks": ["write"],
    }
    url, demo, _ = start(with_rules(rule))
    refused_by(await http.post(url + PROPOSALS, json=ticket(), headers=BILLING), "ops.no_writes")
    refused_by(
        await http.post(url + PROPOSALS, json=credit(None, "k"), headers=BILLING), "ops.no_writes"
    )
    assert (await http.post(url + PROPOSALS, json=lookup(None), headers=BILLING)).status_code == 200
    assert demo.credits == [] and demo.tickets == []


GLOBEX_ALLOWED = {"id": "ops.globex_may", "action": "allow", "tenants": ["globex"]}
CREDITS_BLOCKED = {"id": "ops.no_credits", "action": "block", "tools": ["issue_credit"]}


async def test_the_first_rule_that_decides_wins(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    globex_credit = credit(None, "g1", order="O-80001")
    globex_credit["args"]["currency"] = "EUR"
    # allow written first: an exception to the block for globex only
    url, _, _ = start(with_rules(GLOBEX_ALLOWED, CREDITS_BLOCKED))
    refused_by(
        await http.post(url + PROPOSALS, json=credit(None, "a1"), headers=BILLING), "ops.no_credits"
    )
    answer = await http.post(url + PROPOSALS, json=globex_credit, headers=GLOBEX)
    assert answer.status_code == 200, answer.text
    # block written first: it decides for everyone
    url, _, _ = start(with_rules(CREDITS_BLOCKED, GLOBEX_ALLOWED))
    refused_by(
        await http.post(url + PROPOSALS, json=globex_credit, headers=GLOBEX), "ops.no_credits"
    )


async def test_hide_takes_a_tool_out_of_the_catalog_and_refuses_its_calls(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    rule = {
        "id": "ops.hide_tickets",
        "action": "hide",
        "tools": ["create_support_ticket"],
        "tenants": ["globex"],
        "remediation": "REPLAN: tickets are not offered here",
    }
    url, _, _ = start(with_rules(rule))
    listed = {
        t["name"] for t in (await http.get(url + "/v1/tools", headers=GLOBEX)).json()["tools"]
    }
    assert listed == {"lookup_order", "issue_credit"}
    listed = {
        t["name"] for t in (await http.get(url + "/v1/tools", headers=BILLING)).json()["tools"]
    }
    assert "create_support_ticket" in listed  # another tenant: not hidden
    for format in ("openai", "anthropic", "mcp"):  # every catalog, not only the plain list
        answer = await http.get(url + "/v1/tools", params={"format": format}, headers=GLOBEX)
        assert answer.status_code == 200, answer.text
        assert "create_support_ticket" not in answer.text, format
    async with mcp_session(url, "demo-globex-token") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
    assert names == {"lookup_order", "issue_credit"}
    globex_ticket = ticket()
    globex_ticket["args"]["customer_id"] = "C-30001"
    body = refused_by(
        await http.post(url + PROPOSALS, json=globex_ticket, headers=GLOBEX), "ops.hide_tickets"
    )
    assert body["remediation"] == "REPLAN: tickets are not offered here"


def metric(text: str, rule: str, outcome: str, mode: str) -> float:
    pattern = (
        r'^broker_policy_decisions_total\{[^}]*rule="' + re.escape(rule) + r'"[^}]*\} ([0-9.e+]+)$'
    )
    total = 0.0
    for line in text.splitlines():
        if re.match(pattern, line) and f'outcome="{outcome}"' in line and f'mode="{mode}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_a_shadow_rule_never_changes_an_answer_and_is_recorded_and_counted(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    block = dict(BIG_CREDITS, mode="shadow")
    loop = {
        "id": "ops.loop_shadow",
        "action": "block",
        "tools": ["lookup_order"],
        "mode": "shadow",
        "loop": {"max_calls": 1, "window_s": 60},
    }
    url, demo, ledger = start(with_rules(block, loop))
    # 110: over the rule's 100, within what the order allows (120)
    big = await http.post(url + PROPOSALS, json=credit(None, "k1", amount=110), headers=BILLING)
    assert big.status_code == 200, big.text
    assert len(demo.credits) == 1
    for _ in range(3):
        answer = await http.post(url + PROPOSALS, json=lookup("s-1"), headers=BILLING)
        assert answer.status_code == 200, answer.text
    text = (await http.get(url + "/metrics")).text
    assert metric(text, "ops.big_credits", "block", "shadow") == 1
    assert metric(text, "ops.loop_shadow", "pass", "shadow") == 1
    assert metric(text, "ops.loop_shadow", "block", "shadow") == 2
    verdicts = [
        {(v["name"], v["verdict"]) for v in record["validators"]}
        for record in ledger_records(ledger)
    ]
    assert ("policy:ops.big_credits", "shadow:block") in verdicts[0]
    assert [("policy:ops.loop_shadow", "shadow:block") in v for v in verdicts[1:]] == [
        False,
        True,
        True,
    ]


async def test_a_canary_applies_to_the_same_sessions_every_time(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    rule = {
        "id": "ops.canary_lookups",
        "action": "block",
        "tools": ["lookup_order"],
        "canary_percent": 50,
    }
    url, _, _ = start(with_rules(rule))
    sessions = [f"c-{uuid.uuid4().hex[:8]}" for _ in range(24)]
    refused: list[set[str]] = []
    for _ in range(2):
        answers = {
            s: await http.post(url + PROPOSALS, json=lookup(s), headers=BILLING) for s in sessions
        }
        refused.append({s for s, a in answers.items() if a.status_code == 409})
        assert all(a.status_code in (200, 409) for a in answers.values())
    assert refused[0] == refused[1]  # stable per session
    assert refused[0] == {s for s in sessions if in_canary("ops.canary_lookups", s, 50)}
    assert 0 < len(refused[0]) < len(sessions)
    # no session: outside every canary
    assert (await http.post(url + PROPOSALS, json=lookup(None), headers=BILLING)).status_code == 200
    text = (await http.get(url + "/metrics")).text
    assert metric(text, "ops.canary_lookups", "block", "canary") == 2 * len(refused[0])
    assert (
        metric(text, "ops.canary_lookups", "block", "shadow")
        == 2 * (len(sessions) - len(refused[0])) + 1
    )


REFUND_FLOW = {
    "id": "ops.refund_flow",
    "action": "block",
    "routes": ["billing_help"],
    "remediation": "REPLAN: follow the refund flow: look the order up, then credit it once",
    "states": {
        "initial": "identify",
        "allowed": {
            "identify": ["lookup_order"],
            "act": ["lookup_order", "issue_credit", "create_support_ticket"],
            "done": ["lookup_order"],
        },
        "final": ["done"],
        "moves": [
            {"from": "identify", "tool": "lookup_order", "to": "act"},
            {"from": "act", "tool": "issue_credit", "to": "done"},
        ],
    },
}


async def test_named_states_allow_tools_per_state_and_succeeded_calls_move_them(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    url, demo, _ = start(with_rules(REFUND_FLOW))
    one = f"st-{uuid.uuid4().hex[:8]}"
    body = refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "k1"), headers=BILLING), "ops.refund_flow"
    )
    assert "state 'identify'" in body["detail"] and body["remediation"].startswith("REPLAN")
    # a failed lookup moves nothing
    failed = await http.post(url + PROPOSALS, json=lookup(one, "O-99999"), headers=BILLING)
    assert failed.status_code == 502, failed.text
    refused_by(
        await http.post(url + PROPOSALS, json=credit(one, "k2"), headers=BILLING), "ops.refund_flow"
    )
    assert (await http.post(url + PROPOSALS, json=lookup(one), headers=BILLING)).status_code == 200
    done = await http.post(url + PROPOSALS, json=credit(one, "k3"), headers=BILLING)
    assert done.status_code == 200, done.text
    again = await http.post(url + PROPOSALS, json=credit(one, "k4"), headers=BILLING)
    assert "state 'done'" in refused_by(again, "ops.refund_flow")["detail"]
    assert (await http.post(url + PROPOSALS, json=lookup(one), headers=BILLING)).status_code == 200
    assert len(demo.credits) == 1
    # routes the rule does not name are untouched
    scheduling = {"Authorization": "Bearer demo-scheduling-token"}
    assert (await http.post(url + PROPOSALS, json=lookup(None), headers=scheduling)).is_success


async def test_require_approval_holds_what_it_matches_for_a_person(
    start: Callable[..., Started], http: httpx.AsyncClient
) -> None:
    raw = with_rules({**BIG_CREDITS, "id": "ops.approve_big", "action": "require_approval"})
    url, demo, _ = start(raw)
    big = credit(None, "k1", amount=110)
    waiting = await http.post(url + PROPOSALS, json=big, headers=BILLING)
    assert waiting.status_code == 202, waiting.text
    approval = waiting.json()["approval"]
    assert "ops.approve_big" in waiting.json()["reason"]
    small = await http.post(url + PROPOSALS, json=credit(None, "k2", amount=5), headers=BILLING)
    assert small.status_code == 200, small.text
    assert [c["amount"] for c in demo.credits] == [5]
    approver = {"Authorization": "Bearer demo-approver-token"}
    decided = await http.post(
        f"{url}/v1/approvals/{approval['id']}/approve",
        json={"digest": approval["digest"]},
        headers=approver,
    )
    assert decided.status_code == 200, decided.text
    assert sorted(c["amount"] for c in demo.credits) == [5, 110]
