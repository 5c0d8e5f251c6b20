"""What a lapsed claim is settled with, read from a real ledger (JSONL file and Redis sinks)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.ledger import LedgerEntry
from broker.recovery import LedgerOutcomes
from broker.stores import Settlement
from tests.contract.test_ledger_sinks import Backend, jsonl_backend, redis_backend
from tests.ledger_entries import make_entry

TTL_S = 3600


@pytest.fixture(params=["jsonl", pytest.param("redis", marks=pytest.mark.redis)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    factory = jsonl_backend(tmp_path) if request.param == "jsonl" else redis_backend()
    async for made in factory:
        yield made


def executed(n: int, **overrides: Any) -> LedgerEntry:
    """Proposal ``prp_<n>``'s record as the pipeline writes it for an executed call."""
    fields: dict[str, Any] = {
        "tool": "issue_credit",
        "args": {"order_id": "O-55300", "amount": 25, "currency": "USD"},
        "execution_status": "succeeded",
        "attempts": 1,
        "result": {"credit_id": f"cr_{n}", "api_key": "s3cret"},
        "sensitive_keys": frozenset({"api_key"}),
        "idempotency_key_hash": "sha256:" + "a" * 64,
        "started_at": "2026-11-22T10:00:00.000Z",
        "ended_at": "2026-11-22T10:00:00.100Z",
    }
    fields.update(overrides)
    return make_entry(n, **fields)


def failed(n: int, code: str, remediation: str) -> LedgerEntry:
    return executed(
        n,
        execution_status="failed",
        result=None,
        category="PROVIDER",
        code=code,
        reason="the backend failed",
        remediation=remediation,
    )


async def test_each_final_record_gives_the_settlement_its_call_would_have_had(
    backend: Backend,
) -> None:
    sink = backend.open_sink()
    try:
        await sink.append(executed(1))
        await sink.append(failed(2, "provider_error", "REPLAN: the backend refused this action"))
        await sink.append(failed(3, "provider_unavailable", "RETRY: resend the same proposal"))
        await sink.append(failed(4, "timeout", "ESCALATE: the action may or may not have happened"))
        await sink.append(make_entry(5, decision="rejected", code="schema_invalid"))
        await sink.append(make_entry(6, decision="pending_approval"))
        await sink.append(executed(7, replayed=True))
        outcomes = LedgerOutcomes(sink, ttl_s=TTL_S)

        success = await outcomes.outcome_of("prp_1")
        assert success is not None and success.settlement is Settlement.SUCCEEDED
        assert success.ttl_s == TTL_S and success.response.status == 200
        answer = json.loads(success.response.body)
        assert answer["proposal_id"] == "prp_1" and answer["audit"]["seq"] == 1
        # The ledger's copy of the result: what it redacted stays redacted in the replay.
        assert answer["execution"]["result"] == {"credit_id": "cr_1", "api_key": "[REDACTED]"}

        definite = await outcomes.outcome_of("prp_2")
        assert definite is not None and definite.settlement is Settlement.DEFINITE_FAILURE
        assert json.loads(definite.response.body)["code"] == "provider_error"
        transient = await outcomes.outcome_of("prp_3")
        assert transient is not None and transient.settlement is Settlement.TRANSIENT_FAILURE
        # Unknown, not final, not an execution, or no record: nothing to settle from.
        for proposal_id in ("prp_4", "prp_5", "prp_6", "prp_7", "prp_404"):
            assert await outcomes.outcome_of(proposal_id) is None, proposal_id
    finally:
        await sink.close()
