"""The chain step of routes with ``[routes.X.dry_runs]``: a dry run a caller asks for, of a tool
outside the route's ``only`` list (or on its ``except`` list), is refused.

Only the dry runs a caller asks for are checked: ``dry_run`` in the body (``/v1/proposals``,
``/v1/tool-calls``) or the argument an ``offer_dry_run`` rule injected. The operator's own dry
runs (``[service] dry_run``, ``broker serve --dry-run``) are not the route's to refuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.config.model import DryRunScope
from broker.model import FailedCheck, FieldError
from broker.taxonomy import Code
from broker.validators import Rejection

if TYPE_CHECKING:
    from broker.pipeline.context import Decided

__all__ = ["DryRunScopeStep"]

_CHECK = FailedCheck("policy", "dry_runs")


class DryRunScopeStep:
    """Refuses a dry run of a tool the route's ``dry_runs`` does not allow (after ``tool_authz``,
    so the tool is the one the call means, by whatever name it was called)."""

    __slots__ = ("_scope",)
    name = "dry_runs"

    def __init__(self, scope: DryRunScope) -> None:
        self._scope = scope

    async def check(self, decided: Decided) -> Rejection | None:
        request, tool = decided.request, decided.tool
        if not request.dry_run or tool is None or self._scope.allows(tool.name):
            return None
        receipt = decided.receipt
        by_argument = receipt is not None and receipt.dry_run_argument
        pointer = "/args/dry_run" if by_argument else "/dry_run"
        called = (receipt.visible_name if receipt is not None else None) or tool.name
        return Rejection(
            code=Code.POLICY_BLOCKED,
            reason=f"this route does not allow dry runs of {called!r}",
            remediation="REPAIR: send the call without dry_run; this route never previews it",
            errors=(FieldError(pointer, "a dry run of this tool is not allowed on this route"),),
            failed_check=_CHECK,
        )
