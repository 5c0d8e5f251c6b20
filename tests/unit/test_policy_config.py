"""``[[policy.rules]]`` checked whole at start: every problem with its key path, reported together,
and the rest of the config still cross-checked."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from broker.config.loading import parse_config
from broker.policy.config import PolicyRuleConfig
from broker.policy.rules import compile_policy, in_canary
from broker.taxonomy import ConfigError
from tests.conftest import ROOT
from tests.fakes import demo_raw
from tests.integration.procs import toml_dumps

BAD_RULES: list[dict[str, Any]] = [
    {"id": "r.unknown_tool", "action": "block", "tools": ["refund_everything"]},
    {"id": "r.glob_never", "action": "block", "tools": ["nothing_*"]},
    {"id": "r.route", "action": "block", "tools": ["issue_credit"], "routes": ["scheduling"]},
    {"id": "r.tenant", "action": "block", "routes": ["scheduling"], "tenants": ["globex"]},
    {"id": "r.risk", "action": "block", "tools": ["lookup_order"], "risks": ["irreversible"]},
    {
        "id": "r.regex",
        "action": "block",
        "tools": ["lookup_order"],
        "args": [{"arg": "order_id", "op": "matches", "value": "(a+)+$"}],
    },
    {
        "id": "r.compare",
        "action": "block",
        "tools": ["issue_credit"],
        "args": [
            {"arg": "amount", "op": "gt", "value": "100"},
            {"arg": "x", "op": "in", "value": []},
        ],
    },
    {"id": "r.loop_allow", "action": "allow", "loop": {"max_calls": 2, "window_s": 10}},
    {"id": "r.after", "action": "block", "after": {"tool": "no_such_tool"}},
    {"id": "r.hide_args", "action": "hide", "args": [{"arg": "a", "op": "eq", "value": 1}]},
    {"id": "r.unknown_tool", "action": "allow"},
]

EXPECTED = {
    "policy.rules[0].tools[0]": "unknown tool",
    "policy.rules[1].tools[0]": "matches no tool",
    "policy.rules[2].routes[0]": "carries none of the rule's tools",
    "policy.rules[3].tenants[0]": "serves tenant",
    "policy.rules[4].risks": "never applies",
    "policy.rules[5].args[0].value": "unsafe regex",
    "policy.rules[6].args[0].value": "compares numbers",
    "policy.rules[6].args[1].value": "empty list",
    "policy.rules[7].action": "session rule",
    "policy.rules[8].after.tool": "unknown tool",
    "policy.rules[9].args": "cannot test them",
    "policy.rules[10].id": "duplicate rule id",
}


def problems_of(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    problems = dict(caught.value.problems)
    assert len(problems) == len(caught.value.problems), "a key path is reported twice"
    return problems


def test_every_bad_rule_is_reported_together_with_its_key_path() -> None:
    raw = demo_raw()
    raw["policy"] = {"rules": BAD_RULES}
    raw["routes"]["scheduling"]["tenants"] = ["nobody"]  # another section's problem, same run
    problems = problems_of(raw)
    for path, words in EXPECTED.items():
        assert words in problems.get(path, ""), (path, problems)
    assert "routes.scheduling.tenants[0]" in problems
    assert len([p for p in problems if p.startswith("policy.")]) == len(EXPECTED)


def test_a_rule_that_does_not_convert_is_reported_beside_the_other_sections() -> None:
    raw = demo_raw()
    raw["policy"] = {"rules": [{"id": "r.bad", "action": "deny"}]}
    raw["routes"]["scheduling"]["tenants"] = ["nobody"]
    problems = problems_of(raw)
    assert "policy.rules[0].action" in problems
    assert "routes.scheduling.tenants[0]" in problems


def test_check_config_prints_every_rule_problem(tmp_path: Path) -> None:
    raw = demo_raw()
    raw["policy"] = {"rules": BAD_RULES[:2]}
    path = tmp_path / "bad.toml"
    path.write_text(toml_dumps(raw), encoding="utf-8")
    assert tomllib.loads(path.read_text(encoding="utf-8"))["policy"]["rules"][0]["id"]
    done = subprocess.run(
        [sys.executable, "-m", "broker", "check-config", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 1, done
    out = done.stdout + done.stderr
    assert "policy.rules[0].tools[0]" in out and "policy.rules[1].tools[0]" in out, out


def test_the_demo_rules_load() -> None:
    config = parse_config(demo_raw())
    assert [rule.id for rule in config.policy.rules] == ["demo.loop_guard", "demo.lookup_first"]
    assert config.routes["guarded_billing"].require_session_id


def test_a_ten_percent_canary_takes_about_ten_percent_of_sessions_and_always_the_same() -> None:
    sessions = [f"session-{i}" for i in range(1000)]
    chosen = {s for s in sessions if in_canary("r.canary", s, 10)}
    assert 70 <= len(chosen) <= 130, len(chosen)
    assert chosen == {s for s in sessions if in_canary("r.canary", s, 10)}
    # another rule's canary is another share of sessions
    assert chosen != {s for s in sessions if in_canary("r.other", s, 10)}
    assert not in_canary("r.canary", None, 100)


def test_rules_are_found_by_tool_without_scanning_the_others() -> None:
    rules = [{"id": f"r{i}", "action": "block", "tools": [f"tool_{i}"]} for i in range(1000)] + [
        {"id": "r.glob", "action": "block", "tools": ["tool_1*"]}
    ]
    config = parse_config({**demo_raw(), "policy": {"rules": []}})

    policy = compile_policy([msgspec.convert(r, PolicyRuleConfig) for r in rules])
    assert [r.id for r in policy.for_tool("tool_7", "read")] == ["r7"]
    assert [r.id for r in policy.for_tool("tool_12", "read")] == ["r12", "r.glob"]
    assert policy.for_tool("lookup_order", "read") == ()
    assert config.policy.rules == []


def test_rules_may_name_registered_tools_and_their_namespaces() -> None:
    raw = demo_raw()
    raw["registered_tools"] = {"billing.refund": {}}
    raw["policy"] = {
        "rules": [
            {
                "id": "r.refund",
                "action": "block",
                "tools": ["billing.refund"],
                "routes": ["billing_help"],
            },
            {"id": "r.ns", "action": "hide", "tools": ["billing.*"], "namespaces": ["billing"]},
        ]
    }
    config = parse_config(raw)
    assert [rule.id for rule in config.policy.rules] == ["r.refund", "r.ns"]


def test_state_machines_are_checked_whole() -> None:
    raw = demo_raw()
    raw["policy"] = {
        "rules": [
            {
                "id": "r.states",
                "action": "block",
                "states": {
                    "initial": "a",
                    "allowed": {
                        "a": ["lookup_order"],
                        "loop1": ["lookup_order"],
                        "loop2": ["lookup_order"],
                        "end": [],
                        "island": ["issue_credit"],
                    },
                    "final": ["end"],
                    "moves": [
                        {"from": "a", "tool": "lookup_order", "to": "loop1"},
                        {"from": "loop1", "tool": "lookup_order", "to": "loop2"},
                        {"from": "loop2", "tool": "lookup_order", "to": "loop1"},
                    ],
                },
            },
            {
                "id": "r.bad_moves",
                "action": "allow",
                "states": {
                    "initial": "start",
                    "allowed": {"a": ["no_such_tool"]},
                    "final": ["a"],
                    "moves": [{"from": "a", "tool": "issue_credit", "to": "b"}],
                },
            },
        ]
    }
    problems = problems_of(raw)
    where = "policy.rules[0].states"
    assert "never reached" in problems[f"{where}.allowed.island"]
    assert "never reached" in problems[f"{where}.allowed.end"]
    for trap in ("a", "loop1", "loop2"):  # a -> loop1 <-> loop2, no way to "end"
        assert "trap" in problems[f"{where}.allowed.{trap}"]
    where = "policy.rules[1].states"
    assert "unknown state" in problems[f"{where}.initial"]
    assert "unknown tool" in problems[f"{where}.allowed.a[0]"]
    assert "unknown state" in problems[f"{where}.moves[0].to"]
    assert "never fires" in problems[f"{where}.moves[0].tool"]
    assert "session rule" in problems["policy.rules[1].action"]
