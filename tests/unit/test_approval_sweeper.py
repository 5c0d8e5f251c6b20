"""The sweeper's second job: an approval left ``approved`` by a process that died before
executing it is executed by another process's sweep, once."""

from __future__ import annotations

import msgspec

from adapters.demo import DemoBackend
from broker.approvals.model import ApprovalRecord
from broker.approvals.service import ORPHAN_AFTER_S
from broker.auth import Authenticator
from broker.config import load_config
from broker.config.model import PolicyConfig
from broker.model import ProposalRequest
from broker.pipeline.orchestrator import Pipeline
from broker.stores import MemoryStore
from broker.tools.runtime import build_registry
from tests.conftest import DEMO_CONFIG, Clock

_records = msgspec.json.Decoder(ApprovalRecord)


async def test_an_orphaned_approval_is_executed_once_by_a_sweep() -> None:
    demo_config = load_config(DEMO_CONFIG)
    # The guarded route without its policy (a session_id, a lookup first): approval alone.
    routes = dict(demo_config.routes)
    routes["guarded_billing"] = msgspec.structs.replace(
        routes["guarded_billing"], require_session_id=False
    )
    config = msgspec.structs.replace(demo_config, policy=PolicyConfig(), routes=routes)
    clock = Clock()
    demo = DemoBackend()
    store = MemoryStore(clock=clock)
    pipeline = Pipeline(
        config=config,
        registry=build_registry(config, secrets={}, backends={"demo": demo}),
        store=store,
        clock=clock,
    )
    principal = Authenticator(config, signing_key=None).authenticate("Bearer demo-guarded-token")
    request = ProposalRequest(
        tool="issue_credit",
        args={"order_id": "O-55300", "amount": 150, "currency": "USD"},  # a 900 USD order
        preconditions=["order_paid", "within_return_window"],
        idempotency_key="orphan-1",
    )
    answer = await pipeline.propose(principal, request)
    assert answer.status == 202
    (row,) = await store.list_approvals("pending")
    # The approving process took pending → approved, then died before executing.
    approved = msgspec.structs.replace(
        _records.decode(row.body), status="approved", decided_at=clock(), decided_by="x"
    )
    body = msgspec.json.encode(approved)
    assert await store.swap_approval(
        row.id, "pending", msgspec.structs.replace(row, status="approved", body=body)
    )

    await pipeline.approvals.sweep()
    assert demo.credits == []  # the approving process may still be executing it
    clock.advance(ORPHAN_AFTER_S)
    await pipeline.approvals.sweep()
    await pipeline.approvals.sweep()
    assert [c["amount"] for c in demo.credits] == [150]
    found = await store.get_approval(row.id)
    assert found is not None and found.status == "executed"
    retry = await pipeline.propose(principal, request)
    assert retry.status == 200
    assert msgspec.json.decode(retry.body)["execution"]["status"] == "succeeded"
