"""``GET /v1/tools``: the tools the caller's route may call, as an agent runtime needs them."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, get

from broker.api.state import broker_state, principal_of

__all__ = ["ToolController"]


class ToolController(Controller):
    path = "/v1/tools"

    @get("/")
    async def list_tools(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        principal = principal_of(request)
        tools = broker_state(request).registry.tools
        names = sorted(tools) if principal.admin else sorted(principal.tools & tools.keys())
        body = {"tools": [tools[name].describe() for name in names]}
        return Response(content=msgspec.json.encode(body), media_type="application/json")
