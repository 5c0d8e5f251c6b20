"""An approval-aware agent loop on the demo's guarded route (``make run``): a large credit waits
for a person, the agent says so and waits for the decision, then reports what happened.

    python client/examples/approval_agent_loop.py [--url http://127.0.0.1:8080] [--approve]

Without ``--approve``, approve it yourself while the agent waits (the approval id and digest are
printed), in the browser inbox or with ``Client(url, "demo-approver-token").approvals``.
``--approve`` plays the approver from a second connection after a short pause.
"""

from __future__ import annotations

import argparse
import threading
import uuid
from typing import Any

from broker_client import AuthzError, Client

AGENT_TOKEN = "demo-guarded-token"  # the guarded_billing route: credits above 100 wait
APPROVER_TOKEN = "demo-approver-token"  # approves acme's actions; never an agent's token


def approve_later(url: str, token: str, approval_id: str, delay_s: float) -> threading.Thread:
    """A person, elsewhere: reads what waits and approves exactly that (its digest)."""

    def approve() -> None:
        with Client(url, token) as approver:
            shown = approver.approvals.get(approval_id)
            print(f"approver: {shown.tool} {shown.args} ({shown.reason})")
            approver.approvals.approve(shown.id, shown.digest, comment="checked the order")

    thread = threading.Timer(delay_s, approve)
    thread.start()
    return thread


def run(
    url: str,
    token: str = AGENT_TOKEN,
    *,
    approver_token: str | None = None,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """One task of the agent; returns what it tells the user (``outcome`` and details)."""
    session = f"approval-example-{uuid.uuid4().hex[:8]}"
    order = {"order_id": "O-55300"}
    credit = {**order, "amount": 150, "currency": "USD"}
    approver: threading.Thread | None = None
    with Client(url, token) as broker:
        broker.propose("lookup_order", order, session_id=session)  # the route's policy: first
        decision = broker.propose(
            "issue_credit",
            credit,
            idempotency_key=f"{session}-credit",
            preconditions=["order_paid", "within_return_window"],
            reason="customer asked for a partial refund",
            session_id=session,
        )
        waits_for = decision.approval if decision.pending else None
        if waits_for is not None:
            print(
                f"agent: a person must approve this credit (approval {waits_for.id}, "
                f"digest {waits_for.digest}, expires {waits_for.expires_at})"
            )
            if approver_token is not None:
                approver = approve_later(url, approver_token, waits_for.id, delay_s=0.5)
            try:
                decision = broker.wait_for_decision(decision, timeout_s=timeout_s)
            except AuthzError as refused:  # denied or expired: the model must not retry it
                return {"outcome": refused.code, "reason": str(refused)}
            finally:
                if approver is not None:
                    approver.join()
        if decision.pending:
            return {"outcome": "still_pending", "proposal_id": decision.proposal_id}
        return {"outcome": "executed", "result": decision.result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--approve", action="store_true", help="play the approver too")
    options = parser.parse_args()
    told = run(options.url, approver_token=APPROVER_TOKEN if options.approve else None)
    print(f"agent to user: {told}")


if __name__ == "__main__":
    main()
