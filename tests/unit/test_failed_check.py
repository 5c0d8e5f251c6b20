"""Every failure code maps to one of the contract's check kinds, and the document lists them all."""

from __future__ import annotations

import re

import pytest

from broker.taxonomy import Code
from broker.validators.checks import CHECK_KINDS, check_of, default_check
from tests.conftest import ROOT

# The kinds as the contract names them (docs/api.md, "Failure taxonomy").
CONTRACT_KINDS = (
    "schema",
    "authz",
    "idempotency",
    "precondition",
    "budget",
    "rate_limit",
    "policy",
    "approval",
    "provider",
    "timeout",
)


def test_the_kinds_are_the_contracts() -> None:
    assert CHECK_KINDS == CONTRACT_KINDS
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = re.search(r"where `kind` is one of (.*?), and `name`", text, re.S)
    assert listed is not None
    assert re.findall(r"`([a-z_]+)`", listed.group(1)) == list(CONTRACT_KINDS)


@pytest.mark.parametrize("code", list(Code))
def test_every_code_has_a_kind(code: Code) -> None:
    assert default_check(code).kind in CHECK_KINDS
    assert default_check(code).name is None
    assert check_of(code, "x").name == "x"


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (Code.SCHEMA_INVALID, "schema"),
        (Code.MALFORMED_REQUEST, "schema"),
        (Code.TOOL_NOT_ALLOWED, "authz"),
        (Code.PRECONDITION_FAILED, "precondition"),
        (Code.BUDGET_EXCEEDED, "budget"),
        (Code.RATE_LIMITED, "rate_limit"),
        (Code.POLICY_BLOCKED, "policy"),
        (Code.OUTCOME_UNKNOWN, "idempotency"),
        (Code.PROVIDER_UNAVAILABLE, "provider"),
        (Code.TIMEOUT, "timeout"),
        (Code.STORE_UNAVAILABLE, "idempotency"),
    ],
)
def test_codes_narrower_than_their_category(code: Code, kind: str) -> None:
    assert default_check(code).kind == kind
