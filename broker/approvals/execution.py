"""What an approved proposal goes through before its adapter runs: the world may have changed.

The tool must still exist and its preconditions must hold again; the pipeline's own tail then
executes, records and settles it (``Pipeline.run_approved``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.plugins import VerifierContext
from broker.taxonomy import Code
from broker.validators import Rejection
from broker.validators.preconditions import verify

if TYPE_CHECKING:
    from broker.pipeline.context import Decided

__all__ = ["recheck"]


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
