"""Human approval through the Python client, against the demo broker over HTTP: the agent's
proposal comes back pending, an approver lists, reads and decides it, and the agent's wait ends
with the executed result (or the denial, raised or returned); refusals raise the client's own
exception types. What executed is judged by the demo backend's list of credits."""

from __future__ import annotations

import threading
import uuid

import pytest
from broker_client import (
    Approval,
    ApprovalInfo,
    AsyncClient,
    AuthzError,
    BrokerError,
    Client,
    Decision,
    PreconditionError,
)

from adapters.demo import DemoBackend

AGENT = "demo-guarded-token"
APPROVER = "demo-approver-token"
OTHER_DIGEST = "sha256:" + "0" * 64


def credit(amount: int) -> dict[str, object]:
    return {"order_id": "O-55300", "amount": amount, "currency": "USD"}


def propose_large_credit(agent: Client, key: str, amount: int = 150) -> tuple[str, Decision]:
    """As an agent does on guarded_billing: look the order up in the session, then credit."""
    session = f"s-{uuid.uuid4().hex[:10]}"
    agent.propose("lookup_order", {"order_id": "O-55300"}, session_id=session)
    decision = agent.propose(
        "issue_credit",
        credit(amount),
        idempotency_key=key,
        preconditions=["order_paid", "within_return_window"],
        session_id=session,
    )
    return session, decision


def test_a_pending_proposal_is_typed_approved_by_an_approver_and_waited_for(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    with Client(url, AGENT) as agent, Client(url, APPROVER) as approver:
        _, decision = propose_large_credit(agent, "cl-approve")
        assert decision.pending and decision.status == 202
        info = decision.approval
        assert isinstance(info, ApprovalInfo) and info.status == "pending"
        assert demo.credits == []

        still = agent.wait_for_decision(decision, timeout_s=0.2, poll_s=0.05)
        assert still.pending  # the timeout returns what is known: still waiting

        (listed,) = approver.approvals.list("pending")
        assert isinstance(listed, Approval) and listed.id == info.id
        shown = approver.approvals.get(info.id)
        assert (shown.tool, shown.route, shown.args) == (
            "issue_credit",
            "guarded_billing",
            credit(150),
        )
        assert shown.digest == info.digest

        with pytest.raises(PreconditionError) as wrong:  # bound to another action
            approver.approvals.approve(info.id, OTHER_DIGEST)
        assert wrong.value.status == 409 and wrong.value.code == "approval_conflict"
        with pytest.raises(AuthzError) as itself:  # an agent never approves its own action
            agent.approvals.approve(info.id, info.digest)
        assert itself.value.status == 403
        with pytest.raises(BrokerError) as unknown:
            approver.approvals.get("apr_01ZZZZZZZZZZZZZZZZZZZZZZZZ")
        assert unknown.value.status == 404
        assert demo.credits == []

        # The approver decides while the agent waits.
        timer = threading.Timer(
            0.3, lambda: approver.approvals.approve(info.id, info.digest, comment="ok")
        )
        timer.start()
        try:
            final = agent.wait_for_decision(decision, timeout_s=10, poll_s=0.05)
        finally:
            timer.join()
        again = approver.approvals.approve(info.id, info.digest)  # a second click: a no-op

    assert final.approved and final.status == 200
    assert final.result is not None and final.result["status"] == "issued"
    assert again.status == "approved" and again.execution == "done"
    assert again.comment == "ok"
    assert [c["amount"] for c in demo.credits] == [150]


async def test_a_denial_ends_the_wait_as_an_authz_error_or_a_returned_decision(
    broker: tuple[str, DemoBackend],
) -> None:
    url, demo = broker
    with Client(url, AGENT) as sync_agent:
        _, first = propose_large_credit(sync_agent, "cl-deny-1")
        _, second = propose_large_credit(sync_agent, "cl-deny-2", amount=120)
    async with (
        AsyncClient(url, AGENT) as agent,
        AsyncClient(url, AGENT, errors="return") as patient,
        AsyncClient(url, APPROVER) as approver,
    ):
        for pending in (first, second):
            assert pending.approval is not None
            denied = await approver.approvals.deny(
                pending.approval.id, "the order was refunded already"
            )
            assert denied.status == "denied" and denied.decided_by is not None
        with pytest.raises(AuthzError) as raised:
            await agent.wait_for_decision(first.proposal_id, timeout_s=5)
        returned = await patient.wait_for_decision(second, timeout_s=5)
        info = first.approval
        assert info is not None
        with pytest.raises(PreconditionError) as other_way:
            await approver.approvals.approve(info.id, info.digest)
        listed = await approver.approvals.list("denied")

    assert raised.value.code == "approval_denied" and raised.value.category == "AUTHZ"
    assert "refunded already" in str(raised.value)
    assert returned.decision == "rejected" and returned.code == "approval_denied"
    assert other_way.value.code == "approval_conflict"
    assert second.approval is not None
    assert {a.id for a in listed} == {info.id, second.approval.id}
    assert demo.credits == []
