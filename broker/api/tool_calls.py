"""``POST /v1/tool-calls``: a model's tool calls in its provider's own shape, answered in kind."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post

from broker.api.json_body import (
    REPEATED_KEYS,
    duplicate_key_pointers,
    repeated_key_errors,
)
from broker.api.proposals import body_reader, proposal_headers, receive
from broker.api.shared import broker_state
from broker.native.catalogs import ProviderCatalogs
from broker.native.mediation import answer_tool_calls
from broker.responses import Answer
from broker.taxonomy import Code

__all__ = ["TOOL_CALLS_PATH", "ToolCallController"]

TOOL_CALLS_PATH = "/v1/tool-calls"


class ToolCallController(Controller):
    path = TOOL_CALLS_PATH

    @post(
        "/",
        status_code=200,
        operation_id="createToolCalls",
        summary="Propose a model's native tool calls",
        description=(
            "Take the tool calls of one model turn as OpenAI (Chat Completions or Responses), "
            "Anthropic or Gemini wrote them; propose each through the whole chain, in order, "
            "keyed `<format>:<call id>`; answer the provider's own result messages and, in call "
            "order, each call's decision exactly as POST /v1/proposals answers it. A body that "
            "cannot be read as a whole is a problem with JSON Pointers into it; nothing runs."
        ),
        tags=["proposals"],
    )
    async def tool_calls(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """Why the handler reads its body itself: as for ``POST /v1/proposals``, the caller is
        authenticated first, and a refused body is recorded in the ledger with JSON Pointers.
        Shed like a proposal when the process is overloaded or draining."""
        load = broker_state(request).load
        done = load.refusal()
        if done is None:
            load.started()
            try:
                done = await self._answer(request)
            finally:
                load.finished()
        return Response(
            content=done.body,
            status_code=done.status,
            media_type=done.media_type,
            headers=done.headers,
        )

    async def _answer(self, request: Request[Any, Any, Any]) -> Answer:
        state = broker_state(request)
        headers = proposal_headers(request.scope["headers"])
        received = await receive(state, headers, body_reader(request, headers, state))
        if isinstance(received, Answer):
            return received
        principal, body, traceparent = received
        pipeline = state.pipeline
        repeated = duplicate_key_pointers(body)  # I-JSON: one value per key
        if repeated:
            return await pipeline.refuse(
                principal,
                Code.MALFORMED_REQUEST,
                REPEATED_KEYS,
                errors=repeated_key_errors(repeated),
                traceparent=traceparent,
            )
        catalogs: ProviderCatalogs = request.app.state.provider_catalogs
        return await answer_tool_calls(
            pipeline,
            principal,
            body,
            names=catalogs.names(),
            max_calls=state.config.service.max_tool_calls,
            traceparent=traceparent,
            gateway=state.gateway,
        )
