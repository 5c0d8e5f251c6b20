"""Config loading: every problem at once with its key path, unknown keys refused, cross-checks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig, load_config, parse_config
from broker.taxonomy import ConfigError
from tests.conftest import DEMO_CONFIG
from tests.fakes import demo_raw


def problems_of(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    problems = dict(caught.value.problems)
    assert len(problems) == len(caught.value.problems), "a key path is reported twice"
    for path, message in caught.value.problems:
        assert path in str(caught.value)
        assert message
    return problems


def test_the_demo_config_loads() -> None:
    config = load_config(DEMO_CONFIG)
    assert isinstance(config, BrokerConfig)
    assert set(config.tools) == {"lookup_order", "create_support_ticket", "issue_credit"}
    assert config.service.idempotency_ttl_s == 86_400
    assert config.service.max_body_bytes == 1_048_576
    assert config.budgets["credits_per_day"].limit == 500
    assert config.rate_limits["credit_calls"].limit == 20


def test_defaults_apply() -> None:
    raw = demo_raw()
    del raw["service"]
    config = parse_config(raw)
    assert config.service.idempotency_ttl_s == 86_400
    assert config.service.dry_run is False


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ((), "surprise"),
        (("service",), "service.surprise"),
        (("tools", "issue_credit"), "tools.issue_credit.surprise"),
        (("tools", "issue_credit", "adapter"), "tools.issue_credit.adapter.surprise"),
        (("routes", "billing_help"), "routes.billing_help.surprise"),
        (("budgets", "credits_per_day"), "budgets.credits_per_day.surprise"),
        (("preconditions", "order_paid"), "preconditions.order_paid.surprise"),
    ],
)
def test_unknown_keys_are_refused_at_every_level(where: tuple[str, ...], path: str) -> None:
    raw = demo_raw()
    node = raw
    for part in where:
        node = node[part]
    node["surprise"] = 1
    problems = problems_of(raw)
    assert path in problems
    assert "unknown" in problems[path]


def test_an_unknown_key_in_a_token_is_refused() -> None:
    raw = demo_raw()
    raw["tokens"][0]["scopes"] = ["everything"]
    assert "tokens[0].scopes" in problems_of(raw)


def test_all_conversion_problems_are_reported_at_once() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["risk"] = "dangerous"
    raw["tools"]["lookup_order"]["timeout_s"] = -1
    raw["rate_limits"]["credit_calls"]["limit"] = 0
    raw["service"]["idempotency_ttl_s"] = "a day"
    raw["surprise"] = True
    del raw["tools"]["create_support_ticket"]["description"]
    problems = problems_of(raw)
    assert set(problems) >= {
        "tools.issue_credit.risk",
        "tools.lookup_order.timeout_s",
        "rate_limits.credit_calls.limit",
        "service.idempotency_ttl_s",
        "surprise",
        "tools.create_support_ticket.description",
    }


def test_all_cross_reference_problems_are_reported_at_once() -> None:
    raw = demo_raw()
    raw["routes"]["billing_help"]["tools"].append("ghost")
    raw["routes"]["scheduling"]["tenants"].append("initech")
    raw["service_accounts"]["route-scheduling@bots"]["route"] = "nowhere"
    raw["tokens"][0]["service_account"] = "nobody@bots"
    raw["tools"]["issue_credit"]["preconditions"].append("moon_is_full")
    raw["tools"]["issue_credit"]["budgets"].append("no_budget")
    raw["tools"]["issue_credit"]["rate_limits"].append("no_limit")
    raw["tools"]["lookup_order"]["adapter"]["backend"] = "nobackend"
    raw["preconditions"]["order_paid"]["verifier"] = "elsewhere.order_paid"
    problems = problems_of(raw)
    assert set(problems) >= {
        "routes.billing_help.tools[3]",
        "routes.scheduling.tenants[1]",
        'service_accounts."route-scheduling@bots".route',
        "tokens[0].service_account",
        "tools.issue_credit.preconditions[3]",
        "tools.issue_credit.budgets[1]",
        "tools.issue_credit.rate_limits[1]",
        "tools.lookup_order.adapter.backend",
        "preconditions.order_paid.verifier",
    }


def test_conversion_and_cross_reference_problems_are_reported_together() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["risk"] = "dangerous"  # conversion
    raw["surprise"] = True  # conversion
    raw["routes"]["billing_help"]["tools"].append("ghost")  # cross-reference
    raw["tools"]["lookup_order"]["input_schema"]["properties"]["order_id"]["pattern"] = "^(a+)+$"
    problems = problems_of(raw)
    assert set(problems) >= {
        "tools.issue_credit.risk",
        "surprise",
        "routes.billing_help.tools[3]",
        "tools.lookup_order.input_schema.properties.order_id.pattern",
    }


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "object", "properties": {"x": {"type": "strng"}}}, "properties.x.type"),
        ({"type": "object", "required": "x"}, "required"),
        ({"type": "array"}, "type"),
        ({"type": "object", "properties": {"x": {"pattern": "^(a|a)*$"}}}, "properties.x.pattern"),
        ({"type": "object", "properties": {"x": {"pattern": "(a)\\1"}}}, "properties.x.pattern"),
        ({"type": "object", "properties": {"x": {"pattern": "[unclosed"}}}, "properties.x.pattern"),
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
            "properties.x.$ref",
        ),
    ],
    ids=[
        "bad-type",
        "bad-required",
        "not-object",
        "overlap",
        "backref",
        "invalid-regex",
        "remote-ref",
    ],
)
def test_tool_schemas_are_checked_at_load(schema: dict[str, Any], path: str) -> None:
    raw = demo_raw()
    raw["tools"]["lookup_order"]["input_schema"] = schema
    problems = problems_of(raw)
    assert f"tools.lookup_order.input_schema.{path}" in problems, problems


def test_pattern_properties_are_checked_too() -> None:
    raw = demo_raw()
    raw["tools"]["lookup_order"]["input_schema"]["patternProperties"] = {"^(x+)+$": {}}
    problems = problems_of(raw)
    assert any(
        path.startswith("tools.lookup_order.input_schema.patternProperties") for path in problems
    )


# -- budgets ---------------------------------------------------------------------------------------


def test_a_sum_budget_must_add_up_a_numeric_argument() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["input_schema"]["properties"]["amount"] = {"type": "string"}
    problems = problems_of(raw)
    assert "tools.issue_credit.budgets[0]" in problems
    assert "number" in problems["tools.issue_credit.budgets[0]"]


def test_a_sum_budget_must_add_up_a_declared_argument() -> None:
    raw = demo_raw()
    raw["budgets"]["credits_per_day"]["field"] = "total"
    problems = problems_of(raw)
    assert "tools.issue_credit.budgets[0]" in problems


def test_a_sum_budget_must_add_up_a_required_argument() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["input_schema"]["required"] = ["order_id", "currency"]
    problems = problems_of(raw)
    assert "tools.issue_credit.budgets[0]" in problems
    assert "required" in problems["tools.issue_credit.budgets[0]"]


def test_an_integer_budget_field_is_fine() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["input_schema"]["properties"]["amount"] = {
        "type": "integer",
        "minimum": 1,
    }
    parse_config(raw)


@pytest.mark.parametrize(
    ("budget", "path"),
    [
        ({"kind": "sum", "limit": 10, "window_s": 60}, "budgets.b.field"),
        ({"kind": "count", "limit": 10, "window_s": 60, "field": "amount"}, "budgets.b.field"),
        ({"kind": "sum", "limit": 0, "window_s": 60, "field": "amount"}, "budgets.b.limit"),
        ({"kind": "sum", "limit": 10, "window_s": 0, "field": "amount"}, "budgets.b.window_s"),
        ({"kind": "average", "limit": 10, "window_s": 60}, "budgets.b.kind"),
        ({"kind": "count", "limit": 10, "window_s": 60, "per": ["planet"]}, "budgets.b.per[0]"),
    ],
)
def test_budget_definitions_are_checked(budget: dict[str, Any], path: str) -> None:
    raw = demo_raw()
    raw["budgets"]["b"] = budget
    assert path in problems_of(raw)


# -- tokens and tools ------------------------------------------------------------------------------


def test_token_problems_are_located() -> None:
    raw = demo_raw()
    raw["tokens"][0]["tenant"] = "initech"
    raw["tokens"][1]["tools"] = ["issue_credit"]  # scheduling may not issue credits
    raw["tokens"][2]["sha256"] = "not-a-digest"
    raw["tokens"][3]["tenant"] = "acme"  # an admin token carries no tenant
    dup = copy.deepcopy(raw["tokens"][0])
    raw["tokens"].append(dup)
    problems = problems_of(raw)
    assert "tokens[2].sha256" in problems
    raw["tokens"][2]["sha256"] = "f" * 64
    problems = problems_of(raw)
    assert {"tokens[0].tenant", "tokens[1].tools[0]", "tokens[3]", "tokens[4].name"} <= set(
        problems
    )


def test_an_irreversible_tool_cannot_be_idempotent() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["risk"] = "irreversible"
    raw["tools"]["issue_credit"]["idempotent"] = True
    assert "tools.issue_credit.idempotent" in problems_of(raw)


def test_credentials_must_name_their_source() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["credentials"] = {"api_key": "hunter2"}
    problems = problems_of(raw)
    assert "tools.issue_credit.credentials.api_key" in problems
    assert "hunter2" not in str(problems)


def test_load_config_reports_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        load_config(tmp_path / "missing.toml")
    assert missing.value.problems[0][0] == ""
    bad = tmp_path / "bad.toml"
    bad.write_text("[unclosed")
    with pytest.raises(ConfigError) as invalid:
        load_config(bad)
    assert "TOML" in invalid.value.problems[0][1]
