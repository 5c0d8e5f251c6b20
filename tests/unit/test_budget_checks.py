"""A budget kept ``per_arg`` must name an argument every proposal carries, as a plain value."""

from __future__ import annotations

import pytest

from broker.config import parse_config
from broker.taxonomy import ConfigError
from tests.fakes import demo_raw


def test_the_demo_budget_is_kept_per_currency() -> None:
    config = parse_config(demo_raw())
    assert config.budgets["credits_per_day"].per_arg == "currency"


@pytest.mark.parametrize(
    ("per_arg", "why"),
    [("colour", "not an argument"), ("note", "not required"), ("amount", "not a plain value")],
)
def test_a_per_arg_budget_needs_a_required_plain_argument(per_arg: str, why: str) -> None:
    raw = demo_raw()
    raw["budgets"]["credits_per_day"]["per_arg"] = per_arg
    tool = raw["tools"]["issue_credit"]["input_schema"]
    tool["properties"]["note"] = {"type": "string"}
    tool["properties"]["amount"] = {"type": "number", "exclusiveMinimum": 0, "maximum": 1000}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    problems = dict(caught.value.problems)
    assert "tools.issue_credit.budgets[0]" in problems, why
    assert repr(per_arg) in problems["tools.issue_credit.budgets[0]"]
