"""``[routes.X.mediation]`` is checked whole at start: every bad rule reported with its key path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from broker.mediation.view import declaration_hash
from tests.conftest import DEMO_CONFIG, ROOT, free_port
from tests.fakes import demo_raw
from tests.unit.test_config import problems_of

WHERE = "routes.billing_help.mediation"


def with_mediation(mediation: dict[str, Any]) -> dict[str, Any]:
    raw = demo_raw()
    raw["routes"]["billing_help"]["mediation"] = mediation
    return raw


def test_bad_rules_are_reported_together_with_key_paths() -> None:
    rules = [
        {"action": "hide", "tool": "no_such_tool"},  # names no tool of the route
        {"action": "rename", "tool": "lookup_order", "name": "issue_credit"},  # two tools, one name
        {"action": "augment", "tool": "issue_credit", "properties": {"amount": {"type": "string"}}},
        {"action": "augment", "tool": "lookup_order", "properties": {"note": {"type": "strang"}}},
        {"action": "hide", "tool": "create_support_ticket"},
        {"action": "require_reason", "tool": "create_support_ticket"},  # on a hidden tool
        {"id": "x", "action": "augment", "tool": "issue_credit"},  # changes nothing
    ]
    problems = problems_of(with_mediation({"rules": rules}))
    assert set(problems) == {
        f"{WHERE}.rules[0].tool",
        f"{WHERE}.rules[1].name",
        f"{WHERE}.rules[2].properties.amount",
        f"{WHERE}.rules[3].properties.note.type",
        f"{WHERE}.rules[5].tool",
        f"{WHERE}.rules[6]",
    }, problems
    assert "already the name of 'issue_credit'" in problems[f"{WHERE}.rules[1].name"]
    assert "already an argument" in problems[f"{WHERE}.rules[2].properties.amount"]


def test_malformed_rules_are_reported_key_by_key() -> None:
    rules = [
        {"action": "explode", "tool": "lookup_order"},
        {"action": "rename", "tool": "lookup_order", "name": "bad name!"},
        {"action": "hide", "tool": "lookup_order", "colour": "red"},
    ]
    problems = problems_of(with_mediation({"rules": rules, "reason_on_missing": "maybe"}))
    assert set(problems) == {
        f"{WHERE}.rules[0].action",
        f"{WHERE}.rules[1].name",
        f"{WHERE}.rules[2].colour",
        f"{WHERE}.reason_on_missing",
    }, problems
    assert "'hide'" in problems[f"{WHERE}.rules[0].action"]


def test_injected_names_the_broker_owns_and_duplicate_ids_are_refused() -> None:
    rules = [
        {"id": "a", "action": "augment", "tool": "issue_credit", "properties": {"reason": {}}},
        {"id": "a", "action": "rename", "tool": "issue_credit", "name": "credit"},
        {"action": "rename", "tool": "issue_credit", "name": "credit2"},
        {"action": "rename", "tool": "lookup_order", "name": "lookup_order"},
        {"action": "rename", "tool": "create_support_ticket", "name": "billing.tickets"},
    ]
    problems = problems_of(with_mediation({"rules": rules}))
    assert set(problems) == {
        f"{WHERE}.rules[3].name",  # changes nothing
        f"{WHERE}.rules[4].name",  # a registration's kind of name
        f"{WHERE}.rules[0].properties.reason",
        f"{WHERE}.rules[1].id",
        f"{WHERE}.rules[2].tool",
    }, problems


def test_serve_refuses_to_start_on_bad_rules(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    rule = '[[routes.billing_help.mediation.rules]]\naction = "hide"\ntool = "no_such_tool"\n'
    config.write_text(DEMO_CONFIG.read_text(encoding="utf-8") + "\n" + rule)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--config",
            str(config),
            "--port",
            str(free_port()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert f"{WHERE}.rules[0].tool" in result.stderr


def test_the_declaration_hash_ignores_key_order_but_not_meaning() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}}
    reordered = {"properties": {"a": {"maxLength": 3, "type": "string"}}, "type": "object"}
    changed = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 4}}}
    assert declaration_hash("t", "d", schema) == declaration_hash("t", "d", reordered)
    assert declaration_hash("t", "d", schema) != declaration_hash("t", "d", changed)
    assert declaration_hash("t", "d", schema) != declaration_hash("u", "d", schema)


def test_a_replacement_is_checked_against_the_tool_it_stands_for() -> None:
    rules = [
        {
            "action": "replace",
            "tool": "issue_credit",
            "name": "refund",
            "description": "Refund.",
            "input_schema": {
                "type": "object",
                "properties": {"order": {"type": "strang"}, "reason": {"type": "string"}},
            },
            "arguments": {"order_id": "order", "cents": "order", "currency": "money"},
        },
        {"action": "augment", "tool": "issue_credit", "description_append": "More."},
    ]
    problems = problems_of(with_mediation({"rules": rules}))
    assert set(problems) == {
        f"{WHERE}.rules[0].input_schema.properties.order.type",
        f"{WHERE}.rules[0].input_schema.properties.reason",
        f"{WHERE}.rules[0].arguments.currency",  # not a property of the replacement
        f"{WHERE}.rules[0].arguments.cents",  # not an argument of the tool
        f"{WHERE}.rules[0].arguments",  # amount, required by the tool, is not mapped
        f"{WHERE}.rules[1].tool",  # augmenting a replaced tool
    }, problems


def test_an_offered_dry_run_that_collides_with_a_real_argument_is_a_config_error() -> None:
    raw = with_mediation(
        {
            "rules": [
                {"action": "offer_dry_run", "tool": "issue_credit"},
                {"action": "augment", "tool": "lookup_order", "properties": {"dry_run": {}}},
            ]
        }
    )
    schema = raw["tools"]["issue_credit"]["input_schema"]
    schema["properties"]["dry_run"] = {"type": "boolean"}
    problems = problems_of(raw)
    assert set(problems) == {f"{WHERE}.rules[0].tool", f"{WHERE}.rules[1].properties.dry_run"}
    assert "already takes a 'dry_run' argument" in problems[f"{WHERE}.rules[0].tool"]


def test_bad_dry_run_limits_are_config_errors_with_key_paths() -> None:
    where = "routes.{}.dry_runs"
    raw = demo_raw()
    routes = raw["routes"]
    routes["billing_help"]["dry_runs"] = {"only": ["lookup_order", "no_such_tool"], "except": []}
    routes["scheduling"]["dry_runs"] = {}
    problems = problems_of(raw)
    assert set(problems) == {
        where.format("billing_help"),
        where.format("billing_help") + ".only[1]",
        where.format("scheduling"),
    }, problems
    assert "exactly one of" in problems[where.format("billing_help")]
    assert "not a tool of this route" in problems[where.format("billing_help") + ".only[1]"]
    raw = demo_raw()
    raw["routes"]["billing_help"] |= {"dry_run": True, "dry_runs": {"except": ["issue_credit"]}}
    assert "dry_run = true" in problems_of(raw)[where.format("billing_help")]
    raw["routes"]["billing_help"]["dry_runs"] = {"except": ["issue_credit"], "never": []}
    assert set(problems_of(raw)) == {where.format("billing_help") + ".never"}
