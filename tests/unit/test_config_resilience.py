"""The resilience keys of the config: defaults, and bad values named by their key paths."""

from __future__ import annotations

from broker.config import parse_config
from tests.fakes import demo_raw
from tests.unit.test_config import problems_of


def test_defaults_follow_the_contract() -> None:
    config = parse_config(demo_raw())
    service = config.service
    assert service.circuit_breaker is True
    assert (service.breaker_failures, service.breaker_open_s) == (5, 30.0)
    assert service.retry_budget_ratio == 0.2
    assert config.tools["issue_credit"].adapter.max_concurrency == 32


def test_bad_values_are_all_reported_with_their_key_paths() -> None:
    raw = demo_raw()
    raw["tools"]["issue_credit"]["adapter"]["max_concurrency"] = 0
    raw["tools"]["lookup_order"]["adapter"]["max_concurrency"] = "many"
    raw["service"].update(
        retry_budget_ratio=1.5, breaker_failures=0, breaker_open_s=-1, max_in_flight_proposals=-1
    )
    problems = problems_of(raw)
    assert set(problems) >= {
        "tools.issue_credit.adapter.max_concurrency",
        "tools.lookup_order.adapter.max_concurrency",
        "service.retry_budget_ratio",
        "service.breaker_failures",
        "service.breaker_open_s",
        "service.max_in_flight_proposals",
    }
