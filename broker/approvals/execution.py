"""What an approved proposal goes through before its adapter runs: the world may have changed.

The tool must still exist and its preconditions must hold again; the pipeline's own tail then
executes, records and settles it (``Pipeline.run_approved``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from broker.model import Principal, ProposalRequest
from broker.pipeline.context import Decided, Meta
from broker.plugins import VerifierContext
from broker.stores import Admitted, Ticket
from broker.taxonomy import Code
from broker.validators import Rejection
from broker.validators.preconditions import verify

if TYPE_CHECKING:
    from broker.approvals.model import ApprovalRecord
    from broker.tools.runtime import Registry

__all__ = ["decided_for", "recheck"]


async def recheck(decided: Decided) -> Rejection | None:
    """``None`` when the approved proposal may execute now."""
    tool = decided.tool
    if tool is None:
        return Rejection(
            code=Code.UNKNOWN_TOOL,
            reason=f"the tool {decided.request.tool!r} is gone since the approval was requested",
            remediation="REPLAN: the tool no longer exists",
        )
    context = VerifierContext(
        tenant=decided.tenant,
        route=decided.route,
        tool=tool.name,
        trace_id=decided.meta.trace_id,
    )
    return await verify(tool, decided.request.args, context)


def decided_for(record: ApprovalRecord, registry: Registry) -> Decided:
    """The proposal as the chain left it, rebuilt for execution in any process."""
    principal = Principal(
        service_account=record.service_account,
        route=record.route,
        tenant=record.tenant,
        tools=frozenset({record.tool}),
    )
    request = ProposalRequest(
        tool=record.tool,
        args=record.args,
        preconditions=record.preconditions,
        idempotency_key=record.idempotency_key,
        reason=record.proposal_reason,
        trace_id=record.trace_id,
        session_id=record.session_id,
    )
    ticket = Ticket(tenant=record.tenant, claim=None, owner=None, charges=record.charges)
    started = time.perf_counter()
    return Decided(
        Meta(record.proposal_id, record.trace_id, record.tool, False),
        principal,
        request,
        tenant=record.tenant,
        route=record.route,
        tool=registry.tools.get(record.tool),
        key=record.idempotency_key,
        admitted=Admitted(ticket),
        started=started,
        mark=started,
        phase=record.phase,
    )
