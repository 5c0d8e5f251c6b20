"""``POST /v1/implied-writes/check``: which claims in a message no execution backs."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, post

from broker.api.errors import problem_response
from broker.api.json_body import located, read_json_body
from broker.api.shared import broker_state, principal_of
from broker.model import FieldError
from broker.prose_audit import CheckRequest
from broker.taxonomy import Code

__all__ = ["ImpliedWriteController"]

_decoder = msgspec.json.Decoder(CheckRequest)
_encoder = msgspec.json.Encoder()


class ImpliedWriteController(Controller):
    path = "/v1/implied-writes"

    @post(
        "/check",
        status_code=200,
        operation_id="checkImpliedWrites",
        summary="Check a message for implied writes",
        description=(
            "Find the sentences of an agent's message that claim a world-changing action "
            "happened, and judge each against the executions recorded for the trace or session "
            "(as the caller may see them). Every check is counted and recorded in the ledger."
        ),
        tags=["implied-writes"],
    )
    async def check(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        principal = principal_of(request)
        raw = await read_json_body(request)
        if isinstance(raw, Response):
            return raw
        try:
            body = _decoder.decode(raw)
        except msgspec.ValidationError as exc:  # a DecodeError too: answered first, as 422
            where, message = located(exc)
            return problem_response(
                Code.SCHEMA_INVALID, message, errors=[FieldError(where, message)]
            )
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return problem_response(
                Code.MALFORMED_REQUEST,
                "the body is not valid JSON",
                errors=[FieldError("", "expected {text, trace_id or session_id}")],
            )
        if not body.trace_id and not body.session_id:
            return problem_response(
                Code.SCHEMA_INVALID,
                "name the trace_id or session_id whose executions the text is judged against",
                errors=[FieldError("/trace_id", "trace_id or session_id is required")],
            )
        result = await broker_state(request).implied_writes.check(principal, body)
        return Response(content=_encoder.encode(result), media_type="application/json")
