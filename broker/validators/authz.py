"""Tool known, and allowed for the caller's route: the cheap, stateless checks that run first.

A route may call a tool its config lists (narrowed by the token), or one a registration granted
to it (unless the token names its tools: a narrowed token is never widened by a registration).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.model import FailedCheck, FieldError, Principal
from broker.taxonomy import Code
from broker.tool_id import ToolIdError, parse_tool_id
from broker.tools.runtime import ToolRuntime
from broker.validators import Rejection

__all__ = ["check_tool", "tool_named_by_id"]


def tool_named_by_id(tool_id: str, names_by_id: Mapping[str, str]) -> str | Rejection:
    """The name of the tool whose stable id is ``tool_id`` (a proposal may name it either way);
    ``names_by_id`` is the registry's index (``Registry.names_by_id``)."""
    name = names_by_id.get(tool_id)
    if name is not None:  # a registered tool's id: it follows the grammar by construction
        return name
    try:
        parse_tool_id(tool_id)
    except ToolIdError as exc:
        return Rejection(
            code=Code.SCHEMA_INVALID,
            reason=str(exc),
            remediation="REPAIR: send a tool_id exactly as GET /v1/tools lists it",
            errors=(FieldError("/tool_id", str(exc)),),
        )
    return Rejection(
        code=Code.UNKNOWN_TOOL,
        reason=f"unknown tool_id {tool_id!r}",
        remediation="REPLAN: choose a tool from GET /v1/tools",
        errors=(FieldError("/tool_id", f"unknown tool_id {tool_id!r}"),),
    )


def check_tool(
    name: str, principal: Principal, tools: Mapping[str, ToolRuntime]
) -> ToolRuntime | Rejection:
    tool = tools.get(name)
    if tool is None:
        return Rejection(
            code=Code.UNKNOWN_TOOL,
            reason=f"unknown tool {name!r}",
            remediation="REPLAN: choose a tool from GET /v1/tools",
            errors=(FieldError("/tool", f"unknown tool {name!r}"),),
        )
    if not tool.granted_to(principal):
        return Rejection(
            code=Code.TOOL_NOT_ALLOWED,
            reason=f"route {principal.route!r} may not call {name!r}",
            remediation="REPLAN: this route cannot do that; hand off to a human or another route",
            failed_check=FailedCheck("authz", principal.route),  # the route's list of tools
        )
    # The tool as this tenant's calls see it: with that tenant's own credentials, if any.
    return tool.for_tenant(principal.tenant or "")
