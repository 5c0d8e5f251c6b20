"""Route policy: on routes that require it, no action follows an unchecked report of the last.

A route with ``require_implied_write_check`` wants every message that reports an executed action
checked for implied writes (``/v1/implied-writes/check``) before the agent acts again, so prose
claiming a change that did not happen is caught before it compounds. The ledger is the witness:
it holds both the executions and the checks of a session, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.model import FailedCheck
from broker.prose_audit import CHECK_TOOL
from broker.taxonomy import Code
from broker.validators import Rejection

if TYPE_CHECKING:
    from broker.ledger import LedgerSink

__all__ = ["IMPLIED_WRITE_CHECK", "require_implied_write_check"]

IMPLIED_WRITE_CHECK = FailedCheck("policy", "require_implied_write_check")
"""What refuses here: the route's setting of that name."""


async def require_implied_write_check(
    ledger: LedgerSink | None, session_id: str | None
) -> Rejection | None:
    """Was the message after the session's last execution checked? Refuse if not."""
    if not session_id:
        return Rejection(
            code=Code.POLICY_BLOCKED,
            reason="this route requires a session_id on every proposal",
            remediation="REPAIR: send the conversation's session_id with the proposal",
            failed_check=IMPLIED_WRITE_CHECK,
        )
    if ledger is None:
        return None
    last_execution = last_check = 0
    for record in await ledger.by_session(session_id):
        if record.tool == CHECK_TOOL:
            last_check = record.seq
        elif record.execution_status == "succeeded" and not record.replayed:
            last_execution = record.seq
    if last_execution > last_check:
        return Rejection(
            code=Code.POLICY_BLOCKED,
            reason="the message reporting the last action was not checked for implied writes",
            remediation="REPAIR: POST the message to /v1/implied-writes/check, then resend",
            failed_check=IMPLIED_WRITE_CHECK,
        )
    return None
