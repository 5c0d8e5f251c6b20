"""`$ per successful action`: each adapter call adds its tool's configured ``cost_usd`` to
``broker_execution_cost_usd_total{tool}``, failed and timed-out calls included; refusals and dry
runs cost nothing. Divided by ``broker_executions_total{status="succeeded"}`` it is the price of
one action that worked (the PromQL in deploy/README.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import httpx
import msgspec
import pytest

from adapters.demo import DemoBackend
from broker.config import BrokerConfig, ToolConfig, parse_config
from broker.plugins import Backend
from broker.taxonomy import ConfigError
from tests.conftest import ADMIN, BILLING, credit
from tests.integration.test_metrics_http import count
from tests.loopback import LoopbackBackend, running
from tests.registrations import registration, registration_raw

COST = "broker_execution_cost_usd_total"
EXECUTIONS = "broker_executions_total"


def priced(config: BrokerConfig, **costs: float) -> BrokerConfig:
    tools: dict[str, ToolConfig] = dict(config.tools)
    for name, cost in costs.items():
        tools[name] = msgspec.structs.replace(tools[name], cost_usd=cost)
    # issue_credit times out: the backend takes 0.3 s, the tool allows 0.05 s.
    tools["issue_credit"] = msgspec.structs.replace(tools["issue_credit"], timeout_s=0.05)
    return msgspec.structs.replace(config, tools=tools)


def lookup(order: str) -> dict[str, object]:
    return {"tool": "lookup_order", "args": {"order_id": order}}


async def test_cost_counts_every_call_and_divides_into_dollars_per_success(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]], demo_config: BrokerConfig
) -> None:
    config = priced(demo_config, lookup_order=0.001, issue_credit=0.25)
    url, _ = make_broker(config, backends={"demo": DemoBackend(latency_s=0.3)})
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        before = (await client.get("/metrics")).text
        # Pre-initialised at zero, so increase() sees the first spend.
        assert count(before, COST, tool="lookup_order") == 0
        assert count(before, COST, tool="create_support_ticket") == 0

        statuses = [
            (await client.post("/v1/proposals", json=body, headers=BILLING)).status_code
            for body in (
                lookup("O-55291"),  # succeeded
                lookup("O-55291"),  # succeeded
                lookup("O-00000"),  # the backend says not found: a failed call, still paid
                credit(),  # timed out: the call may have been made, so it is paid
                {**credit("dry"), "dry_run": True},  # nothing executed
                {"tool": "nope", "args": {}},  # refused
            )
        ]
        assert statuses == [200, 200, 502, 504, 200, 422]
        text = (await client.get("/metrics")).text

    assert count(text, COST, tool="lookup_order") == pytest.approx(0.003)
    assert count(text, COST, tool="issue_credit") == pytest.approx(0.25)
    assert count(text, COST, tool="create_support_ticket") == 0  # no cost configured
    assert count(text, EXECUTIONS, tool="lookup_order", status="succeeded") == 2
    assert count(text, EXECUTIONS, tool="lookup_order", status="failed") == 1
    assert count(text, EXECUTIONS, tool="issue_credit", status="failed") == 1
    # sum(cost) / sum(succeeded executions): what deploy/README.md's query computes.
    per_success = count(text, COST) / count(text, EXECUTIONS, status="succeeded")
    assert per_success == pytest.approx(0.253 / 2)


def test_cost_usd_is_a_non_negative_tool_setting(demo_config: BrokerConfig) -> None:
    raw = msgspec.to_builtins(demo_config)
    raw["tools"]["lookup_order"]["cost_usd"] = -1
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert any(path == "tools.lookup_order.cost_usd" for path, _ in caught.value.problems)


async def test_a_registered_tool_is_priced_by_the_operator_s_config(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]],
) -> None:
    raw = registration_raw()
    raw.setdefault("registered_tools", {})["billing.refund"] = {"cost_usd": 0.01}
    url, _ = make_broker(parse_config(raw))
    loopback = LoopbackBackend()
    with running(loopback) as backend_url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = registration("billing.refund", backend_url + "/tools/refund")
            created = await client.post("/v1/tools", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            loopback.secrets["/tools/refund"] = created.json()["signing_secret"]
            for key in ("r1", "r2"):
                proposal = {
                    "tool": "billing.refund",
                    "args": {"payment_id": "P-1"},
                    "idempotency_key": key,
                }
                done = await client.post("/v1/proposals", json=proposal, headers=BILLING)
                assert done.status_code == 200, done.text
            text = (await client.get("/metrics")).text
    assert count(text, COST, tool="billing.refund") == pytest.approx(0.02)
