"""An approval's digest is SHA-256 over the RFC 8785 form of the whole action (docs/api.md),
however it is assembled: for any tenant, route, tool, key and arguments, and whatever actions
were digested before (the members a route, tenant and tool share are written once)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.approvals.model import action_digest
from broker.ledger.canonical import MAX_SAFE_INT
from tests.unit.test_ledger_canonical import JSON_VALUES, KEYS, TEXT


def reference(tenant: str, route: str, tool: str, args: dict[str, Any], key: str | None) -> str:
    action = {"tenant": tenant, "route": route, "tool": tool, "args": args, "idempotency_key": key}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(action)).hexdigest()


# Keys admission accepts are printable ASCII (quote and backslash included); any text is digested.
KEYS_ASKED = st.one_of(
    st.none(), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20), TEXT
)
NAMES = st.one_of(TEXT, st.sampled_from(["acme", "guarded_billing", "issue_credit", "\ue000", ""]))


@settings(max_examples=150)
@given(
    tenant=NAMES,
    route=NAMES,
    tool=NAMES,
    args=st.dictionaries(KEYS, JSON_VALUES, max_size=5),
    key=KEYS_ASKED,
)
def test_the_digest_is_that_of_the_whole_action(
    tenant: str, route: str, tool: str, args: dict[str, Any], key: str | None
) -> None:
    digest = action_digest(tenant=tenant, route=route, tool=tool, args=args, idempotency_key=key)
    assert digest == reference(tenant, route, tool, args, key)


def test_actions_that_differ_only_in_tenant_route_or_tool_differ_in_digest() -> None:
    args = {"order_id": "O-1", "amount": 150, "currency": "USD"}
    actions = [
        ("acme", "guarded_billing", "issue_credit"),
        ("globex", "guarded_billing", "issue_credit"),
        ("acme", "billing_help", "issue_credit"),
        ("acme", "guarded_billing", "create_support_ticket"),
        ("acme", "guarded_billing", "issue_credit"),  # the first again, after the others
    ]
    digests = [
        action_digest(tenant=t, route=r, tool=tool, args=args, idempotency_key="k-1")
        for t, r, tool in actions
    ]
    assert digests == [reference(t, r, tool, args, "k-1") for t, r, tool in actions]
    assert len(set(digests)) == 4


def test_every_ascii_key_is_digested_as_rfc8785_writes_it() -> None:
    args = {"amount": 150}
    printable = "".join(chr(c) for c in range(0x20, 0x7F))
    every = [chr(c) for c in range(0x80)]
    for key in (printable, '"', "\\", "a/b", "<tag>", " ", "\x7f", "\t", *every):
        digest = action_digest(
            tenant="acme",
            route="guarded_billing",
            tool="issue_credit",
            args=args,
            idempotency_key=key,
        )
        assert digest == reference("acme", "guarded_billing", "issue_credit", args, key), key


# Flat arguments (text, booleans, nulls, integers) are written without canonical_json's pass:
# names past U+E000 (ordered otherwise by RFC 8785) and integers past 2**53 - 1 (which it
# refuses) must still go through it.
EDGE_INTS = st.sampled_from([MAX_SAFE_INT, -MAX_SAFE_INT, MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1])
FLAT_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), EDGE_INTS, TEXT, st.sampled_from(["1" * 16, "\ue000"])
)


@settings(max_examples=300)
@given(args=st.dictionaries(KEYS, FLAT_VALUES, max_size=5), key=KEYS_ASKED)
def test_flat_arguments_are_digested_as_rfc8785_writes_them(
    args: dict[str, Any], key: str | None
) -> None:
    try:
        expected = reference("acme", "guarded_billing", "issue_credit", args, key)
    except rfc8785.CanonicalizationError:
        with pytest.raises(rfc8785.CanonicalizationError):
            action_digest(
                tenant="acme",
                route="guarded_billing",
                tool="issue_credit",
                args=args,
                idempotency_key=key,
            )
        return
    digest = action_digest(
        tenant="acme", route="guarded_billing", tool="issue_credit", args=args, idempotency_key=key
    )
    assert digest == expected


def test_names_past_u_e000_are_ordered_as_rfc8785_orders_them() -> None:
    # By code point "\U0001f600" sorts after "\uffff"; by UTF-16 code unit, before it.
    args = {"\uffff": 1, "\U0001f600": 2, "a": "x"}
    digest = action_digest(
        tenant="acme", route="guarded_billing", tool="issue_credit", args=args, idempotency_key="k"
    )
    assert digest == reference("acme", "guarded_billing", "issue_credit", args, "k")


def test_integers_past_2_53_are_refused_as_rfc8785_refuses_them() -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        action_digest(
            tenant="acme",
            route="guarded_billing",
            tool="issue_credit",
            args={"amount": MAX_SAFE_INT + 1},
            idempotency_key="k",
        )


def test_names_that_are_not_text_are_refused_as_rfc8785_refuses_them() -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        action_digest(
            tenant="acme",
            route="guarded_billing",
            tool="issue_credit",
            args={1: "x"},  # type: ignore[dict-item]
            idempotency_key="k",
        )
