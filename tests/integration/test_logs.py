"""Logs are JSON lines a machine can read, carry the proposal's ids and codes, and no secret."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

import httpx
import pytest

from broker.config import BrokerConfig
from broker.logs import JsonFormatter
from broker.plugins import Backend
from tests.conftest import BILLING, credit, ticket
from tests.integration.test_audit_http import CANARY, with_card_number


@pytest.fixture
def json_lines() -> list[str]:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("broker")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(previous)


async def test_one_json_line_per_proposal_with_ids_and_codes_and_no_secret(
    make_broker: Callable[..., tuple[str, Mapping[str, Backend]]],
    demo_config: BrokerConfig,
    json_lines: list[str],
) -> None:
    url, _ = make_broker(with_card_number(demo_config))
    body = credit()
    body["args"]["card_number"] = CANARY
    async with httpx.AsyncClient(base_url=url) as client:
        approved = (await client.post("/v1/proposals", json=body, headers=BILLING)).json()
        rejected = (
            await client.post("/v1/proposals", json=ticket("C-20001"), headers=BILLING)
        ).json()
    answers = [json.loads(line) for line in json_lines if '"logger":"broker.proposals"' in line]
    assert [a["proposal_id"] for a in answers] == [approved["proposal_id"], rejected["proposal_id"]]
    first, second = answers
    assert first["decision"] == "approved" and first["status"] == 200
    # Plain approvals are DEBUG (the ledger keeps them all); refusals are INFO.
    assert (first["level"], second["level"]) == ("debug", "info")
    assert first["trace_id"] == approved["trace_id"] and first["tool"] == "issue_credit"
    assert second["code"] == "precondition_failed" and second["category"] == "PRECONDITION"
    assert all(CANARY not in line and "demo-billing-token" not in line for line in json_lines)
